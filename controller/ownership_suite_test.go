package controller_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/eurekube/eurekube/api/v1alpha1"
	"github.com/eurekube/eurekube/internal/builders"
	"github.com/eurekube/eurekube/internal/ownership"
	"github.com/eurekube/eurekube/tests/harness"
)

// claimOf waits for app's claim to name namespace want ("" for no claim)
// and, when held is not nil, to be held (or not) for it.
func claimOf(ctx context.Context, app, want string, held *bool) func() error {
	return func() error {
		var claim v1alpha1.EurekaAppClaim
		err := k8s.Get(ctx, client.ObjectKey{Name: ownership.ClaimName(app)}, &claim)
		switch {
		case want == "" && apierrors.IsNotFound(err):
			return nil
		case err != nil:
			return err
		case want == "":
			return fmt.Errorf("claimed for %q, want no claim", claim.Spec.Namespace)
		case claim.Spec.Namespace != want:
			return fmt.Errorf("claimed for %q, want %q", claim.Spec.Namespace, want)
		case held != nil && *held != (ownership.HeldUntil(&claim) != ""):
			return fmt.Errorf("claim of %s held until %q, want held %v", want, ownership.HeldUntil(&claim), *held)
		}
		return nil
	}
}

// claimRegistered waits for the sweeper to have seen app's claim in use.
func claimRegistered(ctx context.Context, app string) func() error {
	return func() error {
		var claim v1alpha1.EurekaAppClaim
		if err := k8s.Get(ctx, client.ObjectKey{Name: ownership.ClaimName(app)}, &claim); err != nil {
			return err
		}
		if claim.Annotations[v1alpha1.ClaimRegisteredAnnotation] == "" {
			return fmt.Errorf("claim of %s not yet marked registered under", app)
		}
		return nil
	}
}

// permittedIs waits for a syncer's Permitted condition.
func permittedIs(s *v1alpha1.EurekaSyncer, status metav1.ConditionStatus, reason string, mention ...string) func() error {
	return func() error {
		c, _, err := condition(s, v1alpha1.ConditionPermitted)
		if err != nil {
			return err
		}
		if c == nil || c.Status != status || c.Reason != reason {
			return fmt.Errorf("Permitted %+v, want %s %s", c, status, reason)
		}
		for _, m := range mention {
			if !strings.Contains(c.Message, m) {
				return fmt.Errorf("Permitted %q does not mention %q", c.Message, m)
			}
		}
		return nil
	}
}

