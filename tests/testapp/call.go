package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"
)

// `testapp call -url URL -listen ADDR -interval D` is a caller that
// discovers through Kubernetes, as a Go, Node or Python pod does: it sends
// GET URL (a Service's DNS name, resolved by the pod's resolver through
// the cluster's DNS, and reached through kube-proxy) every interval, each
// on a new connection, so that every call resolves the name and picks an
// endpoint anew, and serves its counts as JSON on ADDR/stats, in the shape
// of tests/spring-client's: ok, failed, lastError and byInstance (calls
// answered, by the body, which the test app and the Spring VMs set to
// their name).
func runCaller(args []string) error {
	fs := flag.NewFlagSet("call", flag.ContinueOnError)
	url := fs.String("url", "", "the URL to call, such as http://orders.shop.svc/")
	listen := fs.String("listen", ":8080", "where /stats is served")
	interval := fs.Duration("interval", 100*time.Millisecond, "time between two calls")
	timeout := fs.Duration("timeout", 2*time.Second, "bound of one call")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *url == "" {
		return errors.New("-url is required")
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	c := &caller{byInstance: map[string]int64{}}
	client := &http.Client{Timeout: *timeout, Transport: &http.Transport{DisableKeepAlives: true}}
	go c.run(ctx, client, *url, *interval)
	mux := http.NewServeMux()
	mux.HandleFunc("/stats", c.serveStats)
	return serveHTTP(ctx, *listen, mux)
}

// run calls url every interval until ctx ends.
func (c *caller) run(ctx context.Context, client *http.Client, url string, interval time.Duration) {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		began := time.Now()
		who, err := call(ctx, client, url)
		if ctx.Err() != nil {
			return // stopping: a call cut short is no failure
		}
		c.record(began, time.Since(began), who, err)
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// call sends one GET and returns who answered: the body, trimmed.
func call(ctx context.Context, client *http.Client, url string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	resp, err := client.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1024))
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return strings.TrimSpace(string(body)), nil
}

// caller counts the calls; its JSON is tests/spring-client's /stats.
type caller struct {
	mu         sync.Mutex
	ok, failed int64
	lastError  string
	byInstance map[string]int64
}

// record counts a call that began at began and took took; a failed one is
// logged on stderr with both, as the Spring client logs its own.
func (c *caller) record(began time.Time, took time.Duration, who string, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil {
		c.failed++
		c.lastError = fmt.Sprintf("%v (call began %s, failed after %s)", err, began.UTC().Format(time.RFC3339Nano), took.Round(time.Millisecond))
		fmt.Fprintf(os.Stderr, "call failed began=%s took=%s error=%v\n", began.UTC().Format(time.RFC3339Nano), took.Round(time.Microsecond), err)
		return
	}
	c.ok++
	c.byInstance[who]++
}

// serveStats answers the counts as JSON.
func (c *caller) serveStats(w http.ResponseWriter, _ *http.Request) {
	c.mu.Lock()
	body, err := json.Marshal(map[string]any{"ok": c.ok, "failed": c.failed, "lastError": c.lastError, "byInstance": c.byInstance})
	c.mu.Unlock()
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(body)
}
