package controller

import (
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/eurekube/eurekube/api/v1alpha1"
	"github.com/eurekube/eurekube/eureka"
)

var (
	instancesGauge = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "eurekube_syncer_instances",
		Help: "Eureka instances of a syncer's app, by location (here: this cluster's instances of the syncer; elsewhere: VMs and other clusters) and status.",
	}, []string{"namespace", "syncer", "app", "location", "status"})
	orphansRemoved = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "eurekube_orphans_removed_total",
		Help: "Instances removed from Eureka because their pod no longer exists.",
	}, []string{"namespace", "syncer"})
	adaptationsGauge = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "eurekube_syncer_pod_adaptations",
		Help: "Running pods of a syncer carrying an adaptation (what the webhook adapted or could not do for them), by reason.",
	}, []string{"namespace", "syncer", "reason"})
	syncedGauge = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "eurekube_syncer_synced",
		Help: "1 while the syncer's Synced condition is True (Eureka agrees with Kubernetes), else 0.",
	}, []string{"namespace", "syncer"})
	outdatedGauge = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "eurekube_syncer_outdated_registrar_pods",
		Help: "Running pods the syncer injected that run a registrar image other than the current one (a rollout updates them).",
	}, []string{"namespace", "syncer"})
	importEndpointsGauge = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "eurekube_import_endpoints",
		Help: "Endpoints of an import's EndpointSlices, by condition (ready: instances UP; total: every instance imported), as last written; kept as they are while Eureka cannot be read.",
	}, []string{"namespace", "import", "condition"})
	registryCachesGauge = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "eurekube_eureka_registry_caches",
		Help: "Registry caches the manager holds (each a copy of a registry), by Eureka server set in canonical form; more than one only where readers of one set use different credentials or TLS material. Their total is capped by --max-eureka-server-sets.",
	}, []string{"servers"})
	registryReadersGauge = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "eurekube_eureka_registry_readers",
		Help: "Syncers and imports reading a registry cache, by Eureka server set in canonical form.",
	}, []string{"servers"})
	eurekaRequests = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "eurekube_eureka_request_duration_seconds",
		Help:    "Eureka requests of the reconciler, by operation and result.",
		Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5},
	}, []string{"op", "result"})
)

func init() {
	metrics.Registry.MustRegister(instancesGauge, orphansRemoved, adaptationsGauge, syncedGauge, outdatedGauge, importEndpointsGauge, eurekaRequests,
		registryCachesGauge, registryReadersGauge)
}

// setServerSetGauges publishes the registry caches held and their readers,
// by server set (clients.publish).
func setServerSetGauges(caches, readers map[string]int) {
	registryCachesGauge.Reset()
	registryReadersGauge.Reset()
	for servers, n := range caches {
		registryCachesGauge.WithLabelValues(servers).Set(float64(n))
		registryReadersGauge.WithLabelValues(servers).Set(float64(readers[servers]))
	}
}

// requestObserver feeds eurekaRequests; it implements eureka.Observer.
type requestObserver struct{}

func (requestObserver) ObserveRequest(op, _ string, d time.Duration, err error) {
	eurekaRequests.WithLabelValues(op, eureka.Outcome(err)).Observe(d.Seconds())
}

// forgetMetrics drops the series of a syncer that is gone.
func forgetMetrics(namespace, syncer string) {
	labels := map[string]string{"namespace": namespace, "syncer": syncer}
	instancesGauge.DeletePartialMatch(labels)
	instanceApps.Delete(types.NamespacedName{Namespace: namespace, Name: syncer})
	orphansRemoved.DeletePartialMatch(labels)
	adaptationsGauge.DeletePartialMatch(labels)
	syncedGauge.DeletePartialMatch(labels)
	outdatedGauge.DeletePartialMatch(labels)
	adaptationSeries.Lock()
	delete(adaptationSeries.reasons, types.NamespacedName{Namespace: namespace, Name: syncer})
	adaptationSeries.Unlock()
}

// setImportGauges publishes how many endpoints an import's slices hold.
func setImportGauges(namespace, imp string, ready, total int32) {
	importEndpointsGauge.WithLabelValues(namespace, imp, "ready").Set(float64(ready))
	importEndpointsGauge.WithLabelValues(namespace, imp, "total").Set(float64(total))
}

// forgetImportMetrics drops the series of an import that is gone.
func forgetImportMetrics(namespace, imp string) {
	importEndpointsGauge.DeletePartialMatch(prometheus.Labels{"namespace": namespace, "import": imp})
}

// adaptationSeries remembers which reasons each syncer's gauge holds, so a
// reason that disappears loses its series (a stale 3 would read as three
// pods still adapted).
var adaptationSeries = struct {
	sync.Mutex
	reasons map[types.NamespacedName][]string
}{reasons: map[types.NamespacedName][]string{}}

// setAdaptationGauges publishes how many pods carry each adaptation and
// removes the series of reasons no pod carries any more.
func setAdaptationGauges(s *v1alpha1.EurekaSyncer, list []v1alpha1.PodAdaptations) {
	key := types.NamespacedName{Namespace: s.Namespace, Name: s.Name}
	current := make([]string, 0, len(list))
	for _, a := range list {
		adaptationsGauge.WithLabelValues(s.Namespace, s.Name, string(a.Reason)).Set(float64(a.Pods))
		current = append(current, string(a.Reason))
	}
	adaptationSeries.Lock()
	defer adaptationSeries.Unlock()
	for _, reason := range adaptationSeries.reasons[key] {
		if !slices.Contains(current, reason) {
			adaptationsGauge.DeleteLabelValues(s.Namespace, s.Name, reason)
		}
	}
	if len(current) == 0 {
		delete(adaptationSeries.reasons, key)
	} else {
		adaptationSeries.reasons[key] = current
	}
}

// setStatusGauges publishes what the syncer's written status says.
func setStatusGauges(s *v1alpha1.EurekaSyncer) {
	synced := 0.0
	if meta.IsStatusConditionTrue(s.Status.Conditions, v1alpha1.ConditionSynced) {
		synced = 1
	}
	syncedGauge.WithLabelValues(s.Namespace, s.Name).Set(synced)
	outdatedGauge.WithLabelValues(s.Namespace, s.Name).Set(float64(s.Status.OutdatedRegistrarPods))
}

// instanceApps remembers the app each syncer's instance series are under.
var instanceApps sync.Map // types.NamespacedName → string

// setInstanceGauges publishes how many of the app's instances are in each
// status, here and elsewhere (zero included, so a status that empties is
// seen as 0). A renamed app drops the old name's series.
func setInstanceGauges(s *v1alpha1.EurekaSyncer, here, elsewhere []eureka.Instance) {
	app := s.EffectiveAppName()
	key := types.NamespacedName{Namespace: s.Namespace, Name: s.Name}
	if old, ok := instanceApps.Swap(key, app); ok && old != app {
		instancesGauge.DeletePartialMatch(prometheus.Labels{"namespace": s.Namespace, "syncer": s.Name, "app": old.(string)})
	}
	for location, insts := range map[string][]eureka.Instance{"here": here, "elsewhere": elsewhere} {
		counts := map[eureka.Status]int{eureka.StatusUp: 0, eureka.StatusDown: 0, eureka.StatusStarting: 0, eureka.StatusOutOfService: 0, eureka.StatusUnknown: 0}
		for _, inst := range insts {
			counts[inst.Status]++
		}
		for status, n := range counts {
			instancesGauge.WithLabelValues(s.Namespace, s.Name, app, location, string(status)).Set(float64(n))
		}
	}
}
