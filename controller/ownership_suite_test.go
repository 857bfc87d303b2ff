package controller_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
