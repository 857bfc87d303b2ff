package selfmanaged_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/eurekube/eurekube/certs"
	"github.com/eurekube/eurekube/certs/selfmanaged"
	"github.com/eurekube/eurekube/tests/harness"
)

func TestServed_FailsHandshakesUntilTheSecretHoldsAKeyPairThenServesItsLatest(t *testing.T) {
	clientset := fake.NewClientset()
	loaded := make(chan *x509.Certificate, 10)
	s := selfmanaged.NewServed(selfmanaged.ServedOptions{
		Clientset: clientset, Namespace: "eurekube-system", Name: "eurekube-webhook-tls",
		Logger: logrus.NewEntry(logrus.New()),
		OnLoad: func(c *x509.Certificate) { loaded <- c },
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = s.Start(ctx) }()

	if _, err := s.GetCertificate(&tls.ClientHelloInfo{}); err == nil {
		t.Fatal("served a certificate before the Secret held one")
	}
	ca, err := certs.NewCA("test", 0)
	if err != nil {
		t.Fatal(err)
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "eurekube-system", Name: "eurekube-webhook-tls"}, Data: map[string][]byte{}}
	for i, verb := range []string{"create", "update"} {
		serving, err := ca.Issue(certs.LocalHosts())
		if err != nil {
			t.Fatal(err)
		}
		secret.Data[certs.CertFile], secret.Data[certs.KeyFile] = serving.CertPEM, serving.KeyPEM
		if i == 0 {
			_, err = clientset.CoreV1().Secrets("eurekube-system").Create(ctx, secret, metav1.CreateOptions{})
		} else {
			_, err = clientset.CoreV1().Secrets("eurekube-system").Update(ctx, secret, metav1.UpdateOptions{})
		}
		if err != nil {
			t.Fatal(err)
		}
		harness.Eventually(t, 10*time.Second, "the certificate of the Secret after its "+verb+" is served", func() error {
			c, err := s.GetCertificate(&tls.ClientHelloInfo{})
			if err != nil {
				return err
			}
			if !c.Leaf.Equal(serving.Cert) {
				return errors.New("serving another certificate")
			}
			return nil
		})
		if got := <-loaded; !got.Equal(serving.Cert) {
			t.Fatalf("OnLoad after the %s got another certificate", verb)
		}
	}
}
