package controller

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/eurekube/eurekube/api/v1alpha1"
	"github.com/eurekube/eurekube/eureka"
)

// eurekaAccess is what a syncer's spec.eureka names besides the URLs, read
// from its namespace: the credentials, the CA bundle, the client
// certificate. Its digest keys the client cache, so a rotated Secret or
// ConfigMap yields a new client at the next reconcile, and an update that
// changes nothing (a new resourceVersion of the same data, a relabel) keeps
// the client and its connections.
type eurekaAccess struct {
	credentials eureka.Credentials
	caPEM       []byte
	roots       *x509.CertPool // nil: the system's
	certPEM     []byte
	keyPEM      []byte
	clientCert  *tls.Certificate // nil: none
}

func (a *eurekaAccess) digest(urls []string) [32]byte {
	h := sha256.New()
	for _, part := range append(urls, "", a.credentials.Username, a.credentials.Password, string(a.caPEM), string(a.certPEM), string(a.keyPEM)) {
		fmt.Fprintf(h, "%d:%s", len(part), part)
	}
	var sum [32]byte
	h.Sum(sum[:0])
	return sum
}

// readEurekaAccess reads what s names, uncached: the manager neither watches
// nor keeps Secrets and ConfigMaps. Each error names the object, the key and
// what is wrong with it, for the EurekaConfigInvalid condition.
// A forbidden read's error says how to grant it (grant).
func readEurekaAccess(ctx context.Context, reader client.Reader, grant v1alpha1.ReadGrant, s *v1alpha1.EurekaSyncer) (eurekaAccess, error) {
	var a eurekaAccess
	if ref := s.Spec.Eureka.CredentialsSecretRef; ref != nil {
		secret, err := readSecret(ctx, reader, grant, s.Namespace, ref.Name, "Eureka credentials")
		if err != nil {
			return a, err
		}
		a.credentials = eureka.Credentials{Username: string(secret.Data["username"]), Password: string(secret.Data["password"])}
	}
	t := s.Spec.Eureka.TLS
	if t == nil {
		return a, nil
	}
	if ref := t.CABundleRef; ref != nil {
		kind, key := ref.EffectiveKind(), ref.EffectiveKey()
		var data []byte
		var found bool
		if kind == v1alpha1.CABundleSecret {
			secret, err := readSecret(ctx, reader, grant, s.Namespace, ref.Name, "the Eureka CA bundle")
			if err != nil {
				return a, err
			}
			data, found = secret.Data[key]
		} else {
			var cm corev1.ConfigMap
			if err := reader.Get(ctx, types.NamespacedName{Namespace: s.Namespace, Name: ref.Name}, &cm); err != nil {
				return a, grantHint(fmt.Errorf("read the Eureka CA bundle from ConfigMap %s: %w", ref.Name, err), grant, s.Namespace)
			}
			var text string
			if text, found = cm.Data[key]; found {
				data = []byte(text)
			} else {
				data, found = cm.BinaryData[key]
			}
		}
		if !found {
			return a, fmt.Errorf("the Eureka CA bundle: %s %s has no key %s (spec.eureka.tls.caBundleRef)", kind, ref.Name, key)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(data) {
			return a, fmt.Errorf("the Eureka CA bundle: key %s of %s %s holds no PEM certificate", key, kind, ref.Name)
		}
		a.caPEM, a.roots = data, pool
	}
	if ref := t.ClientCertificateSecretRef; ref != nil {
		secret, err := readSecret(ctx, reader, grant, s.Namespace, ref.Name, "the Eureka client certificate")
		if err != nil {
			return a, err
		}
		certPEM, keyPEM := secret.Data[corev1.TLSCertKey], secret.Data[corev1.TLSPrivateKeyKey]
		pair, err := tls.X509KeyPair(certPEM, keyPEM)
		if err != nil {
			return a, fmt.Errorf("the Eureka client certificate: keys %s and %s of Secret %s: %w", corev1.TLSCertKey, corev1.TLSPrivateKeyKey, ref.Name, err)
		}
		a.certPEM, a.keyPEM, a.clientCert = certPEM, keyPEM, &pair
	}
	return a, nil
}

func readSecret(ctx context.Context, reader client.Reader, grant v1alpha1.ReadGrant, namespace, name, what string) (*corev1.Secret, error) {
	var secret corev1.Secret
	if err := reader.Get(ctx, types.NamespacedName{Namespace: namespace, Name: name}, &secret); err != nil {
		return nil, grantHint(fmt.Errorf("read %s from Secret %s: %w", what, name, err), grant, namespace)
	}
	return &secret, nil
}

// grantHint adds to a forbidden read how to grant it: the manager may read
// Secrets and ConfigMaps only where a namespace grants it.
func grantHint(err error, grant v1alpha1.ReadGrant, namespace string) error {
	if apierrors.IsForbidden(err) {
		return fmt.Errorf("%w (grant the manager access in this namespace: %s)", err, grant.Command(namespace))
	}
	return err
}
