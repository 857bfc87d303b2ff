package controller

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/eurekube/eurekube/api/v1alpha1"
	"github.com/eurekube/eurekube/eureka"
)

var (
	instancesGauge = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "eurekube_syncer_instances",
		Help: "This cluster's Eureka instances of a syncer, by status.",
	}, []string{"namespace", "syncer", "status"})
	orphansRemoved = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "eurekube_orphans_removed_total",
		Help: "Instances removed from Eureka because their pod no longer exists.",
	}, []string{"namespace", "syncer"})
	eurekaRequests = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "eurekube_eureka_request_duration_seconds",
		Help:    "Eureka requests of the reconciler, by operation and result.",
		Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5},
	}, []string{"op", "result"})
)

func init() {
	metrics.Registry.MustRegister(instancesGauge, orphansRemoved, eurekaRequests)
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
	orphansRemoved.DeletePartialMatch(labels)
}

// setInstanceGauges publishes how many of the syncer's instances are in
// each status (zero included, so a status that empties is seen as 0).
func setInstanceGauges(s *v1alpha1.EurekaSyncer, insts []eureka.Instance) {
	counts := map[eureka.Status]int{eureka.StatusUp: 0, eureka.StatusDown: 0, eureka.StatusStarting: 0, eureka.StatusOutOfService: 0}
	for _, inst := range insts {
		counts[inst.Status]++
	}
	for status, n := range counts {
		instancesGauge.WithLabelValues(s.Namespace, s.Name, string(status)).Set(float64(n))
	}
}
