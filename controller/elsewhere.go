package controller

import (
	"context"
	"errors"
	"sync/atomic"

	"github.com/eurekube/eurekube/api/v1alpha1"
	"github.com/eurekube/eurekube/eureka"
)

// Registries lends the webhook the reconciler's registry reads (one per
// Eureka server set, credentials and TLS material; see eureka.go), so that
// admission decides elsewhere: Refuse from what the manager last read,
// without a request to Eureka per pod. The manager makes one, gives it to
// Setup (Options.Registries) and to the webhook; it implements
// webhook.Registries. Every replica has one: the webhook runs on all of
// them, and a follower's first question about a server set reads it once.
type Registries struct {
	r atomic.Pointer[Reconciler]
}

// errNoReconciler: the webhook asked before Setup bound the reconciler.
var errNoReconciler = errors.New("the manager's reconciler is not set up yet")

// bind makes r answer.
func (g *Registries) bind(r *Reconciler) { g.r.Store(r) }

// Instances are app's instances in the last read (at most a resync
// period old) of the registry of syncer s's servers; an error when there
// is none (Eureka unreachable, credentials refused).
func (g *Registries) Instances(ctx context.Context, s *v1alpha1.EurekaSyncer, app string) ([]eureka.Instance, error) {
	r := g.r.Load()
	if r == nil {
		return nil, errNoReconciler
	}
	cache, err := r.clients.forSyncer(ctx, s)
	if err != nil {
		return nil, err
	}
	registry, err := cache.Registry(ctx)
	if err != nil {
		return nil, err
	}
	return registry.Instances(app), nil
}
