package manager

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/eurekube/eurekube/certs"
	"github.com/eurekube/eurekube/tests/harness"
)

// With --tls-cert-dir the gateway serves HTTPS only, with the mounted
// certificate and the one that replaces it; on shutdown it reports not
// ready at once and serves on for --shutdown-delay.
func TestGatewayServer_ServesTLSFollowsTheCertificateAndDrains(t *testing.T) {
	dir := t.TempDir()
	ca, err := certs.Bootstrap(dir, certs.LocalHosts())
	if err != nil {
		t.Fatal(err)
	}
	port, err := harness.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	log := logrus.New()
	log.SetOutput(io.Discard)
	s := &gatewayServer{
		cfg:     GatewayConfig{ListenAddr: fmt.Sprintf("127.0.0.1:%d", port), TLSCertDir: dir, ShutdownDelay: 5 * time.Second},
		handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "eureka") }),
		log:     logrus.NewEntry(log),
	}
	if err := s.ready(nil); err == nil {
		t.Fatal("ready before serving")
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Start(ctx) }()
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	https := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
	url := fmt.Sprintf("https://127.0.0.1:%d/eureka/apps", port)
	get := func() error {
		resp, err := https.Get(url)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("HTTP %d", resp.StatusCode)
		}
		return nil
	}
	harness.Eventually(t, 30*time.Second, "the gateway answering over HTTPS", get)
	if err := s.ready(nil); err != nil {
		t.Fatalf("not ready while serving: %v", err)
	}
	plain := &http.Client{Timeout: 5 * time.Second}
	if resp, err := plain.Get(fmt.Sprintf("http://127.0.0.1:%d/eureka/apps", port)); err == nil && resp.StatusCode == http.StatusOK {
		resp.Body.Close()
		t.Fatal("the gateway answered plain HTTP with --tls-cert-dir")
	}
	// A new certificate in the directory is served from then on.
	next, err := ca.Rotate(dir, certs.LocalHosts())
	if err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, 30*time.Second, "the rotated certificate served", func() error {
		conn, err := tls.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port), &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12})
		if err != nil {
			return err
		}
		defer conn.Close()
		if !conn.ConnectionState().PeerCertificates[0].Equal(next.Cert) {
			return errors.New("still the first certificate")
		}
		return nil
	})
	cancel()
	harness.Eventually(t, 5*time.Second, "not ready once stopping", func() error {
		if s.ready(nil) == nil {
			return errors.New("still ready")
		}
		return nil
	})
	if err := get(); err != nil {
		t.Fatalf("stopped serving within its shutdown delay: %v", err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("shutdown: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("did not stop")
	}
}
