package selfmanaged

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/sirupsen/logrus"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"

	"github.com/eurekube/eurekube/certs"
)

// caCommonName names every CA the manager issues.
const caCommonName = "eurekube-webhook-ca"

// Default validities and trust delay. The serving certificate renews
// after 20 days, the CA after about 8 months; a new CA is in the caBundle
// for a minute before a certificate it signed is served.
const (
	DefaultCAValidity      = certs.DefaultCAValidity
	DefaultServingValidity = certs.DefaultServingValidity
	DefaultTrustDelay      = time.Minute
)

// IssuerOptions configure NewIssuer.
type IssuerOptions struct {
	Clientset kubernetes.Interface
	// Served tells the issuer when the Secret changes.
	Served *Served
	// Namespace and SecretName locate the certificate Secret.
	Namespace, SecretName string
	// WebhookConfiguration names the MutatingWebhookConfiguration whose
	// caBundle is kept current.
	WebhookConfiguration string
	// DNSNames the serving certificate is valid for.
	DNSNames []string
	// CAValidity, ServingValidity and TrustDelay default to the Default*
	// constants when zero.
	CAValidity, ServingValidity, TrustDelay time.Duration
	// Recorder, when set, records an Event on the Secret for every change.
	Recorder events.EventRecorder
	Logger   *logrus.Entry
}

// Issuer keeps the certificate Secret and the caBundle current. It runs
// on the elected leader only.
type Issuer struct {
	o      IssuerOptions
	policy policy
	// webhooks lists the webhook configuration (that one object).
	webhooks toolscache.Store
	// patchedFrom and patched are the last caBundle patch: the object it
	// was applied to (its resourceVersion) and the result, which stands in
	// for the watched copy until the watch delivers it.
	patchedFrom string
	patched     *admissionregistrationv1.MutatingWebhookConfiguration
	// waiting: the last sync found no webhook configuration (logged once).
	waiting bool
	// adoptRefused: the API server refused to add the owner (logged once).
	adoptRefused bool
}

// NewIssuer returns an Issuer for the manager to run.
func NewIssuer(o IssuerOptions) *Issuer {
	p := policy{DNSNames: o.DNSNames, CAValidity: o.CAValidity, ServingValidity: o.ServingValidity, TrustDelay: o.TrustDelay}
	if p.CAValidity <= 0 {
		p.CAValidity = DefaultCAValidity
	}
	if p.ServingValidity <= 0 {
		p.ServingValidity = DefaultServingValidity
	}
	if p.TrustDelay <= 0 {
		p.TrustDelay = DefaultTrustDelay
	}
	return &Issuer{o: o, policy: p}
}

// NeedLeaderElection is true: one writer at a time.
func (i *Issuer) NeedLeaderElection() bool { return true }

// Start syncs on every change of the Secret or of the webhook
// configuration, and when a certificate is due, until ctx ends.
func (i *Issuer) Start(ctx context.Context) error {
	changed := i.o.Served.subscribe()
	webhookChanged := make(chan struct{}, 1)
	poke := func(any) {
		select {
		case webhookChanged <- struct{}{}:
		default:
		}
	}
	factory := informers.NewSharedInformerFactoryWithOptions(i.o.Clientset, 0, informers.WithTweakListOptions(oneName(i.o.WebhookConfiguration)))
	inf := factory.Admissionregistration().V1().MutatingWebhookConfigurations().Informer()
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc: poke, UpdateFunc: func(_, obj any) { poke(obj) }, DeleteFunc: poke,
	}); err != nil {
		return fmt.Errorf("watch MutatingWebhookConfiguration %s: %w", i.o.WebhookConfiguration, err)
	}
	i.webhooks = inf.GetStore()
	factory.Start(ctx.Done())
	defer factory.Shutdown()
	if !toolscache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		return nil
	}
	i.o.Logger.WithFields(logrus.Fields{"secret": i.o.SecretName, "webhookConfiguration": i.o.WebhookConfiguration}).Info("managing the webhook's certificates")

	const minRetry, maxRetry = time.Second, time.Minute
	retry := minRetry
	for {
		wait := retry
		recheck, err := i.sync(ctx)
		if ctx.Err() != nil {
			return nil // stopping (or no longer the leader): a read cut short is no failure
		}
		if apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) {
			// Another writer (a previous leader, a helm upgrade) came
			// between the read and the write: read again.
			i.o.Logger.WithError(err).Info("webhook certificates: conflicting write, syncing again")
			wait = 0
		} else if err != nil {
			i.o.Logger.WithError(err).WithField("retryIn", retry.String()).Error("webhook certificates")
			retry = min(2*retry, maxRetry)
		} else {
			retry = minRetry
			// A recheck already due (a renewal waiting for the caBundle)
			// is polled each second, not spun on.
			wait = max(time.Until(recheck), minRetry)
		}
		timer := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			timer.Stop()
			return nil
		case <-changed:
		case <-webhookChanged:
		case <-timer.C:
		}
		timer.Stop()
	}
}

