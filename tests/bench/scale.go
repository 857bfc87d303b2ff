package bench

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/eurekube/eurekube/api/v1alpha1"
	"github.com/eurekube/eurekube/certs"
	"github.com/eurekube/eurekube/eureka"
	"github.com/eurekube/eurekube/internal/builders"
	"github.com/eurekube/eurekube/tests/harness"
	"github.com/eurekube/eurekube/webhook"
)

// Scenario is a shape of cluster for the reconciler: namespaces, syncers
// in each, pods per syncer.
type Scenario struct {
	Name                                           string
	Namespaces, SyncersPerNamespace, PodsPerSyncer int
	// Upgrade: the pods were injected by a release before spec.traffic,
	// without the eurekube.io/traffic annotation the reconciler keeps: the
	// manager's first pass after an upgrade.
	Upgrade bool
	// ImportedApps, when set, makes this a scenario of imports instead of
	// syncers: that many apps of InstancesPerApp instances each on VMs,
	// and one EurekaImport of each app, across Namespaces.
	ImportedApps, InstancesPerApp int
	// ChangedAppInstances, when set in an import scenario, imports one
	// more app of that many instances once the steady state is measured,
	// and changes it in Eureka one instance at a time, counting the
	// EndpointSlice writes each change causes (importchanges.go). Over
	// 100 instances its import has more than one slice.
	ChangedAppInstances int
	// Restart, in a syncer scenario, also measures a manager started
	// again over the statuses the first one made right, as a new leader
	// finds them every day: its first full pass, its time and its API
	// writes (restart.go).
	Restart bool
	// Targets the issues set for this shape; nil: none.
	Targets *ScaleTargets
}

// ScaleTargets are the upper bounds of a scenario's figures; zero: no
// target for that figure.
type ScaleTargets struct {
	TimeToRightSeconds float64
	// TimeToRightFloorRatio bounds the first pass's time as a ratio to
	// the floor the same run measures (its start → /readyz plus what the
	// pass cannot do without, done by the bench alone), in place of
	// TimeToRightSeconds: two shared cores make no absolute time hold.
	TimeToRightFloorRatio float64
	// RestartSeconds and RestartWrites bound the first full pass of a
	// manager started again over statuses already right (the scenario's
	// Restart).
	RestartSeconds    float64
	RestartWrites     *float64
	PeakRSSMiB        float64
	RequestsPerResync float64
}

// floorRatio is v as a target ratio to the floor, or nil when v is zero.
func floorRatio(v float64) *float64 {
	if v == 0 {
		return nil
	}
	return &v
}

// target is v as a target, or nil when v is zero.
func target(v float64) *float64 {
	if v == 0 {
		return nil
	}
	return Max(v)
}

func (s Scenario) syncers() int { return s.Namespaces * s.SyncersPerNamespace }
func (s Scenario) pods() int    { return s.syncers() * s.PodsPerSyncer }

// ScaleOptions configure MeasureScale.
type ScaleOptions struct {
	Eureka *harness.Eureka
	// Manager is the manager measured: ./cmd/manager built from this tree.
	Manager BuiltManager
	// Before, when set, is the manager built at an older commit: each
	// scenario with targets, and the upgrade, is measured with it first, on fixtures made the same way
	// on a fresh control plane and registry, and its figures stand beside
	// the new ones.
	Before  *BuiltManager
	WorkDir string
	// ResyncPeriod is the manager's --resync-period; requests are counted
	// over ResyncsCounted of them.
	ResyncPeriod   time.Duration
	ResyncsCounted int
	Log            logrus.FieldLogger
}

// BuiltManager is a manager binary and the commit it was built from.
type BuiltManager struct {
	Binary, Commit string
}

const (
	scaleClusterID = "bench-cluster"
	scaleWorkers   = 16
	// scaleServiceRange holds 65,534 ClusterIPs.
	scaleServiceRange = "10.96.0.0/16"
)

// benchNamespaceLabels label every namespace the bench's pods are created
// in: opted in for injection.
var benchNamespaceLabels = map[string]string{v1alpha1.NamespaceInjectionLabel: "enabled"}

// scaleRun is what one manager measured in one scenario.
type scaleRun struct {
	commit string
	// converged: manager start → every status right; readyz: start →
	// /readyz.
	converged, readyz time.Duration
	// untilRight: the Eureka requests until every status was right.
	untilRight Counts
	// mem: after the resyncs counted; memRight: when every status was
	// right.
	mem, memRight Memory
	// heapMiB: the Go heap in use after the resyncs counted.
	heapMiB float64
	// The steady-state window: requests and response bytes in it, and the
	// resyncs it held.
	window      Counts
	windowBytes float64
	resyncs     float64
	// windowAPI: the API requests in the window, by verb and resource.
	windowAPI apiRequests
	// writes: the API writes until every status was right.
	writes apiRequests
	// cpu: what the processes of the run used until every status was right.
	cpu string
	// apiCPU: where the API server's CPU went over the first 20 s after
	// /readyz.
	apiCPU apiServerCPU
	// podsRead: the bench's own watch-list of every pod, as the manager's
	// informer starts, timed once the manager had stopped; zero without
	// pods, or when it failed.
	podsRead time.Duration
	// cachedPods: the pods the manager's cache starts with (none for
	// imports, whose pods field counts instances).
	cachedPods int
	// bare: the pass's writes made by the bench alone (zero when the
	// scenario has none).
	bare bareWrites
	// restart: the first full pass of a manager started again over right
	// statuses (nil when the scenario measures none).
	restart *restartRun
	// changes: the single-instance changes of an import scenario and the
	// slice writes of each (nil when it makes none).
	changes       *importChanges
	reconciles    float64 // until every status was right
	reconcileSecs float64 // their summed duration
	syncers, pods int
}

