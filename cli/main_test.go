package cli

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"os"
	"path/filepath"
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

var update = flag.Bool("update", false, "rewrite the golden files of testdata/")

// run runs the command line as the user would type it after the program
// name, with stdin as standard input.
func run(t *testing.T, stdin string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = Main(context.Background(), append([]string{"/usr/local/bin/eurekube"}, args...), Streams{In: strings.NewReader(stdin), Out: &out, Err: &errOut})
	return code, out.String(), errOut.String()
}

// golden compares got with testdata/name, or rewrites it with -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./cli -run %s -update to create it)", err, t.Name())
	}
	if got != string(want) {
		t.Errorf("%s differs from what the command printed (go test ./cli -run '%s' -update rewrites it):\n%s", path, t.Name(), got)
	}
}

func injectArgs(file string, more ...string) []string {
	args := append([]string{"inject", "-f", file, "--syncers", "testdata/inject/syncers.yaml"}, testManagerFlags...)
	return append(args, more...)
}

func readFile(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
