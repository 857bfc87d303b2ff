package harness

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/eurekube/eurekube/certs"
)

// App stands in for the app container beside a registrar run as a process:
// an HTTP server on 127.0.0.1 answering Spring Boot's /actuator/health
// with {"status":"UP"}, or {"status":"DOWN"} and 503 while it is told it is
// unhealthy, and GET / with its name, as tests/testapp answers its pod
// name. With AppOptions.TLS it also serves HTTPS on a second port, as an app
// with a secure port does. (Pods on the real node run tests/testapp
// instead.)
type App struct {
	// Port is the app's plain HTTP port on 127.0.0.1.
	Port int
	// SecurePort is its HTTPS port on 127.0.0.1; 0 without AppOptions.TLS.
	SecurePort int
	healthy    atomic.Bool
	servers    []*http.Server
}

// AppOptions configure StartAppWith.
type AppOptions struct {
	Healthy bool
	// Name is what GET / answers on the plain port.
	Name string
	// TLS, when set, adds the HTTPS listener.
	TLS *AppTLS
}

// AppTLS is the app's HTTPS listener: a certificate for IP 127.0.0.1 that
// CA issues, and the name GET / answers there, so a caller's counts tell
// which listener answered.
type AppTLS struct {
	CA   *certs.CA
	Name string
}

// StartApp starts an app, healthy or not.
func StartApp(healthy bool) (*App, error) {
	return StartAppWith(AppOptions{Healthy: healthy})
}

// StartAppWith starts an app as o says.
func StartAppWith(o AppOptions) (*App, error) {
	a := &App{}
	a.healthy.Store(o.Healthy)
	var err error
	if a.Port, err = a.serve(o.Name, nil); err != nil {
		return nil, err
	}
	if o.TLS != nil {
		cfg, err := o.TLS.serverConfig()
		if err == nil {
			a.SecurePort, err = a.serve(o.TLS.Name, cfg)
		}
		if err != nil {
			_ = a.Close()
			return nil, err
		}
	}
	return a, nil
}

// serve starts one listener answering name on GET /, over TLS when cfg is
// set, and returns its port.
func (a *App) serve(name string, cfg *tls.Config) (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("app: %w", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		_, _ = w.Write([]byte(name + "\n"))
	})
	mux.HandleFunc("/actuator/health", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if !a.healthy.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte(`{"status":"DOWN"}`))
			return
		}
		_, _ = w.Write([]byte(`{"status":"UP"}`))
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	a.servers = append(a.servers, srv)
	if cfg != nil {
		ln = tls.NewListener(ln, cfg)
	}
	go func() { _ = srv.Serve(ln) }()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// serverConfig serves a certificate CA issues for 127.0.0.1, the address
// the app listens on and its registrar registers.
func (t *AppTLS) serverConfig() (*tls.Config, error) {
	if t.CA == nil {
		return nil, errors.New("app: AppTLS needs a CA")
	}
	serving, err := t.CA.Issue(certs.ServingOptions{IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}})
	if err != nil {
		return nil, fmt.Errorf("app certificate: %w", err)
	}
	pair, err := tls.X509KeyPair(serving.CertPEM, serving.KeyPEM)
	if err != nil {
		return nil, fmt.Errorf("app certificate: %w", err)
	}
	return &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}, nil
}

// AppT starts an app for a test and stops it when the test ends.
func AppT(t testing.TB, healthy bool) *App {
	t.Helper()
	return AppWithT(t, AppOptions{Healthy: healthy})
}

// AppWithT starts an app as o says for a test and stops it when the test
// ends.
func AppWithT(t testing.TB, o AppOptions) *App {
	t.Helper()
	a, err := StartAppWith(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Close() })
	return a
}

// SetHealthy changes what /actuator/health answers from now on.
func (a *App) SetHealthy(healthy bool) { a.healthy.Store(healthy) }

// Close stops the app.
func (a *App) Close() error {
	var errs []error
	for _, srv := range a.servers {
		errs = append(errs, srv.Close())
	}
	return errors.Join(errs...)
}
