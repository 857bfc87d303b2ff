package certs_test

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/eurekube/eurekube/certs"
)

func TestBootstrap_WritesACertificateThatTheCABundleVerifiesForLocalHosts(t *testing.T) {
	dir := t.TempDir()
	ca, err := certs.Bootstrap(dir, certs.LocalHosts())
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{certs.CertFile, certs.KeyFile, certs.CAFile} {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			t.Fatalf("%s not written: %v", name, err)
		}
	}
	caFile, err := os.ReadFile(filepath.Join(dir, certs.CAFile))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(caFile, ca.PEM) {
		t.Fatal("ca.crt differs from the returned CA bundle")
	}
	for _, host := range []string{"127.0.0.1", "localhost"} {
		if err := handshake(t, dir, ca.PEM, host); err != nil {
			t.Errorf("a client trusting the CA bundle cannot reach %s: %v", host, err)
		}
	}
	if err := handshake(t, dir, ca.PEM, "example.com"); err == nil {
		t.Error("the certificate is valid for example.com, a host it was not issued for")
	}
}

func TestRotate_ReplacesTheServingCertificateUnderTheSameCA(t *testing.T) {
	dir := t.TempDir()
	ca, err := certs.Bootstrap(dir, certs.LocalHosts())
	if err != nil {
		t.Fatal(err)
	}
	before, err := os.ReadFile(filepath.Join(dir, certs.CertFile))
	if err != nil {
		t.Fatal(err)
	}
	rotated, err := ca.Rotate(dir, certs.LocalHosts())
	if err != nil {
		t.Fatal(err)
	}
	after, err := os.ReadFile(filepath.Join(dir, certs.CertFile))
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(before, after) {
		t.Fatal("tls.crt unchanged after Rotate")
	}
	if !bytes.Equal(after, rotated.CertPEM) {
		t.Fatal("tls.crt is not the certificate Rotate returned")
	}
	if err := handshake(t, dir, ca.PEM, "127.0.0.1"); err != nil {
		t.Fatalf("the old CA bundle does not verify the rotated certificate: %v", err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 3 {
		t.Errorf("want only tls.crt, tls.key and ca.crt in the directory, got %d entries", len(entries))
	}
}

func TestIssue_RefusesACertificateWithoutHosts(t *testing.T) {
	ca, err := certs.NewCA("test", 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ca.Issue(certs.ServingOptions{}); err == nil {
		t.Fatal("issued a serving certificate for no host")
	}
}

func TestNewCA_IsACertificateAuthority(t *testing.T) {
	ca, err := certs.NewCA("test", 0)
	if err != nil {
		t.Fatal(err)
	}
	if !ca.Cert.IsCA || ca.Cert.KeyUsage&x509.KeyUsageCertSign == 0 {
		t.Fatalf("CA certificate cannot sign: isCA=%v keyUsage=%v", ca.Cert.IsCA, ca.Cert.KeyUsage)
	}
	s, err := ca.Issue(certs.ServingOptions{DNSNames: []string{"eurekube-webhook.eurekube-system.svc"}})
	if err != nil {
		t.Fatal(err)
	}
	if s.Cert.IsCA {
		t.Error("serving certificate is a CA")
	}
	if len(s.Cert.ExtKeyUsage) != 1 || s.Cert.ExtKeyUsage[0] != x509.ExtKeyUsageServerAuth {
		t.Errorf("serving certificate ext key usage = %v, want server auth", s.Cert.ExtKeyUsage)
	}
}

// handshake serves dir's certificate on a loopback port and connects to it
// as serverName with caPEM as the only root.
func handshake(t *testing.T, dir string, caPEM []byte, serverName string) error {
	t.Helper()
	cert, err := tls.LoadX509KeyPair(filepath.Join(dir, certs.CertFile), filepath.Join(dir, certs.KeyFile))
	if err != nil {
		t.Fatal(err)
	}
	l, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{cert}})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		c, err := l.Accept()
		if err != nil {
			return
		}
		_ = c.(*tls.Conn).Handshake()
		c.Close()
	}()
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(caPEM)
	c, err := tls.Dial("tcp", l.Addr().String(), &tls.Config{RootCAs: roots, ServerName: serverName})
	if err != nil {
		return err
	}
	return c.Close()
}

func TestStoredCertificates_ReadBackAndNeverOutliveTheirCA(t *testing.T) {
	ca, err := certs.NewCA("test", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	keyPEM, err := ca.KeyPEM()
	if err != nil {
		t.Fatal(err)
	}
	loaded, err := certs.LoadCA(ca.PEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	s, err := loaded.Issue(certs.ServingOptions{DNSNames: []string{"a.b.svc"}, Validity: 48 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if s.Cert.CheckSignatureFrom(ca.Cert) != nil {
		t.Fatal("the CA read back signs with another key")
	}
	if s.Cert.NotAfter.After(ca.Cert.NotAfter) {
		t.Fatalf("serving certificate valid until %s, after its CA %s", s.Cert.NotAfter, ca.Cert.NotAfter)
	}
	if _, err := certs.LoadServing(s.CertPEM, s.KeyPEM); err != nil {
		t.Fatal(err)
	}
	if _, err := certs.LoadServing(s.CertPEM, keyPEM); err == nil {
		t.Fatal("a serving certificate was read back with another key")
	}
	other, err := certs.NewCA("other", 0)
	if err != nil {
		t.Fatal(err)
	}
	bundle := certs.EncodeBundle(ca.Cert, other.Cert)
	if !certs.BundleHolds(bundle, ca.Cert) || !certs.BundleHolds(bundle, other.Cert) || certs.BundleHolds(ca.PEM, other.Cert) {
		t.Fatal("BundleHolds is wrong")
	}
	if want := ca.Cert.NotAfter.Add(-20 * time.Minute); !certs.RenewAt(ca.Cert).Equal(want) {
		t.Fatalf("RenewAt = %s, want a third of the validity before expiry, %s", certs.RenewAt(ca.Cert), want)
	}
}