func (r scaleRun) perResync(c int64) float64 { return float64(c) / r.resyncs }

// measuredFloor is the least time the first pass could take here, measured
// in this run: the manager's start → /readyz (its caches filled: nothing
// is written before) and then what the pass cannot do without, done by the
// bench alone. nil when the bench made no such writes.
func (r scaleRun) measuredFloor() *float64 {
	if r.bare.count == 0 || r.bare.took == 0 {
		return nil
	}
	floor := (r.readyz + r.bare.took).Seconds()
	return &floor
}

// MeasureScale measures a scenario: with the older manager first when
// o.Before is set, then with this tree's.
func MeasureScale(ctx context.Context, o ScaleOptions, sc Scenario, r *Results) error {
	if sc.ImportedApps > 0 {
		// No older manager: imports are new.
		now, err := measureImportsOnce(ctx, o, sc, o.Manager)
		if err != nil {
			return err
		}
		addImportFigures(r, o, sc, now)
		return nil
	}
	var before *scaleRun
	// The older manager is measured where it is compared: the scenarios
	// with targets, and the upgrade.
	if o.Before != nil && (sc.Targets != nil || sc.Upgrade) {
		b, err := measureScaleOnce(ctx, o, sc, *o.Before)
		if err != nil {
			return fmt.Errorf("with the manager of %s: %w", o.Before.Commit, err)
		}
		before = &b
	}
	now, err := measureScaleOnce(ctx, o, sc, o.Manager)
	if err != nil {
		return err
	}
	addScaleFigures(r, o, sc, now, before)
	return nil
}

// measureScaleOnce builds the scenario on a fresh control plane and an
// empty Eureka registry — pods as the webhook injects them and the kubelet
// leaves them, their instances as their registrars register them — then
// starts the manager and measures how long until every syncer's status is
// right, its memory, its writes, and its Eureka requests per resync.
func measureScaleOnce(ctx context.Context, o ScaleOptions, sc Scenario, m BuiltManager) (scaleRun, error) {
	run := scaleRun{commit: m.Commit, syncers: sc.syncers(), pods: sc.pods()}
	log := o.Log.WithFields(logrus.Fields{"scenario": sc.Name, "commit": m.Commit})
	env, err := startScaleEnv(ctx, o, sc, m)
	if err != nil {
		return run, err
	}
	defer env.close()
	defaults, err := env.mo.webhookDefaults()
	if err != nil {
		return run, err
	}
	setupStart := time.Now()
	f := &fixtures{k8s: env.k8s, eureka: env.eureka, defaults: defaults, upgrade: sc.Upgrade}
	syncers, err := f.create(ctx, sc)
	if err != nil {
		return run, err
	}
	log.WithFields(logrus.Fields{"syncers": len(syncers), "pods": sc.pods(), "took": time.Since(setupStart).Round(time.Second)}).Info("pods created and registered; starting the manager")

	want := int32(sc.PodsPerSyncer)
	err = measureManager(ctx, o, env, log, managedObjects{
		controller: syncerController, count: len(syncers), what: "status", pods: sc.pods(),
		waitRight: func(ctx context.Context) (time.Time, error) {
			return waitStatusesRight(ctx, env.cp, len(syncers), want, 10*time.Minute)
		},
		stillRight: func(ctx context.Context) error { return statusesRight(ctx, env.k8s, len(syncers), want) },
		bareWrites: func(ctx context.Context) (bareWrites, error) { return bareSyncerWrites(ctx, env, syncers) },
		restart: func(ctx context.Context) error {
			if !sc.Restart {
				return nil
			}
			restart, err := measureRestart(ctx, env, log, syncerController, len(syncers))
			if err != nil {
				return fmt.Errorf("the manager started again: %w", err)
			}
			run.restart = &restart
			// Its pass must leave every status right.
			return statusesRight(ctx, env.k8s, len(syncers), want)
		},
	}, &run)
	return run, err
}

// managedObjects are the objects of a scenario the manager keeps: syncers
// or imports.
type managedObjects struct {
	// controller names the manager's controller of them; count is how
	// many there are; what names their right state in logs.
	controller, what string
	count            int
	// pods is how many pods the manager's cache starts with.
	pods int
	// waitRight returns when every one is right; stillRight says which is
	// not.
	waitRight  func(context.Context) (time.Time, error)
	stillRight func(context.Context) error
	// bareWrites, when set, makes the writes the pass cannot do without,
	// as the bench alone, once the manager has stopped: the anchor of how
	// fast any controller could make them here. It says what it wrote.
	bareWrites func(context.Context) (bareWrites, error)
	// restart, when set, runs once the manager has stopped, before the
	// bench's own reads and writes change anything: a manager started
	// again over the objects the first made right.
	restart func(context.Context) error
	// afterSteady, when set, runs while the manager still runs, once the
	// steady state, the memory and the profiles are read, so that what it
	// does changes none of them.
	afterSteady func(context.Context, *manager) error
}

