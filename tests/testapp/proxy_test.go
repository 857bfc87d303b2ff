package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// The proxy forwards to the app and marks the answer; after SIGTERM it
// keeps answering, closing each connection, for its drain, then exits and
// refuses.
func TestProxy_ForwardsAndExitsItsDrainAfterSIGTERM(t *testing.T) {
	app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, "pod-a"+r.URL.Path)
	}))
	defer app.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	const drain = 5 * time.Second
	terminated, terminate := context.WithCancel(context.Background())
	defer terminate()
	exited := make(chan error, 1)
	go func() { exited <- proxy(terminated, ln, strings.TrimPrefix(app.URL, "http://"), drain) }()
	url := "http://" + ln.Addr().String() + "/ready"
	get := func() (*http.Response, string, error) {
		resp, err := http.Get(url)
		if err != nil {
			return nil, "", err
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		return resp, string(body), err
	}

	resp, body, err := get()
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || body != "pod-a/ready\n" || resp.Header.Get("Via") != Via {
		t.Fatalf("through the proxy: %s, body %q, Via %q; want 200, the app's answer and Via %q", resp.Status, body, resp.Header.Get("Via"), Via)
	}

	terminate()
	at := time.Now()
	// The proxy notices the signal a moment later (a busy machine makes it
	// long): until then it answers as before. Every answer is the app's;
	// within the drain one comes on a connection that closes.
	for {
		resp, body, err = get()
		if err != nil {
			t.Fatalf("while draining: %v", err)
		}
		if body != "pod-a/ready\n" {
			t.Fatalf("while draining: body %q, want the app's answer", body)
		}
		if resp.Close {
			break
		}
		if time.Since(at) > drain/2 {
			t.Fatalf("%s after SIGTERM the proxy still keeps connections open; want it to close them while it drains", time.Since(at).Round(time.Millisecond))
		}
		time.Sleep(10 * time.Millisecond)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(time.Minute):
		t.Fatalf("still running a minute after SIGTERM, want it gone %s after", drain)
	}
	if after := time.Since(at); after < drain {
		t.Errorf("exited %s after SIGTERM, before its %s drain ended", after, drain)
	}
	if _, _, err := get(); err == nil {
		t.Error("answered after it exited")
	}
}
