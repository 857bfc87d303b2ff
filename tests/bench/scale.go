package bench

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/eurekube/eurekube/api/v1alpha1"
	"github.com/eurekube/eurekube/certs"
	"github.com/eurekube/eurekube/eureka"
	"github.com/eurekube/eurekube/sidecar"
	"github.com/eurekube/eurekube/tests/harness"
)

// Scenario is a shape of cluster for the reconciler: namespaces, syncers
// in each, pods per syncer.
type Scenario struct {
	Name                                           string
	Namespaces, SyncersPerNamespace, PodsPerSyncer int
	// Targets the issues set for this shape; nil: none.
	Targets *ScaleTargets
	// Before is what the same phase measured for this shape before the
	// change its targets ask for; shown beside the figures.
	Before *ScaleBefore
}

// ScaleTargets are the upper bounds of a scenario's figures; zero: no
// target for that figure.
type ScaleTargets struct {
	TimeToRightSeconds float64
	PeakRSSMiB         float64
	RequestsPerResync  float64
}

// ScaleBefore is an earlier measurement of a scenario, and when it was
// made.
type ScaleBefore struct {
	When                                                            string
	TimeToRightSeconds, PeakRSSMiB, RequestsPerResync, MiBPerResync float64
}

// target is v as a target, or nil when v is zero.
func target(v float64) *float64 {
	if v == 0 {
		return nil
	}
	return Max(v)
}

// beforeNote says what b measured of one figure, for its anchor.
func (b *ScaleBefore) note(what string) string {
	if b == nil {
		return ""
	}
	return fmt.Sprintf("; before (%s): %s", b.When, what)
}

func (s Scenario) syncers() int { return s.Namespaces * s.SyncersPerNamespace }
func (s Scenario) pods() int    { return s.syncers() * s.PodsPerSyncer }

// ScaleOptions configure MeasureScale.
type ScaleOptions struct {
	Eureka *harness.Eureka
	// ManagerBinary is the built ./cmd/manager.
	ManagerBinary string
	WorkDir       string
	Scenario      Scenario
	// ResyncPeriod is the manager's --resync-period; requests are counted
	// over ResyncsCounted of them.
	ResyncPeriod   time.Duration
	ResyncsCounted int
	Log            logrus.FieldLogger
}

const (
	scaleClusterID = "bench-cluster"
	scaleWorkers   = 16
	scalePort      = 8080
)

