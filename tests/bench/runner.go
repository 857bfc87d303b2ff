package bench

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
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
	PhaseGateway    = "gateway"
)

// AllPhases is every phase.
var AllPhases = []string{PhaseRegistrar, PhaseWebhook, PhaseReconciler, PhaseGateway}

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
	// Before is an older commit whose manager the reconciler's scenarios
	// also measure, first, and whose webhook benchmarks the webhook phase
	// runs right after this tree's, for the "before" figures (benchrun
	// -before).
	Before string
	// Scenarios, when set, picks the reconciler's scenarios by id
	// ("1000x20", "1000x20_upgrade", "import_1000x10"; quick: "import_20x10").
	Scenarios []string
	// AllowDirty measures a tree with uncommitted changes; without it Run
	// refuses, as its report would name a commit it did not measure.
	AllowDirty bool
	Log        logrus.FieldLogger
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
	Gateway          GatewaySizes
}

// SizesFor returns the full sizes the issue asks for, or quick ones.
func SizesFor(quick bool) Sizes {
	if quick {
		return Sizes{
			Creates: 150, HandlerRequests: 300, HandlerDuration: 2 * time.Second, HandlerClients: 8,
			RegistrarSamples: 3, RegistrarWindow: 65 * time.Second,
			Scale: []Scenario{{Name: "10 syncers × 20 pods", Namespaces: 2, SyncersPerNamespace: 5, PodsPerSyncer: 20, Restart: true}, {Name: "1 syncer × 500 pods", Namespaces: 1, SyncersPerNamespace: 1, PodsPerSyncer: 500},
				{Name: "20 imported apps × 10 instances", Namespaces: 2, ImportedApps: 20, InstancesPerApp: 10, ChangedAppInstances: 250}},
			ResyncPeriod: 5 * time.Second, ResyncsCounted: 4,
			Gateway: GatewaySizes{Instances: 200, Samples: 60, NewTokens: 10,
				ReadClients: 8, ReadWarmup: 2 * time.Second, ReadDuration: 3 * time.Second, ReadRounds: 1,
				Pollers: 1000, PollInterval: 3 * time.Second, PollWindow: 15 * time.Second},
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
			// syncers; issue 30: its time and memory re-measured; issue 44:
			// its time against the floor the run measures, and the
			// manager started again over right statuses (0 writes, 3 s).
			{Name: "1,000 syncers × 20 pods", Namespaces: 50, SyncersPerNamespace: 20, PodsPerSyncer: 20, Restart: true,
				Targets: &ScaleTargets{TimeToRightFloorRatio: 1.3, PeakRSSMiB: 300, RequestsPerResync: 2, RestartSeconds: 3, RestartWrites: Max(0)}},
			// Issue 30: the first pass after an upgrade from a release
			// whose pods lack what the webhook writes now.
			{Name: "1,000 syncers × 20 pods, after an upgrade", Namespaces: 50, SyncersPerNamespace: 20, PodsPerSyncer: 20, Upgrade: true},
			// Issue 29: the cost of imports independent of their number;
			// issue 42: one slice written at most per single-instance
			// change, in an import of 250 instances (3 slices); issue 44:
			// its time against the floor the run measures.
			{Name: "1,000 imported apps × 10 instances", Namespaces: 50, ImportedApps: 1000, InstancesPerApp: 10, ChangedAppInstances: 250,
				Targets: &ScaleTargets{TimeToRightFloorRatio: 1.3, RequestsPerResync: 2}},
		},
		ResyncPeriod: 10 * time.Second, ResyncsCounted: 6,
		// Issue 43: the gateway's added latency, reads per core and
		// Eureka requests of 1,000 polling clients.
		Gateway: GatewaySizes{Instances: 500, Samples: 400, NewTokens: 40,
			ReadClients: 8, ReadWarmup: 5 * time.Second, ReadDuration: 10 * time.Second, ReadRounds: 2,
			Pollers: 1000, PollInterval: 3 * time.Second, PollWindow: time.Minute},
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
	if r.Environment.Dirty && !o.AllowDirty {
		return nil, fmt.Errorf("bench: the tree at %s has uncommitted changes: commit them first, so the report names the commit it measured (or allow it for development: benchrun -allow-dirty -out DIR)", r.Environment.Commit)
	}
	r.Environment.Load = append(r.Environment.Load, SampleLoad("start"))

	// The Eureka server the first three phases share; the gateway phase
	// starts its own, which takes requests only with the gateway's
	// credentials.
	var server *harness.Eureka
	if slices.ContainsFunc(o.Phases, func(p string) bool { return p != PhaseGateway }) {
		eurekaDir := filepath.Join(o.WorkDir, "eureka")
		if err := os.MkdirAll(eurekaDir, 0o755); err != nil {
			return nil, fmt.Errorf("bench: %w", err)
		}
		if server, err = harness.StartEureka(ctx, harness.EurekaOptions{Profile: harness.ProfileFast, LogDir: eurekaDir}); err != nil {
			return nil, fmt.Errorf("bench: %w", err)
		}
		defer func() { _ = server.Stop() }()
	}

	var managerBin string
	if slices.Contains(o.Phases, PhaseWebhook) || slices.Contains(o.Phases, PhaseReconciler) || slices.Contains(o.Phases, PhaseGateway) {
		if managerBin, err = harness.BuildBinary("./cmd/manager", o.WorkDir); err != nil {
			return nil, fmt.Errorf("bench: %w", err)
		}
	}
	var before *BuiltManager
	if o.Before != "" && slices.Contains(o.Phases, PhaseReconciler) {
		if before, err = buildManagerAt(root, o.Before, o.WorkDir); err != nil {
			return nil, fmt.Errorf("bench: %w", err)
		}
		o.Log.WithField("commit", before.Commit).Info("bench: the reconciler's scenarios measure this commit's manager too")
	}
	phases := map[string]func() error{
		PhaseRegistrar: func() error {
			return MeasureRegistrar(ctx, RegistrarOptions{Eureka: server, WorkDir: phaseDir(o.WorkDir, PhaseRegistrar),
				Samples: sizes.RegistrarSamples, Window: sizes.RegistrarWindow, Log: o.Log}, r)
		},
		PhaseWebhook: func() error {
			return MeasureWebhook(ctx, WebhookOptions{Eureka: server, ManagerBinary: managerBin, WorkDir: phaseDir(o.WorkDir, PhaseWebhook),
				Creates: sizes.Creates, HandlerRequests: sizes.HandlerRequests, HandlerDuration: sizes.HandlerDuration,
				HandlerClients: sizes.HandlerClients, Before: o.Before, Log: o.Log}, r)
		},
		PhaseReconciler: func() error {
			so := ScaleOptions{Eureka: server, Manager: BuiltManager{Binary: managerBin, Commit: strings.Fields(r.Environment.Commit)[0]}, Before: before,
				WorkDir: phaseDir(o.WorkDir, PhaseReconciler), ResyncPeriod: sizes.ResyncPeriod, ResyncsCounted: sizes.ResyncsCounted, Log: o.Log}
			for _, sc := range sizes.Scale {
				if len(o.Scenarios) > 0 && !slices.Contains(o.Scenarios, scenarioID(sc)) {
					continue
				}
				if err := MeasureScale(ctx, so, sc, r); err != nil {
					return fmt.Errorf("%s: %w", sc.Name, err)
				}
			}
			return nil
		},
		PhaseGateway: func() error {
			return MeasureGateway(ctx, GatewayOptions{ManagerBinary: managerBin, WorkDir: phaseDir(o.WorkDir, PhaseGateway), Sizes: sizes.Gateway, Log: o.Log}, r)
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

// buildManagerAt builds ./cmd/manager as it was at rev, from a git
// worktree of it in workDir.
func buildManagerAt(root, rev, workDir string) (_ *BuiltManager, err error) {
	commit, err := shortCommit(root, rev)
	if err != nil {
		return nil, err
	}
	tree := filepath.Join(workDir, "tree-"+commit)
	if err := addWorktree(root, commit, tree); err != nil {
		return nil, err
	}
	defer func() {
		if rmErr := removeWorktree(root, tree); rmErr != nil && err == nil {
			err = rmErr
		}
	}()
	bin := filepath.Join(workDir, "manager-"+commit)
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", bin, "./cmd/manager")
	cmd.Dir = tree
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if msg, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("build the manager of %s: %w\n%s", commit, err, msg)
	}
	return &BuiltManager{Binary: bin, Commit: commit}, nil
}

// shortCommit is rev's commit, abbreviated to 12 digits.
func shortCommit(root, rev string) (string, error) {
	out, err := exec.Command("git", "-C", root, "rev-parse", "--short=12", rev+"^{commit}").Output()
	if err != nil {
		return "", fmt.Errorf("commit %s: %w", rev, err)
	}
	return strings.TrimSpace(string(out)), nil
}

// addWorktree checks commit out, detached, in a git worktree at tree.
func addWorktree(root, commit, tree string) error {
	if msg, err := exec.Command("git", "-C", root, "worktree", "add", "--detach", tree, commit).CombinedOutput(); err != nil {
		return fmt.Errorf("worktree of %s: %w\n%s", commit, err, msg)
	}
	return nil
}

// removeWorktree removes the git worktree at tree.
func removeWorktree(root, tree string) error {
	if msg, err := exec.Command("git", "-C", root, "worktree", "remove", "--force", tree).CombinedOutput(); err != nil {
		return fmt.Errorf("remove the worktree %s: %w\n%s", tree, err, msg)
	}
	return nil
}

func phaseDir(workDir, phase string) string {
	dir := filepath.Join(workDir, phase)
	_ = os.MkdirAll(dir, 0o755)
	return dir
}