// sync brings the Secret, then the caBundle, up to date, and says when to
// look again.
func (i *Issuer) sync(ctx context.Context) (time.Time, error) {
	mwc := i.webhookConfiguration()
	if mwc == nil {
		// No configuration, no certificate: nothing calls the webhook, and
		// a Secret written now would have no owner to go with. At
		// uninstall the configuration goes first while the leader still
		// runs: issuing then would leave a Secret behind.
		log := i.o.Logger.WithField("webhookConfiguration", i.o.WebhookConfiguration)
		if i.waiting {
			log.Debug("still no MutatingWebhookConfiguration: issuing nothing")
		} else {
			log.Warn("no MutatingWebhookConfiguration: issuing no certificate until it exists")
			i.waiting = true
		}
		return time.Now().Add(time.Hour), nil // its creation wakes Start
	}
	i.waiting = false
	secrets := i.o.Clientset.CoreV1().Secrets(i.o.Namespace)
	secret, err := secrets.Get(ctx, i.o.SecretName, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		secret = nil
	case err != nil:
		return time.Time{}, fmt.Errorf("read Secret %s/%s: %w", i.o.Namespace, i.o.SecretName, err)
	}
	var cur material
	if secret != nil {
		cur = parseSecret(secret.Data)
		for _, p := range cur.problems {
			i.o.Logger.WithField("secret", i.o.SecretName).Warn("certificate Secret: " + p + ": replacing it")
		}
	}
	trusted := cur.ca != nil && everyBundleHolds(mwc, cur.ca)
	res, err := plan(cur, time.Now(), i.policy, trusted)
	if err != nil {
		return time.Time{}, err
	}
	owner := ownerReference(mwc)
	if len(res.changes) > 0 {
		if secret, err = i.store(ctx, secret, res.next, owner); err != nil {
			return time.Time{}, err
		}
		i.report(secret, res.changes)
	}
	if !ownedBy(secret, owner) {
		if err := i.adopt(ctx, secret, owner); err != nil {
			return time.Time{}, err
		}
	}
	if err := i.patchCABundle(ctx, mwc, certs.EncodeBundle(res.next.bundle...)); err != nil {
		return time.Time{}, err
	}
	return res.recheck, nil
}

// ownerReference makes the webhook configuration the certificate Secret's
// owner, so that uninstalling Eurekube (helm uninstall, kubectl delete -k
// deletes the configuration) lets the garbage collector delete the Secret,
// CA key and all: the manager created it, so no manifest names it. Without
// blockOwnerDeletion, which would need the configuration's finalizers.
func ownerReference(mwc *admissionregistrationv1.MutatingWebhookConfiguration) *metav1.OwnerReference {
	return &metav1.OwnerReference{
		APIVersion: admissionregistrationv1.SchemeGroupVersion.String(), Kind: "MutatingWebhookConfiguration",
		Name: mwc.Name, UID: mwc.UID,
	}
}

// ownedBy is true when there is no Secret, or owner owns it.
func ownedBy(secret *corev1.Secret, owner *metav1.OwnerReference) bool {
	return secret == nil || slices.ContainsFunc(secret.OwnerReferences, func(r metav1.OwnerReference) bool { return r.UID == owner.UID })
}

// adopt makes owner the owner of a Secret created without it (by a version
// before owners, or for a configuration since created again). Best effort:
// where the OwnerReferencesPermissionEnforcement admission plugin runs
// (OpenShift), changing an object's owners needs delete on it, which the
// manager is not granted; then the Secret stays unowned, said once, and
// certificates go on as before.
func (i *Issuer) adopt(ctx context.Context, secret *corev1.Secret, owner *metav1.OwnerReference) error {
	adopted := secret.DeepCopy()
	adopted.OwnerReferences = append(adopted.OwnerReferences, *owner)
	log := i.o.Logger.WithFields(logrus.Fields{"secret": i.o.SecretName, "webhookConfiguration": owner.Name})
	_, err := i.o.Clientset.CoreV1().Secrets(i.o.Namespace).Update(ctx, adopted, metav1.UpdateOptions{})
	switch {
	case err == nil:
		log.Info("the webhook configuration now owns the certificate Secret: deleting it deletes the Secret")
	case apierrors.IsForbidden(err):
		if !i.adoptRefused {
			log.WithError(err).Warn("cannot make the webhook configuration own the certificate Secret; certificates go on, but delete the Secret yourself after uninstalling")
			i.adoptRefused = true
		}
	default:
		return fmt.Errorf("make the webhook configuration own Secret %s/%s: %w", i.o.Namespace, i.o.SecretName, err)
	}
	return nil
}

