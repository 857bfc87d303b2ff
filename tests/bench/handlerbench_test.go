package bench

import (
	"strings"
	"testing"
)

const handlerBenchOutput = `goos: linux
goarch: amd64
pkg: github.com/eurekube/eurekube/webhook
cpu: Intel(R) Xeon(R) CPU
BenchmarkHandler-2              	    5000	     88512 ns/op	   41240 B/op	     312 allocs/op
BenchmarkPrecomputedHandler-2   	    5000	     40120 ns/op	   20112 B/op	     150 allocs/op
PASS
ok  	github.com/eurekube/eurekube/webhook	1.234s
`

func TestParseHandlerBenchmarks_ReadsBothOrTheHandlerAlone(t *testing.T) {
	h, err := parseHandlerBenchmarks([]byte(handlerBenchOutput))
	if err != nil {
		t.Fatal(err)
	}
	if want := (benchmarkResult{ns: 88512, bytes: 41240, allocs: 312}); h.handler != want {
		t.Errorf("handler = %+v, want %+v", h.handler, want)
	}
	if want := (benchmarkResult{ns: 40120, bytes: 20112, allocs: 150}); !h.hasFloor || h.floor != want {
		t.Errorf("floor = %+v (%v), want %+v", h.floor, h.hasFloor, want)
	}

	// An older commit without BenchmarkPrecomputedHandler.
	var older []string
	for _, l := range strings.Split(handlerBenchOutput, "\n") {
		if !strings.HasPrefix(l, "BenchmarkPrecomputedHandler") {
			older = append(older, l)
		}
	}
	h, err = parseHandlerBenchmarks([]byte(strings.Join(older, "\n")))
	if err != nil {
		t.Fatal(err)
	}
	if h.hasFloor || h.handler.allocs != 312 {
		t.Errorf("older = %+v, want the handler alone", h)
	}

	if _, err := parseHandlerBenchmarks([]byte("FAIL\n")); err == nil {
		t.Error("no BenchmarkHandler: want an error")
	}
}

func TestHandlerBenchmarkFigures_NameTheOlderCommitsRun(t *testing.T) {
	now := handlerBenchmarks{handler: benchmarkResult{ns: 90000, bytes: 40000, allocs: 300}, floor: benchmarkResult{ns: 40000, allocs: 150}, hasFloor: true}
	old := handlerBenchmarks{handler: benchmarkResult{ns: 300000, allocs: 1200}, floor: benchmarkResult{ns: 45000}, hasFloor: true}
	r := &Results{}
	addHandlerBenchmarkFigures(r, now, &old, "efc310a7c7e3")
	if len(r.Figures) != 2 {
		t.Fatalf("%d figures, want 2", len(r.Figures))
	}
	for _, want := range []string{"alone, answering the precomputed patch: 40.0 µs", "own work is 50.0 µs", "at efc310a7c7e3 in this run: 300 µs (its own work 255 µs), 1200 allocs"} {
		if !strings.Contains(r.Figures[0].Anchor, want) {
			t.Errorf("time anchor %q lacks %q", r.Figures[0].Anchor, want)
		}
	}
	if strings.Contains(r.Figures[0].Anchor, "issue 17") {
		t.Errorf("time anchor %q still has a typed-in figure", r.Figures[0].Anchor)
	}
	for _, want := range []string{"of the 90.0 µs per request", "server alone takes 40.0 µs", "own work 50.0 µs (255 µs at efc310a7c7e3 in this run)"} {
		if !strings.Contains(r.Figures[0].IfMissed, want) {
			t.Errorf("IfMissed %q lacks %q", r.Figures[0].IfMissed, want)
		}
	}
	if want := "controller-runtime's server alone: 150; at efc310a7c7e3 in this run: 1200"; r.Figures[1].Anchor != want {
		t.Errorf("allocs anchor = %q, want %q", r.Figures[1].Anchor, want)
	}

	r = &Results{}
	addHandlerBenchmarkFigures(r, now, nil, "")
	if strings.Contains(r.Figures[0].Anchor, "in this run") || strings.Contains(r.Figures[0].IfMissed, "in this run") {
		t.Errorf("without an older commit: %q / %q", r.Figures[0].Anchor, r.Figures[0].IfMissed)
	}
}