// bareWrites is what a scenario's bareWrites made, and what that took.
type bareWrites struct {
	// what says which writes, count how many.
	what  string
	count int
	// read: the full read of the registry before them, of readInstances
	// instances (zero when the scenario reads none).
	read          time.Duration
	readInstances int
	// watches: the kinds watched while writing, and the events received.
	watches []string
	events  int
	// took: the wall time of it all; cpu: what the processes used
	// meanwhile.
	took time.Duration
	cpu  string
}

// measureManager starts the manager on env's fixtures and measures its
// first pass until every object is right — its time, Eureka requests, API
// writes, CPU, reconciles and memory — then its steady state over
// o.ResyncsCounted resyncs, after which every object must still be right.
func measureManager(ctx context.Context, o ScaleOptions, env *scaleEnv, log logrus.FieldLogger, objs managedObjects, run *scaleRun) error {
	cp, proxy, dir := env.cp, env.proxy, env.dir
	requests0, err := readAPIRequests(ctx, cp)
	if err != nil {
		return err
	}
	start := time.Now()
	mgr, err := startManager(ctx, env.mo)
	if err != nil {
		return err
	}
	defer func() { _ = mgr.Stop() }()
	run.readyz = time.Since(start)
	procs := runProcesses(cp, o.Eureka.Addr(), mgr.Pid())
	cpu0 := procs.read()
	// A CPU profile of the first pass, for reading what it spent (its
	// manager may predate the flag: then there is none).
	profiled := make(chan error, 1)
	go func() { profiled <- mgr.profile(ctx, "profile?seconds=20", filepath.Join(dir, "cpu.prof")) }()
	// And the API server's over the same time, for what each kind of
	// request it served cost it.
	type apiProfile struct {
		cpu apiServerCPU
		err error
	}
	apiProfiled := make(chan apiProfile, 1)
	go func() {
		c, err := profileAPIServer(ctx, cp, 20*time.Second, filepath.Join(dir, "kube-apiserver-cpu.prof"))
		apiProfiled <- apiProfile{c, err}
	}()
	// And what its goroutines wait for, at moments of the pass.
	go func() {
		for _, at := range []time.Duration{5 * time.Second, 15 * time.Second, 25 * time.Second} {
			select {
			case <-time.After(time.Until(start.Add(at))):
				_ = mgr.profile(ctx, "goroutine?debug=1", filepath.Join(dir, fmt.Sprintf("goroutines-%s.txt", at)))
			case <-ctx.Done():
				return
			}
		}
	}()
	right, err := objs.waitRight(ctx)
	if err != nil {
		return fmt.Errorf("%w (manager log %s)", err, mgr.LogPath())
	}
	run.converged = right.Sub(start)
	run.cpu = procs.describe(cpu0, procs.read(), time.Since(start)-run.readyz)
	run.untilRight = proxy.Counts()
	requests1, err := readAPIRequests(ctx, cp)
	if err != nil {
		return err
	}
	run.writes = requests1.sub(requests0).writes()
	if run.reconciles, run.reconcileSecs, err = reconcileTotals(mgr.MetricsURL(), objs.controller); err != nil {
		return err
	}
	if run.memRight, err = ReadMemory(mgr.Pid()); err != nil {
		return err
	}
	log.WithFields(logrus.Fields{"converged": run.converged, "readyz": run.readyz, "hwm_mib": MiB(run.memRight.HWMKiB), "writes": run.writes.total()}).Infof("every %s right; counting Eureka requests per resync", objs.what)

	if err := measureSteadyState(ctx, o, env, mgr, objs.controller, objs.count, run); err != nil {
		return err
	}
	if err := objs.stillRight(ctx); err != nil {
		return fmt.Errorf("after %d resyncs: %w", o.ResyncsCounted, err)
	}
	if run.mem, err = ReadMemory(mgr.Pid()); err != nil {
		return err
	}
	if run.heapMiB, err = heapInUseMiB(mgr.MetricsURL()); err != nil {
		return err
	}
	api := <-apiProfiled
	run.apiCPU = api.cpu
	if err := errors.Join(<-profiled, api.err, mgr.profile(ctx, "heap", filepath.Join(dir, "heap.prof"))); err != nil {
		log.WithError(err).Warn("no profile of this manager")
	}
	if objs.afterSteady != nil {
		if err := objs.afterSteady(ctx, mgr); err != nil {
			return fmt.Errorf("%w (manager log %s)", err, mgr.LogPath())
		}
	}
	// What reading the pods, and making the pass's writes, cost the API
	// server and a client alone, for the floor: timed with the manager
	// stopped, so that neither disturbs the other.
	run.cachedPods = objs.pods
	if objs.pods > 0 || objs.bareWrites != nil || objs.restart != nil {
		if err := mgr.Stop(); err != nil {
			log.WithError(err).Warn("stop the manager")
		}
	}
	if objs.restart != nil {
		if err := objs.restart(ctx); err != nil {
			return err
		}
	}
	if objs.pods > 0 {
		if run.podsRead, err = watchListPods(ctx, cp.Config, objs.pods); err != nil {
			log.WithError(err).Warn("no floor for this pass")
		}
	}
	if objs.bareWrites != nil {
		cpu0, start := procs.read(), time.Now()
		bare, err := objs.bareWrites(ctx)
		if err != nil {
			return fmt.Errorf("the bench's own writes: %w", err)
		}
		bare.took = time.Since(start)
		bare.cpu = procs.describe(cpu0, procs.read(), bare.took)
		run.bare = bare
		log.WithFields(logrus.Fields{"writes": bare.count, "took": bare.took}).Info("the pass's writes, made by the bench alone")
	}
	log.WithFields(logrus.Fields{"per_resync": run.perResync(run.window.Total()), "resyncs": run.resyncs, "hwm_mib": MiB(run.mem.HWMKiB), "rss_mib": MiB(run.mem.RSSKiB)}).Info("scale scenario done")
	return nil
}

