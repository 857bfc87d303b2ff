package main

import (
	"strings"
	"testing"
	"time"
)

// TestJSONLog_KeepsWhatGoTestPrintsWithoutV feeds a go test -json stream
// of a passing, a failing and an unfinished test: the run's output keeps
// the package's lines and the failing test's whole output, not the
// passing test's, and the summary lists every test slowest first.
func TestJSONLog_KeepsWhatGoTestPrintsWithoutV(t *testing.T) {
	start := time.Date(2026, 11, 26, 6, 0, 0, 0, time.UTC)
	stream := `{"Time":"2026-11-26T06:00:05Z","Action":"start","Package":"p"}
{"Time":"2026-11-26T06:00:05Z","Action":"output","Package":"p","Output":"cluster started\n"}
{"Time":"2026-11-26T06:00:10Z","Action":"run","Package":"p","Test":"TestQuiet"}
{"Time":"2026-11-26T06:00:10Z","Action":"output","Package":"p","Test":"TestQuiet","Output":"quiet log\n"}
{"Time":"2026-11-26T06:00:20Z","Action":"run","Package":"p","Test":"TestLoud"}
{"Time":"2026-11-26T06:00:20Z","Action":"run","Package":"p","Test":"TestLoud/sub"}
{"Time":"2026-11-26T06:00:21Z","Action":"output","Package":"p","Test":"TestLoud/sub","Output":"why it failed\n"}
{"Time":"2026-11-26T06:00:22Z","Action":"fail","Package":"p","Test":"TestLoud/sub","Elapsed":2}
{"Time":"2026-11-26T06:01:00Z","Action":"pass","Package":"p","Test":"TestQuiet","Elapsed":50}
{"Time":"2026-11-26T06:01:01Z","Action":"fail","Package":"p","Test":"TestLoud","Elapsed":41}
{"Time":"2026-11-26T06:01:02Z","Action":"run","Package":"p","Test":"TestHung"}
{"Time":"2026-11-26T06:01:03Z","Action":"output","Package":"p","Test":"TestHung","Output":"waiting for the node\n"}
not json: a build error
{"Time":"2026-11-26T06:01:04Z","Action":"output","Package":"p","Output":"FAIL\tp\t59s\n"}
`
	l := newJSONLog(start)
	l.read(strings.NewReader(stream))
	l.finish()
	out := l.out.String()
	for _, want := range []string{"cluster started", "why it failed", "not json: a build error", "FAIL\tp\t59s", "TestHung did not end", "waiting for the node"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "quiet log") {
		t.Errorf("output holds a passing test's log:\n%s", out)
	}
	sum := l.summary("go test p", 2)
	quiet, loud := strings.Index(sum, "TestQuiet (pass)"), strings.Index(sum, "TestLoud (fail)")
	if quiet < 0 || loud < 0 || quiet > loud || !strings.Contains(sum, "… and 1 more") || !strings.Contains(sum, "   10s    50s") {
		t.Errorf("summary:\n%s", sum)
	}
}
