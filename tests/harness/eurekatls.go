package harness

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/eurekube/eurekube/certs"
)

// EurekaTLS makes the server serve HTTPS with a certificate CA issues for
// its host, through Spring Boot's PEM SSL bundle (server.ssl.bundle). With
// ClientAuth it also demands a client certificate signed by CA
// (server.ssl.client-auth=need, the bundle's truststore).
type EurekaTLS struct {
	CA         *certs.CA
	ClientAuth bool
}

// EurekaAuth makes the server demand HTTP basic auth with these credentials
// (tests/eureka-server's BasicAuthFilter); SetAuth and a Restart rotate
// them.
type EurekaAuth struct {
	Username, Password string
}

// tlsArgs issues the serving certificate into dir and returns the Spring
// Boot arguments that serve it.
func (t *EurekaTLS) args(host, dir string) ([]string, error) {
	o := certs.ServingOptions{}
	if ip := net.ParseIP(host); ip != nil {
		o.IPAddresses = []net.IP{ip}
	} else {
		o.DNSNames = []string{host}
	}
	serving, err := t.CA.Issue(o)
	if err != nil {
		return nil, fmt.Errorf("eureka server certificate: %w", err)
	}
	files := map[string][]byte{"server.crt": serving.CertPEM, "server.key": serving.KeyPEM, "ca.crt": t.CA.PEM}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			return nil, fmt.Errorf("eureka server certificate: %w", err)
		}
	}
	args := []string{
		"--spring.ssl.bundle.pem.eureka.keystore.certificate=file:" + filepath.Join(dir, "server.crt"),
		"--spring.ssl.bundle.pem.eureka.keystore.private-key=file:" + filepath.Join(dir, "server.key"),
		"--server.ssl.bundle=eureka",
	}
	if t.ClientAuth {
		args = append(args,
			"--spring.ssl.bundle.pem.eureka.truststore.certificate=file:"+filepath.Join(dir, "ca.crt"),
			"--server.ssl.client-auth=need")
	}
	return args, nil
}

// clientConfig is how the harness itself reaches the server: trusting CA,
// with a client certificate of its own when the server demands one.
func (t *EurekaTLS) clientConfig() (*tls.Config, error) {
	pool := x509.NewCertPool()
	pool.AddCert(t.CA.Cert)
	cfg := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	if t.ClientAuth {
		certPEM, keyPEM, err := IssueClientCertificate(t.CA, "eurekube-harness")
		if err != nil {
			return nil, err
		}
		pair, err := tls.X509KeyPair(certPEM, keyPEM)
		if err != nil {
			return nil, err
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	return cfg, nil
}

// IssueClientCertificate signs a client certificate (extended key usage
// clientAuth, which a server checking client certificates requires) for
// commonName with ca; PEM certificate and PKCS#8 key, as a
// kubernetes.io/tls Secret holds them.
func IssueClientCertificate(ca *certs.CA, commonName string) (certPEM, keyPEM []byte, err error) {
	caKeyPEM, err := ca.KeyPEM()
	if err != nil {
		return nil, nil, err
	}
	caPair, err := tls.X509KeyPair(ca.PEM, caKeyPEM)
	if err != nil {
		return nil, nil, fmt.Errorf("client certificate: the CA's key: %w", err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: commonName},
		NotBefore:    time.Now().Add(-time.Minute),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, key.Public(), caPair.PrivateKey)
	if err != nil {
		return nil, nil, fmt.Errorf("client certificate for %s: %w", commonName, err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), nil
}
