package controller_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/eurekube/eurekube/api/v1alpha1"
	"github.com/eurekube/eurekube/internal/builders"
	"github.com/eurekube/eurekube/internal/ownership"
	"github.com/eurekube/eurekube/tests/harness"
)

// An app no policy names belongs to the first namespace whose syncer
// registers it; the later one is told who owns it, with its running pods
// and what a platform team does about it; when the owner's syncer goes,
// the claim goes with it and the app is free again.
func TestOwnership_TheFirstSyncerClaimsTheAppAndReleasesItWhenDeleted(t *testing.T) {
	ctx := context.Background()
	first, second := newNamespace(t), newNamespace(t) // skips without the servers
	harness.SuspendSharedApps(ctx, t, k8s)
	app := "QUOTES-" + strings.ToUpper(first[len(first)-5:])
	owner := builders.Syncer(first, "quotes", builders.AppName(app))
	if err := k8s.Create(ctx, owner); err != nil {
		t.Fatal(err)
	}
	claimOf := func(want string) func() error {
		return func() error {
			var claim v1alpha1.EurekaAppClaim
			err := k8s.Get(ctx, client.ObjectKey{Name: ownership.ClaimName(app)}, &claim)
			switch {
			case want == "" && apierrors.IsNotFound(err):
				return nil
			case err != nil:
				return err
			case claim.Spec.Namespace != want:
				return fmt.Errorf("claimed for %q, want %q", claim.Spec.Namespace, want)
			}
			return nil
		}
	}
	harness.Eventually(t, patience, "the app claimed for the first namespace", claimOf(first))

	later := builders.Syncer(second, "quotes", builders.AppName(app))
	if err := k8s.Create(ctx, later); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, patience, "the later syncer Permitted False naming the owner", func() error {
		c, _, err := condition(later, v1alpha1.ConditionPermitted)
		if err != nil {
			return err
		}
		if c == nil || c.Status != metav1.ConditionFalse || c.Reason != ownership.ReasonOwnedElsewhere || !strings.Contains(c.Message, "namespace "+first) {
			return fmt.Errorf("Permitted %+v", c)
		}
		return nil
	})

	waitFinalizer(t, owner)
	if err := k8s.Delete(ctx, owner); err != nil {
		t.Fatal(err)
	}
	// Released, then claimed by the one namespace that still registers
	// the app.
	harness.Eventually(t, patience, "the claim passed to the second namespace", claimOf(second))
	harness.Eventually(t, patience, "the later syncer now Permitted", func() error {
		c, _, err := condition(later, v1alpha1.ConditionPermitted)
		if err != nil {
			return err
		}
		if c == nil || c.Status != metav1.ConditionTrue {
			return fmt.Errorf("Permitted %+v", c)
		}
		return nil
	})
}

// A claim whose namespace registers its app by no path any more (the
// pods that asked for it by annotation are gone, or the namespace is) is
// released, after its grace; one still used is kept.
func TestOwnership_AClaimNothingUsesIsReleased(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	harness.SuspendSharedApps(ctx, t, k8s)
	unused := ownership.NewClaim("LEFT-"+strings.ToUpper(ns[len(ns)-5:]), ns)
	used := ownership.NewClaim("KEPT-"+strings.ToUpper(ns[len(ns)-5:]), ns)
	for _, c := range []*v1alpha1.EurekaAppClaim{unused, used} {
		if err := k8s.Create(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	if err := k8s.Create(ctx, builders.Syncer(ns, "kept", builders.AppName(used.Spec.App))); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, patience, "the unused claim released", func() error {
		var got v1alpha1.EurekaAppClaim
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(unused), &got); !apierrors.IsNotFound(err) {
			return fmt.Errorf("claim of %s still there (%v)", unused.Spec.App, err)
		}
		return nil
	})
	var got v1alpha1.EurekaAppClaim
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(used), &got); err != nil {
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
	older := builders.Syncer(a, "ledger", builders.AppName(app))
	if err := k8s.Create(ctx, older); err != nil {
		t.Fatal(err)
	}
	younger := builders.Syncer(b, "ledger", builders.AppName(app))
	if err := k8s.Create(ctx, younger); err != nil {
		t.Fatal(err)
	}
	// Within one second of each other, the name decides (FirstRegistrant).
	first, asking := older, younger
	if ownership.FirstRegistrant([]v1alpha1.EurekaSyncer{*older, *younger}, app, "") != older.Namespace {
		first, asking = younger, older
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