// scaleEnv is what a scenario runs on: a fresh control plane, an empty
// Eureka registry reached directly (for fixtures) and through a counting
// proxy (for the manager), and the manager's flags.
type scaleEnv struct {
	cp     *harness.ControlPlane
	k8s    client.Client
	eureka *eureka.Client
	proxy  *CountingProxy
	mo     managerOptions
	// dir holds the scenario's certificates, logs and profiles.
	dir string
}

// startScaleEnv empties the registry and starts a control plane for sc
// measured with m.
func startScaleEnv(ctx context.Context, o ScaleOptions, sc Scenario, m BuiltManager) (env *scaleEnv, err error) {
	env = &scaleEnv{dir: filepath.Join(o.WorkDir, fmt.Sprintf("%s-%s", scenarioID(sc), m.Commit))}
	certDir := filepath.Join(env.dir, "certs")
	if _, err := certs.Bootstrap(certDir, certs.LocalHosts()); err != nil {
		return nil, fmt.Errorf("webhook certificate: %w", err)
	}
	if err := o.Eureka.Restart(ctx); err != nil { // an empty registry
		return nil, fmt.Errorf("restart eureka: %w", err)
	}
	// Room for a Service per import, beside the API server's own.
	if env.cp, err = harness.StartControlPlane(ctx, harness.ControlPlaneOptions{ServiceClusterIPRange: scaleServiceRange}); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			env.close()
		}
	}()
	if env.k8s, err = unthrottledClient(env.cp); err != nil {
		return nil, err
	}
	if env.eureka, err = eureka.New(eureka.Options{URLs: []string{o.Eureka.URL()}, Timeout: 10 * time.Second, Logger: o.Log}); err != nil {
		return nil, err
	}
	if env.proxy, err = StartCountingProxy(o.Eureka.Addr()); err != nil {
		return nil, err
	}
	env.mo = managerOptions{
		Binary: m.Binary, Kubeconfig: env.cp.Kubeconfig, EurekaURLs: []string{env.proxy.URL()}, ClusterID: scaleClusterID,
		ResyncPeriod: o.ResyncPeriod, CertDir: certDir, LogPath: filepath.Join(env.dir, "manager.log"),
	}
	return env, nil
}

func (env *scaleEnv) close() {
	if env.proxy != nil {
		env.proxy.Close()
	}
	_ = env.cp.Stop()
}

// measureSteadyState counts, over o.ResyncsCounted resync periods in
// which nothing changes, the Eureka requests and response bytes through
// the proxy, the API requests, and the resyncs: the reconciles of
// controller, each of which reconciles one of objects.
func measureSteadyState(ctx context.Context, o ScaleOptions, env *scaleEnv, mgr *manager, controller string, objects int, run *scaleRun) error {
	before, bytesBefore := env.proxy.Counts(), env.proxy.ResponseBytes()
	reconciles0, err := reconciles(mgr.MetricsURL(), controller)
	if err != nil {
		return err
	}
	api0, err := readAPIRequests(ctx, env.cp)
	if err != nil {
		return err
	}
	select {
	case <-time.After(time.Duration(o.ResyncsCounted) * o.ResyncPeriod): // the measurement window itself
	case <-ctx.Done():
		return ctx.Err()
	}
	run.window, run.windowBytes = env.proxy.Counts().Sub(before), float64(env.proxy.ResponseBytes()-bytesBefore)
	api1, err := readAPIRequests(ctx, env.cp)
	if err != nil {
		return err
	}
	run.windowAPI = api1.sub(api0)
	reconciles1, err := reconciles(mgr.MetricsURL(), controller)
	if err != nil {
		return err
	}
	// A resync reconciles every object once; the window holds about
	// ResyncsCounted of them, but each object's period drifts by its own
	// reconcile's length, so the manager's reconcile counter says how
	// many there were.
	if run.resyncs = (reconciles1 - reconciles0) / float64(objects); run.resyncs <= 0 {
		return fmt.Errorf("no reconcile in %d resync periods", o.ResyncsCounted)
	}
	return nil
}

