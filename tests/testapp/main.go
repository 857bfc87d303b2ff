// Command testapp is the app the end-to-end suites run in every app
// container: an HTTP server on $LISTEN_ADDR (default :8080) that answers
// every readiness path with 200 and "/" with its pod name ($POD_NAME), so a
// caller can see which pod served it. It logs each request (each
// connection, over TCP) on its stdout once answered, with when it began and
// how long it took (requestlog.go). On SIGTERM it stops accepting new
// connections, answers the requests in flight and exits, as a well-behaved
// app does.
//
// With $MANAGEMENT_ADDR it also serves a Spring Boot Actuator there, as
// Spring Boot does on management.server.port: /actuator/health (and its
// readiness and liveness groups) with details, and /actuator/info, in the
// actuator's own media type, which Spring Boot Admin reads.
//
// With $LISTEN_PROTOCOL=tcp it speaks no HTTP at all: every connection to
// $LISTEN_ADDR receives the pod name and a newline, and is closed (a
// stand-in for a gRPC server or any other TCP service). $LISTEN_AFTER (a Go
// duration) delays its listening, as an app that takes that long to start.
//
// `testapp hook URL` is a preStop command for images without a shell: it
// sends GET URL with the pod's name in the X-Pod header and fails unless the
// answer is 2xx, so a test can see that, and when, a pod's own hook ran.
//
// `testapp proxy -listen ADDR -to HOST:PORT -exit-after-sigterm D` is a
// service mesh's proxy in front of the app (proxy.go).
//
// `testapp call -url URL` calls URL (a Service by its DNS name) every
// 100 ms from inside a pod and serves its counts on :8080/stats (call.go).
package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"
)

func main() {
	pod := os.Getenv("POD_NAME")
	if len(os.Args) == 3 && os.Args[1] == "hook" {
		if err := hook(os.Args[2], pod); err != nil {
			fmt.Fprintln(os.Stderr, "testapp hook:", err)
			os.Exit(1)
		}
		return
	}
	if len(os.Args) > 1 && os.Args[1] == "call" {
		if err := runCaller(os.Args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, "testapp call:", err)
			os.Exit(1)
		}
		return
	}
	if len(os.Args) > 1 && os.Args[1] == "proxy" {
		if err := runProxy(os.Args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, "testapp proxy:", err)
			os.Exit(1)
		}
		return
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	addr := cmp.Or(os.Getenv("LISTEN_ADDR"), ":8080")
	errs := make(chan error, 2)
	servers := 1
	if os.Getenv("LISTEN_PROTOCOL") == "tcp" {
		go func() { errs <- serveTCP(ctx, addr, pod) }()
	} else {
		mux := http.NewServeMux()
		mux.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, pod) })
		go func() { errs <- serveHTTP(ctx, addr, logged(mux)) }()
	}
	if mgmt := os.Getenv("MANAGEMENT_ADDR"); mgmt != "" {
		servers++
		go func() { errs <- serveHTTP(ctx, mgmt, logged(actuator(pod))) }()
	}
	// Every server has drained before the process exits: an exit cuts
	// the connections of the requests still in flight.
	for range servers {
		if err := <-errs; err != nil {
			fmt.Fprintln(os.Stderr, "testapp:", err)
			os.Exit(1)
		}
	}
}

// serveHTTP serves h on addr until ctx ends, then shuts down gracefully:
// it returns once the requests in flight are answered (for at most 5 s).
func serveHTTP(ctx context.Context, addr string, h http.Handler) error {
	srv := &http.Server{Addr: addr, Handler: h, ReadHeaderTimeout: 5 * time.Second}
	drained := make(chan struct{})
	go func() {
		defer close(drained)
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdown)
	}()
	if err := srv.ListenAndServe(); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	// ListenAndServe returns as soon as Shutdown begins, before the
	// connections still answering a request are done.
	<-drained
	return nil
}

// serveTCP answers every connection with the pod name until ctx ends.
func serveTCP(ctx context.Context, addr, pod string) error {
	if d, err := time.ParseDuration(os.Getenv("LISTEN_AFTER")); err == nil {
		select {
		case <-time.After(d):
		case <-ctx.Done():
			return nil
		}
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	go func() {
		<-ctx.Done()
		_ = ln.Close()
	}()
	for {
		conn, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		began := time.Now()
		_ = conn.SetWriteDeadline(began.Add(5 * time.Second))
		_, werr := fmt.Fprintln(conn, pod)
		_ = conn.Close()
		fmt.Fprintf(requestLog, "connection began=%s took=%s from=%s error=%v\n",
			began.UTC().Format(time.RFC3339Nano), time.Since(began).Round(time.Microsecond), conn.RemoteAddr(), werr)
	}
}

// actuatorMediaType is what Spring Boot's actuator answers with; Spring
// Boot Admin reads plain application/json as Spring Boot 1's shape.
const actuatorMediaType = "application/vnd.spring-boot.actuator.v3+json"

// actuator serves the health and info endpoints of a Spring Boot app.
func actuator(pod string) http.Handler {
	health := map[string]any{"status": "UP", "components": map[string]any{
		"ping": map[string]any{"status": "UP"},
		"pod":  map[string]any{"status": "UP", "details": map[string]any{"name": pod}},
	}}
	info := map[string]any{"app": map[string]any{"name": "testapp", "pod": pod}}
	answer := func(body any) http.HandlerFunc {
		return func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", actuatorMediaType)
			_ = json.NewEncoder(w).Encode(body)
		}
	}
	mux := http.NewServeMux()
	mux.Handle("/actuator/health", answer(health))
	mux.Handle("/actuator/health/", answer(map[string]any{"status": "UP"}))
	mux.Handle("/actuator/info", answer(info))
	return mux
}

func hook(url, pod string) error {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	req.Header.Set("X-Pod", pod)
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return nil
}
