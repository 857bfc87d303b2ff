package webhook

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/eurekube/eurekube/api/v1alpha1"
)

// Consent at admission: the webhook mounts the Secrets a syncer's
// spec.eureka names into the registrar, which sends them to the syncer's
// Eureka servers, so it mounts only a Secret that consents
// (v1alpha1.SecretConsented, the label the reconciler requires too) and
// denies the pod otherwise, mounting nothing. It reads the Secret's
// metadata alone, with the get the namespace grants the manager
// (v1alpha1.ReadGrant): never its data, never a list or watch.

// checkConsent denies r, an injection, when its syncer names a Secret that
// does not consent, that does not exist, or that the manager may not read.
func (h *Handler) checkConsent(ctx context.Context, namespace string, r *Result) error {
	if !r.Inject || r.Syncer == nil || r.Denied != "" {
		return nil
	}
	for _, o := range r.Syncer.Spec.Eureka.ReadObjects() {
		if o.Kind != "Secret" {
			continue
		}
		secret := &metav1.PartialObjectMetadata{}
		secret.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Secret"))
		err := h.secrets.Get(ctx, client.ObjectKey{Namespace: namespace, Name: o.Name}, secret)
		switch {
		case apierrors.IsNotFound(err):
			refuse(r, ReasonSecretNotConsented, fmt.Sprintf("EurekaSyncer %s: Secret %s/%s (%s) does not exist, so the registrar cannot be given it; create it labelled %s=true (its consent to being sent to the syncer's Eureka servers), or remove %s",
				r.Syncer.Name, namespace, o.Name, o.Field, v1alpha1.EurekaCredentialsLabel, o.Field))
			return nil
		case apierrors.IsForbidden(err):
			refuse(r, ReasonSecretNotConsented, fmt.Sprintf("EurekaSyncer %s: the manager may not read Secret %s/%s (%s) to check its consent, so it mounts nothing; grant the read with: %s",
				r.Syncer.Name, namespace, o.Name, o.Field, h.grant.Command(namespace)))
			return nil
		case err != nil:
			return fmt.Errorf("read the labels of Secret %s/%s (%s of EurekaSyncer %s): %w", namespace, o.Name, o.Field, r.Syncer.Name, err)
		case !v1alpha1.SecretConsented(secret.Labels):
			refuse(r, ReasonSecretNotConsented, fmt.Sprintf("EurekaSyncer %s: %s, and the webhook mounts nothing into the registrar without it; to use it: %s",
				r.Syncer.Name, v1alpha1.SecretNotConsented(namespace, o.Name, o.Field), v1alpha1.SecretConsentCommand(namespace, o.Name)))
			return nil
		}
	}
	return nil
}
