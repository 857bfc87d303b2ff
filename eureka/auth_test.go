package eureka_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/eurekube/eurekube/certs"
	"github.com/eurekube/eurekube/eureka"
)

// passwordServer answers 404 (an unknown instance: the request got through)
// to the current password and 401 to any other.
type passwordServer struct {
	mu       sync.Mutex
	password string
	refused  atomic.Int32
}

func (s *passwordServer) set(p string) { s.mu.Lock(); s.password = p; s.mu.Unlock() }

func (s *passwordServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	want := s.password
	s.mu.Unlock()
	if u, p, ok := r.BasicAuth(); !ok || u != "eureka" || p != want {
		s.refused.Add(1)
		w.Header().Set("WWW-Authenticate", `Basic realm="eureka"`)
		http.Error(w, "bad credentials", http.StatusUnauthorized)
		return
	}
	http.NotFound(w, r)
}

func TestCredentials_RotatedPasswordIsUsedOnTheNextRequestAndRetriedOnceOn401(t *testing.T) {
	srv := &passwordServer{password: "one"}
	ts := httptest.NewServer(srv)
	defer ts.Close()

	var mu sync.Mutex
	source, seen := "one", "one" // source: the files; seen: what a cheap check last noticed
	var reloads atomic.Int32
	c, err := eureka.New(eureka.Options{URLs: []string{ts.URL + "/eureka"}, Credentials: func(reload bool) (eureka.Credentials, error) {
		mu.Lock()
		defer mu.Unlock()
		if reload {
			reloads.Add(1)
			seen = source
		}
		return eureka.Credentials{Username: "eureka", Password: seen}, nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := c.Heartbeat(ctx, "app", "id", time.Time{}); !errors.Is(err, eureka.ErrNotFound) {
		t.Fatalf("heartbeat with the right password: %v, want the server's 404", err)
	}

	// The server takes a new password and the source has it, but the cheap
	// check has not noticed yet: the 401 makes the client read it again and
	// send once more, so the caller never sees the refusal.
	srv.set("two")
	mu.Lock()
	source = "two"
	mu.Unlock()
	if err := c.Heartbeat(ctx, "app", "id", time.Time{}); !errors.Is(err, eureka.ErrNotFound) {
		t.Fatalf("heartbeat after the rotation: %v, want the server's 404 after one retry", err)
	}
	if srv.refused.Load() != 1 || reloads.Load() != 1 {
		t.Fatalf("refused %d requests with %d reloads, want 1 and 1", srv.refused.Load(), reloads.Load())
	}

	// The server moves on but the source does not: one 401, no second send.
	srv.set("three")
	err = c.Heartbeat(ctx, "app", "id", time.Time{})
	if eureka.StatusCode(err) != http.StatusUnauthorized || !errors.Is(err, eureka.ErrRejected) {
		t.Fatalf("heartbeat with a stale password: %v, want HTTP 401", err)
	}
	if srv.refused.Load() != 2 {
		t.Fatalf("refused %d requests, want 2: unchanged credentials are not sent again", srv.refused.Load())
	}
}

func TestCredentials_AnUnreadableSourceIsAnErrorWithoutARequest(t *testing.T) {
	srv := &passwordServer{password: "one"}
	ts := httptest.NewServer(srv)
	defer ts.Close()
	c, err := eureka.New(eureka.Options{URLs: []string{ts.URL + "/eureka"}, Credentials: func(bool) (eureka.Credentials, error) {
		return eureka.Credentials{}, errors.New("open /etc/eurekube/eureka/password: no such file or directory")
	}})
	if err != nil {
		t.Fatal(err)
	}
	err = c.Heartbeat(context.Background(), "app", "id", time.Time{})
	if !errors.Is(err, eureka.ErrInvalid) || !strings.Contains(err.Error(), "/etc/eurekube/eureka/password") {
		t.Fatalf("err = %v, want ErrInvalid naming the file", err)
	}
	if srv.refused.Load() != 0 {
		t.Fatal("a request was sent without credentials")
	}
}

func TestTLS_TrustsOnlyTheGivenCAAndPresentsTheClientCertificate(t *testing.T) {
	ca, err := certs.NewCA("eureka test CA", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	serving, err := ca.Issue(certs.LocalHosts())
	if err != nil {
		t.Fatal(err)
	}
	servingPair, err := tls.X509KeyPair(serving.CertPEM, serving.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	trusted := x509.NewCertPool()
	trusted.AddCert(ca.Cert)
	var presented atomic.Int32
	ts := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		presented.Store(int32(len(r.TLS.PeerCertificates)))
		http.NotFound(w, r)
	}))
	ts.TLS = &tls.Config{Certificates: []tls.Certificate{servingPair}, ClientAuth: tls.RequestClientCert}
	ts.StartTLS()
	defer ts.Close()
	url := ts.URL + "/eureka"
	ctx := context.Background()

	other, err := certs.NewCA("some other CA", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	wrong := x509.NewCertPool()
	wrong.AddCert(other.Cert)
	c, err := eureka.New(eureka.Options{URLs: []string{url}, RootCAs: wrong})
	if err != nil {
		t.Fatal(err)
	}
	err = c.Heartbeat(ctx, "app", "id", time.Time{})
	if !errors.Is(err, eureka.ErrUnavailable) || !strings.Contains(err.Error(), "x509") {
		t.Fatalf("with a CA that did not sign the server's certificate: %v, want an x509 error", err)
	}

	c, err = eureka.New(eureka.Options{URLs: []string{url}, RootCAs: trusted, ClientCertificate: &servingPair})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Heartbeat(ctx, "app", "id", time.Time{}); !errors.Is(err, eureka.ErrNotFound) {
		t.Fatalf("with the server's CA: %v, want the server's 404", err)
	}
	if presented.Load() != 1 {
		t.Fatalf("client presented %d certificates, want 1", presented.Load())
	}
}
