package registrar_test

import (
	"bufio"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/eurekube/eurekube/sidecar"
)

// metric reads one sample from the registrar's /metrics; 0 when absent.
func metric(t testing.TB, p *pod, series string) float64 {
	t.Helper()
	addr, ok := p.env[sidecar.EnvListenAddr]
	if !ok {
		t.Fatal("no listen address")
	}
	return scrape(t, addr, series)
}

func failedRequests(t testing.TB, addr string) float64 {
	return scrape(t, addr, `eurekube_registrar_registrations_total{result="error"}`)
}

func scrape(t testing.TB, addr, series string) float64 {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(io.LimitReader(resp.Body, 1<<20))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), series+" "); ok {
			f, _ := strconv.ParseFloat(v, 64)
			return f
		}
	}
	return 0
}
