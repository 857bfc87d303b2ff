package bench

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestAdd_SaysByHowMuchAndWhyATargetIsMissed(t *testing.T) {
	var r Results
	r.Add(Figure{ID: "a", Section: SectionWebhook, Name: "met", Value: 0.8, Unit: "ms", Target: Max(1), IfMissed: "never shown"})
	r.Add(Figure{ID: "b", Section: SectionWebhook, Name: "missed", Value: 1.5, Unit: "ms", Target: Max(1), IfMissed: "the probe period"})
	r.Add(Figure{ID: "c", Section: SectionRegistrar, Name: "no target", Value: 3, Unit: "req/min"})
	if f := r.Figures[0]; f.Met == nil || !*f.Met || f.Missed != "" {
		t.Errorf("met figure: %+v", f)
	}
	if f := r.Figures[1]; f.Met == nil || *f.Met || f.Missed != "missed by 0.500 ms (50 % over the target): the probe period" {
		t.Errorf("missed figure: met %v, %q", f.Met, f.Missed)
	}
	if f := r.Figures[2]; f.Met != nil || f.Missed != "" {
		t.Errorf("figure without a target: %+v", f)
	}
}

func TestAdd_JudgesALowerBound(t *testing.T) {
	var r Results
	r.Add(Figure{ID: "a", Section: SectionGateway, Name: "met", Value: 3000, Unit: "reads/s", TargetMin: Min(2000)})
	r.Add(Figure{ID: "b", Section: SectionGateway, Name: "missed", Value: 1500, Unit: "reads/s", TargetMin: Min(2000), IfMissed: "why"})
	if f := r.Figures[0]; f.Met == nil || !*f.Met || f.Missed != "" {
		t.Errorf("met figure: %+v", f)
	}
	if f := r.Figures[1]; f.Met == nil || *f.Met || f.Missed != "short by 500 reads/s (25 % under the target): why" {
		t.Errorf("missed figure: met %v, %q", f.Met, f.Missed)
	}
	md := Report(&r)
	for _, want := range []string{
		"## Gateway",
		"| met | 3,000 reads/s | ≥ 2,000 reads/s | met |",
		"| missed | 1,500 reads/s | ≥ 2,000 reads/s | **missed** |",
		"- **Gateway — missed**: 1,500 reads/s against ≥ 2,000 reads/s; short by 500 reads/s",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q:\n%s", want, md)
		}
	}
}

func TestReport_ShowsEachFigureBesideItsTargetAndAnchor(t *testing.T) {
	r := &Results{Date: time.Date(2026, 11, 22, 15, 0, 0, 0, time.UTC), Duration: "14 min 03 s",
		Environment: Environment{CPU: "Test CPU", Cores: 2, Go: "go1.26.8", Load: []LoadSample{{When: "start", LoadAvg1: 0.5, Others: []string{"go 95%"}}}}}
	r.Add(Figure{Section: SectionWebhook, Name: "pod CREATE p99, with ÷ without", Value: 1.4, Unit: "×", Target: Max(1.25), Anchor: "7 ms ÷ 5 ms", IfMissed: "why", Method: "how"})
	r.Add(Figure{Section: SectionReconciler, Name: "1 syncer × 5,000 pods: manager peak RSS", Value: 98.2, Unit: "MiB", Target: Max(150), Anchor: "RSS now 90 MiB"})
	r.Fail(PhaseRegistrar, os.ErrDeadlineExceeded)
	md := Report(r)
	for _, want := range []string{
		"| pod CREATE p99, with ÷ without | 1.40 × | ≤ 1.25 × | **missed** | 7 ms ÷ 5 ms |",
		"| 1 syncer × 5,000 pods: manager peak RSS | 98.2 MiB | ≤ 150 MiB | met | RSS now 90 MiB |",
		"missed by 0.150 × (12 % over the target): why",
		"| start | 0.50 | go 95% |",
		"registrar: i/o timeout",
		"- **Webhook — pod CREATE p99, with ÷ without**: how",
		"Test CPU, 2 cores",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q:\n%s", want, md)
		}
	}
	if strings.Contains(FiguresTable(r), "## Registrar") {
		t.Error("a section without figures has a table")
	}
}

func TestWrite_StoresJSONAndMarkdown(t *testing.T) {
	dir := t.TempDir()
	r := &Results{}
	r.Add(Figure{Section: SectionRegistrar, Name: "binary size", Value: 9.3, Unit: "MiB"})
	if err := r.Write(dir); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"results.json", "REPORT.md"} {
		if data, err := os.ReadFile(filepath.Join(dir, name)); err != nil || !strings.Contains(string(data), "binary size") {
			t.Errorf("%s: %v, %.200s", name, err, data)
		}
	}
}

