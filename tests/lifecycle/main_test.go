package lifecycle_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

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
	ctx, cancel := context.WithTimeout(context.Background(), 75*time.Minute)
	c, err = cluster.Start(ctx, cluster.Options{Bare: true, Peers: 1})
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, "start the node:", err)
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
