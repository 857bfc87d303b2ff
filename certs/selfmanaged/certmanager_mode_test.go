package selfmanaged_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/eurekube/eurekube/certs"
	"github.com/eurekube/eurekube/manager"
	"github.com/eurekube/eurekube/tests/harness"
)

// In cert-manager mode (the default) the manager serves the files of
// --cert-dir, reloads them when they change, and exports the served
// certificate's expiry like in self-managed mode.
func TestCertManagerMode_ServesTheRenewedFilesAndExportsTheirExpiry(t *testing.T) {
	harness.SkipWhenShort(t, "a kube-apiserver and etcd")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir := filepath.Join(t.TempDir(), "certs")
	ca, err := certs.Bootstrap(dir, certs.LocalHosts())
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, namespace: "cert-manager-mode", ctx: ctx}
	r := e.startWith(cp.Config, manager.CertificateLifetimes{}, []string{"--registrar-image=eurekube/registrar:test", "--cert-dir=" + dir})

	renewed, err := ca.Rotate(dir, certs.LocalHosts())
	if err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, deadline, "the manager serves the renewed certificate and exports its expiry", func() error {
		roots := x509.NewCertPool()
		roots.AppendCertsFromPEM(ca.PEM)
		conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(r.webhookPort)),
			&tls.Config{RootCAs: roots, ServerName: "127.0.0.1"})
		if err != nil {
			return err
		}
		served := conn.ConnectionState().PeerCertificates[0]
		conn.Close()
		if !served.Equal(renewed.Cert) {
			return errors.New("still serving the first certificate")
		}
		samples, err := harness.Metrics(ctx, "http://127.0.0.1:"+strconv.Itoa(r.metricsPort)+"/metrics")
		if err != nil {
			return err
		}
		if got := samples["eurekube_webhook_certificate_expiry_timestamp_seconds"]; got != float64(renewed.Cert.NotAfter.Unix()) {
			return fmt.Errorf("eurekube_webhook_certificate_expiry_timestamp_seconds = %v, want %d", got, renewed.Cert.NotAfter.Unix())
		}
		return nil
	})
}
