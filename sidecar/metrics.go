package sidecar

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/eurekube/eurekube/eureka"
)

// Metrics are the registrar's Prometheus series, on a registry of its own
// (the binary serves nothing else). A nil *Metrics records nothing.
type Metrics struct {
	Registry      *prometheus.Registry
	registrations *prometheus.CounterVec
	heartbeats    *prometheus.CounterVec
	status        *prometheus.GaugeVec
	appHealthy    prometheus.Gauge
	requests      *prometheus.HistogramVec
}

// NewMetrics creates the series and registers them.
func NewMetrics() *Metrics {
	m := &Metrics{
		Registry: prometheus.NewRegistry(),
		registrations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "eurekube_registrar_registrations_total", Help: "Registrations (POSTs) sent to Eureka, by result.",
		}, []string{"result"}),
		heartbeats: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "eurekube_registrar_heartbeats_total", Help: "Heartbeats sent to Eureka, by result (ok, not_found, error).",
		}, []string{"result"}),
		status: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "eurekube_registrar_status", Help: "1 for the status Eureka last accepted for this pod.",
		}, []string{"status"}),
		appHealthy: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "eurekube_registrar_app_healthy", Help: "1 when the app passes the health gate.",
		}),
		requests: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "eurekube_registrar_eureka_request_seconds", Help: "Eureka request latency by operation and result.",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5},
		}, []string{"op", "result"}),
	}
	m.Registry.MustRegister(m.registrations, m.heartbeats, m.status, m.appHealthy, m.requests)
	return m
}

// ObserveRequest implements eureka.Observer.
func (m *Metrics) ObserveRequest(op, _ string, d time.Duration, err error) {
	if m == nil {
		return
	}
	m.requests.WithLabelValues(op, eureka.Outcome(err)).Observe(d.Seconds())
}

func (m *Metrics) observeRegistration(err error) {
	if m != nil {
		m.registrations.WithLabelValues(eureka.Outcome(err)).Inc()
	}
}

func (m *Metrics) observeHeartbeat(err error) {
	if m != nil {
		m.heartbeats.WithLabelValues(eureka.Outcome(err)).Inc()
	}
}

func (m *Metrics) setStatus(s eureka.Status) {
	if m == nil {
		return
	}
	for _, each := range []eureka.Status{eureka.StatusStarting, eureka.StatusUp, eureka.StatusDown} {
		v := 0.0
		if each == s {
			v = 1
		}
		m.status.WithLabelValues(string(each)).Set(v)
	}
}

func (m *Metrics) setAppHealthy(healthy bool) {
	if m == nil {
		return
	}
	v := 0.0
	if healthy {
		v = 1
	}
	m.appHealthy.Set(v)
}
