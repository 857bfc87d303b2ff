package controller_test

import (
	"context"
	"crypto/x509"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/eurekube/eurekube/api/v1alpha1"
	"github.com/eurekube/eurekube/certs"
	"github.com/eurekube/eurekube/eureka"
	"github.com/eurekube/eurekube/internal/builders"
	"github.com/eurekube/eurekube/tests/harness"
)

// A Eureka server serving HTTPS with a private CA and demanding basic
// auth: the manager reads it through the syncer's CA bundle ConfigMap and
// credentials Secret; a bundle without the key, or without a certificate,
// is EurekaConfigInvalid naming the object and key; after the server's
// password rotates and the Secret with it, the manager reads again with a
// new client.
func TestEurekaTLS_CABundleCredentialsAndTheirRotation(t *testing.T) {
	needsServers(t)
	ctx := context.Background()
	ca, err := certs.NewCA("corp eureka CA", 24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	secure := harness.EurekaT(t, harness.EurekaOptions{TLS: &harness.EurekaTLS{CA: ca}, Auth: &harness.EurekaAuth{Username: "eureka", Password: "first"}})
	roots := x509.NewCertPool()
	roots.AddCert(ca.Cert)
	direct := func(password string) *eureka.Client {
		c, err := eureka.New(eureka.Options{URLs: []string{secure.URL()}, RootCAs: roots, Username: "eureka", Password: password, Timeout: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}

	ns := newNamespace(t)
	bundle := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "corp-ca", Namespace: ns}, Data: map[string]string{"root.pem": "not yet"}}
	login := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "eureka-login", Namespace: ns, Labels: map[string]string{v1alpha1.EurekaCredentialsLabel: "true"}},
		Data: map[string][]byte{"username": []byte("eureka"), "password": []byte("first")}}
	if err := k8s.Create(ctx, bundle); err != nil {
		t.Fatal(err)
	}
	if err := k8s.Create(ctx, login); err != nil {
		t.Fatal(err)
	}
	s := builders.Syncer(ns, "ledger", builders.Port(intstr.FromInt32(8080)), builders.EurekaURLs(secure.URL()), builders.Credentials("eureka-login"),
		func(s *v1alpha1.EurekaSyncer) {
			s.Spec.Eureka.TLS = &v1alpha1.EurekaTLS{CABundleRef: &v1alpha1.CABundleRef{Name: "corp-ca"}}
		})
	if err := k8s.Create(ctx, s); err != nil {
		t.Fatal(err)
	}

	// The key defaults to ca.crt, which the ConfigMap lacks.
	harness.Eventually(t, patience, "EurekaConfigInvalid naming the ConfigMap and the missing key",
		reachable(s, metav1.ConditionFalse, "EurekaConfigInvalid", "ConfigMap corp-ca", "no key ca.crt"))
	bundle.Data = map[string]string{"ca.crt": "-----BEGIN CERTIFICATE-----\nbroken\n-----END CERTIFICATE-----\n"}
	if err := k8s.Update(ctx, bundle); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, patience, "EurekaConfigInvalid saying the key holds no certificate",
		reachable(s, metav1.ConditionFalse, "EurekaConfigInvalid", "key ca.crt of ConfigMap corp-ca", "no PEM certificate"))

	bundle.Data = map[string]string{"ca.crt": string(ca.PEM)}
	if err := k8s.Update(ctx, bundle); err != nil {
		t.Fatal(err)
	}
	vm := eureka.Instance{App: "LEDGER", InstanceID: "vm-3:ledger:8080", HostName: "10.9.9.3", IPAddr: "10.9.9.3",
		Status: eureka.StatusUp, Port: 8080, PortEnabled: true}
	if err := direct("first").Register(ctx, vm); err != nil {
		t.Fatal(err)
	}
	readsTheVM := readsElsewhere(s, 1)
	harness.Eventually(t, patience, "the HTTPS server read through the CA bundle, with the credentials", readsTheVM)

	// The password rotates: the server restarts demanding the new one
	// (refusing the manager's cached client), then the Secret follows.
	secure.SetAuth(&harness.EurekaAuth{Username: "eureka", Password: "second"})
	restartCtx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	if err := secure.Restart(restartCtx); err != nil {
		t.Fatal(err)
	}
	if err := direct("second").Register(ctx, vm); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, patience, "the old password refused", reachable(s, metav1.ConditionFalse, "", "401"))
	login.Data["password"] = []byte("second")
	if err := k8s.Update(ctx, login); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, patience, "read again with the rotated password, no restart", readsTheVM)
}
