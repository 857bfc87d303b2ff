package sidecar

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/eurekube/eurekube/eureka"
)

// recorder is what the registrar records; *Metrics and the reference below
// both have it.
type recorder interface {
	ObserveRequest(op, url string, d time.Duration, err error)
	observeRegistration(err error)
	observeHeartbeat(err error)
	setStatus(s eureka.Status)
	setAppHealthy(healthy bool)
}

// clientLibraryMetrics are the same series on the Prometheus client
// library, as the registrar served them before it wrote the format itself:
// the reference its output must match.
type clientLibraryMetrics struct {
	registry      *prometheus.Registry
	registrations *prometheus.CounterVec
	heartbeats    *prometheus.CounterVec
	status        *prometheus.GaugeVec
	appHealthy    prometheus.Gauge
	requests      *prometheus.HistogramVec
}

func newClientLibraryMetrics() *clientLibraryMetrics {
	m := &clientLibraryMetrics{
		registry: prometheus.NewRegistry(),
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
	m.registry.MustRegister(m.registrations, m.heartbeats, m.status, m.appHealthy, m.requests)
	return m
}

func (m *clientLibraryMetrics) ObserveRequest(op, _ string, d time.Duration, err error) {
	m.requests.WithLabelValues(op, eureka.Outcome(err)).Observe(d.Seconds())
}

func (m *clientLibraryMetrics) observeRegistration(err error) {
	m.registrations.WithLabelValues(eureka.Outcome(err)).Inc()
}

func (m *clientLibraryMetrics) observeHeartbeat(err error) {
	m.heartbeats.WithLabelValues(eureka.Outcome(err)).Inc()
}

func (m *clientLibraryMetrics) setStatus(s eureka.Status) {
	for _, each := range []eureka.Status{eureka.StatusStarting, eureka.StatusUp, eureka.StatusDown} {
		v := 0.0
		if each == s {
			v = 1
		}
		m.status.WithLabelValues(string(each)).Set(v)
	}
}

func (m *clientLibraryMetrics) setAppHealthy(healthy bool) {
	v := 0.0
	if healthy {
		v = 1
	}
	m.appHealthy.Set(v)
}

func TestMetrics_ServesWhatThePrometheusClientLibraryServed(t *testing.T) {
	notFound := fmt.Errorf("heartbeat: %w", eureka.ErrNotFound)
	unavailable := fmt.Errorf("register: %w", eureka.ErrUnavailable)
	for _, tc := range []struct {
		name   string
		record func(r recorder)
	}{
		{"before anything happened", func(recorder) {}},
		{"registered STARTING, then UP, heartbeating", func(r recorder) {
			r.ObserveRequest("register", "http://e1/eureka/apps/ORDERS", 41*time.Millisecond, nil)
			r.observeRegistration(nil)
			r.setStatus(eureka.StatusStarting)
			r.setAppHealthy(true)
			r.ObserveRequest("register", "http://e1/eureka/apps/ORDERS", 3*time.Millisecond, nil)
			r.observeRegistration(nil)
			r.setStatus(eureka.StatusUp)
			for i := range 7 {
				r.ObserveRequest("heartbeat", "http://e1/eureka/apps/ORDERS/x", time.Duration(i)*time.Millisecond, nil)
				r.observeHeartbeat(nil)
			}
		}},
		{"forgotten by Eureka, then unreachable, then DOWN", func(r recorder) {
			r.ObserveRequest("heartbeat", "u", 5*time.Millisecond, notFound) // on a bucket's bound
			r.observeHeartbeat(notFound)
			r.ObserveRequest("register", "u", 5*time.Second, unavailable)
			r.ObserveRequest("register", "u", 7*time.Second, unavailable) // above every bound
			r.observeRegistration(unavailable)
			r.observeRegistration(unavailable)
			r.ObserveRequest("cancel", "u", 0, errors.New("boom"))
			r.ObserveRequest("register", "u", 1234567*time.Nanosecond, nil)
			r.observeRegistration(nil)
			r.setStatus(eureka.StatusDown)
			r.setAppHealthy(true)
			r.setAppHealthy(false)
		}},
		{"a long life: counts past a million", func(r recorder) {
			for range 1_000_000 {
				r.observeHeartbeat(nil)
			}
			for range 1_234 {
				r.ObserveRequest("heartbeat", "u", 333*time.Microsecond, nil)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reference, ours := newClientLibraryMetrics(), NewMetrics()
			tc.record(reference)
			tc.record(ours)

			req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
			want := httptest.NewRecorder()
			promhttp.HandlerFor(reference.registry, promhttp.HandlerOpts{}).ServeHTTP(want, req)
			got := httptest.NewRecorder()
			ours.ServeHTTP(got, req)

			if got.Code != want.Code || got.Header().Get("Content-Type") != want.Header().Get("Content-Type") {
				t.Errorf("answered %d %q, want %d %q", got.Code, got.Header().Get("Content-Type"), want.Code, want.Header().Get("Content-Type"))
			}
			if got.Body.String() != want.Body.String() {
				t.Errorf("body:\n%s\nwant (Prometheus client library):\n%s", got.Body, want.Body)
			}
		})
	}
}

func TestMetrics_NilRecordsNothing(t *testing.T) {
	var m *Metrics
	m.ObserveRequest("register", "u", time.Second, nil)
	m.observeRegistration(nil)
	m.observeHeartbeat(nil)
	m.setStatus(eureka.StatusUp)
	m.setAppHealthy(true)
}
