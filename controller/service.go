package controller

import (
	"context"

	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/eurekube/eurekube/api/v1alpha1"
	"github.com/eurekube/eurekube/eureka"
)

// serviceObserved is what a Service-mode reconcile found and did.
type serviceObserved struct{}

// watchServiceMode adds what Service mode watches to the controller.
func (r *Reconciler) watchServiceMode(_ manager.Manager, b *builder.Builder) (*builder.Builder, error) {
	return b, nil
}

// syncService registers, updates and cancels the instances of a
// Service-mode syncer's Service.
func (r *Reconciler) syncService(_ context.Context, _ *v1alpha1.EurekaSyncer, _ *eureka.Client, _ *observed) {
}
