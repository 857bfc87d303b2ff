package sidecar

import (
	"bytes"
	"cmp"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/eurekube/eurekube/eureka"
)

// Metrics are the registrar's Prometheus series, served by ServeHTTP in the
// Prometheus text format. A nil *Metrics records nothing.
//
// Five series with fixed label sets do not need the Prometheus client
// library: with the protobuf, procfs and YAML packages it brings, it was
// more than a quarter of the binary, whose pages are most of the
// registrar's resident memory. The output is what the library wrote for the
// same series, byte for byte (metrics_test.go compares the two).
type Metrics struct {
	mu            sync.Mutex
	registrations map[string]float64 // by result
	heartbeats    map[string]float64 // by result
	status        map[string]float64 // by status; empty until the first registration
	appHealthy    float64
	requests      map[requestKey]*histogram
}

type requestKey struct{ op, result string }

// requestBuckets are the bounds of eurekube_registrar_eureka_request_seconds.
var requestBuckets = []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5}

// NewMetrics creates the series; a series with labels appears once it has a
// value, as with the Prometheus client library.
func NewMetrics() *Metrics {
	return &Metrics{
		registrations: map[string]float64{},
		heartbeats:    map[string]float64{},
		status:        map[string]float64{},
		requests:      map[requestKey]*histogram{},
	}
}

// ObserveRequest implements eureka.Observer.
func (m *Metrics) ObserveRequest(op, _ string, d time.Duration, err error) {
	if m == nil {
		return
	}
	key := requestKey{op, eureka.Outcome(err)}
	m.mu.Lock()
	defer m.mu.Unlock()
	h := m.requests[key]
	if h == nil {
		h = newHistogram(requestBuckets)
		m.requests[key] = h
	}
	h.observe(requestBuckets, d.Seconds())
}

func (m *Metrics) observeRegistration(err error) {
	if m != nil {
		m.mu.Lock()
		m.registrations[eureka.Outcome(err)]++
		m.mu.Unlock()
	}
}

func (m *Metrics) observeHeartbeat(err error) {
	if m != nil {
		m.mu.Lock()
		m.heartbeats[eureka.Outcome(err)]++
		m.mu.Unlock()
	}
}

func (m *Metrics) setStatus(s eureka.Status) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, each := range []eureka.Status{eureka.StatusStarting, eureka.StatusUp, eureka.StatusDown} {
		v := 0.0
		if each == s {
			v = 1
		}
		m.status[string(each)] = v
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
	m.mu.Lock()
	m.appHealthy = v
	m.mu.Unlock()
}

// ServeHTTP writes every series in the Prometheus text format (0.0.4),
// uncompressed whatever the request's Accept-Encoding: a scrape is about
// 3 KiB, and a gzip writer would allocate some 800 KiB of heap for it.
func (m *Metrics) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	var body bytes.Buffer
	m.writeText(&body)
	w.Header().Set("Content-Type", textContentType)
	_, _ = body.WriteTo(w)
}

// writeText writes the families sorted by name and each family's series
// sorted by label values, leaving out families without series, as the
// Prometheus client library does.
func (m *Metrics) writeText(b *bytes.Buffer) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()

	const healthy = "eurekube_registrar_app_healthy"
	writeHeader(b, healthy, "gauge", "1 when the app passes the health gate.")
	writeSample(b, healthy, m.appHealthy)

	if len(m.requests) > 0 {
		const name = "eurekube_registrar_eureka_request_seconds"
		writeHeader(b, name, "histogram", "Eureka request latency by operation and result.")
		keys := make([]requestKey, 0, len(m.requests))
		for k := range m.requests {
			keys = append(keys, k)
		}
		slices.SortFunc(keys, func(a, b requestKey) int {
			return cmp.Or(cmp.Compare(a.op, b.op), cmp.Compare(a.result, b.result))
		})
		for _, k := range keys {
			m.requests[k].write(b, name, requestBuckets, "op", k.op, "result", k.result)
		}
	}
	writeByLabel(b, "eurekube_registrar_heartbeats_total", "counter",
		"Heartbeats sent to Eureka, by result (ok, not_found, error).", "result", m.heartbeats)
	writeByLabel(b, "eurekube_registrar_registrations_total", "counter",
		"Registrations (POSTs) sent to Eureka, by result.", "result", m.registrations)
	writeByLabel(b, "eurekube_registrar_status", "gauge",
		"1 for the status Eureka last accepted for this pod.", "status", m.status)
}

// writeByLabel writes a family of one label, if it has any series.
func writeByLabel(b *bytes.Buffer, name, kind, help, label string, values map[string]float64) {
	if len(values) == 0 {
		return
	}
	writeHeader(b, name, kind, help)
	keys := make([]string, 0, len(values))
	for k := range values {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		writeSample(b, name, values[k], label, k)
	}
}