// The squat measured on make run: a tenant names another namespace's app
// in a syncer that selects nothing, and is refused; the owner then deletes
// its syncer and makes it again (as a mode change requires), with a
// Recreate-like gap in which none of its pods runs. The app stays the
// owner's throughout: the claim is held for it, never handed to the
// squatter's older syncer; the squatter's syncer, which registers
// nothing, never earns a claim, even once the hold has run out.
func TestOwnership_ASquatterNeverTakesAnAppItsOwnerDeletesAndRecreates(t *testing.T) {
	ctx := context.Background()
	probe, evil := newNamespace(t), newNamespace(t) // skips without the servers
	harness.SuspendSharedApps(ctx, t, k8s)
	app := "PROBE-" + strings.ToUpper(probe[len(probe)-5:])
	yes, no := true, false

	// A syncer alone names the app: it claims nothing.
	owner := builders.Syncer(probe, "orders", builders.AppName(app))
	if err := k8s.Create(ctx, owner); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, patience, "the owner's syncer Permitted, the app unclaimed", permittedIs(owner, metav1.ConditionTrue, ownership.ReasonUnclaimed))
	if err := claimOf(ctx, app, "", nil)(); err != nil {
		t.Fatalf("a syncer that registers nothing claimed its app: %v", err)
	}
	// Its first pod registers: now the app is the namespace's.
	pod := admitted(t, owner, "orders-1", "10.0.0.41")
	harness.Eventually(t, patience, "the app claimed by the namespace that registers it", claimOf(ctx, app, probe, &no))
	harness.Eventually(t, patience, "the claim seen in use", claimRegistered(ctx, app))

	squatter := builders.Syncer(evil, "squat", builders.AppName(app), builders.Selecting("nothing"))
	if err := k8s.Create(ctx, squatter); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, patience, "the squatter refused naming the owner", permittedIs(squatter, metav1.ConditionFalse, ownership.ReasonOwnedElsewhere, "namespace "+probe))

	// The owner's pods go, then its syncer.
	if err := k8s.Delete(ctx, pod); err != nil {
		t.Fatal(err)
	}
	waitFinalizer(t, owner)
	if err := k8s.Delete(ctx, owner); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, patience, "the claim held for the owner", claimOf(ctx, app, probe, &yes))
	harness.Eventually(t, patience, "the squatter still refused, the hold named", permittedIs(squatter, metav1.ConditionFalse, ownership.ReasonOwnedElsewhere, "namespace "+probe, "held for it until"))

	// The owner makes its syncer again: permitted at once, and its next pod
	// takes the claim up.
	harness.Eventually(t, patience, "the owner's syncer gone", func() error {
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(owner), &v1alpha1.EurekaSyncer{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("still there (%v)", err)
		}
		return nil
	})
	again := builders.Syncer(probe, "orders", builders.AppName(app))
	if err := k8s.Create(ctx, again); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, patience, "the re-created syncer Permitted by its held claim", permittedIs(again, metav1.ConditionTrue, ownership.ReasonClaimed, "held for it until"))
	admitted(t, again, "orders-2", "10.0.0.42")
	harness.Eventually(t, patience, "the claim taken up by the namespace registering again", claimOf(ctx, app, probe, &no))
	harness.Eventually(t, patience, "the squatter still refused", permittedIs(squatter, metav1.ConditionFalse, ownership.ReasonOwnedElsewhere, "namespace "+probe))

	// The owner stops for good and the hold runs out (written here as the
	// sweeper would find it a day later): the claim goes, and the
	// squatter's syncer, which registers nothing, does not get it.
	var pods corev1.PodList
	if err := k8s.List(ctx, &pods, client.InNamespace(probe)); err != nil {
		t.Fatal(err)
	}
	for i := range pods.Items {
		if err := k8s.Delete(ctx, &pods.Items[i]); client.IgnoreNotFound(err) != nil {
			t.Fatal(err)
		}
	}
	waitFinalizer(t, again)
	if err := k8s.Delete(ctx, again); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, patience, "the claim held again", claimOf(ctx, app, probe, &yes))
	expire := fmt.Appendf(nil, `{"metadata":{"annotations":{%q:%q}}}`, v1alpha1.ClaimHeldUntilAnnotation, time.Now().Add(-time.Minute).UTC().Format(time.RFC3339))
	if err := k8s.Patch(ctx, &v1alpha1.EurekaAppClaim{ObjectMeta: metav1.ObjectMeta{Name: ownership.ClaimName(app)}}, client.RawPatch(types.MergePatchType, expire)); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, patience, "the claim released once its hold ran out", claimOf(ctx, app, "", nil))
	harness.Eventually(t, patience, "the squatter told the app is unclaimed", permittedIs(squatter, metav1.ConditionTrue, ownership.ReasonUnclaimed))
	if err := claimOf(ctx, app, "", nil)(); err != nil {
		t.Errorf("a syncer that registers nothing claimed the freed app: %v", err)
	}
}