// addScaleFigures records a scenario's figures, each beside the older
// manager's when it was measured, and each miss explained by what this
// run measured.
func addScaleFigures(r *Results, o ScaleOptions, sc Scenario, now scaleRun, before *scaleRun) {
	var targets ScaleTargets
	if sc.Targets != nil {
		targets = *sc.Targets
	}
	beside := func(f func(scaleRun) string) string {
		if before == nil {
			return ""
		}
		return fmt.Sprintf("; at %s, measured in this run on the same fixtures: %s", before.commit, f(*before))
	}
	shape := fmt.Sprintf("%d namespace(s) × %d syncer(s) × %d pods", sc.Namespaces, sc.SyncersPerNamespace, sc.PodsPerSyncer)
	made := "injected by this tree's webhook (webhook.Inject with the manager's own defaults, from the flags it is started with)"
	if sc.Upgrade {
		made = "injected by this tree's webhook, then stripped of the eurekube.io/traffic annotation, as a release before spec.traffic (08fc0e6) left them: the first pass after an upgrade"
	}
	id := "reconciler." + scenarioID(sc)
	r.Add(Figure{
		ID: id + ".time_to_right", Section: SectionReconciler, Name: sc.Name + ": manager start → every status right",
		Value: now.converged.Seconds(), Unit: "s", Target: target(targets.TimeToRightSeconds),
		Floor: now.measuredFloor(), FloorRatio: floorRatio(targets.TimeToRightFloorRatio),
		Anchor: fmt.Sprintf("of which start → /readyz (polled every 100 ms): %s s; %s; until every status was right: %s",
			formatValue(now.readyz.Seconds()), now.floorParts(), now.work()) + beside(func(b scaleRun) string {
			return fmt.Sprintf("%s s (%s)", formatValue(b.converged.Seconds()), b.work())
		}),
		Method:   fmt.Sprintf("%s created beforehand (%d pods in all, %s, Running and Ready with pod IPs through the status subresource), each pod's instance registered UP directly in an empty Eureka registry (fast profile) from the settings its registrar container was given (webhook.InjectedSettings, sidecar.Config.Instance); then the manager process starts (--resync-period %s, Eureka through a counting proxy) and the syncers are watched until observedGeneration, selected, injected, ready, registered and UP counts all equal the pods and Synced is True. The manager's writes are the kube-apiserver's apiserver_request_total for write verbs between its start and that moment (nothing else writes then); its reconciles and their summed time are controller-runtime's controller_runtime_reconcile_total and controller_runtime_reconcile_time_seconds for the syncer controller. The floor, measured in the same run: once the manager has stopped, the bench does alone what any controller of these syncers cannot do without on its first pass, one full read of the registry, then for each syncer an update adding a finalizer, a claim of its app created and its status patched (%d at a time), with a watch of syncers and claims open from the current resource version, as a controller of them keeps; that time with the manager's start → /readyz (its caches filled, the pods included: it writes nothing before) is the floor.", shape, sc.pods(), made, o.ResyncPeriod, scaleWorkers),
		IfMissed: "until every status was right the manager made " + now.work() + "; " + now.apiCPU.String() + "; " + now.floor(),
	})
	if now.restart != nil {
		addRestartFigures(r, id, sc.Name, targets, *now.restart)
	}
	r.Add(Figure{
		ID: id + ".peak_rss", Section: SectionReconciler, Name: sc.Name + ": manager peak RSS",
		Value: MiB(now.mem.HWMKiB), Unit: "MiB", Target: target(targets.PeakRSSMiB),
		Anchor: fmt.Sprintf("peak when every status was right %s MiB; RSS now %s MiB, after %d resyncs, of which Go heap in use %s MiB", formatValue(MiB(now.memRight.HWMKiB)), formatValue(MiB(now.mem.RSSKiB)), o.ResyncsCounted, formatValue(now.heapMiB)) +
			beside(func(b scaleRun) string {
				return fmt.Sprintf("%s MiB (Go heap in use %s MiB)", formatValue(MiB(b.mem.HWMKiB)), formatValue(b.heapMiB))
			}),
		Method: "VmHWM of the manager process from /proc/PID/status after the resyncs counted below (the peak since it started, start-up and first reconciles included); the Go heap is its go_memstats_heap_inuse_bytes then.",
		IfMissed: fmt.Sprintf("the peak was %s MiB already when every status was right; after the resyncs the Go heap held %s MiB for %d pods in the cache and %d instances decoded (%s KiB of heap per pod)",
			formatValue(MiB(now.memRight.HWMKiB)), formatValue(now.heapMiB), now.pods, now.pods, formatValue(now.heapMiB*1024/float64(max(now.pods, 1)))),
	})
	perResync := now.perResync(now.window.Total())
	r.Add(Figure{
		ID: id + ".requests_per_resync", Section: SectionReconciler, Name: sc.Name + ": Eureka requests per resync",
		Value: perResync, Unit: "requests", Target: target(targets.RequestsPerResync),
		Anchor: fmt.Sprintf("%d syncer(s): %s per syncer (%s), %s MiB of responses per resync", sc.syncers(),
			formatValue(perResync/float64(sc.syncers())), describeCounts(now.window, now.perResync), formatValue(now.windowBytes/now.resyncs/(1<<20))) +
			beside(func(b scaleRun) string {
				return fmt.Sprintf("%s requests and %s MiB of responses per resync", formatValue(b.perResync(b.window.Total())), formatValue(b.windowBytes/b.resyncs/(1<<20)))
			}),
		Method:   fmt.Sprintf("requests through the counting proxy over %s (%d resync periods of %s) in steady state, nothing changing, divided by the resyncs that happened in it: the manager's controller_runtime_reconcile_total for the syncer controller over the same window, divided by the number of syncers.", time.Duration(o.ResyncsCounted)*o.ResyncPeriod, o.ResyncsCounted, o.ResyncPeriod),
		IfMissed: fmt.Sprintf("the window held %s resyncs and %s requests (%s)", formatValue(now.resyncs), formatValue(float64(now.window.Total())), describeCounts(now.window, now.perResync)),
	})
	r.Add(Figure{
		ID: id + ".api_requests_per_resync", Section: SectionReconciler, Name: sc.Name + ": API requests per resync",
		Value: now.windowAPI.total() / now.resyncs, Unit: "requests",
		Anchor: now.apiPerResync() + beside(func(b scaleRun) string {
			return fmt.Sprintf("%s requests per resync: %s", formatValue(b.windowAPI.total()/b.resyncs), b.apiPerResync())
		}),
		Method: fmt.Sprintf("the kube-apiserver's apiserver_request_total (requests of a resource: the manager's, and the re-watches of the API server's own informers; the bench itself sends none in the window) over the same steady-state window as the Eureka requests, divided by the resyncs in it. Every syncer names a credentials Secret, one per namespace, labelled %s=true: the GETs of secrets and configmaps are the manager's reads of what spec.eureka names. A manager that caches them keeps each read longer than this window (docs/operations.md, Eureka credentials): its steady-state average adds the Secrets named, once per that time.", v1alpha1.EurekaCredentialsLabel),
	})
}

