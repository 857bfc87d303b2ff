package bench

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/sirupsen/logrus"
)

// The restart: what a real cluster sees every day. The manager that made
// every status right has stopped (a rollout, a node drained, a crash); a
// new one starts over the same objects, whose status is already right, and
// takes over. Its first full pass should write nothing, and be over soon.

// apiServerLeases is the kube-apiserver's own write that goes on whatever
// the manager does: the renewal of its identity Lease (kube-system, every
// 10 s). apiserver_request_total names no client, so it is counted beside
// the pass's writes, not in them; the bench's manager runs without leader
// election and writes no Lease of its own.
const apiServerLeases = "PUT leases"

// restartProfileSeconds is how long the restarted manager's CPU profile
// runs from /readyz: longer than its pass (the target is 3 s).
const restartProfileSeconds = 8

// restartRun is the first full pass of a manager started again.
type restartRun struct {
	// readyz: its start → /readyz (caches synced: the controllers start,
	// as a standby's do once it takes the Lease); pass: /readyz → every
	// object reconciled once and its queue empty, nothing in flight.
	readyz, pass time.Duration
	// writes: the API server's count of write requests between the start
	// and the end of the pass, the API server's own Lease renewals left
	// out; leases: those.
	writes apiRequests
	leases float64
	// reconciles in the pass; eureka: the Eureka requests it made.
	reconciles float64
	eureka     Counts
	objects    int
	// changes: what the pass changed, by status field and Event reason.
	changes restartChanges
}

// measureRestart starts the manager again on env, over objects of
// controller that are already right, and measures its first full pass: the
// time from /readyz until controller has reconciled every object once and
// its work queue is empty with no reconcile running, and the API writes
// the kube-apiserver counted from the start to that moment. The manager is
// stopped again afterwards.
func measureRestart(ctx context.Context, env *scaleEnv, log logrus.FieldLogger, controller string, objects int) (restartRun, error) {
	run := restartRun{objects: objects}
	requests0, err := readAPIRequests(ctx, env.cp)
	if err != nil {
		return run, err
	}
	eureka0 := env.proxy.Counts()
	state0, err := readRestartState(ctx, env.k8s)
	if err != nil {
		return run, err
	}
	mo := env.mo
	mo.LogPath = filepath.Join(env.dir, "manager-restarted.log")
	start := time.Now()
	mgr, err := startManager(ctx, mo)
	if err != nil {
		return run, err
	}
	defer func() { _ = mgr.Stop() }()
	ready := time.Now()
	run.readyz = ready.Sub(start)
	// A CPU profile of the pass, for reading what it spends (its manager
	// may predate the flag: then there is none).
	profiled := make(chan error, 1)
	go func() {
		profiled <- mgr.profile(ctx, fmt.Sprintf("profile?seconds=%d", restartProfileSeconds), filepath.Join(env.dir, "restart-cpu.prof"))
	}()
	done, reconciled, err := waitPassDone(ctx, mgr.MetricsURL(), controller, objects, 5*time.Minute)
	if err != nil {
		return run, fmt.Errorf("%w (manager log %s)", err, mo.LogPath)
	}
	if err := <-profiled; err != nil {
		log.WithError(err).Warn("no CPU profile of the restarted manager")
	}
	run.pass, run.reconciles = done.Sub(ready), reconciled
	requests1, err := readAPIRequests(ctx, env.cp)
	if err != nil {
		return run, err
	}
	run.eureka = env.proxy.Counts().Sub(eureka0)
	run.writes = requests1.sub(requests0).writes()
	run.leases = run.writes[apiServerLeases]
	delete(run.writes, apiServerLeases)
	if run.changes, err = restartChangesSince(ctx, env.k8s, state0); err != nil {
		return run, err
	}
	log.WithFields(logrus.Fields{"readyz": run.readyz, "pass": run.pass, "writes": run.writes.String(), "reconciles": run.reconciles, "changed": run.changes.String()}).Info("the manager started again: its first full pass")
	return run, mgr.Stop()
}

// passPoll is how often waitPassDone scrapes the manager's metrics: each
// scrape of a manager of 1,000 syncers costs it about 50 ms of CPU, so
// polling every 50 ms took a fifth of what the pass spent.
const passPoll = 100 * time.Millisecond

