package certs

import (
	"bytes"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"time"

	cmapi "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	"github.com/cert-manager/cert-manager/pkg/util/pki"
)

// KeyPEM is the CA's private key, PEM-encoded (PKCS#8), for storing the CA
// beside its certificate.
func (ca *CA) KeyPEM() ([]byte, error) {
	keyPEM, err := pki.EncodePrivateKey(ca.key, cmapi.PKCS8)
	if err != nil {
		return nil, fmt.Errorf("encode CA key: %w", err)
	}
	return keyPEM, nil
}

// LoadCA reads a CA back from its PEM certificate and key, as KeyPEM and
// PEM wrote them.
func LoadCA(certPEM, keyPEM []byte) (*CA, error) {
	cert, err := pki.DecodeX509CertificateBytes(certPEM)
	if err != nil {
		return nil, fmt.Errorf("CA certificate: %w", err)
	}
	if !cert.IsCA {
		return nil, fmt.Errorf("CA certificate %q is not a CA", cert.Subject.CommonName)
	}
	key, err := pki.DecodePrivateKeyBytes(keyPEM)
	if err != nil {
		return nil, fmt.Errorf("CA key: %w", err)
	}
	if ok, err := pki.PublicKeyMatchesCertificate(key.Public(), cert); err != nil || !ok {
		return nil, fmt.Errorf("CA key does not match CA certificate %q", cert.Subject.CommonName)
	}
	return &CA{Cert: cert, PEM: EncodeBundle(cert), key: key}, nil
}

// LoadServing reads a serving certificate back from tls.crt and tls.key,
// and checks that the key is the certificate's.
func LoadServing(certPEM, keyPEM []byte) (*Serving, error) {
	cert, err := pki.DecodeX509CertificateBytes(certPEM)
	if err != nil {
		return nil, fmt.Errorf("serving certificate: %w", err)
	}
	key, err := pki.DecodePrivateKeyBytes(keyPEM)
	if err != nil {
		return nil, fmt.Errorf("serving key: %w", err)
	}
	if ok, err := pki.PublicKeyMatchesCertificate(key.Public(), cert); err != nil || !ok {
		return nil, errors.New("serving key does not match the serving certificate")
	}
	return &Serving{Cert: cert, CertPEM: certPEM, KeyPEM: keyPEM}, nil
}

// ParseBundle reads the certificates of a PEM CA bundle (ca.crt, a
// caBundle), in order.
func ParseBundle(bundle []byte) ([]*x509.Certificate, error) {
	cas, err := pki.DecodeX509CertificateSetBytes(bundle)
	if err != nil {
		return nil, fmt.Errorf("CA bundle: %w", err)
	}
	return cas, nil
}

// EncodeBundle PEM-encodes certificates one after the other: a CA bundle.
func EncodeBundle(certs ...*x509.Certificate) []byte {
	var b bytes.Buffer
	for _, c := range certs {
		_ = pem.Encode(&b, &pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})
	}
	return b.Bytes()
}

// BundleHolds says whether the PEM bundle holds cert.
func BundleHolds(bundle []byte, cert *x509.Certificate) bool {
	cas, err := ParseBundle(bundle)
	if err != nil {
		return false
	}
	for _, c := range cas {
		if c.Equal(cert) {
			return true
		}
	}
	return false
}

// RenewAt is when cert is due for renewal: once less than a third of its
// validity remains, cert-manager's default, which leaves two renewal
// attempts' worth of slack before it expires.
func RenewAt(cert *x509.Certificate) time.Time {
	lifetime := cert.NotAfter.Sub(cert.NotBefore)
	return cert.NotAfter.Add(-lifetime / 3)
}
