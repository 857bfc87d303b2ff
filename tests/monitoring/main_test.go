// Package monitoring_test checks manifests/monitoring, Eurekube's optional
// operations package: the PrometheusRule's alerts are checked and
// unit-tested with promtool (testdata/*.yaml), every metric the alerts and
// the Grafana dashboard query is one Eurekube or a known dependency
// exports, and the kustomization builds the rule and the dashboard's
// ConfigMap.
package monitoring_test

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/eurekube/eurekube/tests/harness"
)

var (
	// root is the repository's top directory.
	root string
	// promtool is Prometheus's promtool, built by tests/tools/promtool.
	promtool string
)

func TestMain(m *testing.M) {
	harness.SkipSuiteWhenShort("promtool, built from Prometheus's Go module (tests/tools/promtool)")
	os.Exit(func() int {
		var err error
		if root, err = harness.RepoRoot(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		if promtool, err = harness.BuildArtifact("EUREKUBE_PROMTOOL", "tests/tools/promtool/build.sh"); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		return m.Run()
	}())
}

// repoFile is the path of a file given relative to the repository's root.
func repoFile(rel string) string {
	return filepath.Join(root, filepath.FromSlash(rel))
}

// run runs a command and returns its combined output, failing t with that
// output when the command fails.
func run(t *testing.T, dir, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %s: %v\n%s", filepath.Base(name), strings.Join(args, " "), err, out.String())
	}
	return out.String()
}
