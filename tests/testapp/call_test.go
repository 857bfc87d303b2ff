package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// The caller counts each answer by who gave it, and a refusal or an error
// status as a failure naming it; /stats serves the counts in the Spring
// client's shape.
func TestCaller_CountsAnswersByWhoAndFailures(t *testing.T) {
	var failing atomic.Bool
	app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if failing.Load() {
			http.Error(w, "no", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "vm-1")
	}))
	defer app.Close()
	c := &caller{byInstance: map[string]int64{}}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		c.run(ctx, &http.Client{Timeout: time.Second, Transport: &http.Transport{DisableKeepAlives: true}}, app.URL, time.Millisecond)
		close(done)
	}()
	read := func() (s struct {
		OK, Failed int64
		LastError  string
		ByInstance map[string]int64
	}) {
		rec := httptest.NewRecorder()
		c.serveStats(rec, httptest.NewRequest(http.MethodGet, "/stats", nil))
		if err := json.Unmarshal(rec.Body.Bytes(), &s); err != nil {
			t.Fatalf("stats %q: %v", rec.Body, err)
		}
		return s
	}
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: not within 10 s: %+v", what, read())
			}
		}
	}
	waitFor("calls answered by vm-1", func() bool { return read().ByInstance["vm-1"] >= 3 })
	failing.Store(true)
	waitFor("failed calls", func() bool { return read().Failed >= 3 })
	stop()
	<-done
	s := read()
	if s.OK != s.ByInstance["vm-1"] || !strings.HasPrefix(s.LastError, "GET "+app.URL+": 503 Service Unavailable (call began ") {
		t.Errorf("stats %+v: want every answer by vm-1 and the 503 as the last error, with when its call began", s)
	}
}
