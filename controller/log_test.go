package controller

import (
	"context"
	"testing"

	"github.com/sirupsen/logrus"
	logtest "github.com/sirupsen/logrus/hooks/test"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// Inside a reconcile, what a concern logs names the syncer without the
// concern saying so; outside one, it goes to the reconciler's logger as
// is.
func TestLogFrom_TheReconcilesLoggerNamesTheSyncer(t *testing.T) {
	log, hook := logtest.NewNullLogger()
	r := &Reconciler{log: log}
	r.logFrom(context.Background()).Info("outside")
	if got := hook.LastEntry(); len(got.Data) != 0 {
		t.Errorf("outside a reconcile: fields %v, want none", got.Data)
	}
	ctx := r.withReconcileLog(context.Background(), reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "shop", Name: "orders"}})
	r.logFrom(ctx).WithField("instances", []string{"a"}).Info("inside")
	got := hook.LastEntry()
	want := logrus.Fields{"namespace": "shop", "syncer": "orders"}
	for k, v := range want {
		if got.Data[k] != v {
			t.Errorf("inside a reconcile: %s = %v, want %v (fields %v)", k, got.Data[k], v, got.Data)
		}
	}
	if _, ok := got.Data["instances"]; !ok {
		t.Errorf("inside a reconcile: the concern's own field is lost: %v", got.Data)
	}
}
