package certs

import (
	"crypto"
	"crypto/x509"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"time"

	cmapi "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	"github.com/cert-manager/cert-manager/pkg/util/pki"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// File names in a certificate directory: the keys of a cert-manager Secret,
// which are also controller-runtime's webhook server defaults.
const (
	CertFile = "tls.crt"
	KeyFile  = "tls.key"
	CAFile   = "ca.crt"
	// CAKeyFile holds the CA's private key where the manager manages its
	// own certificates (a key cert-manager does not write).
	CAKeyFile = "ca.key"
)

// Default validities. Local certificates are short-lived on purpose: a
// sandbox is restarted long before they expire.
const (
	DefaultCAValidity      = 365 * 24 * time.Hour
	DefaultServingValidity = 30 * 24 * time.Hour
)

// CA is a self-signed certificate authority that signs serving certificates.
type CA struct {
	// Cert is the CA certificate.
	Cert *x509.Certificate
	// PEM is Cert PEM-encoded: the caBundle of a webhook configuration.
	PEM []byte
	key crypto.Signer
}

// ServingOptions name the hosts a serving certificate is valid for.
type ServingOptions struct {
	// DNSNames such as localhost or eurekube-webhook.eurekube-system.svc.
	DNSNames []string
	// IPAddresses such as 127.0.0.1.
	IPAddresses []net.IP
	// Validity defaults to DefaultServingValidity.
	Validity time.Duration
}

// Serving is a serving certificate and its key, PEM-encoded.
type Serving struct {
	// Cert is the parsed certificate.
	Cert *x509.Certificate
	// CertPEM and KeyPEM are what tls.crt and tls.key hold.
	CertPEM, KeyPEM []byte
}

// NewCA generates an ECDSA P-256 CA valid for validity (DefaultCAValidity
// when zero).
func NewCA(commonName string, validity time.Duration) (*CA, error) {
	if validity <= 0 {
		validity = DefaultCAValidity
	}
	key, err := pki.GenerateECPrivateKey(pki.ECCurve256)
	if err != nil {
		return nil, fmt.Errorf("generate CA key: %w", err)
	}
	tmpl, err := template(cmapi.CertificateSpec{
		CommonName: commonName,
		IsCA:       true,
		Duration:   &metav1.Duration{Duration: validity},
		Usages:     []cmapi.KeyUsage{cmapi.UsageCertSign, cmapi.UsageDigitalSignature},
	})
	if err != nil {
		return nil, fmt.Errorf("CA %q: %w", commonName, err)
	}
	certPEM, cert, err := pki.SignCertificate(tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, fmt.Errorf("self-sign CA %q: %w", commonName, err)
	}
	return &CA{Cert: cert, PEM: certPEM, key: key}, nil
}

// Issue signs a new serving certificate, with a new key, for the hosts of o.
func (ca *CA) Issue(o ServingOptions) (*Serving, error) {
	if len(o.DNSNames) == 0 && len(o.IPAddresses) == 0 {
		return nil, fmt.Errorf("serving certificate: no DNS name or IP address to issue it for")
	}
	if o.Validity <= 0 {
		o.Validity = DefaultServingValidity
	}
	// A certificate never outlives its CA: the one it would present after
	// the CA expired would not verify anyway, and renewing it in time
	// (RenewAt) would then be out of step with the CA's rotation.
	if untilCAExpiry := time.Until(ca.Cert.NotAfter); untilCAExpiry < o.Validity {
		o.Validity = untilCAExpiry
	}
	if o.Validity <= 0 {
		return nil, fmt.Errorf("serving certificate: CA %q expired at %s", ca.Cert.Subject.CommonName, ca.Cert.NotAfter.UTC().Format(time.RFC3339))
	}
	key, err := pki.GenerateECPrivateKey(pki.ECCurve256)
	if err != nil {
		return nil, fmt.Errorf("generate serving key: %w", err)
	}
	spec := cmapi.CertificateSpec{
		DNSNames:    o.DNSNames,
		IPAddresses: pki.IPAddressesToString(o.IPAddresses),
		Duration:    &metav1.Duration{Duration: o.Validity},
		Usages:      []cmapi.KeyUsage{cmapi.UsageServerAuth, cmapi.UsageDigitalSignature},
	}
	if len(o.DNSNames) > 0 {
		spec.CommonName = o.DNSNames[0]
	}
	tmpl, err := template(spec)
	if err != nil {
		return nil, fmt.Errorf("serving certificate for %v %v: %w", o.DNSNames, o.IPAddresses, err)
	}
	certPEM, cert, err := pki.SignCertificate(tmpl, ca.Cert, key.Public(), ca.key)
	if err != nil {
		return nil, fmt.Errorf("sign serving certificate for %v %v: %w", o.DNSNames, o.IPAddresses, err)
	}
	keyPEM, err := pki.EncodePrivateKey(key, cmapi.PKCS8)
	if err != nil {
		return nil, fmt.Errorf("encode serving key: %w", err)
	}
	return &Serving{Cert: cert, CertPEM: certPEM, KeyPEM: keyPEM}, nil
}

// template builds an x509 template from a cert-manager Certificate spec, the
// way cert-manager's own issuers do, so local certificates have the same
// shape as the ones issued in clusters.
func template(spec cmapi.CertificateSpec) (*x509.Certificate, error) {
	spec.PrivateKey = &cmapi.CertificatePrivateKey{Algorithm: cmapi.ECDSAKeyAlgorithm, Size: pki.ECCurve256}
	return pki.CertificateTemplateFromCertificate(&cmapi.Certificate{Spec: spec})
}

// Write stores s and the CA bundle in dir as tls.crt, tls.key and ca.crt.
// Each file is replaced atomically (written aside, then renamed), key
// first, so a reader never sees a half-written file; a watcher that reads
// between the two renames sees a key that does not match the certificate,
// fails that one read and succeeds on the event of the second rename.
func (s *Serving) Write(dir string, caPEM []byte) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("certificate directory %s: %w", dir, err)
	}
	for _, f := range []struct {
		name string
		data []byte
	}{{CAFile, caPEM}, {KeyFile, s.KeyPEM}, {CertFile, s.CertPEM}} {
		if err := writeAtomic(filepath.Join(dir, f.name), f.data); err != nil {
			return err
		}
	}
	return nil
}

func writeAtomic(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	defer os.Remove(tmp.Name()) // a no-op once renamed
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// Bootstrap creates a CA and a serving certificate for o, writes them into
// dir and returns the CA, whose PEM is the caBundle to install. Call
// ca.Rotate(dir, o) later to replace the serving certificate.
func Bootstrap(dir string, o ServingOptions) (*CA, error) {
	ca, err := NewCA("eurekube-webhook-ca", 0)
	if err != nil {
		return nil, err
	}
	if _, err := ca.Rotate(dir, o); err != nil {
		return nil, err
	}
	return ca, nil
}

// Rotate issues a new serving certificate (new key, same CA) for o and
// writes it into dir, replacing the previous one.
func (ca *CA) Rotate(dir string, o ServingOptions) (*Serving, error) {
	s, err := ca.Issue(o)
	if err != nil {
		return nil, err
	}
	if err := s.Write(dir, ca.PEM); err != nil {
		return nil, err
	}
	return s, nil
}

// LocalHosts are the names a webhook server on this machine is reached by:
// localhost and 127.0.0.1.
func LocalHosts() ServingOptions {
	return ServingOptions{DNSNames: []string{"localhost"}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}}
}
