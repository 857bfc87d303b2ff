package harness

import (
	"fmt"
	"net"
	"net/http"
	"sync/atomic"
	"testing"
	"time"
)

// App stands in for the app container beside a registrar run as a process:
// an HTTP server on 127.0.0.1 answering Spring Boot's /actuator/health
// with {"status":"UP"}, or {"status":"DOWN"} and 503 while it is told it is
// unhealthy. (Pods on the real node run tests/testapp instead.)
type App struct {
	// Port is the app's port on 127.0.0.1.
	Port    int
	healthy atomic.Bool
	srv     *http.Server
}

// StartApp starts an app, healthy or not.
func StartApp(healthy bool) (*App, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("app: %w", err)
	}
	a := &App{Port: ln.Addr().(*net.TCPAddr).Port}
	a.healthy.Store(healthy)
	mux := http.NewServeMux()
	mux.HandleFunc("/actuator/health", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if !a.healthy.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte(`{"status":"DOWN"}`))
			return
		}
		_, _ = w.Write([]byte(`{"status":"UP"}`))
	})
	a.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = a.srv.Serve(ln) }()
	return a, nil
}

// AppT starts an app for a test and stops it when the test ends.
func AppT(t testing.TB, healthy bool) *App {
	t.Helper()
	a, err := StartApp(healthy)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Close() })
	return a
}

// SetHealthy changes what /actuator/health answers from now on.
func (a *App) SetHealthy(healthy bool) { a.healthy.Store(healthy) }

// Close stops the app.
func (a *App) Close() error { return a.srv.Close() }
