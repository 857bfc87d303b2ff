package selfmanaged

import (
	"crypto/x509"
	"fmt"

	"github.com/eurekube/eurekube/certs"
)

// material is what the Secret holds, parsed. Whatever is missing or
// unusable is nil, and problems says why, for the log.
type material struct {
	// bundle is ca.crt: the CAs webhook clients trust, the current one
	// first, then an older one while a CA rotation overlaps.
	bundle []*x509.Certificate
	// ca is the current CA (bundle[0] with ca.key), which signs serving
	// certificates.
	ca *certs.CA
	// serving is tls.crt with tls.key.
	serving  *certs.Serving
	problems []string
}

// parseSecret reads a Secret's data; it never fails, the plan replaces
// what it cannot use.
func parseSecret(data map[string][]byte) material {
	var m material
	if len(data[certs.CAFile]) > 0 {
		bundle, err := certs.ParseBundle(data[certs.CAFile])
		if err != nil {
			m.problems = append(m.problems, err.Error())
		} else {
			m.bundle = bundle
			ca, err := certs.LoadCA(certs.EncodeBundle(bundle[0]), data[certs.CAKeyFile])
			if err != nil {
				m.problems = append(m.problems, err.Error())
			} else {
				m.ca = ca
			}
		}
	}
	if len(data[certs.CertFile]) > 0 || len(data[certs.KeyFile]) > 0 {
		s, err := certs.LoadServing(data[certs.CertFile], data[certs.KeyFile])
		if err != nil {
			m.problems = append(m.problems, err.Error())
		} else {
			m.serving = s
		}
	}
	return m
}

// secretData is m in the Secret's layout: cert-manager's keys plus ca.key.
func (m material) secretData() (map[string][]byte, error) {
	caKey, err := m.ca.KeyPEM()
	if err != nil {
		return nil, err
	}
	return map[string][]byte{
		certs.CAFile:    certs.EncodeBundle(m.bundle...),
		certs.CAKeyFile: caKey,
		certs.CertFile:  m.serving.CertPEM,
		certs.KeyFile:   m.serving.KeyPEM,
	}, nil
}

// servingSignedByCA says whether the serving certificate chains to the
// current CA.
func (m material) servingSignedByCA() bool {
	return m.serving != nil && m.ca != nil && m.serving.Cert.CheckSignatureFrom(m.ca.Cert) == nil
}

func describe(c *x509.Certificate) string {
	return fmt.Sprintf("%q serial %s", c.Subject.CommonName, c.SerialNumber)
}
