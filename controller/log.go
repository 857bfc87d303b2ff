package controller

import (
	"context"

	"github.com/sirupsen/logrus"
	crcontroller "sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// The reconciler logs with logrus (Options.Logger; the manager bridges the
// same logger into controller-runtime's logr). Reconcile builds one logger
// per reconcile, the reconciler's with the syncer's namespace and name and
// controller-runtime's reconcile id, and puts it in the context; the
// concerns take it from there (logFrom) and add only what is theirs (the
// instances, the traffic, …). What runs outside a reconcile (the watches'
// mappings, the Service instances' heartbeats) logs with the reconciler's
// own.

// logKey is the context key of a reconcile's logger.
type logKey struct{}

// withReconcileLog returns ctx carrying the logger of the reconcile of req.
func (r *Reconciler) withReconcileLog(ctx context.Context, req reconcile.Request) context.Context {
	fields := logrus.Fields{"namespace": req.Namespace, "syncer": req.Name}
	if id := crcontroller.ReconcileIDFromContext(ctx); id != "" { // none when called directly (benchmarks)
		fields["reconcileID"] = string(id)
	}
	return context.WithValue(ctx, logKey{}, r.log.WithFields(fields))
}

// logFrom is the logger of the reconcile ctx belongs to, or the
// reconciler's outside one.
func (r *Reconciler) logFrom(ctx context.Context) logrus.FieldLogger {
	if log, ok := ctx.Value(logKey{}).(logrus.FieldLogger); ok {
		return log
	}
	return r.log
}
