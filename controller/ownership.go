package controller

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/eurekube/eurekube/api/v1alpha1"
	"github.com/eurekube/eurekube/internal/ownership"
)

// App ownership: whether the syncer's namespace may register its app
// (internal/ownership holds the rule, the webhook applies it to each pod).
// Ownership is earned by registering: the reconciler claims an unclaimed
// app only for a syncer that registers it (pods it injected for that app,
// or instances of it in Eureka, those the reconciler registers in Service
// mode among them), for the namespace of the oldest such syncer, so that on an upgrade, where
// several may already, the first one keeps it whichever is reconciled
// first. A syncer that only names the app, or is refused, claims nothing.
// The reconciler alone knows the app's instances elsewhere, which a
// policy may refuse to join.
//
// A claim whose namespace registers its app no more is not deleted at
// once: it is held for the namespace (eurekube.io/held-until, Options.
// ClaimHold) so that deleting and re-creating a syncer (as a mode change
// requires), a Recreate rollout that drains every pod, or a manager
// restart never hands the app to another namespace; registering again
// takes it up (ownership.Checker). Once the hold runs out, the claim is
// deleted and the next namespace to register the app claims it.

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
	v, err := checker.Check(ctx, s.EffectiveAppName(), ns, registersOwnApp(s, obs))
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

// registersOwnApp is true when the syncer registers its own app (not one
// its pods were given by annotation): pods it injected for it, or
// instances of it in Eureka (in Service mode, those the manager
// registered). Only that earns the namespace the app.
func registersOwnApp(s *v1alpha1.EurekaSyncer, obs *observed) bool {
	if obs.pods.ownApp > 0 {
		return true
	}
	app := s.EffectiveAppName()
	for i := range obs.instances {
		if strings.EqualFold(obs.instances[i].App, app) {
			return true
		}
	}
	return false
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

// releaseClaims holds the claims this cluster's manager made for the
// apps of a syncer whose detach is complete, where its namespace
// registers them no more: no other live syncer of the namespace has the
// app, and no pod of the namespace asks for it by annotation. The claim
// sweeper deletes them once the hold has run out; another namespace may
// then claim them. A claim of another namespace, or one the manager did
// not make, is never touched.
func (r *Reconciler) releaseClaims(ctx context.Context, s *v1alpha1.EurekaSyncer, apps []string) error {
	inUse, err := r.appsInUse(ctx, s.Namespace, s.Name, apps...)
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
		if claim.Spec.Namespace != s.Namespace || claim.Spec.App != app || ownership.HeldUntil(&claim) != "" ||
			claim.Annotations[v1alpha1.ClaimRegisteredAnnotation] == "" && !ownership.Registers(s) {
			continue // a claim never registered under is the sweeper's to delete
		}
		if err := r.holdClaim(ctx, &claim, time.Now()); err != nil {
			return err
		}
	}
	return nil
}

// appsInUse says which of apps namespace registers: those of its live
// syncers (but the one named except), and those its live pods ask for by
// annotation. Each app is read through the cache's indexes (syncers by
// app, pods by the app they ask for), never by listing the namespace: the
// claim sweeper asks once for each claim, so a namespace of many syncers
// and pods would otherwise be copied out of the cache once per claim.
func (r *Reconciler) appsInUse(ctx context.Context, namespace, except string, apps ...string) (map[string]bool, error) {
	inUse := map[string]bool{}
	for _, app := range apps {
		var syncers v1alpha1.EurekaSyncerList
		if err := r.client.List(ctx, &syncers, client.InNamespace(namespace), ownership.SyncersOf(app), client.UnsafeDisableDeepCopy); err != nil {
			return nil, fmt.Errorf("list the EurekaSyncers of app %s: %w", app, err)
		}
		for i := range syncers.Items {
			// A syncer that only names the app uses nothing: ownership is
			// earned, and kept, by registering.
			if o := &syncers.Items[i]; o.Name != except && o.DeletionTimestamp == nil && ownership.Registers(o) {
				inUse[app] = true
			}
		}
		if inUse[app] {
			continue
		}
		var pods corev1.PodList
		if err := r.client.List(ctx, &pods, client.InNamespace(namespace), client.MatchingFields{podsByApp: strings.ToUpper(app)}, client.UnsafeDisableDeepCopy); err != nil {
			return nil, fmt.Errorf("list the pods that ask for app %s: %w", app, err)
		}
		for i := range pods.Items {
			// A terminating pod still registers (a Recreate rollout drains
			// every pod before the new ones start); a finished one never
			// will again.
			if !finished(&pods.Items[i]) {
				inUse[app] = true
			}
		}
	}
	return inUse, nil
}

// holdClaim marks a claim the manager made as held for its namespace
// until ClaimHold from now.
func (r *Reconciler) holdClaim(ctx context.Context, claim *v1alpha1.EurekaAppClaim, now time.Time) error {
	until := now.Add(r.opts.ClaimHold).UTC().Format(time.RFC3339)
	if err := r.annotateClaim(ctx, claim, v1alpha1.ClaimHeldUntilAnnotation, until); err != nil {
		return fmt.Errorf("hold EurekaAppClaim %s for namespace %s: %w", claim.Name, claim.Spec.Namespace, err)
	}
	r.logFrom(ctx).WithFields(map[string]any{"app": claim.Spec.App, "namespace": claim.Spec.Namespace, "heldUntil": until}).
		Info("the namespace registers the app no more: its claim is held for it")
	return nil
}

