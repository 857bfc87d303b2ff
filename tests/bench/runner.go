package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/go-logr/logr"
	"github.com/sirupsen/logrus"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/eurekube/eurekube/tests/harness"
)

// Phases of a run, in the order they run.
const (
	PhaseRegistrar  = "registrar"
	PhaseWebhook    = "webhook"
	PhaseReconciler = "reconciler"
)

// AllPhases is every phase.
var AllPhases = []string{PhaseRegistrar, PhaseWebhook, PhaseReconciler}

// Options configure Run.
type Options struct {
	// Quick uses small counts and short windows: minutes instead of a
	// quarter of an hour, for development.
	Quick bool
	// Sizes, when set, replace the full or quick sizes (for the smoke
	// test).
	Sizes *Sizes
	// Phases to run (default AllPhases).
	Phases []string
	// OutDir receives results.json and REPORT.md.
	OutDir string
	// WorkDir receives binaries, certificates and logs (default: a new
	// temporary directory, kept for reading the logs).
	WorkDir string
	Log     logrus.FieldLogger
}

// Sizes are the counts and windows of a run.
type Sizes struct {
	Creates          int
	HandlerRequests  int
	HandlerDuration  time.Duration
	HandlerClients   int
	RegistrarSamples int
	RegistrarWindow  time.Duration
	Scale            []Scenario
	ResyncPeriod     time.Duration
	ResyncsCounted   int
}

// SizesFor returns the full sizes the issue asks for, or quick ones.
func SizesFor(quick bool) Sizes {
	if quick {
		return Sizes{
			Creates: 150, HandlerRequests: 300, HandlerDuration: 2 * time.Second, HandlerClients: 8,
			RegistrarSamples: 3, RegistrarWindow: 65 * time.Second,
			Scale:        []Scenario{{Name: "10 syncers × 20 pods", Namespaces: 2, SyncersPerNamespace: 5, PodsPerSyncer: 20}, {Name: "1 syncer × 500 pods", Namespaces: 1, SyncersPerNamespace: 1, PodsPerSyncer: 500}},
			ResyncPeriod: 5 * time.Second, ResyncsCounted: 4,
		}
	}
	return Sizes{
		Creates: 2000, HandlerRequests: 3000, HandlerDuration: 15 * time.Second, HandlerClients: 8,
		RegistrarSamples: 20, RegistrarWindow: 3 * time.Minute,
		Scale: []Scenario{
			{Name: "100 syncers × 50 pods", Namespaces: 10, SyncersPerNamespace: 10, PodsPerSyncer: 50},
			{Name: "1 syncer × 5,000 pods", Namespaces: 1, SyncersPerNamespace: 1, PodsPerSyncer: 5000,
				Targets: &ScaleTargets{TimeToRightSeconds: 10, PeakRSSMiB: 150}},
			// Issue 17: the reconciler's cost independent of the number of
			// syncers. Before: one read of its app per syncer per resync.
			{Name: "1,000 syncers × 20 pods", Namespaces: 50, SyncersPerNamespace: 20, PodsPerSyncer: 20,
				Targets: &ScaleTargets{TimeToRightSeconds: 10, PeakRSSMiB: 300, RequestsPerResync: 2},
				Before: &ScaleBefore{When: "one read of its app per syncer, measured by this phase in the week of issue 17",
					TimeToRightSeconds: 23.8, PeakRSSMiB: 247, RequestsPerResync: 1001, MiBPerResync: 21.3}},
		},
		ResyncPeriod: 10 * time.Second, ResyncsCounted: 6,
	}
}

