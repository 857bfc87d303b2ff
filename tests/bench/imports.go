package bench

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/eurekube/eurekube/api/v1alpha1"
	"github.com/eurekube/eurekube/eureka"
)

// The import scenario: apps that run on VMs, each imported as a Service
// with EndpointSlices. Its instances are registered as a Spring app on a
// VM registers them (no Eurekube marker), so every one is imported.

// importInstancePort is the port every VM instance serves on.
const importInstancePort = 8080

// importedApp is the i-th app of an import scenario, lower-cased: the
// import's name, its Service's, and (upper-cased by Eureka) the app's.
func importedApp(i int) string { return fmt.Sprintf("vm-app-%04d", i) }

// measureImportsOnce registers sc's VM instances in an empty Eureka
// registry and creates one EurekaImport per app on a fresh control plane,
// then starts the manager and measures how long until every import's
// status says all its instances ready and its slices hold them, its
// memory, its writes, and its Eureka requests per resync.
func measureImportsOnce(ctx context.Context, o ScaleOptions, sc Scenario, m BuiltManager) (scaleRun, error) {
	run := scaleRun{commit: m.Commit, syncers: sc.ImportedApps, pods: sc.ImportedApps * sc.InstancesPerApp}
	log := o.Log.WithFields(logrus.Fields{"scenario": sc.Name, "commit": m.Commit})
	env, err := startScaleEnv(ctx, o, sc, m)
	if err != nil {
		return run, err
	}
	defer env.close()
	setupStart := time.Now()
	if err := createImports(ctx, env, sc); err != nil {
		return run, err
	}
	log.WithFields(logrus.Fields{"imports": sc.ImportedApps, "instances": run.pods, "took": time.Since(setupStart).Round(time.Second)}).Info("VM instances registered and imports created; starting the manager")

	err = measureManager(ctx, o, env, log, managedObjects{
		controller: importController, count: sc.ImportedApps, what: "import's status",
		waitRight: func(ctx context.Context) (time.Time, error) {
			right, err := waitAllRight(ctx, env.cp, "import's status", func() client.ObjectList { return &v1alpha1.EurekaImportList{} }, sc.ImportedApps,
				func(o client.Object) error { return importRight(o.(*v1alpha1.EurekaImport), sc.InstancesPerApp) }, 10*time.Minute)
			if err != nil {
				return right, err
			}
			// A status is written after its slices: they are there now.
			return right, importedSlicesRight(ctx, env.k8s, sc)
		},
		stillRight: func(ctx context.Context) error {
			if err := importsRight(ctx, env.k8s, sc); err != nil {
				return err
			}
			return importedSlicesRight(ctx, env.k8s, sc)
		},
		bareWrites: func(ctx context.Context) (bareWrites, error) { return bareImportWrites(ctx, env, sc) },
		afterSteady: func(ctx context.Context, mgr *manager) error {
			if sc.ChangedAppInstances == 0 {
				return nil
			}
			changes, err := measureImportChanges(ctx, env, sc.ImportedApps, sc.ChangedAppInstances,
				func() (float64, error) { return reconciles(mgr.MetricsURL(), importController) })
			if err != nil {
				return fmt.Errorf("single-instance changes: %w", err)
			}
			run.changes = &changes
			worst := changes.worst()
			log.WithFields(logrus.Fields{"slices": changes.slices, "most_writes": worst.writes.total(), "by": worst.what}).Info("single-instance changes counted")
			return nil
		},
	}, &run)
	return run, err
}