// waitPassDone polls the manager's metrics every passPoll until controller
// has reconciled at least objects times (each object once: the informers
// hand every one of them over at the start) and its work queue is empty
// with no reconcile running, and returns when that was seen and the
// reconciles counted then.
func waitPassDone(ctx context.Context, metricsURL, controller string, objects int, timeout time.Duration) (time.Time, float64, error) {
	deadline := time.Now().Add(timeout)
	match := `controller="` + controller + `"`
	var reconciled, depth, active float64
	for {
		text, err := scrape(metricsURL)
		if err != nil {
			return time.Time{}, 0, err
		}
		seen := time.Now()
		// Before its first reconcile a controller may export none of
		// these: read as zero then.
		reconciled, _ = sumCounter(bytes.NewReader(text), "controller_runtime_reconcile_total", match)
		depth, _ = sumCounter(bytes.NewReader(text), "workqueue_depth", `name="`+controller+`"`)
		active, _ = sumCounter(bytes.NewReader(text), "controller_runtime_active_workers", match)
		if reconciled >= float64(objects) && depth == 0 && active == 0 {
			return seen, reconciled, nil
		}
		if time.Now().After(deadline) {
			return time.Time{}, 0, fmt.Errorf("first full pass within %s: %s reconciles of %d objects, %s queued, %s running", timeout, formatValue(reconciled), objects, formatValue(depth), formatValue(active))
		}
		select {
		case <-time.After(passPoll):
		case <-ctx.Done():
			return time.Time{}, 0, ctx.Err()
		}
	}
}

// addRestartFigures records the restart's time and writes.
func addRestartFigures(r *Results, id, name string, targets ScaleTargets, rs restartRun) {
	method := fmt.Sprintf("once the manager that made every status right (above) has stopped, after its steady state, and before the bench's own reads and writes for the floor, the same manager binary starts again with the same flags over the same %d syncers, pods and registry, every status already right, as a new leader finds them. Its start → /readyz is its caches filling (a standby that takes the Lease has them filled already); from /readyz its controllers run, as a new leader's do. The pass is done when the manager's own metrics, polled every %s (uncompressed), say the syncer controller has reconciled every syncer once (controller_runtime_reconcile_total ≥ %d), its work queue is empty (workqueue_depth) and no reconcile runs (controller_runtime_active_workers). Its writes are not the manager's word: the kube-apiserver's apiserver_request_total for write verbs from the manager's start to the end of the pass (nothing else writes then), less the API server's own identity Lease renewals (PUT leases, every 10 s), counted beside. Afterwards every status must still be right.", rs.objects, passPoll, rs.objects)
	anchor := fmt.Sprintf("its start → /readyz (caches filled) %s s before; %s reconciles (%s per syncer); %s Eureka requests (%s); the API server's own Lease renewals meanwhile: %s",
		formatValue(rs.readyz.Seconds()), formatValue(rs.reconciles), formatValue(rs.reconciles/float64(max(rs.objects, 1))),
		formatValue(float64(rs.eureka.Total())), describeCounts(rs.eureka, func(n int64) float64 { return float64(n) }), formatValue(rs.leases))
	r.Add(Figure{
		ID: id + ".restart_pass", Section: SectionReconciler, Name: name + ", the manager started again over right statuses: new leader → first full pass done",
		Value: rs.pass.Seconds(), Unit: "s", Target: target(targets.RestartSeconds),
		Anchor: anchor, Method: method,
		IfMissed: fmt.Sprintf("the pass made %s reconciles and %s API writes (%s); start → /readyz took %s s more before it", formatValue(rs.reconciles), formatValue(rs.writes.total()), rs.writes, formatValue(rs.readyz.Seconds())),
	})
	f := Figure{
		ID: id + ".restart_writes", Section: SectionReconciler, Name: name + ", the manager started again over right statuses: API writes of its first full pass",
		Value: rs.writes.total(), Unit: "writes",
		Anchor: fmt.Sprintf("by verb and resource: %s; counted by the kube-apiserver (apiserver_request_total) from the start to the end of the pass; what they changed, every syncer and Event read before the start and after the pass: %s",
			rs.writes, rs.changes),
		IfMissed: fmt.Sprintf("every status was right already, so each of these (%s) wrote what was there, or what a pass over unchanged objects should leave as it is: %s", rs.writes, rs.changes),
	}
	if targets.RestartWrites != nil {
		f.Target = Max(*targets.RestartWrites)
	}
	r.Add(f)
}
