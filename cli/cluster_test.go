package cli

import (
	"context"
	"errors"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/eurekube/eurekube/api/v1alpha1"
	"github.com/eurekube/eurekube/tests/harness"
)

// The tests against a real kube-apiserver share one control plane,
// started by the first of them and stopped by TestMain; in -short mode
// they skip and none starts.
var shared struct {
	once sync.Once
	cp   *harness.ControlPlane
	err  error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if shared.cp != nil {
		_ = shared.cp.Stop()
	}
	os.Exit(code)
}

// controlPlane is the shared kube-apiserver with Eurekube's CRD.
func controlPlane(t *testing.T) *harness.ControlPlane {
	t.Helper()
	harness.SkipWhenShort(t, "a kube-apiserver and etcd (envtest)")
	shared.once.Do(func() {
		shared.cp, shared.err = harness.StartControlPlane(context.Background(), harness.ControlPlaneOptions{})
	})
	if shared.err != nil {
		t.Fatal(shared.err)
	}
	return shared.cp
}

// runOn runs a command against the control plane, as a user with its
// kubeconfig would.
func runOn(t *testing.T, cp *harness.ControlPlane, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	return run(t, "", append(args, "--kubeconfig", cp.Kubeconfig)...)
}

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// createNamespace creates a namespace, opted in when optedIn.
func createNamespace(ctx context.Context, t *testing.T, cp *harness.ControlPlane, name string, optedIn bool) {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if optedIn {
		ns.Labels = map[string]string{v1alpha1.NamespaceInjectionLabel: "enabled"}
	}
	if err := cp.Client.Create(ctx, ns); err != nil {
		t.Fatalf("create namespace %s: %v", name, err)
	}
}

// lineOf is the output line of check, or "" when there is none.
func lineOf(out, verdict, check string) string {
	for _, l := range strings.Split(out, "\n") {
		f := strings.Fields(l)
		if len(f) >= 2 && f[0] == verdict && f[1] == check {
			return l
		}
	}
	return ""
}

// errNotYet is a poll's "not yet".
var errNotYet = errors.New("not yet")
