package harness

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
)

// Metrics reads a Prometheus text endpoint into its samples, keyed by the
// series as written: `name{label="value"}`, or the bare name.
func Metrics(ctx context.Context, url string) (map[string]float64, error) {
	return MetricsFrom(ctx, http.DefaultClient, url, "")
}

// MetricsFrom is Metrics through hc, sending token (when set) as a bearer
// token, as Prometheus scrapes an endpoint that authorizes its callers.
func MetricsFrom(ctx context.Context, hc *http.Client, url, token string) (map[string]float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, fmt.Errorf("metrics %s: %w", url, err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("metrics %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("metrics %s: %s", url, resp.Status)
	}
	samples := map[string]float64{}
	sc := bufio.NewScanner(io.LimitReader(resp.Body, 16<<20))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			return nil, fmt.Errorf("metrics %s: sample %q: %w", url, line, err)
		}
		samples[line[:i]] = v
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("metrics %s: %w", url, err)
	}
	return samples, nil
}
