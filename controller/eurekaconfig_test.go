package controller

import (
	"context"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/eurekube/eurekube/api/v1alpha1"
	"github.com/eurekube/eurekube/certs"
	"github.com/eurekube/eurekube/internal/builders"
)

// What the manager reads for a syncer is what ReadObjects lists, which
// `eurekube check` asks the API server whether the manager may read.
func TestReadEurekaAccess_ReadsWhatReadObjectsLists(t *testing.T) {
	ca, err := certs.NewCA("eureka CA", 0)
	if err != nil {
		t.Fatal(err)
	}
	clientCert, err := ca.Issue(certs.ServingOptions{DNSNames: []string{"registrar"}})
	if err != nil {
		t.Fatal(err)
	}
	reader := &recordingReader{
		secrets: map[string]map[string][]byte{
			"creds":  {"username": []byte("u"), "password": []byte("p")},
			"client": {corev1.TLSCertKey: clientCert.CertPEM, corev1.TLSPrivateKeyKey: clientCert.KeyPEM},
			"ca":     {"bundle.pem": ca.PEM},
		},
		configMaps: map[string]map[string]string{"ca": {v1alpha1.DefaultCABundleKey: string(ca.PEM)}},
	}
	for _, kind := range []v1alpha1.CABundleKind{v1alpha1.CABundleConfigMap, v1alpha1.CABundleSecret} {
		bundle := &v1alpha1.CABundleRef{Kind: kind, Name: "ca"}
		if kind == v1alpha1.CABundleSecret {
			bundle.Key = "bundle.pem"
		}
		s := builders.Syncer("shop", "orders", builders.Credentials("creds"), func(s *v1alpha1.EurekaSyncer) {
			s.Spec.Eureka.TLS = &v1alpha1.EurekaTLS{CABundleRef: bundle, ClientCertificateSecretRef: &corev1.LocalObjectReference{Name: "client"}}
		})
		reader.got = nil
		if _, err := readEurekaAccess(context.Background(), reader, v1alpha1.ReadGrant{}, s); err != nil {
			t.Fatalf("CA bundle in a %s: %v", kind, err)
		}
		var want []string
		for _, o := range s.Spec.Eureka.ReadObjects() {
			want = append(want, o.Kind+"/"+o.Name)
		}
		if !slices.Equal(reader.got, want) {
			t.Errorf("CA bundle in a %s: the manager read %v, ReadObjects lists %v", kind, reader.got, want)
		}
	}
}

// A forbidden read says how to grant it, with this install's names.
func TestReadEurekaAccess_AForbiddenReadNamesTheGrant(t *testing.T) {
	s := builders.Syncer("shop", "orders", builders.Credentials("creds"))
	grant := v1alpha1.ReadGrant{ClusterRole: "acme-eureka-credentials", ServiceAccountNamespace: "platform", ServiceAccountName: "acme-manager"}
	_, err := readEurekaAccess(context.Background(), &forbiddenReader{}, grant, s)
	want := "kubectl -n shop create rolebinding acme-eureka-credentials --clusterrole=acme-eureka-credentials --serviceaccount=platform:acme-manager"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("forbidden read: %v, want the hint %q", err, want)
	}
}
