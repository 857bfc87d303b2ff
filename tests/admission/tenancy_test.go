package admission

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	eurekubev1alpha1 "github.com/eurekube/eurekube/api/v1alpha1"
	"github.com/eurekube/eurekube/internal/builders"
	"github.com/eurekube/eurekube/internal/ownership"
	"github.com/eurekube/eurekube/tests/harness"
)

// The tenancy attacks, against the real API server and the manager's own
// webhook and reconciler: a tenant of namespace A tries to register an app
// that belongs to namespace B. Each attempt is refused with the owner or
// the policy named, and nothing of A's is admitted to register.

// withoutSharedApps removes the suite's share-everything policy for one
// test, so that the first-come rule and the test's own policies decide.
func withoutSharedApps(ctx context.Context, t *testing.T) {
	t.Helper()
	harness.SuspendSharedApps(ctx, t, suite.c)
	// The webhook reads policies from the manager's cache.
	harness.Eventually(t, time.Minute, "the shared policy gone from the manager's view", func() error {
		return wantCreateRefused(ctx, t, uniqueApp(t, "probe"), optedInNamespace(ctx, t, "probe-b"), optedInNamespace(ctx, t, "probe-a"))
	})
}

// uniqueApp is an app name no other test registers.
func uniqueApp(t *testing.T, prefix string) string {
	return strings.ToUpper(fmt.Sprintf("%s-%d", prefix, time.Now().UnixNano()%1_000_000_000))
}

// wantCreateRefused admits a pod of app in owner (claiming it), then
// expects the same app's pod in intruder to be refused naming the owner.
func wantCreateRefused(ctx context.Context, t *testing.T, app, owner, intruder string) error {
	if err := suite.c.Create(ctx, builders.Syncer(owner, "svc", builders.AppName(app))); client.IgnoreAlreadyExists(err) != nil {
		return err
	}
	if err := suite.c.Create(ctx, builders.Pod(owner, "svc", builders.Restricted())); err != nil {
		return fmt.Errorf("the owner's pod: %w", err)
	}
	if err := suite.c.Create(ctx, builders.Syncer(intruder, "svc", builders.AppName(app))); client.IgnoreAlreadyExists(err) != nil {
		return err
	}
	err := suite.c.Create(ctx, builders.Pod(intruder, "svc", builders.Restricted()))
	if err == nil || !strings.Contains(err.Error(), "belongs to namespace "+owner) {
		return fmt.Errorf("the intruder's pod: %v, want refused naming namespace %s", err, owner)
	}
	return nil
}

func TestTenancy_AnAppBelongsToTheFirstNamespaceThatRegistersIt(t *testing.T) {
	requireInjection(t)
	ctx := context.Background()
	withoutSharedApps(ctx, t)
	app := uniqueApp(t, "payments")
	owner, intruder := optedInNamespace(ctx, t, "team-b"), optedInNamespace(ctx, t, "team-a")

	// Through a syncer.
	if err := wantCreateRefused(ctx, t, app, owner, intruder); err != nil {
		t.Fatal(err)
	}
	var claim eurekubev1alpha1.EurekaAppClaim
	if err := suite.c.Get(ctx, client.ObjectKey{Name: ownership.ClaimName(app)}, &claim); err != nil {
		t.Fatalf("no claim of %s: %v", app, err)
	}
	if claim.Spec.Namespace != owner || claim.Spec.App != app {
		t.Errorf("claim %+v, want app %s of namespace %s", claim.Spec, app, owner)
	}

	// Through an annotation, under a syncer of an app of its own.
	if err := suite.c.Create(ctx, builders.Syncer(intruder, "own", builders.AppName(uniqueApp(t, "own")))); err != nil {
		t.Fatal(err)
	}
	err := suite.c.Create(ctx, builders.Pod(intruder, "own", builders.Restricted(),
		builders.Annotations(map[string]string{eurekubev1alpha1.AnnotationAppName: strings.ToLower(app)})))
	if err == nil || !strings.Contains(err.Error(), "belongs to namespace "+owner) {
		t.Errorf("annotation eurekube.io/app-name %s in %s: %v, want refused naming %s", app, intruder, err, owner)
	}

	// The intruder's syncer says why it registers nothing, and the
	// owner's that it may.
	harness.Eventually(t, 2*time.Minute, "the intruder's syncer Permitted False naming the owner",
		permitted(ctx, intruder, "svc", metav1.ConditionFalse, ownership.ReasonOwnedElsewhere, owner))
	harness.Eventually(t, 2*time.Minute, "the owner's syncer Permitted True",
		permitted(ctx, owner, "svc", metav1.ConditionTrue, ownership.ReasonClaimed, owner))

	// A syncer without pods claims nothing: ownership is earned by
	// registering, never by naming an app. Its Permitted condition says the
	// app is free, and its first admitted pod claims it.
	declared := uniqueApp(t, "declared")
	third := optedInNamespace(ctx, t, "team-c")
	if err := suite.c.Create(ctx, builders.Syncer(third, "declared", builders.AppName(declared))); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, 2*time.Minute, "the syncer without pods Permitted, the app unclaimed",
		permitted(ctx, third, "declared", metav1.ConditionTrue, ownership.ReasonUnclaimed, declared))
	if err := suite.c.Get(ctx, client.ObjectKey{Name: ownership.ClaimName(declared)}, &claim); err == nil {
		t.Fatalf("a syncer that registers nothing claimed %s for %s", declared, claim.Spec.Namespace)
	}
	if err := suite.c.Create(ctx, builders.Pod(third, "declared", builders.Restricted())); err != nil {
		t.Fatalf("the first pod of an unclaimed app: %v", err)
	}
	if err := suite.c.Get(ctx, client.ObjectKey{Name: ownership.ClaimName(declared)}, &claim); err != nil || claim.Spec.Namespace != third {
		t.Errorf("after the first pod: claim %+v (%v), want the app claimed for %s", claim.Spec, err, third)
	}
}