// createImports makes sc's namespaces and imports, and registers the
// instances of its apps, InstancesPerApp of each, UP.
func createImports(ctx context.Context, env *scaleEnv, sc Scenario) error {
	for n := range sc.Namespaces {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: importNamespace(n)}}
		if err := env.k8s.Create(ctx, ns); err != nil {
			return fmt.Errorf("namespace %s: %w", ns.Name, err)
		}
	}
	for i := range sc.ImportedApps {
		imp := &v1alpha1.EurekaImport{ObjectMeta: metav1.ObjectMeta{Namespace: importNamespace(i % sc.Namespaces), Name: importedApp(i)},
			Spec: v1alpha1.EurekaImportSpec{App: importedApp(i)}}
		if err := env.k8s.Create(ctx, imp); err != nil {
			return fmt.Errorf("import %s/%s: %w", imp.Namespace, imp.Name, err)
		}
	}
	return inParallel(ctx, sc.ImportedApps*sc.InstancesPerApp, func(k int) error {
		return env.eureka.Register(ctx, vmInstance(k/sc.InstancesPerApp, k))
	})
}

func importNamespace(n int) string { return fmt.Sprintf("import-%02d", n) }

// vmInstance is the k-th VM instance, of app: registered as Spring's
// Eureka client on a VM registers it, with a lease longer than the run
// since nobody heartbeats it.
func vmInstance(app, k int) eureka.Instance {
	ip := fmt.Sprintf("10.%d.%d.%d", 1+k/65536, k/256%256, k%256)
	name := importedApp(app)
	return eureka.Instance{App: strings.ToUpper(name), InstanceID: fmt.Sprintf("%s:%s:%d", ip, name, importInstancePort),
		HostName: ip, IPAddr: ip, VIPAddress: name, Status: eureka.StatusUp, Port: importInstancePort, PortEnabled: true,
		Duration: time.Hour, Metadata: map[string]string{}}
}

// importRight says how imp's status is not yet right for instances UP
// instances.
func importRight(imp *v1alpha1.EurekaImport, instances int) error {
	st := imp.Status
	var err error
	switch want := fmt.Sprintf("%d/%d", instances, instances); {
	case st.ObservedGeneration != imp.Generation:
		err = fmt.Errorf("observedGeneration %d, generation %d", st.ObservedGeneration, imp.Generation)
	case st.Endpoints != want:
		err = fmt.Errorf("endpoints %q, want %q", st.Endpoints, want)
	case !meta.IsStatusConditionTrue(st.Conditions, v1alpha1.ConditionSynced):
		err = errors.New("condition Synced is not True")
	}
	if err != nil {
		return fmt.Errorf("%s/%s: %w", imp.Namespace, imp.Name, err)
	}
	return nil
}

// importsRight lists the imports and says which one is not right.
func importsRight(ctx context.Context, k8s client.Client, sc Scenario) error {
	var list v1alpha1.EurekaImportList
	if err := k8s.List(ctx, &list); err != nil {
		return err
	}
	if len(list.Items) != sc.ImportedApps {
		return fmt.Errorf("%d imports listed, want %d", len(list.Items), sc.ImportedApps)
	}
	for i := range list.Items {
		if err := importRight(&list.Items[i], sc.InstancesPerApp); err != nil {
			return err
		}
	}
	return nil
}

// importedSlicesRight lists the EndpointSlices the imports control and
// says how they are not each app's instances, ready, at the instance port.
func importedSlicesRight(ctx context.Context, k8s client.Client, sc Scenario) error {
	var list discoveryv1.EndpointSliceList
	if err := k8s.List(ctx, &list); err != nil {
		return fmt.Errorf("list EndpointSlices: %w", err)
	}
	ready := map[string]int{}
	for _, s := range list.Items {
		// Only an import's count (the API server keeps the slice of
		// default/kubernetes).
		if owner := metav1.GetControllerOf(&s); owner == nil || owner.Kind != "EurekaImport" {
			continue
		}
		service := s.Namespace + "/" + s.Labels[discoveryv1.LabelServiceName]
		if len(s.Ports) != 1 || s.Ports[0].Port == nil || *s.Ports[0].Port != importInstancePort {
			return fmt.Errorf("EndpointSlice %s/%s of %s: ports %v, want %d", s.Namespace, s.Name, service, s.Ports, importInstancePort)
		}
		for _, ep := range s.Endpoints {
			if ep.Conditions.Ready != nil && *ep.Conditions.Ready {
				ready[service]++
			}
		}
	}
	for i := range sc.ImportedApps {
		service := importNamespace(i%sc.Namespaces) + "/" + importedApp(i)
		if ready[service] != sc.InstancesPerApp {
			return fmt.Errorf("the slices of Service %s hold %d ready endpoints, want %d", service, ready[service], sc.InstancesPerApp)
		}
	}
	return nil
}

