package bench

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"k8s.io/client-go/rest"

	"github.com/eurekube/eurekube/tests/harness"
)

// apiRequests counts the requests the kube-apiserver served, by verb and
// resource ("PATCH pods", "PUT eurekasyncers/status", "GET secrets").
type apiRequests map[string]float64

// readAPIRequests reads the API server's apiserver_request_total.
func readAPIRequests(ctx context.Context, cp *harness.ControlPlane) (apiRequests, error) {
	c, err := rest.HTTPClientFor(cp.Config)
	if err != nil {
		return nil, fmt.Errorf("API server metrics: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(cp.Config.Host, "/")+"/metrics", nil)
	if err != nil {
		return nil, fmt.Errorf("API server metrics: %w", err)
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, fmt.Errorf("API server metrics: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("API server metrics: %s", resp.Status)
	}
	return parseAPIRequests(resp.Body)
}

// parseAPIRequests sums apiserver_request_total by verb, resource and
// subresource from the Prometheus text format. Requests of no resource
// (/metrics, /healthz: the bench's own reads) are left out.
func parseAPIRequests(r io.Reader) (apiRequests, error) {
	w := apiRequests{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		const name = "apiserver_request_total{"
		if !strings.HasPrefix(line, name) {
			continue
		}
		labels, value, ok := strings.Cut(line[len(name):], "} ")
		if !ok {
			return nil, fmt.Errorf("apiserver_request_total: cannot read %q", line)
		}
		l := promLabels(labels)
		if l["resource"] == "" {
			continue
		}
		n, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
		if err != nil {
			return nil, fmt.Errorf("apiserver_request_total: %q: %w", line, err)
		}
		key := l["verb"] + " " + l["resource"]
		if l["subresource"] != "" {
			key += "/" + l["subresource"]
		}
		w[key] += n
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("apiserver_request_total: %w", err)
	}
	return w, nil
}

// writes are the requests of the write verbs.
func (w apiRequests) writes() apiRequests {
	out := apiRequests{}
	for k, v := range w {
		if isWrite(k) {
			out[k] = v
		}
	}
	return out
}

// byVerb sums the requests of each verb.
func (w apiRequests) byVerb() apiRequests {
	out := apiRequests{}
	for k, v := range w {
		verb, _, _ := strings.Cut(k, " ")
		out[verb] += v
	}
	return out
}

// scaled divides every count by d (per resync, say).
func (w apiRequests) scaled(d float64) apiRequests {
	out := apiRequests{}
	for k, v := range w {
		out[k] = v / d
	}
	return out
}

// promLabels reads `a="x",b="y"`; values hold no quotes or commas here.
func promLabels(s string) map[string]string {
	out := map[string]string{}
	for _, kv := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(kv, "=")
		if ok {
			out[k] = strings.Trim(v, `"`)
		}
	}
	return out
}

func (w apiRequests) sub(before apiRequests) apiRequests {
	d := apiRequests{}
	for k, v := range w {
		if n := v - before[k]; n > 0 {
			d[k] = n
		}
	}
	return d
}

func (w apiRequests) total() float64 {
	var t float64
	for _, v := range w {
		t += v
	}
	return t
}

// String lists the requests, most first.
func (w apiRequests) String() string {
	keys := slices.Collect(maps.Keys(w))
	slices.SortFunc(keys, func(a, b string) int {
		if w[a] != w[b] {
			if w[a] > w[b] {
				return -1
			}
			return 1
		}
		return strings.Compare(a, b)
	})
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, formatValue(w[k])+" "+k)
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

// reconcileTotals reads how many reconciles controller ran and their
// summed duration in seconds.
func reconcileTotals(metricsURL, controller string) (count, seconds float64, err error) {
	text, err := scrape(metricsURL)
	if err != nil {
		return 0, 0, err
	}
	match := `controller="` + controller + `"`
	if count, err = sumCounter(bytes.NewReader(text), "controller_runtime_reconcile_total", match); err != nil {
		return 0, 0, err
	}
	if seconds, err = sumCounter(bytes.NewReader(text), "controller_runtime_reconcile_time_seconds_sum", match); err != nil {
		return 0, 0, err
	}
	return count, seconds, nil
}

// heapInUseMiB reads the manager's go_memstats_heap_inuse_bytes.
func heapInUseMiB(metricsURL string) (float64, error) {
	text, err := scrape(metricsURL)
	if err != nil {
		return 0, err
	}
	sc := bufio.NewScanner(bytes.NewReader(text))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "go_memstats_heap_inuse_bytes "); ok {
			n, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil {
				return 0, fmt.Errorf("go_memstats_heap_inuse_bytes: %w", err)
			}
			return n / (1 << 20), nil
		}
	}
	return 0, fmt.Errorf("go_memstats_heap_inuse_bytes: not found at %s", metricsURL)
}
