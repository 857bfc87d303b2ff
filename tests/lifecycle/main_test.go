package lifecycle_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/eurekube/eurekube/api/v1alpha1"
	"github.com/eurekube/eurekube/tests/cluster"
	"github.com/eurekube/eurekube/tests/harness"
	"github.com/eurekube/eurekube/tests/node"
)

var (
	c *cluster.Cluster
	// kube reads the node's API with the CRD type too.
	kube client.Client
	// helm is built from its Go module; eurekube is the CLI, built here.
	helm, eurekube string
)

func TestMain(m *testing.M) {
	harness.SkipSuiteWhenShort("a real node, Helm and a Eureka server")
	if reason := node.Unavailable(node.Options{}); reason != "" {
		fmt.Println("skipped: " + reason)
		os.Exit(0)
	}
	os.Exit(run(m))
}

func run(m *testing.M) int {
	var err error
	if helm, err = harness.BuildArtifact("EUREKUBE_HELM", "tests/tools/helm/build.sh"); err != nil {
		fmt.Fprintln(os.Stderr, "helm:", err)
		return 1
	}
	var cleanup func()
	if eurekube, cleanup, err = harness.BuildTemp("./cmd/eurekube"); err != nil {
		fmt.Fprintln(os.Stderr, "eurekube CLI:", err)
		return 1
	}
	defer cleanup()
	// One node per machine: the start waits while the end-to-end suite's
	// node runs, so its bound covers that suite too.
	logs, err := os.MkdirTemp("", "eurekube-lifecycle-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ctx, cancel := context.WithTimeout(context.Background(), 75*time.Minute)
	c, err = cluster.Start(ctx, cluster.Options{Bare: true, Peers: 1, LogDir: logs, Node: node.Options{LogDir: filepath.Join(logs, "node")}})
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, "start the node:", err)
		keepSetup(logs)
		return 1
	}
	scheme := harness.Scheme()
	if err := apiextensionsv1.AddToScheme(scheme); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if kube, err = client.New(c.Node.Config, client.Options{Scheme: scheme}); err != nil {
		fmt.Fprintln(os.Stderr, "API client:", err)
		return 1
	}
	code := m.Run()
	if err := c.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "stop the node:", err)
		code = 1
	}
	return code
}

// keepSetup keeps the logs of a setup that failed (the node's processes'
// and Eureka's) in bin/test-artifacts/lifecycle/setup/.
func keepSetup(logs string) {
	dir, err := harness.KeepSuiteSetup("lifecycle", logs)
	if err != nil {
		fmt.Fprintln(os.Stderr, "keep the setup's logs:", err)
		return
	}
	fmt.Fprintln(os.Stderr, "the setup's logs are kept in", dir)
}

func kubectl(t *testing.T, args ...string) {
	t.Helper()
	out, err := exec.Command(c.Node.Kubectl(), append([]string{"--kubeconfig", c.Node.Kubeconfig}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// selfManaged is manifests/self-managed as a platform team applies it for
// the node's Eureka servers, which the stories' syncers name
// (cluster.AllowNodeEureka).
func selfManaged(t *testing.T) string {
	t.Helper()
	root, err := harness.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir, err := cluster.AllowNodeEureka(filepath.Join(root, "manifests", "self-managed"), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// runCLI runs the eurekube command line against the node and returns its
// output; its exit code must be want.
func runCLI(t *testing.T, want int, args ...string) string {
	t.Helper()
	cmd := exec.Command(eurekube, append(args, "--kubeconfig", c.Node.Kubeconfig)...)
	out, err := cmd.CombinedOutput()
	if code := cmd.ProcessState.ExitCode(); code != want {
		t.Fatalf("eurekube %s exited %d (%v), want %d:\n%s", strings.Join(args, " "), code, err, want, out)
	}
	return string(out)
}

func waitInstalled(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	if err := c.WaitInstalled(ctx); err != nil {
		t.Fatal(err)
	}
}

func getSyncer(ctx context.Context, key client.ObjectKey) (*v1alpha1.EurekaSyncer, error) {
	var s v1alpha1.EurekaSyncer
	return &s, c.Node.Client.Get(ctx, key, &s)
}