// addImportFigures records an import scenario's figures.
func addImportFigures(r *Results, o ScaleOptions, sc Scenario, now scaleRun) {
	var targets ScaleTargets
	if sc.Targets != nil {
		targets = *sc.Targets
	}
	id := "reconciler." + scenarioID(sc)
	work := fmt.Sprintf("%s API writes (%s), %s reconciles (%s per import) taking %s s in all, %s Eureka requests (%s); %s",
		formatValue(float64(now.writes.total())), now.writes, formatValue(now.reconciles), formatValue(now.reconciles/float64(max(sc.ImportedApps, 1))),
		formatValue(now.reconcileSecs), formatValue(float64(now.untilRight.Total())), describeCounts(now.untilRight, func(n int64) float64 { return float64(n) }), now.cpu)
	r.Add(Figure{
		ID: id + ".time_to_right", Section: SectionReconciler, Name: sc.Name + ": manager start → every import's slices right",
		Value: now.converged.Seconds(), Unit: "s", Target: target(targets.TimeToRightSeconds),
		Floor: now.measuredFloor(), FloorRatio: floorRatio(targets.TimeToRightFloorRatio),
		Anchor: fmt.Sprintf("of which start → /readyz (polled every 100 ms): %s s; %s; until every import was right: %s",
			formatValue(now.readyz.Seconds()), now.floorParts(), work),
		Method: fmt.Sprintf("%d apps of %d instances each registered UP directly in an empty Eureka registry (fast profile) as Spring's client on a VM registers them (no Eurekube marker, port %d), and one EurekaImport of each app created beforehand across %d namespaces; then the manager process starts (--resync-period %s, Eureka through a counting proxy) and the imports are watched until observedGeneration is their generation, endpoints reads %d/%d and Synced is True; then the EndpointSlices controlled by an EurekaImport are listed, and each app's must hold its %d endpoints, ready, at port %d. Writes and reconciles as for the syncers, for the eurekaimport controller. The anchor: once the manager has stopped, the bench does alone what the pass cannot do without, one full read of the registry, then for each import its Service, Endpoints and EndpointSlice created, beside an update of the import adding a finalizer, and then its whole status patched, every condition and count as the manager wrote it (%d at a time; the manager's Event of the changed endpoints is left out), with a watch of each of those kinds open from the current resource version, as a controller of them keeps; with the manager's start → /readyz it is the floor, which the pass's time is judged against.",
			sc.ImportedApps, sc.InstancesPerApp, importInstancePort, sc.Namespaces, o.ResyncPeriod, sc.InstancesPerApp, sc.InstancesPerApp, sc.InstancesPerApp, importInstancePort, scaleWorkers),
		IfMissed: "until every import was right the manager made " + work + "; " + now.apiCPU.String() + "; " + now.floor(),
	})
	if c := now.changes; c != nil {
		addSliceWritesFigure(r, id, sc, *c)
	}
	r.Add(Figure{
		ID: id + ".peak_rss", Section: SectionReconciler, Name: sc.Name + ": manager peak RSS",
		Value: MiB(now.mem.HWMKiB), Unit: "MiB", Target: target(targets.PeakRSSMiB),
		Anchor: fmt.Sprintf("peak when every import was right %s MiB; RSS now %s MiB, after %d resyncs, of which Go heap in use %s MiB; beside the syncer scenarios' peak RSS above",
			formatValue(MiB(now.memRight.HWMKiB)), formatValue(MiB(now.mem.RSSKiB)), o.ResyncsCounted, formatValue(now.heapMiB)),
		Method: "VmHWM of the manager process from /proc/PID/status after the resyncs counted, as for the syncers: the manager keeps no syncer here, so this is what imports cost it (its Services, EndpointSlices and imports cached, the registry decoded).",
	})
	perResync := now.perResync(now.window.Total())
	r.Add(Figure{
		ID: id + ".requests_per_resync", Section: SectionReconciler, Name: sc.Name + ": Eureka requests per resync",
		Value: perResync, Unit: "requests", Target: target(targets.RequestsPerResync),
		Anchor: fmt.Sprintf("%d import(s) of one server set: %s per import (%s), %s MiB of responses per resync", sc.ImportedApps,
			formatValue(perResync/float64(sc.ImportedApps)), describeCounts(now.window, now.perResync), formatValue(now.windowBytes/now.resyncs/(1<<20))),
		Method: fmt.Sprintf("requests through the counting proxy over %s (%d resync periods of %s) in steady state, nothing changing, divided by the resyncs in it: the manager's controller_runtime_reconcile_total for the eurekaimport controller over the window, divided by the number of imports.",
			time.Duration(o.ResyncsCounted)*o.ResyncPeriod, o.ResyncsCounted, o.ResyncPeriod),
		IfMissed: fmt.Sprintf("the window held %s resyncs and %s requests (%s)", formatValue(now.resyncs), formatValue(float64(now.window.Total())), describeCounts(now.window, now.perResync)),
	})
	r.Add(Figure{
		ID: id + ".api_requests_per_resync", Section: SectionReconciler, Name: sc.Name + ": API requests per resync",
		Value: now.windowAPI.total() / now.resyncs, Unit: "requests", Anchor: now.apiPerResync(),
		Method: "the kube-apiserver's apiserver_request_total over the same steady-state window, divided by the resyncs in it: with nothing changing in Eureka, a write here is one the import reconciler could have left out.",
	})
}