// Run measures every phase, records what failed, and writes the results
// even when a phase failed; the error then names the failed phases.
func Run(ctx context.Context, o Options) (*Results, error) {
	start := time.Now()
	if len(o.Phases) == 0 {
		o.Phases = AllPhases
	}
	if o.Log == nil {
		o.Log = logrus.StandardLogger()
	}
	// envtest logs through controller-runtime; its lines add nothing here.
	ctrllog.SetLogger(logr.Discard())
	root, err := harness.RepoRoot()
	if err != nil {
		return nil, err
	}
	if o.WorkDir == "" {
		if o.WorkDir, err = os.MkdirTemp("", "eurekube-bench-"); err != nil {
			return nil, fmt.Errorf("bench: %w", err)
		}
	}
	o.Log.WithField("workdir", o.WorkDir).Info("bench: binaries, certificates and logs go here")
	sizes := SizesFor(o.Quick)
	if o.Sizes != nil {
		sizes = *o.Sizes
	}
	r := &Results{Date: start, Quick: o.Quick, Environment: DescribeEnvironment(root)}
	r.Environment.Load = append(r.Environment.Load, SampleLoad("start"))

	eurekaDir := filepath.Join(o.WorkDir, "eureka")
	if err := os.MkdirAll(eurekaDir, 0o755); err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	server, err := harness.StartEureka(ctx, harness.EurekaOptions{Profile: harness.ProfileFast, LogDir: eurekaDir})
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	defer func() { _ = server.Stop() }()

	var managerBin string
	if slices.Contains(o.Phases, PhaseWebhook) || slices.Contains(o.Phases, PhaseReconciler) {
		if managerBin, err = harness.BuildBinary("./cmd/manager", o.WorkDir); err != nil {
			return nil, fmt.Errorf("bench: %w", err)
		}
	}
	phases := map[string]func() error{
		PhaseRegistrar: func() error {
			return MeasureRegistrar(ctx, RegistrarOptions{Eureka: server, WorkDir: phaseDir(o.WorkDir, PhaseRegistrar),
				Samples: sizes.RegistrarSamples, Window: sizes.RegistrarWindow, Log: o.Log}, r)
		},
		PhaseWebhook: func() error {
			return MeasureWebhook(ctx, WebhookOptions{Eureka: server, ManagerBinary: managerBin, WorkDir: phaseDir(o.WorkDir, PhaseWebhook),
				Creates: sizes.Creates, HandlerRequests: sizes.HandlerRequests, HandlerDuration: sizes.HandlerDuration,
				HandlerClients: sizes.HandlerClients, Log: o.Log}, r)
		},
		PhaseReconciler: func() error {
			for _, sc := range sizes.Scale {
				if err := MeasureScale(ctx, ScaleOptions{Eureka: server, ManagerBinary: managerBin, WorkDir: phaseDir(o.WorkDir, PhaseReconciler),
					Scenario: sc, ResyncPeriod: sizes.ResyncPeriod, ResyncsCounted: sizes.ResyncsCounted, Log: o.Log}, r); err != nil {
					return fmt.Errorf("%s: %w", sc.Name, err)
				}
			}
			return nil
		},
	}
	for _, name := range AllPhases {
		if !slices.Contains(o.Phases, name) {
			continue
		}
		log := o.Log.WithField("phase", name)
		log.Info("phase starts")
		phaseStart := time.Now()
		if err := phases[name](); err != nil {
			log.WithError(err).Error("phase failed")
			r.Fail(name, err)
		} else {
			log.WithField("took", time.Since(phaseStart).Round(time.Second)).Info("phase done")
		}
		r.Environment.Load = append(r.Environment.Load, SampleLoad("after "+name))
		if ctx.Err() != nil {
			break
		}
	}
	r.Duration = roundDuration(time.Since(start))
	if err := r.Write(o.OutDir); err != nil {
		return r, err
	}
	if len(r.Errors) > 0 {
		return r, fmt.Errorf("bench: %d phase(s) failed (see %s): %v", len(r.Errors), filepath.Join(o.OutDir, "REPORT.md"), r.Errors)
	}
	return r, nil
}

func phaseDir(workDir, phase string) string {
	dir := filepath.Join(workDir, phase)
	_ = os.MkdirAll(dir, 0o755)
	return dir
}
