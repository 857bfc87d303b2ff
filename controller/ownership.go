package controller

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/eurekube/eurekube/api/v1alpha1"
	"github.com/eurekube/eurekube/internal/ownership"
)

// App ownership: whether the syncer's namespace may register its app
// (internal/ownership holds the rule, the webhook applies it to each pod).
// The reconciler claims an unclaimed app for the namespace of the oldest
// syncer that registers it, so that on an upgrade, where several may
// already, the first one keeps it whichever is reconciled first; and it
// alone knows the app's instances elsewhere, which a policy may refuse to
// join.

// checkOwnership records in obs whether the syncer's namespace may
// register its app. A live syncer only: a deleted one registers nothing
// more.
func (r *Reconciler) checkOwnership(ctx context.Context, s *v1alpha1.EurekaSyncer, obs *observed) error {
	if !s.DeletionTimestamp.IsZero() {
		return nil
	}
	var nsObj corev1.Namespace
	if err := r.client.Get(ctx, client.ObjectKey{Name: s.Namespace}, &nsObj); err != nil {
		return fmt.Errorf("read namespace %s: %w", s.Namespace, err)
	}
	ns := ownership.Namespace{Name: s.Namespace, Labels: nsObj.Labels}
	app := s.EffectiveAppName()
	checker := ownership.Checker{Reader: r.client, Live: r.apiReader, Writer: r.client}
	v, err := checker.Check(ctx, app, ns, "", true)
	if err != nil {
		return err
	}
	if v.NeedsClaim {
		owner, err := r.firstRegistrant(ctx, app, s.Namespace)
		if err != nil {
			return err
		}
		if v, err = checker.Check(ctx, app, ns, owner, false); err != nil {
			return err
		}
	}
	// Joining is what a policy may refuse: a syncer already registered
	// beside the app's VMs stays permitted (its rollouts go on).
	if obs.registryRead && len(obs.elsewhere) > 0 && len(obs.instances) == 0 {
		v = v.RefuseElsewhere(fmt.Sprintf("%d instance(s) elsewhere", len(obs.elsewhere)))
	}
	obs.ownership = &v
	return nil
}

// firstRegistrant is the namespace of the oldest live syncer of the
// cluster that registers app, or fallback if none does.
func (r *Reconciler) firstRegistrant(ctx context.Context, app, fallback string) (string, error) {
	var all v1alpha1.EurekaSyncerList
	if err := r.client.List(ctx, &all, client.UnsafeDisableDeepCopy); err != nil {
		return "", fmt.Errorf("list EurekaSyncers: %w", err)
	}
	var first *v1alpha1.EurekaSyncer
	for i := range all.Items {
		s := &all.Items[i]
		if s.DeletionTimestamp != nil || s.EffectiveAppName() != app {
			continue
		}
		if first == nil || s.CreationTimestamp.Before(&first.CreationTimestamp) ||
			s.CreationTimestamp.Equal(&first.CreationTimestamp) && s.Namespace+"/"+s.Name < first.Namespace+"/"+first.Name {
			first = s
		}
	}
	if first == nil {
		return fallback, nil
	}
	return first.Namespace, nil
}
