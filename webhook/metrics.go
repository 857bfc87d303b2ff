package webhook

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

var (
	admissions = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "eurekube_webhook_admissions_total",
		Help: "Pod admissions by result (injected, skipped, denied, error) and reason.",
	}, []string{"result", "reason"})
	admissionSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "eurekube_webhook_admission_duration_seconds",
		Help:    "Time to answer one admission request, by result.",
		Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1},
	}, []string{"result"})
	adapted = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "eurekube_webhook_adaptations_total",
		Help: "What the webhook adapted or could not do for injected pods, by reason (recorded on each pod in the eurekube.io/adaptations annotation).",
	}, []string{"reason"})
)

func init() {
	metrics.Registry.MustRegister(admissions, admissionSeconds, adapted)
}

func observe(resp admission.Response, reason Reason, d time.Duration) {
	result := "skipped"
	switch {
	case resp.Result != nil && resp.Result.Code >= 400 && !resp.Allowed && reason != ReasonInvalidAnnotation && reason != ReasonInvalidConfig:
		result = "error"
	case !resp.Allowed:
		result = "denied"
	case reason == ReasonInjected:
		result = "injected"
	}
	admissions.WithLabelValues(result, string(reason)).Inc()
	admissionSeconds.WithLabelValues(result).Observe(d.Seconds())
}
