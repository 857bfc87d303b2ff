package v1alpha1

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func TestReadObjects_NamesEverySecretAndConfigMapOfSpecEureka(t *testing.T) {
	for name, tc := range map[string]struct {
		servers EurekaServers
		want    []ReadObject
	}{
		"nothing named": {},
		"credentials, a CA bundle in a ConfigMap (the default kind) and a client certificate": {
			servers: EurekaServers{
				CredentialsSecretRef: &corev1.LocalObjectReference{Name: "creds"},
				TLS: &EurekaTLS{
					CABundleRef:                &CABundleRef{Name: "ca"},
					ClientCertificateSecretRef: &corev1.LocalObjectReference{Name: "client"},
				},
			},
			want: []ReadObject{
				{Kind: "Secret", Resource: "secrets", Name: "creds", Field: "spec.eureka.credentialsSecretRef"},
				{Kind: "ConfigMap", Resource: "configmaps", Name: "ca", Field: "spec.eureka.tls.caBundleRef"},
				{Kind: "Secret", Resource: "secrets", Name: "client", Field: "spec.eureka.tls.clientCertificateSecretRef"},
			},
		},
		"a CA bundle in a Secret": {
			servers: EurekaServers{TLS: &EurekaTLS{CABundleRef: &CABundleRef{Kind: CABundleSecret, Name: "ca"}}},
			want:    []ReadObject{{Kind: "Secret", Resource: "secrets", Name: "ca", Field: "spec.eureka.tls.caBundleRef"}},
		},
	} {
		if got := tc.servers.ReadObjects(); !slices.Equal(got, tc.want) {
			t.Errorf("%s: ReadObjects() = %+v, want %+v", name, got, tc.want)
		}
	}
}