// The squat measured on make run, at admission: a tenant names another
// namespace's app in a syncer that selects nothing and is refused; while
// the owner registers the app no more (its syncer deleted and made again,
// a Recreate rollout), the claim is held for it: the squatter's pods are
// still refused, the hold named, and the owner's next pod is admitted and
// takes the claim up.
func TestTenancy_AHeldClaimKeepsASquatterOut(t *testing.T) {
	requireInjection(t)
	ctx := context.Background()
	withoutSharedApps(ctx, t)
	app := uniqueApp(t, "probe")
	probe, evil := optedInNamespace(ctx, t, "probe"), optedInNamespace(ctx, t, "evil")
	if err := wantCreateRefused(ctx, t, app, probe, evil); err != nil {
		t.Fatal(err)
	}
	// The owner's pods and syncer are gone; the manager holds the claim for
	// it (written here as the reconciler does once the syncer's detach is
	// done: the controller suite sees it do so against a real Eureka).
	until := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	hold := fmt.Appendf(nil, `{"metadata":{"annotations":{%q:%q}}}`, eurekubev1alpha1.ClaimHeldUntilAnnotation, until)
	if err := suite.c.Patch(ctx, &eurekubev1alpha1.EurekaAppClaim{ObjectMeta: metav1.ObjectMeta{Name: ownership.ClaimName(app)}}, client.RawPatch(types.MergePatchType, hold)); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, time.Minute, "the squatter's pod refused, the hold named", func() error {
		err := suite.c.Create(ctx, builders.Pod(evil, "svc", builders.Restricted()))
		if err == nil || !strings.Contains(err.Error(), "belongs to namespace "+probe) || !strings.Contains(err.Error(), "held for it until "+until) {
			return fmt.Errorf("the squatter's pod: %v, want refused naming %s and the hold", err, probe)
		}
		return nil
	})
	if err := suite.c.Create(ctx, builders.Pod(probe, "svc", builders.Restricted())); err != nil {
		t.Fatalf("the owner's pod under its held claim: %v", err)
	}
	var claim eurekubev1alpha1.EurekaAppClaim
	if err := suite.c.Get(ctx, client.ObjectKey{Name: ownership.ClaimName(app)}, &claim); err != nil {
		t.Fatal(err)
	}
	if claim.Spec.Namespace != probe || ownership.HeldUntil(&claim) != "" {
		t.Errorf("claim %+v held until %q, want %s's, taken up by its pod", claim.Spec, ownership.HeldUntil(&claim), probe)
	}

	// An admin deletes the claim while the owner still registers the app:
	// the squatter, asking first, does not get it; the claim is made again
	// for the namespace that registers the app.
	harness.Eventually(t, 2*time.Minute, "the owner's syncer counted as registering", func() error {
		var s eurekubev1alpha1.EurekaSyncer
		if err := suite.c.Get(ctx, client.ObjectKey{Namespace: probe, Name: "svc"}, &s); err != nil {
			return err
		}
		if !ownership.Registers(&s) {
			return fmt.Errorf("status %+v, want pods injected", s.Status)
		}
		return nil
	})
	if err := suite.c.Delete(ctx, &claim); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, time.Minute, "the squatter's pod refused once the claim is gone", func() error {
		if err := suite.c.Get(ctx, client.ObjectKey{Name: ownership.ClaimName(app)}, &eurekubev1alpha1.EurekaAppClaim{}); err == nil {
			return nil // made again already, by the owner's reconcile: the refusal below still holds
		}
		err := suite.c.Create(ctx, builders.Pod(evil, "svc", builders.Restricted()))
		if err == nil || !strings.Contains(err.Error(), "namespace "+probe) {
			return fmt.Errorf("the squatter's pod with no claim standing: %v, want refused naming %s", err, probe)
		}
		return nil
	})
	err := suite.c.Create(ctx, builders.Pod(evil, "svc", builders.Restricted()))
	if err == nil || !strings.Contains(err.Error(), "belongs to namespace "+probe) {
		t.Errorf("the squatter's pod: %v, want refused naming %s", err, probe)
	}
	if err := suite.c.Get(ctx, client.ObjectKey{Name: ownership.ClaimName(app)}, &claim); err != nil || claim.Spec.Namespace != probe {
		t.Errorf("claim %+v (%v), want it made again for %s", claim.Spec, err, probe)
	}
}

