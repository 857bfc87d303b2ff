package bench

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"time"
)

// Kinds of Eureka requests, as the REST API names them.
const (
	KindRegister     = "register"      // POST /apps/{APP}
	KindHeartbeat    = "heartbeat"     // PUT /apps/{APP}/{ID}
	KindStatus       = "status"        // PUT /apps/{APP}/{ID}/status (the sticky override)
	KindCancel       = "cancel"        // DELETE /apps/{APP}/{ID}
	KindFetchFull    = "fetch-full"    // GET /apps
	KindFetchDelta   = "fetch-delta"   // GET /apps/delta
	KindReadApp      = "read-app"      // GET /apps/{APP}
	KindReadInstance = "read-instance" // GET /apps/{APP}/{ID}
	KindOther        = "other"
)

// Counts are requests by kind.
type Counts map[string]int64

// Total is the number of requests of every kind.
func (c Counts) Total() int64 {
	var n int64
	for _, v := range c {
		n += v
	}
	return n
}

// Sub is what happened between an earlier reading and this one.
func (c Counts) Sub(before Counts) Counts {
	d := Counts{}
	for k, v := range c {
		if n := v - before[k]; n != 0 {
			d[k] = n
		}
	}
	return d
}

// CountingProxy is a reverse proxy in front of a real Eureka server that
// counts every request by kind, so that a client's traffic is measured on
// the wire rather than taken from the client's own metrics.
type CountingProxy struct {
	ln  net.Listener
	srv *http.Server

	mu     sync.Mutex
	counts Counts
	bytes  int64
}

// StartCountingProxy listens on a free loopback port and forwards to the
// server at target (host:port).
func StartCountingProxy(target string) (*CountingProxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("counting proxy to %s: %w", target, err)
	}
	p := &CountingProxy{ln: ln, counts: Counts{}}
	rp := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: "http", Host: target})
	rp.Transport = &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
		MaxIdleConnsPerHost: 64,
		IdleConnTimeout:     90 * time.Second,
	}
	rp.ErrorHandler = func(w http.ResponseWriter, r *http.Request, err error) {
		// As the default handler does, without a line for each request
		// whose client gave up (polling clients stopped mid-request).
		if r.Context().Err() == nil {
			log.Printf("counting proxy: %v", err)
		}
		w.WriteHeader(http.StatusBadGateway)
	}
	p.srv = &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			p.count(Classify(r.Method, r.URL.Path))
			cw := &countingWriter{ResponseWriter: w}
			rp.ServeHTTP(cw, r)
			p.mu.Lock()
			p.bytes += cw.n
			p.mu.Unlock()
		}),
		ReadHeaderTimeout: 10 * time.Second,
	}
	go func() { _ = p.srv.Serve(ln) }()
	return p, nil
}

// URL is the Eureka service URL through the proxy.
func (p *CountingProxy) URL() string { return "http://" + p.ln.Addr().String() + "/eureka" }

// Counts returns a copy of the counts so far.
func (p *CountingProxy) Counts() Counts {
	p.mu.Lock()
	defer p.mu.Unlock()
	c := make(Counts, len(p.counts))
	for k, v := range p.counts {
		c[k] = v
	}
	return c
}

// ResponseBytes is the size of every response body so far.
func (p *CountingProxy) ResponseBytes() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.bytes
}

// countingWriter counts the body bytes written through it.
type countingWriter struct {
	http.ResponseWriter
	n int64
}

func (w *countingWriter) Write(b []byte) (int, error) {
	n, err := w.ResponseWriter.Write(b)
	w.n += int64(n)
	return n, err
}

// Close stops the proxy.
func (p *CountingProxy) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := p.srv.Shutdown(ctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("counting proxy: %w", err)
	}
	return nil
}

func (p *CountingProxy) count(kind string) {
	p.mu.Lock()
	p.counts[kind]++
	p.mu.Unlock()
}

// Classify names the kind of a Eureka REST request from its method and
// path (anything up to and including "/apps" is the service URL's prefix).
func Classify(method, path string) string {
	i := strings.Index(path, "/apps")
	if i < 0 {
		return KindOther
	}
	rest := strings.Trim(path[i+len("/apps"):], "/")
	var parts []string
	if rest != "" {
		parts = strings.Split(rest, "/")
	}
	switch {
	case method == http.MethodGet && len(parts) == 0:
		return KindFetchFull
	case method == http.MethodGet && len(parts) == 1 && parts[0] == "delta":
		return KindFetchDelta
	case method == http.MethodGet && len(parts) == 1:
		return KindReadApp
	case method == http.MethodGet && len(parts) == 2:
		return KindReadInstance
	case method == http.MethodPost && len(parts) == 1:
		return KindRegister
	case method == http.MethodPut && len(parts) == 2:
		return KindHeartbeat
	case method == http.MethodPut && len(parts) == 3 && parts[2] == "status":
		return KindStatus
	case method == http.MethodDelete && len(parts) == 2:
		return KindCancel
	}
	return KindOther
}