// apiPerResync says the API requests of the window per resync: by verb,
// the reads of Secrets and ConfigMaps, and every resource.
func (r scaleRun) apiPerResync() string {
	per := r.windowAPI.scaled(r.resyncs)
	return fmt.Sprintf("by verb: %s; GET secrets %s, GET configmaps %s; all: %s",
		per.byVerb(), formatValue(per["GET secrets"]), formatValue(per["GET configmaps"]), per)
}

// work says what the manager did until every status was right.
func (r scaleRun) work() string {
	return fmt.Sprintf("%s API writes (%s), %s reconciles (%s per syncer) taking %s s in all, %s Eureka requests; %s",
		formatValue(float64(r.writes.total())), r.writes, formatValue(r.reconciles), formatValue(r.reconciles/float64(max(r.syncers, 1))),
		formatValue(r.reconcileSecs), formatValue(float64(r.untilRight.Total())), r.cpu)
}

// floor estimates the least time the first pass could take on this
// machine, from what this run measured: a syncer scenario's manager writes
// nothing before its cache holds the pods, so the bench's own watch-list of
// them (timed once the manager had stopped) comes first; then the API
// server's CPU for the pass's writes alone, each kind at the cost per write
// its profile measured in the pass, spread over every core the process may
// use. It leaves out etcd, the manager, Eureka, the watch events the writes
// set off and the collector's background work; but a cost per write
// measured under the pass's contention moves with it, so it is an estimate
// at this run's costs, not a bound.
func (r scaleRun) floor() string {
	floor := r.estimatedFloor()
	if r.bare.count > 0 {
		floor += fmt.Sprintf("; measured: %s; with the start to /readyz, at least %s s here",
			r.bare, formatValue((r.readyz + r.bare.took).Seconds()))
	}
	return floor
}

// estimatedFloor is the floor's estimate from the profile, or why there is
// none.
func (r scaleRun) estimatedFloor() string {
	if r.apiCPU.total == 0 {
		return "no floor: no profile of the kube-apiserver"
	}
	cpu, ok := r.apiCPU.writesCPU(r.writes)
	if !ok {
		return "no floor: the API server's profile holds no request of some kind of write the pass made"
	}
	cores := runtime.GOMAXPROCS(0)
	spread := cpu / time.Duration(cores)
	read := ""
	if r.cachedPods > 0 && r.podsRead == 0 {
		return "no floor: the bench's watch-list of the pods failed (its log says why)"
	}
	if r.podsRead > 0 {
		read = fmt.Sprintf("the bench's own watch-list of the %d pods, as the manager's informer starts (protobuf, sendInitialEvents, timed with the manager stopped), took %s s; ", r.cachedPods, formatValue(r.podsRead.Seconds()))
	}
	return fmt.Sprintf("a floor estimated from this run: %sthe pass's writes alone cost the API server %s CPU-s at the cost per write of each kind its profile measured in the pass (%s s over %d cores), so at these costs the pass takes at least %s s here",
		read, formatValue(cpu.Seconds()), formatValue(spread.Seconds()), cores, formatValue((r.podsRead + spread).Seconds()))
}

// floorParts says what the measured floor is made of: the manager's start
// → /readyz and what the bench alone took for the pass's writes.
func (r scaleRun) floorParts() string {
	floor := r.measuredFloor()
	if floor == nil {
		return "no floor measured"
	}
	return fmt.Sprintf("the floor %s s: that start → /readyz and what the pass cannot do without, done by the bench alone (%s s: %s s the registry's full read, then %s writes, %d at a time)",
		formatValue(*floor), formatValue(r.bare.took.Seconds()), formatValue(r.bare.read.Seconds()), formatValue(float64(r.bare.count)), scaleWorkers)
}

// String says what the bench's own pass took.
func (b bareWrites) String() string {
	read := ""
	if b.readInstances > 0 {
		read = fmt.Sprintf("a full read of the registry (%d instances, as the manager's first) took %s s, then ", b.readInstances, formatValue(b.read.Seconds()))
	}
	return fmt.Sprintf("done by the bench alone once the manager had stopped, %sthe %s writes the pass cannot do without (%s), %d at a time as the manager's workers, with the watches open that a controller of them keeps (%s: %d events received), took %s s in all (%s)",
		read, formatValue(float64(b.count)), b.what, scaleWorkers, strings.Join(b.watches, ", "), b.events, formatValue(b.took.Seconds()), b.cpu)
}

func scenarioID(sc Scenario) string {
	if sc.ImportedApps > 0 {
		return fmt.Sprintf("import_%dx%d", sc.ImportedApps, sc.InstancesPerApp)
	}
	id := strconv.Itoa(sc.syncers()) + "x" + strconv.Itoa(sc.PodsPerSyncer)
	if sc.Upgrade {
		id += "_upgrade"
	}
	return id
}