// MeasureScale builds the scenario on a fresh control plane and an empty
// Eureka registry — pods as the webhook and the kubelet leave them, their
// instances as their registrars register them — then starts the manager
// and measures how long until every syncer's status is right, its memory,
// and its Eureka requests per resync.
func MeasureScale(ctx context.Context, o ScaleOptions, r *Results) error {
	sc := o.Scenario
	log := o.Log.WithField("scenario", sc.Name)
	dir := filepath.Join(o.WorkDir, fmt.Sprintf("%dx%d", sc.syncers(), sc.PodsPerSyncer))
	certDir := filepath.Join(dir, "certs")
	if _, err := certs.Bootstrap(certDir, certs.LocalHosts()); err != nil {
		return fmt.Errorf("webhook certificate: %w", err)
	}
	if err := o.Eureka.Restart(ctx); err != nil { // an empty registry
		return fmt.Errorf("restart eureka: %w", err)
	}
	cp, err := harness.StartControlPlane(ctx, harness.ControlPlaneOptions{})
	if err != nil {
		return err
	}
	defer func() { _ = cp.Stop() }()
	k8s, err := unthrottledClient(cp)
	if err != nil {
		return err
	}
	direct, err := eureka.New(eureka.Options{URLs: []string{o.Eureka.URL()}, Timeout: 10 * time.Second, Logger: o.Log})
	if err != nil {
		return err
	}
	setupStart := time.Now()
	syncers, err := scaleFixtures(ctx, k8s, direct, sc)
	if err != nil {
		return err
	}
	log.WithFields(logrus.Fields{"syncers": len(syncers), "pods": sc.pods(), "took": time.Since(setupStart).Round(time.Second)}).Info("pods created and registered; starting the manager")

	proxy, err := StartCountingProxy(o.Eureka.Addr())
	if err != nil {
		return err
	}
	defer proxy.Close()
	start := time.Now()
	m, err := startManager(ctx, managerOptions{
		Binary: o.ManagerBinary, Kubeconfig: cp.Kubeconfig, EurekaURLs: []string{proxy.URL()}, ClusterID: scaleClusterID,
		ResyncPeriod: o.ResyncPeriod, CertDir: certDir, LogPath: filepath.Join(dir, "manager.log"),
	})
	if err != nil {
		return err
	}
	defer func() { _ = m.Stop() }()
	readyz := time.Since(start)
	want := int32(sc.PodsPerSyncer)
	if err := harness.Poll(ctx, 10*time.Minute, 100*time.Millisecond, "every syncer's status right", func() error {
		return statusesRight(ctx, k8s, len(syncers), want)
	}); err != nil {
		return fmt.Errorf("%w (manager log %s)", err, m.LogPath())
	}
	converged := time.Since(start)
	untilRight := proxy.Counts()
	memRight, err := ReadMemory(m.Pid())
	if err != nil {
		return err
	}
	log.WithFields(logrus.Fields{"converged": converged, "readyz": readyz, "hwm_mib": MiB(memRight.HWMKiB)}).Info("every status right; counting Eureka requests per resync")

	before, bytesBefore := proxy.Counts(), proxy.ResponseBytes()
	reconciles0, err := reconciles(m.MetricsURL())
	if err != nil {
		return err
	}
	select {
	case <-time.After(time.Duration(o.ResyncsCounted) * o.ResyncPeriod): // the measurement window itself
	case <-ctx.Done():
		return ctx.Err()
	}
	window, bytesInWindow := proxy.Counts().Sub(before), float64(proxy.ResponseBytes()-bytesBefore)
	reconciles1, err := reconciles(m.MetricsURL())
	if err != nil {
		return err
	}
	// A resync reconciles every syncer once; the window holds about
	// ResyncsCounted of them, but each syncer's period drifts by its own
	// reconcile's length, so the manager's reconcile counter says how
	// many there were.
	resyncs := (reconciles1 - reconciles0) / float64(len(syncers))
	if resyncs <= 0 {
		return fmt.Errorf("no reconcile in %d resync periods", o.ResyncsCounted)
	}
	if err := statusesRight(ctx, k8s, len(syncers), want); err != nil {
		return fmt.Errorf("statuses after %d resyncs: %w", o.ResyncsCounted, err)
	}
	mem, err := ReadMemory(m.Pid())
	if err != nil {
		return err
	}
	log.WithFields(logrus.Fields{"per_resync": float64(window.Total()) / resyncs, "resyncs": resyncs, "hwm_mib": MiB(mem.HWMKiB), "rss_mib": MiB(mem.RSSKiB)}).Info("scale scenario done")

	var targets ScaleTargets
	if sc.Targets != nil {
		targets = *sc.Targets
	}
	var beforeTime, beforeRSS, beforeRequests string
	if b := sc.Before; b != nil {
		beforeTime = b.note(formatValue(b.TimeToRightSeconds) + " s")
		beforeRSS = b.note(formatValue(b.PeakRSSMiB) + " MiB")
		beforeRequests = b.note(fmt.Sprintf("%s requests and %s MiB of responses per resync", formatValue(b.RequestsPerResync), formatValue(b.MiBPerResync)))
	}
	shape := fmt.Sprintf("%d namespace(s) × %d syncer(s) × %d pods", sc.Namespaces, sc.SyncersPerNamespace, sc.PodsPerSyncer)
	r.Add(Figure{
		ID: "reconciler." + scenarioID(sc) + ".time_to_right", Section: SectionReconciler, Name: sc.Name + ": manager start → every status right",
		Value: converged.Seconds(), Unit: "s", Target: target(targets.TimeToRightSeconds),
		Anchor:   fmt.Sprintf("of which start → /readyz (caches synced, polled every 100 ms): %s s; %s Eureka requests until then%s", formatValue(readyz.Seconds()), formatValue(float64(untilRight.Total())), beforeTime),
		Method:   fmt.Sprintf("%s created beforehand (%d pods in all, annotated and shaped as injected, Running and Ready with pod IPs through the status subresource), each pod's instance registered UP directly in an empty Eureka registry (fast profile) with the metadata the registrar sends (sidecar.Config.Instance); then the manager process starts (--resync-period %s, Eureka through a counting proxy) and every syncer is polled every 100 ms until observedGeneration, selected, injected, ready, registered and UP counts all equal the pods and Synced is True.", shape, sc.pods(), o.ResyncPeriod),
		IfMissed: "the reconciler starts once its pod informer has listed every pod of the cluster; then each syncer's first reconcile reads its pods from the cache and its instances from the one registry read all syncers share, and writes a finalizer and a status: two API writes per syncer, 16 syncers at a time, on the API server that also answers the bench's poll (a list of every syncer each 100 ms) on this machine's shared cores",
	})
	r.Add(Figure{
		ID: "reconciler." + scenarioID(sc) + ".peak_rss", Section: SectionReconciler, Name: sc.Name + ": manager peak RSS",
		Value: MiB(mem.HWMKiB), Unit: "MiB", Target: target(targets.PeakRSSMiB),
		Anchor:   fmt.Sprintf("RSS now %s MiB, after %d resyncs%s", formatValue(MiB(mem.RSSKiB)), o.ResyncsCounted, beforeRSS),
		Method:   "VmHWM of the manager process from /proc/PID/status after the resyncs counted below (the peak since it started, start-up and first reconciles included).",
		IfMissed: "the manager caches every pod of the cluster (the reconciler reads them) and holds the whole Eureka registry decoded, one instance per pod; here every instance was registered in the three minutes before the manager started, which Eureka keeps as its delta, so each resync's delta carries the whole registry and a new copy is decoded beside the last (in a steady state it carries only what changed)",
	})
	perResync := func(c int64) float64 { return float64(c) / resyncs }
	r.Add(Figure{
		ID: "reconciler." + scenarioID(sc) + ".requests_per_resync", Section: SectionReconciler, Name: sc.Name + ": Eureka requests per resync",
		Value: perResync(window.Total()), Unit: "requests", Target: target(targets.RequestsPerResync),
		Anchor: fmt.Sprintf("%d syncer(s): %s per syncer (%s), %s MiB of responses per resync%s", sc.syncers(),
			formatValue(perResync(window.Total())/float64(sc.syncers())), describeCounts(window, perResync), formatValue(bytesInWindow/resyncs/(1<<20)), beforeRequests),
		Method:   fmt.Sprintf("requests through the counting proxy over %s (%d resync periods of %s) in steady state, nothing changing, divided by the resyncs that happened in it: the manager's controller_runtime_reconcile_total for the syncer controller over the same window, divided by the number of syncers (%s).", time.Duration(o.ResyncsCounted)*o.ResyncPeriod, o.ResyncsCounted, o.ResyncPeriod, formatValue(resyncs)),
		IfMissed: "the registry is read at most once per resync period per server set, when a reconcile finds the last read older than the period; a window whose resyncs drift by the reconciles' own length can hold one read more than the resyncs it counts",
	})
	return nil
}

