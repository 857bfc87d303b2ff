package admission

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"strconv"
	"testing"
	"time"

	eurekubev1alpha1 "github.com/eurekube/eurekube/api/v1alpha1"
	"github.com/eurekube/eurekube/certs"
	"github.com/eurekube/eurekube/internal/builders"
	"github.com/eurekube/eurekube/tests/harness"
)

func TestWebhook_ServesARotatedCertificateWithoutARestart(t *testing.T) {
	requireInjection(t)
	before, err := servedCertificate()
	if err != nil {
		t.Fatal(err)
	}
	rotated, err := suite.ca.Rotate(suite.certDir, certs.LocalHosts())
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(before.Raw, rotated.Cert.Raw) {
		t.Fatal("rotation produced the same certificate")
	}
	harness.Eventually(t, 30*time.Second, "the webhook serves the rotated certificate", func() error {
		served, err := servedCertificate()
		if err != nil {
			return err
		}
		if !bytes.Equal(served.Raw, rotated.Cert.Raw) {
			return errors.New("still serving the previous certificate (serial " + served.SerialNumber.String() + ")")
		}
		return nil
	})
	select {
	case <-suite.managerDone:
		t.Fatal("the manager stopped")
	default:
	}

	// The API server, which trusts the CA only, keeps calling the webhook.
	ctx := testContext(t)
	ns := optedInNamespace(ctx, t, "rotated")
	createSyncer(t, builders.Syncer(ns, "orders"))
	pod := builders.Pod(ns, "orders", builders.Restricted())
	if err := suite.c.Create(ctx, pod); err != nil {
		t.Fatalf("create a pod after the rotation: %v", err)
	}
	if !eurekubev1alpha1.RunsRegistrar(pod) {
		t.Fatalf("the pod created after the rotation was not injected; containers: %v", containerNames(pod))
	}
}

// servedCertificate is the certificate the webhook server presents to a
// client that trusts the suite's CA, as the API server does.
func servedCertificate() (*x509.Certificate, error) {
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(suite.ca.PEM)
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp",
		net.JoinHostPort("127.0.0.1", strconv.Itoa(suite.webhookPort)),
		&tls.Config{RootCAs: roots, ServerName: "127.0.0.1"})
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0], nil
}
