package ownership

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/eurekube/eurekube/api/v1alpha1"
)

// ManagedByLabel marks the claims the manager made, so that it deletes
// only its own.
const ManagedByLabel = "app.kubernetes.io/managed-by"

// ManagedByValue is ManagedByLabel's value on the manager's claims.
const ManagedByValue = "eurekube"

// Checker reads the policies and the app's claim, and claims an unclaimed
// app for the namespace that asks first.
type Checker struct {
	// Reader reads policies and claims, normally the manager's cache.
	Reader client.Reader
	// Live reads a claim from the API server itself when creating it found
	// one that the cache does not show yet. Nil: Reader.
	Live client.Reader
	// Writer creates claims. Nil: Check never claims (a read-only caller,
	// such as `eurekube check`).
	Writer client.Writer
	// Indexed: Reader is a cache with the index IndexSyncers registers,
	// so Check reads only the syncers of the app it decides. Else it lists
	// every syncer of the cluster, once per unclaimed app it is asked about.
	Indexed bool
}

// syncersByApp is the syncer cache's index by the app each registers
// (EffectiveAppName).
const syncersByApp = "eurekube.io/app"

// IndexSyncers registers with a cache the index of syncers by app that a
// Checker with Indexed reads: a manager's first pass over a thousand new
// syncers otherwise lists all of them for each, a thousand times.
func IndexSyncers(ctx context.Context, fi client.FieldIndexer) error {
	err := fi.IndexField(ctx, &v1alpha1.EurekaSyncer{}, syncersByApp, func(o client.Object) []string {
		if s, ok := o.(*v1alpha1.EurekaSyncer); ok {
			return []string{s.EffectiveAppName()}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("index EurekaSyncers by app: %w", err)
	}
	return nil
}

// SyncersOf selects, from a cache with the index IndexSyncers registers,
// the syncers that register app.
func SyncersOf(app string) client.MatchingFields {
	return client.MatchingFields{syncersByApp: upper(app)}
}

// Check says whether namespace ns may register app. An app no policy
// names and no namespace has claimed belongs to its first registrant: the
// namespace of the oldest live syncer that registers it (FirstRegistrant),
// else ns. claim says that ns registers the app now (a pod being admitted,
// a syncer with pods or instances): ownership is earned so, never by
// naming an app. With claim (and a Writer), Check claims an unclaimed app
// for its first registrant, and the verdict is that of the claim that
// stands afterwards: of two namespaces that ask at once, only one wins;
// and ns takes up its own claim that was held for it (HeldUntil). Without,
// nothing is written (a dry run).
func (c Checker) Check(ctx context.Context, app string, ns Namespace, claim bool) (Verdict, error) {
	// The cache's own objects, not copies, as for the syncers below: Check
	// only reads them, and the webhook asks once per pod it injects.
	var policies v1alpha1.EurekaAppPolicyList
	if err := c.Reader.List(ctx, &policies, client.UnsafeDisableDeepCopy); err != nil {
		return Verdict{}, fmt.Errorf("list EurekaAppPolicies: %w", err)
	}
	existing, err := c.claim(ctx, c.Reader, app)
	if err != nil {
		return Verdict{}, err
	}
	v := Decide(app, ns, policies.Items, existing)
	if v.Reason == ReasonClaimed && claim && c.Writer != nil && HeldUntil(existing) != "" {
		if existing, err = c.takeUp(ctx, existing); err != nil {
			return Verdict{}, err
		}
		return Decide(app, ns, policies.Items, existing), nil
	}
	if !v.NeedsClaim {
		return v, nil
	}
	var syncers v1alpha1.EurekaSyncerList
	opts := []client.ListOption{client.UnsafeDisableDeepCopy}
	if c.Indexed {
		opts = append(opts, SyncersOf(app))
	}
	if err := c.Reader.List(ctx, &syncers, opts...); err != nil {
		return Verdict{}, fmt.Errorf("list EurekaSyncers: %w", err)
	}
	owner := FirstRegistrant(syncers.Items, app, ns.Name)
	if !claim || c.Writer == nil {
		if v.Allowed = owner == ns.Name; !v.Allowed {
			v.Reason, v.Owner = ReasonOwnedElsewhere, owner
			v.Message = fmt.Sprintf("Eureka app %s is registered first by namespace %s (its oldest EurekaSyncer), which it will belong to", v.App, owner)
		}
		return v, nil
	}
	if existing, err = c.create(ctx, app, owner); err != nil {
		return Verdict{}, err
	}
	return Decide(app, ns, policies.Items, existing), nil
}

// claim reads app's claim; nil when there is none.
func (c Checker) claim(ctx context.Context, r client.Reader, app string) (*v1alpha1.EurekaAppClaim, error) {
	var claim v1alpha1.EurekaAppClaim // shares the cache's maps and slices: only read
	switch err := r.Get(ctx, types.NamespacedName{Name: ClaimName(app)}, &claim, client.UnsafeDisableDeepCopy); {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("read EurekaAppClaim %s: %w", ClaimName(app), err)
	}
	return &claim, nil
}

// create claims app for namespace, or reads the claim that beat it.
func (c Checker) create(ctx context.Context, app, namespace string) (*v1alpha1.EurekaAppClaim, error) {
	claim := NewClaim(app, namespace)
	err := c.Writer.Create(ctx, claim)
	if err == nil {
		return claim, nil
	}
	if !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("claim Eureka app %s for namespace %s: %w", claim.Spec.App, namespace, err)
	}
	live := c.Live
	if live == nil {
		live = c.Reader
	}
	existing, err := c.claim(ctx, live, app)
	if err != nil {
		return nil, err
	}
	if existing == nil {
		return nil, fmt.Errorf("claim Eureka app %s: EurekaAppClaim %s exists and then does not: try again", claim.Spec.App, claim.Name)
	}
	return existing, nil
}

// takeUp ends the hold of a claim whose namespace registers its app
// again. Removing the annotation is idempotent; a claim deleted meanwhile
// (its hold ran out) is made again for the namespace, or the one that beat
// it is read.
func (c Checker) takeUp(ctx context.Context, held *v1alpha1.EurekaAppClaim) (*v1alpha1.EurekaAppClaim, error) {
	claim := &v1alpha1.EurekaAppClaim{ObjectMeta: metav1.ObjectMeta{Name: held.Name}}
	patch := fmt.Appendf(nil, `{"metadata":{"annotations":{%q:null}}}`, v1alpha1.ClaimHeldUntilAnnotation)
	err := c.Writer.Patch(ctx, claim, client.RawPatch(types.MergePatchType, patch))
	switch {
	case apierrors.IsNotFound(err):
		return c.create(ctx, held.Spec.App, held.Spec.Namespace)
	case err != nil:
		return nil, fmt.Errorf("take up the held EurekaAppClaim %s for namespace %s: %w", held.Name, held.Spec.Namespace, err)
	}
	return claim, nil
}

// NewClaim is the claim of app for namespace.
func NewClaim(app, namespace string) *v1alpha1.EurekaAppClaim {
	return &v1alpha1.EurekaAppClaim{
		ObjectMeta: metav1.ObjectMeta{Name: ClaimName(app), Labels: map[string]string{ManagedByLabel: ManagedByValue}},
		Spec:       v1alpha1.EurekaAppClaimSpec{App: upper(app), Namespace: namespace},
	}
}