// annotateClaim sets (or, with "", removes) one annotation of a claim;
// the preconditions keep a claim changed since it was read.
func (r *Reconciler) annotateClaim(ctx context.Context, claim *v1alpha1.EurekaAppClaim, key, value string) error {
	v := "null"
	if value != "" {
		v = fmt.Sprintf("%q", value)
	}
	patch := fmt.Appendf(nil, `{"metadata":{"uid":%q,"resourceVersion":%q,"annotations":{%q:%s}}}`,
		claim.UID, claim.ResourceVersion, key, v)
	target := &v1alpha1.EurekaAppClaim{ObjectMeta: metav1.ObjectMeta{Name: claim.Name}}
	err := r.client.Patch(ctx, target, client.RawPatch(types.MergePatchType, patch))
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil // gone, or changed: the sweeper looks again
	}
	return err
}

// releaseClaim deletes a claim the manager made; the precondition keeps
// a claim made or taken up again since it was read.
func (r *Reconciler) releaseClaim(ctx context.Context, claim *v1alpha1.EurekaAppClaim) error {
	if claim.Labels[ownership.ManagedByLabel] != ownership.ManagedByValue {
		return nil
	}
	err := r.client.Delete(ctx, claim, client.Preconditions{UID: &claim.UID, ResourceVersion: &claim.ResourceVersion})
	if client.IgnoreNotFound(err) != nil && !apierrors.IsConflict(err) {
		return fmt.Errorf("release EurekaAppClaim %s: %w", claim.Name, err)
	}
	r.logFrom(ctx).WithFields(map[string]any{"app": claim.Spec.App, "namespace": claim.Spec.Namespace}).
		Info("released the app's claim: its hold ran out and the namespace registers it no more")
	return nil
}

// claimSweeper keeps each claim the manager made in step with its
// namespace's use of the app, by any path the syncers' detach does not
// see (pods that asked for the app by annotation and are gone, a
// namespace deleted): a claim seen in use is marked registered; one
// registered under that its namespace uses no more is held; a held one
// used again is taken up; a held one whose hold has run out, and one
// never registered under, are released. A claim younger than
// Options.ClaimGrace is kept: the webhook claims before the pod it admits
// exists, and a later admission step may still refuse that pod.
type claimSweeper struct{ *Reconciler }

// DefaultClaimGrace is how long a claim is kept whatever uses it, unless
// Options.ClaimGrace says otherwise.
const DefaultClaimGrace = 2 * time.Minute

// DefaultClaimHold is how long a claim is held for a namespace that
// registers its app no more, unless Options.ClaimHold says otherwise: a
// day, longer than any routine operation (a syncer deleted and made
// again, a rollout, a manager's restart or upgrade) takes.
const DefaultClaimHold = 24 * time.Hour

// setupClaimSweeper registers the sweeper, which looks at each claim when
// it changes and at every resync.
func setupClaimSweeper(mgr manager.Manager, r *Reconciler) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("eurekaappclaim").
		For(&v1alpha1.EurekaAppClaim{}).
		Complete(&claimSweeper{r})
}

// Reconcile holds, takes up or releases one claim.
func (r *claimSweeper) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	var claim v1alpha1.EurekaAppClaim
	if err := r.client.Get(ctx, req.NamespacedName, &claim); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if claim.Labels[ownership.ManagedByLabel] != ownership.ManagedByValue {
		return reconcile.Result{}, nil
	}
	now := time.Now()
	inUse, err := r.appsInUse(ctx, claim.Spec.Namespace, "", claim.Spec.App)
	if err != nil {
		return reconcile.Result{}, err
	}
	held, registered := ownership.HeldUntil(&claim), claim.Annotations[v1alpha1.ClaimRegisteredAnnotation] != ""
	if inUse[claim.Spec.App] && !registered {
		// At once, grace or not: a claim in use is held if its namespace
		// then stops using it, however young.
		return reconcile.Result{RequeueAfter: r.opts.ResyncPeriod},
			r.annotateClaim(ctx, &claim, v1alpha1.ClaimRegisteredAnnotation, now.UTC().Format(time.RFC3339))
	}
	if age := now.Sub(claim.CreationTimestamp.Time); age < r.opts.ClaimGrace {
		return reconcile.Result{RequeueAfter: min(r.opts.ResyncPeriod, r.opts.ClaimGrace-age)}, nil
	}
	switch {
	case inUse[claim.Spec.App] && held != "":
		return reconcile.Result{RequeueAfter: r.opts.ResyncPeriod}, r.annotateClaim(ctx, &claim, v1alpha1.ClaimHeldUntilAnnotation, "")
	case inUse[claim.Spec.App]:
		return reconcile.Result{RequeueAfter: r.opts.ResyncPeriod}, nil
	case !registered:
		// Made at an admission whose pod never ran, or for a namespace
		// that never registered the app: it earned nothing to hold.
		return reconcile.Result{}, r.releaseClaim(ctx, &claim)
	case held == "":
		return reconcile.Result{RequeueAfter: r.opts.ResyncPeriod}, r.holdClaim(ctx, &claim, now)
	}
	until, err := time.Parse(time.RFC3339, held)
	if err != nil {
		// Not the manager's writing: hold it afresh rather than guess.
		return reconcile.Result{RequeueAfter: r.opts.ResyncPeriod}, r.holdClaim(ctx, &claim, now)
	}
	if now.Before(until) {
		return reconcile.Result{RequeueAfter: min(r.opts.ResyncPeriod, until.Sub(now))}, nil
	}
	return reconcile.Result{}, r.releaseClaim(ctx, &claim)
}
