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

// objectGetter is what readEurekaAccess reads through: the API server, or
// the cache of its reads (accessReads).
type objectGetter interface {
	Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error
}

// readEurekaAccess reads what s names, as ReadObjects lists it, through
// reader (accessReads: a bounded cache of GETs, never a watch). A Secret
// is used only with its consent (secretConsented). Each error names the
// object, the key and what is wrong with it, for the EurekaReachable
// condition. A forbidden read's error says how to grant it (grant).
func readEurekaAccess(ctx context.Context, reader objectGetter, grant v1alpha1.ReadGrant, s *v1alpha1.EurekaSyncer) (eurekaAccess, error) {
	var a eurekaAccess
	secrets, configMaps := map[string]*corev1.Secret{}, map[string]*corev1.ConfigMap{}
	for _, o := range s.Spec.Eureka.ReadObjects() {
		key := types.NamespacedName{Namespace: s.Namespace, Name: o.Name}
		if o.Kind == "ConfigMap" {
			var cm corev1.ConfigMap
			if err := reader.Get(ctx, key, &cm); err != nil {
				return a, grantHint(fmt.Errorf("read ConfigMap %s (%s): %w", o.Name, o.Field, err), grant, s.Namespace)
			}
			configMaps[o.Name] = &cm
			continue
		}
		var secret corev1.Secret
		if err := reader.Get(ctx, key, &secret); err != nil {
			return a, grantHint(fmt.Errorf("read Secret %s (%s): %w", o.Name, o.Field, err), grant, s.Namespace)
		}
		if !secretConsented(&secret) {
			return a, &notConsentedError{namespace: s.Namespace, name: o.Name, field: o.Field}
		}
		secrets[o.Name] = &secret
	}
	if ref := s.Spec.Eureka.CredentialsSecretRef; ref != nil {
		secret := secrets[ref.Name]
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
			data, found = secrets[ref.Name].Data[key]
		} else {
			cm := configMaps[ref.Name]
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
		secret := secrets[ref.Name]
		certPEM, keyPEM := secret.Data[corev1.TLSCertKey], secret.Data[corev1.TLSPrivateKeyKey]
		pair, err := tls.X509KeyPair(certPEM, keyPEM)
		if err != nil {
			return a, fmt.Errorf("the Eureka client certificate: keys %s and %s of Secret %s: %w", corev1.TLSCertKey, corev1.TLSPrivateKeyKey, ref.Name, err)
		}
		a.certPEM, a.keyPEM, a.clientCert = certPEM, keyPEM, &pair
	}
	return a, nil
}

// grantHint adds to a forbidden read how to grant it: the manager may read
// Secrets and ConfigMaps only where a namespace grants it.
func grantHint(err error, grant v1alpha1.ReadGrant, namespace string) error {
	if apierrors.IsForbidden(err) {
		return fmt.Errorf("%w (grant the manager access in this namespace: %s)", err, grant.Command(namespace))
	}
	return err
}