// unthrottledClient is a controller-runtime client without client-side
// rate limiting, so fixtures of thousands of pods go at the API server's
// pace.
func unthrottledClient(cp *harness.ControlPlane) (client.Client, error) {
	cfg := rest.CopyConfig(cp.Config)
	cfg.QPS, cfg.Burst = -1, 0
	c, err := client.New(cfg, client.Options{Scheme: cp.Scheme})
	if err != nil {
		return nil, fmt.Errorf("client: %w", err)
	}
	return c, nil
}

// create makes the namespaces, syncers and pods of sc and registers the
// pods' instances.
func (f *fixtures) create(ctx context.Context, sc Scenario) ([]*v1alpha1.EurekaSyncer, error) {
	k8s := f.k8s
	var syncers []*v1alpha1.EurekaSyncer
	for n := range sc.Namespaces {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("scale-%02d", n), Labels: benchNamespaceLabels}}
		if err := k8s.Create(ctx, ns); err != nil {
			return nil, fmt.Errorf("namespace %s: %w", ns.Name, err)
		}
		// Each namespace's syncers log in to Eureka with its Secret (which
		// the bench's server, asking for none, ignores), as a team's would:
		// the manager reads it for them. The bench's manager runs as the
		// control plane's admin, so no RoleBinding grants the read.
		creds := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "eureka-credentials",
			Labels: map[string]string{v1alpha1.EurekaCredentialsLabel: "true"}},
			StringData: map[string]string{"username": "bench", "password": "bench"}}
		if err := k8s.Create(ctx, creds); err != nil {
			return nil, fmt.Errorf("secret %s/%s: %w", ns.Name, creds.Name, err)
		}
		for range sc.SyncersPerNamespace {
			name := fmt.Sprintf("app-%03d", len(syncers))
			s := builders.Syncer(ns.Name, name, builders.Credentials(creds.Name))
			if err := k8s.Create(ctx, s); err != nil {
				return nil, fmt.Errorf("syncer %s/%s: %w", ns.Name, name, err)
			}
			syncers = append(syncers, s)
		}
	}
	err := inParallel(ctx, sc.pods(), func(i int) error { return f.injectedReadyPod(ctx, syncers[i/sc.PodsPerSyncer], i) })
	if err != nil {
		return nil, err
	}
	return syncers, nil
}

// inParallel calls do for 0 to n-1 on scaleWorkers goroutines, and stops
// at the first error, which it returns.
func inParallel(ctx context.Context, n int, do func(int) error) error {
	jobs := make(chan int)
	errs := make(chan error, scaleWorkers)
	var wg sync.WaitGroup
	for range scaleWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				if err := do(i); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	var sendErr error
send:
	for i := range n {
		select {
		case jobs <- i:
		case sendErr = <-errs:
			break send
		case <-ctx.Done():
			sendErr = ctx.Err()
			break send
		}
	}
	close(jobs)
	wg.Wait()
	close(errs)
	if sendErr != nil {
		return sendErr
	}
	return <-errs // nil when none failed
}

// fixtures is what every pod of a scenario is made with.
type fixtures struct {
	k8s    client.Client
	eureka *eureka.Client
	// defaults are the manager's own webhook defaults, from the flags the
	// bench starts it with (manager.ParseFlags, manager.WebhookDefaults).
	defaults webhook.Defaults
	// upgrade: the pods were injected by a release before spec.traffic
	// (08fc0e6), so they lack the eurekube.io/traffic annotation.
	upgrade bool
}

// injectedReadyPod creates a pod as the webhook injects it — webhook.Inject
// with the manager's defaults, nothing shaped by hand — sets its status as
// the kubelet would once it is ready, and registers its instance as its
// registrar would, from the settings its registrar container was given.
func (f *fixtures) injectedReadyPod(ctx context.Context, s *v1alpha1.EurekaSyncer, i int) error {
	app := builders.Pod(s.Namespace, s.Name, builders.Named(fmt.Sprintf("%s-%05d", s.Name, i)))
	res := webhook.Inject(app, webhook.Namespace{Labels: benchNamespaceLabels}, []v1alpha1.EurekaSyncer{*s}, f.defaults)
	if !res.Inject || res.Denied != "" {
		return fmt.Errorf("pod %s/%s: the webhook did not inject it: %s %v %s", app.Namespace, app.Name, res.Reason, res.Err, res.Denied)
	}
	pod := res.Pod
	if f.upgrade {
		delete(pod.Annotations, v1alpha1.TrafficAnnotation)
	}
	if err := f.k8s.Create(ctx, pod); err != nil {
		return fmt.Errorf("pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	ip := fmt.Sprintf("10.%d.%d.%d", 1+i/65536, i/256%256, i%256)
	pod.Status = corev1.PodStatus{
		Phase: corev1.PodRunning, PodIP: ip, PodIPs: []corev1.PodIP{{IP: ip}},
		Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Now()}},
	}
	if err := f.k8s.Status().Update(ctx, pod); err != nil {
		return fmt.Errorf("pod %s/%s status: %w", pod.Namespace, pod.Name, err)
	}
	cfg, ok := webhook.InjectedSettings(pod)
	if !ok {
		return fmt.Errorf("pod %s/%s: its registrar's settings do not read back", pod.Namespace, pod.Name)
	}
	// What the downward API gives the registrar.
	cfg.PodName, cfg.PodNamespace, cfg.PodUID, cfg.PodIP = pod.Name, pod.Namespace, string(pod.UID), ip
	// Nobody heartbeats these instances: a lease longer than the run keeps
	// them listed, as live registrars would.
	cfg.LeaseDuration = time.Hour
	if err := f.eureka.Register(ctx, cfg.Instance(eureka.StatusUp)); err != nil {
		return fmt.Errorf("register %s: %w", cfg.InstanceID(), err)
	}
	return nil
}

