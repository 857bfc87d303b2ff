package bench

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"math"
	"net/http"
	"sort"
	"strconv"
	"strings"

	"github.com/eurekube/eurekube/webhook"
)

// histogram is the cumulative bucket counts of one Prometheus histogram,
// by upper bound in seconds.
type histogram map[float64]float64

// admissionHistogram reads the manager's admission duration histogram for
// injected pods: the handler's decision and mutation.
func admissionHistogram(metricsURL string) (histogram, error) {
	return readHistogram(metricsURL, "eurekube_webhook_admission_duration_seconds", `result="injected"`)
}

// webhookHistogram reads controller-runtime's latency of whole webhook
// requests at the pod webhook's path: decoding the AdmissionReview, the
// handler, encoding the answer (TLS and HTTP parsing excluded).
func webhookHistogram(metricsURL string) (histogram, error) {
	return readHistogram(metricsURL, "controller_runtime_webhook_latency_seconds", `webhook="`+webhook.Path+`"`)
}

func readHistogram(metricsURL, name, match string) (histogram, error) {
	text, err := scrape(metricsURL)
	if err != nil {
		return nil, err
	}
	return parseHistogram(bytes.NewReader(text), name, match)
}

// scrape reads a Prometheus endpoint's text.
func scrape(metricsURL string) ([]byte, error) {
	req, err := http.NewRequest(http.MethodGet, metricsURL, nil)
	if err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	// Uncompressed: the bench scrapes a manager it measures, some passes
	// every 100 ms, and gzip would make each scrape cost it more CPU.
	req.Header.Set("Accept-Encoding", "identity")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("metrics %s: %s", metricsURL, resp.Status)
	}
	text, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("metrics %s: %w", metricsURL, err)
	}
	return text, nil
}

// parseHistogram picks name's buckets whose labels contain match from the
// Prometheus text format.
func parseHistogram(r io.Reader, name, match string) (histogram, error) {
	h := histogram{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name+"_bucket{") || !strings.Contains(line, match) {
			continue
		}
		_, rest, _ := strings.Cut(line, `le="`)
		le, rest, ok := strings.Cut(rest, `"`)
		fields := strings.Fields(rest)
		if !ok || len(fields) < 2 {
			return nil, fmt.Errorf("histogram %s: cannot read %q", name, line)
		}
		bound := math.Inf(1)
		if le != "+Inf" {
			var err error
			if bound, err = strconv.ParseFloat(le, 64); err != nil {
				return nil, fmt.Errorf("histogram %s: bound %q: %w", name, le, err)
			}
		}
		n, err := strconv.ParseFloat(fields[len(fields)-1], 64)
		if err != nil {
			return nil, fmt.Errorf("histogram %s: count in %q: %w", name, line, err)
		}
		h[bound] = n
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("histogram %s: %w", name, err)
	}
	if len(h) == 0 {
		return nil, fmt.Errorf("histogram %s{%s}: not found", name, match)
	}
	return h, nil
}

// sumCounter adds up the samples of name whose labels contain match, from
// the Prometheus text format.
func sumCounter(r io.Reader, name, match string) (float64, error) {
	var sum float64
	found := false
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name+"{") || !strings.Contains(line, match) {
			continue
		}
		fields := strings.Fields(line)
		v, err := strconv.ParseFloat(fields[len(fields)-1], 64)
		if err != nil {
			return 0, fmt.Errorf("counter %s: %q: %w", name, line, err)
		}
		sum, found = sum+v, true
	}
	if err := sc.Err(); err != nil {
		return 0, fmt.Errorf("counter %s: %w", name, err)
	}
	if !found {
		return 0, fmt.Errorf("counter %s{%s}: not found", name, match)
	}
	return sum, nil
}

// The manager's controllers, as controller-runtime's metrics name them.
const (
	syncerController = "eurekasyncer"
	importController = "eurekaimport"
)

// reconciles reads how many reconciles the manager's controller has run.
func reconciles(metricsURL, controller string) (float64, error) {
	text, err := scrape(metricsURL)
	if err != nil {
		return 0, err
	}
	return sumCounter(bytes.NewReader(text), "controller_runtime_reconcile_total", `controller="`+controller+`"`)
}

func (h histogram) sub(before histogram) histogram {
	d := histogram{}
	for k, v := range h {
		d[k] = v - before[k]
	}
	return d
}

// within is the share of observations at most bound, which must be a
// bucket bound (compared with a relative tolerance: generated bounds such
// as 1.0000000000000002e-03 are not exact).
func (h histogram) within(bound float64) float64 {
	total := h[math.Inf(1)]
	if total == 0 {
		return 0
	}
	for b, n := range h {
		if math.Abs(b-bound) <= 1e-9*bound {
			return n / total
		}
	}
	return math.NaN()
}

// quantile is the upper bound of the bucket holding the q-quantile: the
// true value is at most this.
func (h histogram) quantile(q float64) float64 {
	bounds := make([]float64, 0, len(h))
	for b := range h {
		bounds = append(bounds, b)
	}
	sort.Float64s(bounds)
	total := h[math.Inf(1)]
	for _, b := range bounds {
		if h[b] >= q*total {
			return b
		}
	}
	return math.Inf(1)
}
