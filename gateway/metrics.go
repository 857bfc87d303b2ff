package gateway

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

var (
	writesTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "eurekube_gateway_writes_total",
		Help: "Eureka writes through the gateway, by operation, the kind of identity (pod, client, none), verdict (allowed, refused, audited: refused but let through in audit mode, abandoned: the caller went away before the gateway could decide) and reason.",
	}, []string{"op", "identity", "verdict", "reason"})
	requestSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "eurekube_gateway_request_duration_seconds",
		Help:    "Time the gateway took to answer a request, by operation and status code.",
		Buckets: []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5},
	}, []string{"op", "code"})
	readsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "eurekube_gateway_cached_reads_total",
		Help: "Polled reads (apps, delta, app, vip, svip) by result: hit (answered from the gateway's copy), shared (joined a fetch under way) or miss (fetched from Eureka).",
	}, []string{"op", "result"})
	tokenReviews = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "eurekube_gateway_token_reviews_total",
		Help: "TokenReviews the gateway made, by result (authenticated, refused, error).",
	}, []string{"result"})
)

func init() {
	metrics.Registry.MustRegister(writesTotal, requestSeconds, readsTotal, tokenReviews)
}