// statusesRight lists the syncers and says which one is not yet right.
func statusesRight(ctx context.Context, k8s client.Client, syncers int, pods int32) error {
	var list v1alpha1.EurekaSyncerList
	if err := k8s.List(ctx, &list); err != nil {
		return err
	}
	if len(list.Items) != syncers {
		return fmt.Errorf("%d syncers listed, want %d", len(list.Items), syncers)
	}
	wrong := 0
	var first error
	for i := range list.Items {
		if err := syncerRight(&list.Items[i], pods); err != nil {
			wrong++
			if first == nil {
				first = err
			}
		}
	}
	if wrong > 0 {
		return fmt.Errorf("%d of %d syncers not right yet, such as %w", wrong, syncers, first)
	}
	return nil
}

// syncerRight says how s's status is not yet right for pods pods.
func syncerRight(s *v1alpha1.EurekaSyncer, pods int32) error {
	st := s.Status
	var err error
	switch {
	case st.ObservedGeneration != s.Generation:
		err = fmt.Errorf("observedGeneration %d, generation %d", st.ObservedGeneration, s.Generation)
	case st.SelectedPods != pods || st.InjectedPods != pods || st.ReadyPods != pods || st.RegisteredInstances != pods || st.UpInstances != pods:
		err = fmt.Errorf("selected %d, injected %d, ready %d, registered %d, up %d; want %d each",
			st.SelectedPods, st.InjectedPods, st.ReadyPods, st.RegisteredInstances, st.UpInstances, pods)
	case !meta.IsStatusConditionTrue(st.Conditions, v1alpha1.ConditionSynced):
		err = errors.New("condition Synced is not True")
	}
	if err != nil {
		return fmt.Errorf("%s/%s: %w", s.Namespace, s.Name, err)
	}
	return nil
}

// waitStatusesRight watches the syncers until every one of them is right
// and returns when that was seen.
func waitStatusesRight(ctx context.Context, cp *harness.ControlPlane, syncers int, pods int32, timeout time.Duration) (time.Time, error) {
	return waitAllRight(ctx, cp, "syncer's status", func() client.ObjectList { return &v1alpha1.EurekaSyncerList{} }, syncers,
		func(o client.Object) error { return syncerRight(o.(*v1alpha1.EurekaSyncer), pods) }, timeout)
}

// waitAllRight watches the objects of newList's kind until want of them
// are listed and right finds each right, and returns when that was seen.
// A watch costs the API server one event per status write, where a poll
// would list every object each time, taking the cores the manager is
// measured on. what names the objects' right state in errors.
func waitAllRight(ctx context.Context, cp *harness.ControlPlane, what string, newList func() client.ObjectList, want int, right func(client.Object) error, timeout time.Duration) (time.Time, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	wc, err := client.NewWithWatch(cp.Config, client.Options{Scheme: cp.Scheme})
	if err != nil {
		return time.Time{}, fmt.Errorf("watch client: %w", err)
	}
	wrong := map[types.NamespacedName]error{}
	note := func(o client.Object) {
		key := types.NamespacedName{Namespace: o.GetNamespace(), Name: o.GetName()}
		if err := right(o); err != nil {
			wrong[key] = err
		} else {
			delete(wrong, key)
		}
	}
	for {
		// (Re)list, then watch from there; a watch the API server ends
		// is started again.
		list := newList()
		if err := wc.List(ctx, list); err != nil {
			return time.Time{}, fmt.Errorf("list: %w", err)
		}
		items, err := meta.ExtractList(list)
		if err != nil {
			return time.Time{}, err
		}
		clear(wrong)
		for _, item := range items {
			note(item.(client.Object))
		}
		if len(items) == want && len(wrong) == 0 {
			return time.Now(), nil
		}
		w, err := wc.Watch(ctx, newList(), &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: list.GetResourceVersion()}})
		if err != nil {
			return time.Time{}, fmt.Errorf("watch: %w", err)
		}
		listed := len(items)
	events:
		for {
			select {
			case <-ctx.Done():
				w.Stop()
				var example error
				for _, err := range wrong {
					example = err
					break
				}
				return time.Time{}, fmt.Errorf("every %s right within %s: %d of %d not, such as %v", what, timeout, len(wrong), want, example)
			case ev, ok := <-w.ResultChan():
				if !ok {
					break events
				}
				o, isObject := ev.Object.(client.Object)
				if !isObject {
					continue
				}
				switch ev.Type {
				case watch.Added, watch.Modified:
					if ev.Type == watch.Added {
						listed++
					}
					note(o)
				case watch.Deleted:
					listed--
					delete(wrong, types.NamespacedName{Namespace: o.GetNamespace(), Name: o.GetName()})
				}
				if listed == want && len(wrong) == 0 {
					w.Stop()
					return time.Now(), nil
				}
			}
		}
		w.Stop()
	}
}