func TestFormatValue_KeepsAboutThreeDigits(t *testing.T) {
	for v, want := range map[float64]string{0: "0", 0.0123: "0.012", 1.234: "1.23", 12.34: "12.3", 123.4: "123", 4969.7: "4,970", 1234567: "1,234,567", -2.5: "-2.50"} {
		if got := formatValue(v); got != want {
			t.Errorf("formatValue(%v) = %q, want %q", v, got, want)
		}
	}
}

func TestHistogram_QuantileIsTheBoundOfItsBucket(t *testing.T) {
	text := `# HELP eurekube_webhook_admission_duration_seconds x
eurekube_webhook_admission_duration_seconds_bucket{result="injected",le="0.0005"} 900
eurekube_webhook_admission_duration_seconds_bucket{result="injected",le="0.001"} 995
eurekube_webhook_admission_duration_seconds_bucket{result="injected",le="0.0025"} 1000
eurekube_webhook_admission_duration_seconds_bucket{result="injected",le="+Inf"} 1000
eurekube_webhook_admission_duration_seconds_bucket{result="skipped",le="+Inf"} 7
`
	h, err := parseHistogram(strings.NewReader(text), "eurekube_webhook_admission_duration_seconds", `result="injected"`)
	if err != nil {
		t.Fatal(err)
	}
	if got := h.quantile(0.99); got != 0.001 {
		t.Errorf("p99 bound = %v, want 0.001", got)
	}
	if got := h.quantile(0.5); got != 0.0005 {
		t.Errorf("p50 bound = %v, want 0.0005", got)
	}
	if got := h.within(0.001); got != 0.995 {
		t.Errorf("within 1 ms = %v, want 0.995", got)
	}
	if got := h.sub(h).within(0.001); got != 0 {
		t.Errorf("empty difference within 1 ms = %v, want 0", got)
	}
	generated := `controller_runtime_webhook_latency_seconds_bucket{webhook="/mutate-v1-pod",le="0.0010000000000000002"} 3
controller_runtime_webhook_latency_seconds_bucket{webhook="/mutate-v1-pod",le="+Inf"} 4
`
	g, err := parseHistogram(strings.NewReader(generated), "controller_runtime_webhook_latency_seconds", `webhook="/mutate-v1-pod"`)
	if err != nil {
		t.Fatal(err)
	}
	if got := g.within(0.001); got != 0.75 {
		t.Errorf("within an inexact 1 ms bound = %v, want 0.75", got)
	}
	if _, err := parseHistogram(strings.NewReader(text), "eurekube_webhook_admission_duration_seconds", `result="error"`); err == nil {
		t.Error("a missing series parsed")
	}
}