// A claim whose namespace registers its app by no path any more (the
// pods that asked for it by annotation are gone, or the namespace is) is
// held for it once it was registered under, and released once the hold
// has run out; one never registered under (its pod refused by a later
// admission step, a finished Job's) is released after the grace; one in
// use is kept as it is.
func TestOwnership_AClaimNothingUsesIsHeldThenReleased(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	harness.SuspendSharedApps(ctx, t, k8s)
	suffix := strings.ToUpper(ns[len(ns)-5:])
	never := ownership.NewClaim("NEVER-"+suffix, ns)
	left := ownership.NewClaim("LEFT-"+suffix, ns)
	left.Annotations = map[string]string{v1alpha1.ClaimRegisteredAnnotation: time.Now().Add(-time.Hour).UTC().Format(time.RFC3339)}
	used := ownership.NewClaim("KEPT-"+suffix, ns)
	job := ownership.NewClaim("JOB-"+suffix, ns)
	for _, c := range []*v1alpha1.EurekaAppClaim{never, left, used, job} {
		if err := k8s.Create(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	kept := builders.Syncer(ns, "orders", builders.AppName(used.Spec.App))
	if err := k8s.Create(ctx, kept); err != nil {
		t.Fatal(err)
	}
	admitted(t, kept, "kept-1", "10.0.0.61")
	// A Job's pod that asked for the app by annotation, and succeeded.
	done := builders.Pod(ns, "job", builders.Annotations(map[string]string{v1alpha1.AnnotationAppName: job.Spec.App}))
	if err := k8s.Create(ctx, done); err != nil {
		t.Fatal(err)
	}
	created := done.DeepCopy()
	done.Status.Phase = corev1.PodSucceeded
	if err := k8s.Status().Patch(ctx, done, client.MergeFrom(created)); err != nil {
		t.Fatal(err)
	}
	yes, no := true, false
	harness.Eventually(t, patience, "the claim never registered under released", claimOf(ctx, never.Spec.App, "", nil))
	harness.Eventually(t, patience, "the finished Job's claim released", claimOf(ctx, job.Spec.App, "", nil))
	harness.Eventually(t, patience, "the claim in use marked registered under", claimRegistered(ctx, used.Spec.App))
	harness.Eventually(t, patience, "the claim registered under and unused held", claimOf(ctx, left.Spec.App, ns, &yes))
	expire := fmt.Appendf(nil, `{"metadata":{"annotations":{%q:%q}}}`, v1alpha1.ClaimHeldUntilAnnotation, time.Now().Add(-time.Minute).UTC().Format(time.RFC3339))
	if err := k8s.Patch(ctx, &v1alpha1.EurekaAppClaim{ObjectMeta: metav1.ObjectMeta{Name: left.Name}}, client.RawPatch(types.MergePatchType, expire)); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, patience, "the held claim released once its hold ran out", claimOf(ctx, left.Spec.App, "", nil))
	if err := claimOf(ctx, used.Spec.App, ns, &no)(); err != nil {
		t.Errorf("the claim of an app a syncer of the namespace registers: %v", err)
	}
}

// Deciding an unclaimed app, the manager's ownership check reads the
// syncers of that app from its cache's index, not every syncer of the
// cluster, and still finds the oldest: asked by a younger namespace, it
// names the older one as the owner. Its cache here never shows a claim
// (the suite's manager claims the app at once), so the index alone
// decides; nor a policy (the suite's shares every app).
func TestOwnership_TheIndexedCheckNamesTheOldestRegistrant(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	a, b := newNamespace(t), newNamespace(t) // skips without the servers
	app := "LEDGER-" + strings.ToUpper(a[len(a)-5:])
	first := builders.Syncer(a, "orders", builders.AppName(app))
	if err := k8s.Create(ctx, first); err != nil {
		t.Fatal(err)
	}
	admitted(t, first, "ledger-1", "10.0.0.51")
	harness.Eventually(t, patience, "the older syncer registering", func() error {
		s, err := getSyncer(first)
		if err != nil {
			return err
		}
		if !ownership.Registers(s) {
			return fmt.Errorf("status %+v, want pods injected", s.Status)
		}
		return nil
	})
	asking := builders.Syncer(b, "ledger", builders.AppName(app))
	if err := k8s.Create(ctx, asking); err != nil {
		t.Fatal(err)
	}

	unseen, err := labels.Parse("eurekube.io/never-selected=true")
	if err != nil {
		t.Fatal(err)
	}
	c, err := cache.New(cp.Config, cache.Options{Scheme: cp.Scheme, ByObject: map[client.Object]cache.ByObject{
		&v1alpha1.EurekaAppClaim{}:  {Label: unseen},
		&v1alpha1.EurekaAppPolicy{}: {Label: unseen},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if err := ownership.IndexSyncers(ctx, c); err != nil {
		t.Fatal(err)
	}
	go func() { _ = c.Start(ctx) }()
	checker := ownership.Checker{Reader: c, Indexed: true}
	harness.Eventually(t, patience, "the younger namespace told the older owns the app", func() error {
		v, err := checker.Check(ctx, app, ownership.Namespace{Name: asking.Namespace}, false)
		if err != nil {
			return err
		}
		if v.Allowed || v.Owner != first.Namespace {
			return fmt.Errorf("verdict %+v, want the app owned by %s", v, first.Namespace)
		}
		return nil
	})
}
