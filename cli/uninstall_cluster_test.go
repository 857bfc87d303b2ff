package cli

import (
	"context"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/eurekube/eurekube/api/v1alpha1"
	"github.com/eurekube/eurekube/internal/builders"
	"github.com/eurekube/eurekube/tests/harness"
)

// finalizedSyncer creates a syncer with the manager's finalizer, as the
// manager would have added it.
func finalizedSyncer(ctx context.Context, t *testing.T, cp *harness.ControlPlane, namespace string) *v1alpha1.EurekaSyncer {
	t.Helper()
	createNamespace(ctx, t, cp, namespace, true)
	s := builders.Syncer(namespace, "orders")
	s.Finalizers = []string{v1alpha1.Finalizer}
	if err := cp.Client.Create(ctx, s); err != nil {
		t.Fatal(err)
	}
	return s
}

func removeFinalizer(ctx context.Context, c client.Client, s *v1alpha1.EurekaSyncer) error {
	var cur v1alpha1.EurekaSyncer
	if err := c.Get(ctx, client.ObjectKeyFromObject(s), &cur); err != nil {
		return client.IgnoreNotFound(err)
	}
	patch := client.MergeFrom(cur.DeepCopy())
	cur.Finalizers = nil
	return client.IgnoreNotFound(c.Patch(ctx, &cur, patch))
}

func TestUninstall_WaitsUntilTheManagerDetachedEverySyncer(t *testing.T) {
	cp := controlPlane(t)
	ctx := testContext(t)
	s := finalizedSyncer(ctx, t, cp, "uninstall-detached")

	// The manager, as far as uninstall can tell: once the syncer is being
	// deleted, it detaches it and removes its finalizer.
	managerDone := make(chan error, 1)
	go func() {
		managerDone <- harness.Poll(ctx, time.Minute, 50*time.Millisecond, "the syncer is being deleted", func() error {
			var cur v1alpha1.EurekaSyncer
			if err := cp.Client.Get(ctx, client.ObjectKeyFromObject(s), &cur); err != nil {
				return err
			}
			if cur.DeletionTimestamp == nil {
				return errNotYet
			}
			return removeFinalizer(ctx, cp.Client, s)
		})
	}()

	code, out, stderr := runOn(t, cp, "uninstall", "--timeout=1m")
	if err := <-managerDone; err != nil {
		t.Fatalf("the stand-in manager: %v", err)
	}
	if code != ExitOK {
		t.Fatalf("exit %d\n%s\n%s", code, out, stderr)
	}
	for _, want := range []string{"deleted EurekaSyncer uninstall-detached/orders", "detached EurekaSyncer uninstall-detached/orders (0 left)", "Every EurekaSyncer is gone"} {
		if !strings.Contains(out, want) {
			t.Errorf("the output does not say %q:\n%s", want, out)
		}
	}
}

func TestUninstall_WithoutTheManagerTimesOutNamingTheSyncersLeft(t *testing.T) {
	cp := controlPlane(t)
	ctx := testContext(t)
	s := finalizedSyncer(ctx, t, cp, "uninstall-stuck")
	t.Cleanup(func() { _ = removeFinalizer(context.Background(), cp.Client, s) })
	meta.SetStatusCondition(&s.Status.Conditions, metav1.Condition{Type: v1alpha1.ConditionSynced, Status: metav1.ConditionFalse, Reason: "Detaching", Message: "cancelling 3 instances"})
	if err := cp.Client.Status().Update(ctx, s); err != nil {
		t.Fatal(err)
	}

	code, out, stderr := runOn(t, cp, "uninstall", "--timeout=2s")
	if code != ExitFailure {
		t.Fatalf("exit %d, want %d\n%s\n%s", code, ExitFailure, out, stderr)
	}
	for _, want := range []string{
		"timed out after 2s: 1 EurekaSyncer(s) still present",
		"uninstall-stuck/orders  finalizers: " + v1alpha1.Finalizer,
		"Synced=False Detaching: cancelling 3 instances",
		"it must be running",
	} {
		if !strings.Contains(stderr, want) {
			t.Errorf("standard error does not say %q:\n%s", want, stderr)
		}
	}
}
