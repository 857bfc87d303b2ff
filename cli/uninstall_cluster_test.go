package cli

import (
	"context"
	"regexp"
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

// finalizedImport creates an import with the manager's finalizer, as the
// manager would have added it.
func finalizedImport(ctx context.Context, t *testing.T, cp *harness.ControlPlane, namespace string) *v1alpha1.EurekaImport {
	t.Helper()
	imp := &v1alpha1.EurekaImport{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "payments", Finalizers: []string{v1alpha1.ImportFinalizer}},
		Spec: v1alpha1.EurekaImportSpec{App: "PAYMENTS"}}
	if err := cp.Client.Create(ctx, imp); err != nil {
		t.Fatal(err)
	}
	return imp
}

// removeFinalizer takes the finalizers off obj (a syncer or an import), as
// the manager does once it has let it go.
func removeFinalizer(ctx context.Context, c client.Client, obj client.Object) error {
	cur := obj.DeepCopyObject().(client.Object)
	if err := c.Get(ctx, client.ObjectKeyFromObject(obj), cur); err != nil {
		return client.IgnoreNotFound(err)
	}
	patch := client.MergeFrom(cur.DeepCopyObject().(client.Object))
	cur.SetFinalizers(nil)
	return client.IgnoreNotFound(c.Patch(ctx, cur, patch))
}

// standInManager lets obj go once it is being deleted, as the manager
// does: it detaches a syncer, removes an import's Service, and removes
// its finalizer.
func standInManager(ctx context.Context, cp *harness.ControlPlane, obj client.Object) <-chan error {
	done := make(chan error, 1)
	go func() {
		done <- harness.Poll(ctx, time.Minute, 50*time.Millisecond, "the object is being deleted", func() error {
			cur := obj.DeepCopyObject().(client.Object)
			if err := cp.Client.Get(ctx, client.ObjectKeyFromObject(obj), cur); err != nil {
				return err
			}
			if cur.GetDeletionTimestamp() == nil {
				return errNotYet
			}
			return removeFinalizer(ctx, cp.Client, obj)
		})
	}()
	return done
}

func TestUninstall_WaitsUntilTheManagerLetEverySyncerAndImportGo(t *testing.T) {
	cp := controlPlane(t)
	ctx := testContext(t)
	s := finalizedSyncer(ctx, t, cp, "uninstall-detached")
	imp := finalizedImport(ctx, t, cp, "uninstall-detached")
	syncerDone, importDone := standInManager(ctx, cp, s), standInManager(ctx, cp, imp)

	code, out, stderr := runOn(t, cp, "uninstall", "--timeout=1m")
	for _, done := range []<-chan error{syncerDone, importDone} {
		if err := <-done; err != nil {
			t.Fatalf("the stand-in manager: %v", err)
		}
	}
	if code != ExitOK {
		t.Fatalf("exit %d\n%s\n%s", code, out, stderr)
	}
	// Every syncer and import of the cluster: the other tests' too.
	if !regexp.MustCompile(`waiting for the manager to detach \d+ EurekaSyncer\(s\) and remove \d+ EurekaImport\(s\)`).MatchString(out) {
		t.Errorf("the output does not say what it waits for:\n%s", out)
	}
	for _, want := range []string{"deleted EurekaSyncer uninstall-detached/orders", "deleted EurekaImport uninstall-detached/payments",
		"detached EurekaSyncer uninstall-detached/orders (0 left)", "removed EurekaImport uninstall-detached/payments (0 left)",
		"Every EurekaSyncer and EurekaImport is gone"} {
		if !strings.Contains(out, want) {
			t.Errorf("the output does not say %q:\n%s", want, out)
		}
	}
}

func TestUninstall_WithoutTheManagerTimesOutNamingWhatIsLeft(t *testing.T) {
	cp := controlPlane(t)
	ctx := testContext(t)
	s := finalizedSyncer(ctx, t, cp, "uninstall-stuck")
	imp := finalizedImport(ctx, t, cp, "uninstall-stuck")
	t.Cleanup(func() {
		_ = removeFinalizer(context.Background(), cp.Client, s)
		_ = removeFinalizer(context.Background(), cp.Client, imp)
	})
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
		"timed out after 2s: 1 EurekaImport(s) still present",
		"uninstall-stuck/payments  finalizers: " + v1alpha1.ImportFinalizer,
		"it must be running",
	} {
		if !strings.Contains(stderr, want) {
			t.Errorf("standard error does not say %q:\n%s", want, stderr)
		}
	}
}
