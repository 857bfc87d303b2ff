package bench

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/eurekube/eurekube/tests/harness"
)

// TestRun_WritesTheReportFromRealParts runs every phase at toy sizes
// against the real API server, manager, registrar, Spring client and
// Eureka server, so a change elsewhere (a metric's name, the harness, the
// status shape, the registrar's environment or instance id) that would
// break `make bench` breaks a test first. The registrar phase takes one
// latency sample and a 5 s steady-state window (about a minute with the
// Spring client's start).
func TestRun_WritesTheReportFromRealParts(t *testing.T) {
	harness.SkipWhenShort(t, "a control plane, the manager and a Eureka server")
	// No deadline of its own: builds and cold starts take what a busy
	// machine gives them, and every wait inside has its own.
	ctx := t.Context()
	log := logrus.New()
	log.SetLevel(logrus.WarnLevel)
	out := t.TempDir()
	r, err := Run(ctx, Options{
		Phases: AllPhases,
		Sizes: &Sizes{
			Creates: 5, HandlerRequests: 20, HandlerDuration: 200 * time.Millisecond, HandlerClients: 2,
			RegistrarSamples: 1, RegistrarWindow: 5 * time.Second,
			Scale: []Scenario{{Name: "2 syncers × 3 pods", Namespaces: 1, SyncersPerNamespace: 2, PodsPerSyncer: 3, Restart: true,
				Targets: &ScaleTargets{TimeToRightFloorRatio: 100, RestartWrites: Max(0)}},
				{Name: "2 syncers × 3 pods, after an upgrade", Namespaces: 1, SyncersPerNamespace: 2, PodsPerSyncer: 3, Upgrade: true},
				{Name: "2 imported apps × 3 instances", Namespaces: 1, ImportedApps: 2, InstancesPerApp: 3, ChangedAppInstances: 101}},
			ResyncPeriod: time.Second, ResyncsCounted: 3, // a window of a few resyncs: one 1 s resync may pass without a reconcile on a busy machine
			Gateway: GatewaySizes{Instances: 20, Samples: 5, NewTokens: 2,
				ReadClients: 2, ReadWarmup: 200 * time.Millisecond, ReadDuration: 500 * time.Millisecond, ReadRounds: 1,
				Pollers: 20, PollInterval: time.Second, PollWindow: 5 * time.Second},
		},
		OutDir: out, WorkDir: t.TempDir(), Log: log,
		AllowDirty: true, // a working tree under development; CI's clone is clean
	})
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(out, "REPORT.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"pod CREATE p99, Eurekube ÷ precomputed patch", "handler p99, one client", "2 syncers × 3 pods: manager peak RSS", "2 syncers × 3 pods, after an upgrade: manager start → every status right", "2 imported apps × 3 instances: manager start → every import's slices right",
		"what the pass cannot do without, done by the bench alone",
		"2 syncers × 3 pods, the manager started again over right statuses: new leader → first full pass done",
		"2 syncers × 3 pods, the manager started again over right statuses: API writes of its first full pass",
		"× the floor", "pod CREATE p50, precomputed patch ÷ its identical twin (A/A)",
		"2 imported apps × 3 instances: EndpointSlice writes per single-instance Eureka change", "the import of 101 instances has 2 slices",
		"pod CREATE p50 through a no-op webhook", "pod CREATE p99 without a webhook", "kube-apiserver v",
		"app healthy → UP on the server, slowest", "SIGTERM → gone from the server, slowest", "Eureka requests per instance per minute", "RSS, registered and probing",
		"register as a pod (Bearer, TokenReview cached), p99 added", "status override as a client (Basic), p50 added", "GET /apps/delta (JSON, gzip), p50 added",
		"the first write of a new token (one TokenReview)", "GET /apps (JSON, gzip) answered per CPU-second of the gateway", "Eureka requests per minute, 20 clients polling through one gateway"} {
		if !strings.Contains(string(data), want) {
			t.Errorf("REPORT.md lacks %q", want)
		}
	}
	// The registrar's figures were measured, not left at zero (its CPU
	// over 5 s may be below /proc's 10 ms resolution).
	for _, id := range []string{"registrar.healthy_to_up_max", "registrar.sigterm_to_gone_max", "registrar.rss", "registrar.binary",
		"gateway.reads_per_core.apps", "gateway.polls.eureka_reads_per_min"} {
		if i := slices.IndexFunc(r.Figures, func(f Figure) bool { return f.ID == id }); i < 0 {
			t.Errorf("no figure %s", id)
		} else if r.Figures[i].Value <= 0 {
			t.Errorf("figure %s not measured: %+v", id, r.Figures[i])
		}
	}
}
