package controller

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

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
	if !s.DeletionTimestamp.IsZero() || obs.notAllowed != nil {
		// A syncer the allowlists refuse registers nothing, so it claims
		// nothing either.
		return nil
	}
	var nsObj corev1.Namespace
	if err := r.client.Get(ctx, client.ObjectKey{Name: s.Namespace}, &nsObj); err != nil {
		return fmt.Errorf("read namespace %s: %w", s.Namespace, err)
	}
	ns := ownership.Namespace{Name: s.Namespace, Labels: nsObj.Labels}
	checker := ownership.Checker{Reader: r.client, Live: r.apiReader, Writer: r.client, Indexed: r.appIndexed}
	v, err := checker.Check(ctx, s.EffectiveAppName(), ns, true)
	if err != nil {
		return err
	}
	// Joining is what a policy may refuse: a syncer already registered
	// beside the app's VMs stays permitted (its rollouts go on).
	if obs.registryRead && len(obs.elsewhere) > 0 && len(obs.instances) == 0 {
		v = v.RefuseElsewhere(fmt.Sprintf("%d instance(s) elsewhere", len(obs.elsewhere)))
	}
	obs.ownership = &v
	return nil
}

// ownershipCondition is the Permitted condition as far as app ownership
// goes: nil when the syncer was not checked (being deleted), else True
// with the grant or the claim, or False naming the policy or the owner
// and, when pods run from before, that they keep running as they are.
func ownershipCondition(obs *observed) *metav1.Condition {
	v := obs.ownership
	if v == nil {
		return nil
	}
	c := &metav1.Condition{Type: v1alpha1.ConditionPermitted, Status: metav1.ConditionTrue, Reason: v.Reason, Message: v.Message}
	if !v.Allowed {
		c.Status = metav1.ConditionFalse
		if n := obs.pods.injected; n > 0 {
			c.Message += fmt.Sprintf("; the %d pod(s) injected before keep running as they are, and new ones are refused", n)
		}
		c.Message = truncate(c.Message, 1024)
	}
	return c
}

// releaseClaims deletes the claims this cluster's manager made for the
// apps of a syncer whose detach is complete, where its namespace
// registers them no more: no other live syncer of the namespace has the
// app, and no pod of the namespace asks for it by annotation. Another
// namespace may then claim them. A claim of another namespace, or one the
// manager did not make, is never touched.
func (r *Reconciler) releaseClaims(ctx context.Context, s *v1alpha1.EurekaSyncer, apps []string) error {
	inUse, err := r.appsInUse(ctx, s.Namespace, s.Name)
	if err != nil {
		return err
	}
	for _, app := range apps {
		if inUse[app] {
			continue
		}
		var claim v1alpha1.EurekaAppClaim
		switch err := r.apiReader.Get(ctx, client.ObjectKey{Name: ownership.ClaimName(app)}, &claim); {
		case apierrors.IsNotFound(err):
			continue
		case err != nil:
			return fmt.Errorf("read EurekaAppClaim of %s: %w", app, err)
		}
		if claim.Spec.Namespace != s.Namespace || claim.Spec.App != app {
			continue
		}
		if err := r.releaseClaim(ctx, &claim); err != nil {
			return err
		}
	}
	return nil
}

// appsInUse are the apps namespace registers: those of its live syncers
// (but the one named except), and those its live pods ask for by
// annotation.
func (r *Reconciler) appsInUse(ctx context.Context, namespace, except string) (map[string]bool, error) {
	var syncers v1alpha1.EurekaSyncerList
	if err := r.client.List(ctx, &syncers, client.InNamespace(namespace), client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("list EurekaSyncers: %w", err)
	}
	var pods corev1.PodList
	if err := r.client.List(ctx, &pods, client.InNamespace(namespace), client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("list pods: %w", err)
	}
	inUse := map[string]bool{}
	for i := range syncers.Items {
		if o := &syncers.Items[i]; o.Name != except && o.DeletionTimestamp == nil {
			inUse[o.EffectiveAppName()] = true
		}
	}
	for i := range pods.Items {
		if name, ok := pods.Items[i].Annotations[v1alpha1.AnnotationAppName]; ok && pods.Items[i].DeletionTimestamp == nil {
			inUse[strings.ToUpper(name)] = true
		}
	}
	return inUse, nil
}

// releaseClaim deletes a claim the manager made; the precondition keeps
// a claim made again since it was read.
func (r *Reconciler) releaseClaim(ctx context.Context, claim *v1alpha1.EurekaAppClaim) error {
	if claim.Labels[ownership.ManagedByLabel] != ownership.ManagedByValue {
		return nil
	}
	err := r.client.Delete(ctx, claim, client.Preconditions{UID: &claim.UID, ResourceVersion: &claim.ResourceVersion})
	if client.IgnoreNotFound(err) != nil && !apierrors.IsConflict(err) {
		return fmt.Errorf("release EurekaAppClaim %s: %w", claim.Name, err)
	}
	r.logFrom(ctx).WithFields(map[string]any{"app": claim.Spec.App, "namespace": claim.Spec.Namespace}).
		Info("released the app's claim: the namespace registers it no more")
	return nil
}

// claimSweeper releases the claims whose namespace registers their app
// no more by any path the syncers' detach does not see: pods that asked
// for it by annotation and are gone, a namespace deleted. A claim younger
// than Options.ClaimGrace is kept: the webhook claims before the pod it admits
// exists.
type claimSweeper struct{ *Reconciler }

// DefaultClaimGrace is how long a claim is kept whatever uses it, unless
// Options.ClaimGrace says otherwise.
const DefaultClaimGrace = 2 * time.Minute

// setupClaimSweeper registers the sweeper, which looks at each claim when
// it changes and at every resync.
func setupClaimSweeper(mgr manager.Manager, r *Reconciler) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("eurekaappclaim").
		For(&v1alpha1.EurekaAppClaim{}).
		Complete(&claimSweeper{r})
}

// Reconcile releases one claim if its namespace registers its app no
// more.
func (r *claimSweeper) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	var claim v1alpha1.EurekaAppClaim
	if err := r.client.Get(ctx, req.NamespacedName, &claim); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if claim.Labels[ownership.ManagedByLabel] != ownership.ManagedByValue {
		return reconcile.Result{}, nil
	}
	if age := time.Since(claim.CreationTimestamp.Time); age < r.opts.ClaimGrace {
		return reconcile.Result{RequeueAfter: r.opts.ClaimGrace - age}, nil
	}
	inUse, err := r.appsInUse(ctx, claim.Spec.Namespace, "")
	if err != nil {
		return reconcile.Result{}, err
	}
	if inUse[claim.Spec.App] {
		return reconcile.Result{RequeueAfter: r.opts.ResyncPeriod}, nil
	}
	return reconcile.Result{}, r.releaseClaim(ctx, &claim)
}