func TestTenancy_APolicyGrantsAnAppOnlyToTheNamespacesItNames(t *testing.T) {
	requireInjection(t)
	ctx := context.Background()
	withoutSharedApps(ctx, t)
	app := uniqueApp(t, "ledger")
	owner := optedInNamespace(ctx, t, "team-b", "team", "ledger-"+strings.ToLower(app[len(app)-6:]))
	intruder := optedInNamespace(ctx, t, "team-a")
	policy := &eurekubev1alpha1.EurekaAppPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: strings.ToLower(app)},
		Spec: eurekubev1alpha1.EurekaAppPolicySpec{Apps: []string{strings.ToLower(app) + "*"},
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "ledger-" + strings.ToLower(app[len(app)-6:])}}},
	}
	if err := suite.c.Create(ctx, policy); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = suite.c.Delete(context.Background(), policy) })

	for _, ns := range []string{owner, intruder} {
		if err := suite.c.Create(ctx, builders.Syncer(ns, "ledger", builders.AppName(app))); err != nil {
			t.Fatal(err)
		}
	}
	// The intruder comes first: a policy is not a race.
	harness.Eventually(t, time.Minute, "the intruder's pod refused naming the policy", func() error {
		err := suite.c.Create(ctx, builders.Pod(intruder, "ledger", builders.Restricted()))
		if err == nil || !strings.Contains(err.Error(), "EurekaAppPolicy "+policy.Name) {
			return fmt.Errorf("%v, want refused naming EurekaAppPolicy %s", err, policy.Name)
		}
		return nil
	})
	if err := suite.c.Create(ctx, builders.Pod(owner, "ledger", builders.Restricted())); err != nil {
		t.Fatalf("the granted namespace's pod: %v", err)
	}
	var claim eurekubev1alpha1.EurekaAppClaim
	if err := suite.c.Get(ctx, client.ObjectKey{Name: ownership.ClaimName(app)}, &claim); err == nil {
		t.Errorf("an app a policy names was claimed: %+v", claim.Spec)
	}
}

// permitted waits for a syncer's Permitted condition: its status and
// reason, and a mention in its message.
func permitted(ctx context.Context, namespace, name string, status metav1.ConditionStatus, reason, mention string) func() error {
	return func() error {
		var s eurekubev1alpha1.EurekaSyncer
		if err := suite.c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, &s); err != nil {
			return err
		}
		c := meta.FindStatusCondition(s.Status.Conditions, eurekubev1alpha1.ConditionPermitted)
		if c == nil || c.Status != status || c.Reason != reason || !strings.Contains(c.Message, mention) {
			return fmt.Errorf("Permitted %+v, want %s %s mentioning %s", c, status, reason, mention)
		}
		return nil
	}
}
