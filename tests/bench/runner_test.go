package bench

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/eurekube/eurekube/tests/harness"
)

// TestRun_WritesTheReportFromRealParts runs the webhook and reconciler
// phases at toy sizes against the real API server, manager and Eureka
// server, so a change elsewhere (a metric's name, the harness, the status
// shape) that would break `make bench` breaks a test first.
func TestRun_WritesTheReportFromRealParts(t *testing.T) {
	harness.SkipWhenShort(t, "a control plane, the manager and a Eureka server")
	// No deadline of its own: builds and cold starts take what a busy
	// machine gives them, and every wait inside has its own.
	ctx := t.Context()
	log := logrus.New()
	log.SetLevel(logrus.WarnLevel)
	out := t.TempDir()
	_, err := Run(ctx, Options{
		Phases: []string{PhaseWebhook, PhaseReconciler},
		Sizes: &Sizes{
			Creates: 5, HandlerRequests: 20, HandlerDuration: 200 * time.Millisecond, HandlerClients: 2,
			Scale:        []Scenario{{Name: "2 syncers × 3 pods", Namespaces: 1, SyncersPerNamespace: 2, PodsPerSyncer: 3}},
			ResyncPeriod: time.Second, ResyncsCounted: 3, // a window of a few resyncs: one 1 s resync may pass without a reconcile on a busy machine
		},
		OutDir: out, WorkDir: t.TempDir(), Log: log,
	})
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(out, "REPORT.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"pod CREATE p99, Eurekube ÷ precomputed patch", "handler p99, one client", "2 syncers × 3 pods: manager peak RSS", "kube-apiserver v"} {
		if !strings.Contains(string(data), want) {
			t.Errorf("REPORT.md lacks %q", want)
		}
	}
}