func scenarioID(sc Scenario) string {
	return strconv.Itoa(sc.syncers()) + "x" + strconv.Itoa(sc.PodsPerSyncer)
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

// scaleFixtures creates the namespaces, syncers and pods of sc and
// registers the pods' instances.
func scaleFixtures(ctx context.Context, k8s client.Client, c *eureka.Client, sc Scenario) ([]*v1alpha1.EurekaSyncer, error) {
	var syncers []*v1alpha1.EurekaSyncer
	for n := range sc.Namespaces {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("scale-%02d", n), Labels: map[string]string{v1alpha1.NamespaceInjectionLabel: "enabled"}}}
		if err := k8s.Create(ctx, ns); err != nil {
			return nil, fmt.Errorf("namespace %s: %w", ns.Name, err)
		}
		for range sc.SyncersPerNamespace {
			name := fmt.Sprintf("app-%03d", len(syncers))
			s := &v1alpha1.EurekaSyncer{
				ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns.Name},
				Spec: v1alpha1.EurekaSyncerSpec{
					Selector: metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
					Port:     intstr.FromInt32(scalePort),
				},
			}
			if err := k8s.Create(ctx, s); err != nil {
				return nil, fmt.Errorf("syncer %s/%s: %w", ns.Name, name, err)
			}
			syncers = append(syncers, s)
		}
	}
	type job struct {
		s *v1alpha1.EurekaSyncer
		i int // the pod's index in the whole scenario
	}
	jobs := make(chan job)
	errs := make(chan error, scaleWorkers)
	var wg sync.WaitGroup
	for range scaleWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range jobs {
				if err := injectedReadyPod(ctx, k8s, c, j.s, j.i); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	var sendErr error
send:
	for i := range sc.pods() {
		select {
		case jobs <- job{s: syncers[i/sc.PodsPerSyncer], i: i}:
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
		return nil, sendErr
	}
	for err := range errs {
		return nil, err
	}
	return syncers, nil
}

// injectedReadyPod creates a pod as the webhook leaves it, sets its status
// as the kubelet would once it is ready, and registers its instance as its
// registrar would.
func injectedReadyPod(ctx context.Context, k8s client.Client, c *eureka.Client, s *v1alpha1.EurekaSyncer, i int) error {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: fmt.Sprintf("%s-%05d", s.Name, i), Namespace: s.Namespace,
			Labels:      map[string]string{"app": s.Name},
			Annotations: map[string]string{v1alpha1.StatusAnnotation: v1alpha1.StatusInjected, v1alpha1.SyncerAnnotation: s.Name},
		},
		Spec: corev1.PodSpec{Containers: []corev1.Container{
			{Name: "app", Image: "registry.example/app:1", Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: scalePort}}},
			{Name: v1alpha1.RegistrarContainerName, Image: benchRegistrarImage},
		}},
	}
	if err := k8s.Create(ctx, pod); err != nil {
		return fmt.Errorf("pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	ip := fmt.Sprintf("10.%d.%d.%d", 1+i/65536, i/256%256, i%256)
	pod.Status = corev1.PodStatus{
		Phase: corev1.PodRunning, PodIP: ip, PodIPs: []corev1.PodIP{{IP: ip}},
		Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Now()}},
	}
	if err := k8s.Status().Update(ctx, pod); err != nil {
		return fmt.Errorf("pod %s/%s status: %w", pod.Namespace, pod.Name, err)
	}
	cfg := sidecar.Config{
		PodName: pod.Name, PodNamespace: pod.Namespace, PodUID: string(pod.UID), PodIP: ip,
		AppName: s.EffectiveAppName(), VIPAddress: strings.ToLower(s.Name), SecureVIPAddress: strings.ToLower(s.Name), Port: scalePort,
		ClusterID: scaleClusterID, Syncer: s.Name, Metadata: map[string]string{"zone": "zone-a"},
		Health:          sidecar.HealthConfig{Type: sidecar.HealthTCP, Port: scalePort},
		RenewalInterval: 30 * time.Second,
		// Nobody heartbeats these instances: a lease longer than the run
		// keeps them listed, as live registrars would.
		LeaseDuration: time.Hour,
	}
	if err := c.Register(ctx, cfg.Instance(eureka.StatusUp)); err != nil {
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
		s := &list.Items[i]
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
			wrong++
			if first == nil {
				first = fmt.Errorf("%s/%s: %w", s.Namespace, s.Name, err)
			}
		}
	}
	if wrong > 0 {
		return fmt.Errorf("%d of %d syncers not right yet, such as %w", wrong, syncers, first)
	}
	return nil
}