// addSliceWritesFigure records the EndpointSlice writes of the worst
// single-instance change, beside the slices the import has.
func addSliceWritesFigure(r *Results, id string, sc Scenario, c importChanges) {
	worst := c.worst()
	var each []string
	for _, ch := range c.changes {
		each = append(each, fmt.Sprintf("%s: %d (%s; in the status after %s s)", ch.what, ch.writes.total(), ch.writes, formatValue(ch.took.Seconds())))
	}
	r.Add(Figure{
		ID: id + ".slice_writes_per_change", Section: SectionReconciler, Name: sc.Name + ": EndpointSlice writes per single-instance Eureka change",
		Value: float64(worst.writes.total()), Unit: "writes", Target: Max(1),
		Anchor: fmt.Sprintf("the import of %d instances has %d slices, what re-cutting them writes; by change: %s", c.instances, c.slices, strings.Join(each, "; ")),
		Method: fmt.Sprintf("once the steady state is measured, with the manager still running, one more app (%s) of %d instances is registered and imported in %s, and once its status reads %d/%d with its slices holding them, and the manager has reconciled every import once more, Eureka is changed one instance at a time: one instance re-registered DOWN, then UP again, one added whose address (10.200.0.10) sorts before every other, one cancelled. A watch of the import's EndpointSlices (by the %s label, from a listed resource version) counts every create, update and delete, each a new resourceVersion, from the change until the import's status and slices show it and the manager has then reconciled every import once more (each once per resync), so a write a later resync makes for the change counts too. The figure is the change that wrote the most; its instances are cancelled afterwards.",
			changedApp, c.instances, importNamespace(0), c.instances, c.instances, discoveryv1.LabelServiceName),
		IfMissed: fmt.Sprintf("the change %q wrote %d of the import's %d slices (%s): one instance's endpoint is in one slice, so every write beyond one moved endpoints that did not change", worst.what, worst.writes.total(), c.slices, worst.writes),
	})
}