// store writes m into the Secret: created, owned by owner, when there is
// none, else updated at the resourceVersion it was read at (its owners
// untouched), so that a leader acting on a stale read (its predecessor
// wrote since) fails and re-reads.
func (i *Issuer) store(ctx context.Context, secret *corev1.Secret, m material, owner *metav1.OwnerReference) (*corev1.Secret, error) {
	data, err := m.secretData()
	if err != nil {
		return nil, err
	}
	secrets := i.o.Clientset.CoreV1().Secrets(i.o.Namespace)
	if secret == nil {
		secret = &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: i.o.SecretName, Namespace: i.o.Namespace, Labels: map[string]string{"app.kubernetes.io/name": "eurekube"}},
			Type:       corev1.SecretTypeTLS,
			Data:       data,
		}
		secret.OwnerReferences = []metav1.OwnerReference{*owner}
		created, err := secrets.Create(ctx, secret, metav1.CreateOptions{})
		if err != nil {
			return nil, fmt.Errorf("create Secret %s/%s: %w", i.o.Namespace, i.o.SecretName, err)
		}
		return created, nil
	}
	secret = secret.DeepCopy()
	secret.Data = data
	updated, err := secrets.Update(ctx, secret, metav1.UpdateOptions{})
	if err != nil {
		return nil, fmt.Errorf("update Secret %s/%s at resourceVersion %s: %w", i.o.Namespace, i.o.SecretName, secret.ResourceVersion, err)
	}
	return updated, nil
}

func (i *Issuer) report(secret *corev1.Secret, changes []change) {
	for _, c := range changes {
		i.o.Logger.WithFields(logrus.Fields{"secret": i.o.SecretName, "reason": c.Reason}).Info(c.Message)
		if i.o.Recorder != nil {
			i.o.Recorder.Eventf(secret, nil, corev1.EventTypeNormal, c.Reason, "Certificates", "%s", c.Message)
		}
	}
}

func (i *Issuer) webhookConfiguration() *admissionregistrationv1.MutatingWebhookConfiguration {
	obj, ok, err := i.webhooks.GetByKey(i.o.WebhookConfiguration)
	if err != nil || !ok {
		return nil
	}
	mwc, _ := obj.(*admissionregistrationv1.MutatingWebhookConfiguration)
	if i.patched != nil && mwc != nil && mwc.ResourceVersion == i.patchedFrom {
		return i.patched
	}
	return mwc
}

func everyBundleHolds(mwc *admissionregistrationv1.MutatingWebhookConfiguration, ca *certs.CA) bool {
	for _, w := range mwc.Webhooks {
		if !certs.BundleHolds(w.ClientConfig.CABundle, ca.Cert) {
			return false
		}
	}
	return true
}

// patchCABundle sets every webhook's caBundle to bundle where it differs,
// with a JSON patch that first tests the resourceVersion it was read at.
func (i *Issuer) patchCABundle(ctx context.Context, mwc *admissionregistrationv1.MutatingWebhookConfiguration, bundle []byte) error {
	ops := []map[string]any{{"op": "test", "path": "/metadata/resourceVersion", "value": mwc.ResourceVersion}}
	for n, w := range mwc.Webhooks {
		if string(w.ClientConfig.CABundle) != string(bundle) {
			ops = append(ops, map[string]any{"op": "add", "path": fmt.Sprintf("/webhooks/%d/clientConfig/caBundle", n), "value": bundle})
		}
	}
	if len(ops) == 1 {
		return nil
	}
	body, err := json.Marshal(ops)
	if err != nil {
		return fmt.Errorf("caBundle patch: %w", err)
	}
	patched, err := i.o.Clientset.AdmissionregistrationV1().MutatingWebhookConfigurations().Patch(ctx, mwc.Name, types.JSONPatchType, body, metav1.PatchOptions{})
	if err != nil {
		if apierrors.IsInvalid(err) {
			// The test of the resourceVersion failed: the object changed
			// since it was read, and its watch event is on its way.
			return apierrors.NewConflict(admissionregistrationv1.Resource("mutatingwebhookconfigurations"), mwc.Name, err)
		}
		return fmt.Errorf("patch the caBundle of MutatingWebhookConfiguration %s: %w", mwc.Name, err)
	}
	i.patchedFrom, i.patched = mwc.ResourceVersion, patched
	i.o.Logger.WithFields(logrus.Fields{"webhookConfiguration": mwc.Name, "webhooks": len(ops) - 1}).Info("patched the caBundle to the certificate Secret's ca.crt")
	return nil
}
