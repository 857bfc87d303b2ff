package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"
)

// event is one line of `go test -json` (cmd/test2json's TestEvent).
type event struct {
	Time    time.Time
	Action  string
	Package string
	Test    string
	Elapsed float64
	Output  string
}

// timing is one top-level test of a suite: when it began (from the run's
// start), how long it took, and how it ended.
type timing struct {
	Package, Test string
	Began         time.Duration
	Elapsed       time.Duration
	Action        string // pass, fail or skip; "" while it runs
}

// jsonLog reads a `go test -json` stream and keeps what go test prints
// without -v: every package's own lines ("ok", "FAIL", what TestMain
// prints) and the whole output of each top-level test that failed; and
// each top-level test's timing, so the run can say where its minutes went.
type jsonLog struct {
	start   time.Time
	out     bytes.Buffer
	pending map[string]*bytes.Buffer // a running top-level test's output
	timings []*timing
}

func newJSONLog(start time.Time) *jsonLog {
	return &jsonLog{start: start, pending: map[string]*bytes.Buffer{}}
}

// read consumes r to its end. A line that is not JSON (a build error the
// go command prints) is kept as it is.
func (l *jsonLog) read(r io.Reader) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	for sc.Scan() {
		l.line(sc.Bytes())
	}
}

func (l *jsonLog) line(b []byte) {
	var e event
	if len(b) == 0 || b[0] != '{' || json.Unmarshal(b, &e) != nil {
		l.out.Write(b)
		l.out.WriteByte('\n')
		return
	}
	if e.Test == "" {
		if e.Action == "output" {
			l.out.WriteString(e.Output)
		}
		return
	}
	top, _, sub := strings.Cut(e.Test, "/")
	key := e.Package + " " + top
	buf := l.pending[key]
	if buf == nil {
		buf = &bytes.Buffer{}
		l.pending[key] = buf
	}
	switch {
	case e.Action == "output":
		buf.WriteString(e.Output)
	case e.Action == "run" && !sub:
		l.timings = append(l.timings, &timing{Package: e.Package, Test: top, Began: e.Time.Sub(l.start)})
	case (e.Action == "pass" || e.Action == "fail" || e.Action == "skip") && !sub:
		if i := slices.IndexFunc(l.timings, func(t *timing) bool { return t.Package == e.Package && t.Test == top }); i >= 0 {
			l.timings[i].Elapsed = time.Duration(e.Elapsed * float64(time.Second))
			l.timings[i].Action = e.Action
		}
		if e.Action == "fail" {
			l.out.Write(buf.Bytes())
		}
		delete(l.pending, key)
	}
}

// finish writes the output of tests that never ended (the binary died or
// timed out): it is the only word of what they were doing.
func (l *jsonLog) finish() {
	keys := make([]string, 0, len(l.pending))
	for k := range l.pending {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if buf := l.pending[k]; buf.Len() > 0 {
			fmt.Fprintf(&l.out, "(%s did not end; its output:)\n", k)
			l.out.Write(buf.Bytes())
		}
	}
}

// summary lists the n slowest top-level tests, one a line, with when each
// began: where a suite's minutes went.
func (l *jsonLog) summary(name string, n int) string {
	ts := slices.Clone(l.timings)
	slices.SortFunc(ts, func(a, b *timing) int { return int(b.Elapsed - a.Elapsed) })
	if len(ts) == 0 {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "testrun: %s: %d tests, the slowest first (began at, took):\n", name, len(ts))
	for i, t := range ts {
		if i == n {
			fmt.Fprintf(&b, "testrun:   … and %d more\n", len(ts)-n)
			break
		}
		result := t.Action
		if result == "" {
			result = "did not end"
		}
		fmt.Fprintf(&b, "testrun:   %5ds %5ds  %s (%s)\n", int(t.Began.Seconds()), int(t.Elapsed.Seconds()), t.Test, result)
	}
	return b.String()
}