func TestCountingProxy_CountsEachRequestByKind(t *testing.T) {
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) }))
	defer backend.Close()
	p, err := StartCountingProxy(strings.TrimPrefix(backend.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	before := p.Counts()
	for _, req := range []struct{ method, path string }{
		{http.MethodPut, "/apps/ORDERS/a.shop.3f2a9c1e:orders:8080"}, {http.MethodPut, "/apps/ORDERS/a.shop.3f2a9c1e:orders:8080"}, {http.MethodGet, "/apps/delta"},
	} {
		r, _ := http.NewRequest(req.method, p.URL()+req.path, nil)
		resp, err := http.DefaultClient.Do(r)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNoContent {
			t.Fatalf("%s %s through the proxy: %s", req.method, req.path, resp.Status)
		}
	}
	got := p.Counts().Sub(before)
	if got[KindHeartbeat] != 2 || got[KindFetchDelta] != 1 || got.Total() != 3 {
		t.Fatalf("counts = %v, want 2 heartbeats and 1 delta fetch", got)
	}
}

func TestSumCounter_AddsTheMatchingSeries(t *testing.T) {
	text := `controller_runtime_reconcile_total{controller="eurekasyncer",result="success"} 40
controller_runtime_reconcile_total{controller="eurekasyncer",result="requeue_after"} 2
controller_runtime_reconcile_total{controller="other",result="success"} 9
`
	got, err := sumCounter(strings.NewReader(text), "controller_runtime_reconcile_total", `controller="eurekasyncer"`)
	if err != nil || got != 42 {
		t.Fatalf("sum = %v, %v; want 42", got, err)
	}
	if _, err := sumCounter(strings.NewReader(text), "controller_runtime_reconcile_total", `controller="none"`); err == nil {
		t.Error("a missing counter summed")
	}
}

func TestAdd_JudgesARatioToTheFloorOfTheSameRun(t *testing.T) {
	var r Results
	floor := 10.0
	r.Add(Figure{ID: "met", Section: SectionReconciler, Name: "met", Value: 12, Unit: "s", Floor: &floor, FloorRatio: floorRatio(1.3), IfMissed: "never shown"})
	r.Add(Figure{ID: "missed", Section: SectionReconciler, Name: "missed", Value: 19.5, Unit: "s", Floor: &floor, FloorRatio: floorRatio(1.3), IfMissed: "why"})
	r.Add(Figure{ID: "nofloor", Section: SectionReconciler, Name: "no floor", Value: 5, Unit: "s", FloorRatio: floorRatio(1.3)})
	if f := r.Figures[0]; f.Met == nil || !*f.Met || f.Missed != "" || f.Ratio == nil || *f.Ratio != 1.2 {
		t.Errorf("met figure: %+v", f)
	}
	if f := r.Figures[1]; f.Met == nil || *f.Met || f.Missed != "1.95 × its floor of 10.0 s, against at most 1.30 ×: missed by 6.50 s (50 % over 13.0 s): why" {
		t.Errorf("missed figure: met %v, %q", f.Met, f.Missed)
	}
	// A figure whose floor was not measured is not met: a floor that
	// failed must not pass unseen.
	if f := r.Figures[2]; f.Met == nil || *f.Met || f.Missed != "not judged: this run measured no floor" {
		t.Errorf("figure without its floor: met %v, %q", f.Met, f.Missed)
	}
	md := Report(&r)
	for _, want := range []string{
		"| met | 12.0 s (floor 10.0 s, 1.20 × the floor) | ≤ 1.30 × the floor (13.0 s) | met |",
		"| missed | 19.5 s (floor 10.0 s, 1.95 × the floor) | ≤ 1.30 × the floor (13.0 s) | **missed** |",
		"| no floor | 5.00 s (no floor measured) | ≤ 1.30 × the floor | **missed** |",
		"- **Reconciler at scale — missed**: 19.5 s (floor 10.0 s, 1.95 × the floor) against ≤ 1.30 × the floor (13.0 s); 1.95 × its floor",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q:\n%s", want, md)
		}
	}
}

func TestCreateRatio_IsJudgedAgainstTheSpreadOfTheAAPair(t *testing.T) {
	var r Results
	ms := time.Millisecond
	// The twins 5 % apart: Eurekube 4 % over the precomputed patch is
	// within the run's own spread; 10 % is not.
	addCreateRatioFigures(&r, "p50", createTimes{104 * ms / 10, 10 * ms, 105 * ms / 10, 4 * ms, 3 * ms}, ms/2, "why")
	addCreateRatioFigures(&r, "p99", createTimes{22 * ms, 20 * ms, 19 * ms, 15 * ms, 12 * ms}, ms, "why")
	if len(r.Figures) != 4 {
		t.Fatalf("%d figures, want 4", len(r.Figures))
	}
	aa, ratio := r.Figures[0], r.Figures[1]
	if aa.ID != "webhook.create_p50_aa" || aa.Met != nil {
		t.Errorf("A/A figure: %+v", aa)
	}
	if ratio.Target == nil || *ratio.Target != 1.05 || ratio.Met == nil || !*ratio.Met {
		t.Errorf("p50 ratio within the A/A spread: target %v, met %v", ratio.Target, ratio.Met)
	}
	if !strings.Contains(ratio.Anchor, "the A/A pair's spread in this run (10.0 ms and 10.5 ms: 1.05 ×)") {
		t.Errorf("p50 anchor %q", ratio.Anchor)
	}
	// Eurekube's round trip 0.5 ms beyond the anchor's, on a 10 ms create.
	if !strings.Contains(ratio.Anchor, "beyond the anchor's (0.500 ms; both posted by the bench, which serves the anchor itself) added to the precomputed arm's create: 1.05 ×") {
		t.Errorf("p50 anchor lacks the floor: %q", ratio.Anchor)
	}
	p99 := r.Figures[3]
	if want := 20.0 / 19; p99.Target == nil || *p99.Target != want || p99.Met == nil || *p99.Met {
		t.Errorf("p99 ratio 1.10 against a spread of 1.05: target %v, met %v", p99.Target, p99.Met)
	}
	if got := aaSpread(0, ms); got != 1 {
		t.Errorf("spread of an empty arm = %v, want 1", got)
	}
}
