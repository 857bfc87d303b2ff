package cli

import (
	"context"
	"fmt"
	"slices"
	"time"

	"k8s.io/apiserver/pkg/authentication/serviceaccount"
	"k8s.io/apiserver/pkg/authentication/user"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/eurekube/eurekube/api/v1alpha1"
	"github.com/eurekube/eurekube/manager"
)

const checkHelp = `
Check an installation of Eurekube, what a platform team runs first. One
line per check, PASS, WARN or FAIL, with what was found; under each FAIL
an indented "fix:" line says what to do. The exit code is 1 when a check
fails.

The checks: the EurekaSyncer CRD is established; the manager's Deployment
has a ready replica; the MutatingWebhookConfiguration has a caBundle and
its Service has ready endpoints; the webhook's serving certificate (the
Secret of the manager's --certificate-secret) chains to the caBundle,
covers the Service's name and does not expire within --cert-days; the
webhook answers (a server-side dry-run create of a pod in an opted-in
namespace that a syncer selects, which writes nothing); each syncer's
Eureka servers answered the manager with its credentials; the manager's
ServiceAccount can read each Secret and ConfigMap the syncers' spec.eureka
names: credentials, CA bundle, client certificate (a SubjectAccessReview);
every selected pod runs the registrar; injected pods run the registrar
the webhook injects now; each EurekaImport is permitted, read its Eureka
servers, owns its Service and is synced, and the Service exists and is
the import's (WARN while no endpoint is ready, or while Eureka lists
instances past their lease). Then Eurekube's gateway (its Deployment,
--gateway-deployment in the manager's namespace): at least two replicas
ready (WARN below, FAIL at none, WARN when it is not installed, FAIL when
the manager sends tokens for it), its mode (WARN in audit mode, which
lets unauthenticated writes through), and the identities of the manager
and the registrars at it, from both Deployments' flags: the manager's
--gateway-audience is the gateway's --audience, the gateway's
--manager-service-account is the manager's ServiceAccount, and the
manager's --eureka-url names the gateway's Service.

Eureka is not called from here: this command runs outside the cluster and
may not reach it. The manager reads every syncer's Eureka servers at each
resync and writes what it found into the condition EurekaReachable, which
is what the eureka check reports; the imports check reads the imports'
conditions the same way.`

type checkFlags struct {
	kube                 kubeFlags
	manager              managerFlags
	webhookConfiguration string
	certDays             int
	gatewayDeployment    string
}

func runCheck(ctx context.Context, e *env, args []string) error {
	var f checkFlags
	fs := e.flagSet("check", "[flags]", checkHelp)
	f.kube.add(fs, "")
	f.manager.add(fs)
	fs.StringVar(&f.webhookConfiguration, "webhook-configuration", manager.DefaultWebhookConfiguration, "name of Eurekube's MutatingWebhookConfiguration")
	fs.IntVar(&f.certDays, "cert-days", 14, "fail when the webhook's certificate expires within this many days")
	fs.StringVar(&f.gatewayDeployment, "gateway-deployment", DefaultGatewayDeployment, "name of the gateway's Deployment, in the manager's namespace")
	if err := parse(fs, args); err != nil {
		return err
	}
	if f.certDays < 0 {
		return usagef("--cert-days %d: want 0 or more", f.certDays)
	}
	cl, err := f.kube.connect()
	if err != nil {
		return err
	}
	findings := gatherFindings(ctx, cl, f, time.Now())
	printFindings(e.Out, findings)
	if failed(findings) {
		return errReported
	}
	return nil
}

// gatherFindings reads what each check needs and evaluates it; the
// gateway's checks come last.
func gatherFindings(ctx context.Context, c client.Client, f checkFlags, now time.Time) []Finding {
	out, m := installFindings(ctx, c, f, now)
	return append(out, gatewayFindings(ctx, c, f.manager.namespace, cmpOr(f.gatewayDeployment, DefaultGatewayDeployment), m)...)
}

// installFindings are the checks of the CRD, the manager, the webhook,
// the syncers, their pods and the imports; m is the manager's Deployment
// (nil when it could not be read).
func installFindings(ctx context.Context, c client.Client, f checkFlags, now time.Time) (out []Finding, m *managerDeployment) {

	crd := &apiextensionsv1.CustomResourceDefinition{}
	if ok, err := get(ctx, c, client.ObjectKey{Name: CRDName}, crd); err != nil {
		out = append(out, readFailure(checkCRD, err))
	} else {
		out = append(out, evaluateCRD(orNil(ok, crd)))
	}

	m, err := readManager(ctx, c, f.manager.namespace, f.manager.deployment)
	switch {
	case apierrors.IsNotFound(err):
		out = append(out, evaluateManager(nil, f.manager.namespace, f.manager.deployment))
	case err != nil:
		out = append(out, readFailure(checkManager, err))
	default:
		out = append(out, evaluateManager(m, f.manager.namespace, f.manager.deployment))
	}
	certMode, secretName := manager.CertificateModeCertManager, manager.DefaultCertificateSecret
	if m != nil {
		certMode, secretName = m.cfg.CertificateMode, m.cfg.CertificateSecret
	}

	mwc := &admissionregistrationv1.MutatingWebhookConfiguration{}
	ok, err := get(ctx, c, client.ObjectKey{Name: f.webhookConfiguration}, mwc)
	if err != nil {
		out = append(out, readFailure(checkWebhookConfig, err))
	} else {
		mwc = orNil(ok, mwc)
		target, err := readWebhookTarget(ctx, c, mwc)
		if err != nil {
			out = append(out, readFailure(checkWebhookConfig, err))
		} else {
			out = append(out, evaluateWebhookConfig(f.webhookConfiguration, mwc, target, certMode))
		}
	}

	secret := &corev1.Secret{}
	if ok, err := get(ctx, c, client.ObjectKey{Namespace: f.manager.namespace, Name: secretName}, secret); err != nil {
		out = append(out, readFailure(checkWebhookCert, err))
	} else {
		var caBundle []byte
		if mwc != nil && len(mwc.Webhooks) > 0 {
			caBundle = mwc.Webhooks[0].ClientConfig.CABundle
		}
		host := webhookHost(mwc)
		if host == "" {
			host = manager.DefaultWebhookService + "." + f.manager.namespace + ".svc"
		}
		out = append(out, evaluateCertificate(f.manager.namespace+"/"+secretName, orNil(ok, secret), caBundle, host, now, f.certDays, certMode))
	}

	// Imports are checked whether or not syncers can be listed.
	imports := importFindings(ctx, c, now)
	var syncers v1alpha1.EurekaSyncerList
	if err := c.List(ctx, &syncers); err != nil {
		for _, check := range []string{checkWebhookAnswers, checkEureka, checkImports, checkCredentials, checkInjected, checkRegistrar} {
			if check == checkImports {
				out = append(out, imports...)
				continue
			}
			out = append(out, Finding{Verdict: Warn, Check: check, Detail: fmt.Sprintf("not checked: cannot list EurekaSyncers: %v", err)})
		}
		return out, m
	}

	excluded := []string{f.manager.namespace}
	if m != nil {
		excluded = append(excluded, m.cfg.ExcludedNamespaces...)
	}
	out = append(out, evaluateWebhookAnswers(tryWebhook(ctx, c, syncers.Items, excluded, webhookNames(mwc))))
	out = append(out, evaluateEureka(syncers.Items)...)
	out = append(out, imports...)

	if m == nil {
		out = append(out, Finding{Verdict: Warn, Check: checkCredentials, Detail: "not checked: the manager's Deployment (its ServiceAccount) was not read"})
	} else {
		grant := m.cfg.Grant()
		out = append(out, evaluateCredentials(reviewCredentials(ctx, c, syncers.Items, grant), grant)...)
	}

	uninjected, outdated, err := podFindings(ctx, c, syncers.Items, m)
	if err != nil {
		out = append(out, readFailure(checkInjected, err))
		return out, m
	}
	out = append(out, evaluateInjected(syncers.Items, uninjected))
	current := ""
	if m != nil {
		current = m.cfg.RegistrarImage
	}
	out = append(out, evaluateRegistrar(syncers.Items, outdated, current))
	return out, m
}

// importFindings reads every import and the Service of its name, and
// evaluates them.
func importFindings(ctx context.Context, c client.Reader, now time.Time) []Finding {
	var list v1alpha1.EurekaImportList
	if err := c.List(ctx, &list); err != nil {
		if meta.IsNoMatchError(err) {
			return []Finding{{Verdict: Warn, Check: checkImports, Detail: "not checked: the cluster has no EurekaImport CRD (its Eurekube predates imports; kubectl apply -k manifests/crd adds it)"}}
		}
		return []Finding{readFailure(checkImports, fmt.Errorf("list EurekaImports: %w", err))}
	}
	var targets []importTarget
	for i := range list.Items {
		imp := &list.Items[i]
		if imp.DeletionTimestamp != nil {
			continue
		}
		if imp.IsPattern() {
			// Its Services are its apps' imports', listed on their own.
			targets = append(targets, importTarget{imp: imp})
			continue
		}
		t := importTarget{imp: imp, service: &corev1.Service{}}
		name := cmpOr(imp.Status.ServiceName, imp.EffectiveServiceName())
		ok, err := get(ctx, c, client.ObjectKey{Namespace: imp.Namespace, Name: name}, t.service)
		if err != nil {
			return []Finding{readFailure(checkImports, fmt.Errorf("read the Service %s/%s of import %s: %w", imp.Namespace, name, imp.Name, err))}
		}
		t.service = orNil(ok, t.service)
		targets = append(targets, t)
	}
	return evaluateImports(targets, now)
}

// get reads obj; ok is false when it does not exist.
func get(ctx context.Context, c client.Reader, key client.ObjectKey, obj client.Object) (ok bool, err error) {
	err = c.Get(ctx, key, obj)
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	return err == nil, err
}

func orNil[T any](ok bool, v *T) *T {
	if !ok {
		return nil
	}
	return v
}

func readFailure(check string, err error) Finding {
	return Finding{Verdict: Fail, Check: check, Detail: fmt.Sprintf("cannot read: %v", err), Fix: "run as a user who can read Eurekube's objects (a cluster administrator)"}
}

// readWebhookTarget reads the Service the webhook configuration calls and
// its EndpointSlices.
func readWebhookTarget(ctx context.Context, c client.Reader, mwc *admissionregistrationv1.MutatingWebhookConfiguration) (webhookTarget, error) {
	var t webhookTarget
	if mwc == nil || len(mwc.Webhooks) == 0 || mwc.Webhooks[0].ClientConfig.Service == nil {
		return t, nil
	}
	ref := mwc.Webhooks[0].ClientConfig.Service
	svc := &corev1.Service{}
	ok, err := get(ctx, c, client.ObjectKey{Namespace: ref.Namespace, Name: ref.Name}, svc)
	if err != nil || !ok {
		return t, err
	}
	t.service = svc
	var slices discoveryv1.EndpointSliceList
	if err := c.List(ctx, &slices, client.InNamespace(ref.Namespace), client.MatchingLabels{discoveryv1.LabelServiceName: ref.Name}); err != nil {
		return t, fmt.Errorf("EndpointSlices of Service %s/%s: %w", ref.Namespace, ref.Name, err)
	}
	t.slices = slices.Items
	return t, nil
}

// tryWebhook dry-run creates a pod that a Pod-mode syncer of an opted-in
// namespace selects, and says whether it came back injected. Nothing is
// written: the API server runs admission, webhooks included, and stores
// nothing. A permitted syncer is preferred (then one not yet judged): a
// refused one's pod is denied by policy, which shows only that the
// webhook answers. webhooks are the names of Eurekube's webhooks.
func tryWebhook(ctx context.Context, c client.Client, syncers []v1alpha1.EurekaSyncer, excluded, webhooks []string) webhookTrial {
	var namespaces corev1.NamespaceList
	if err := c.List(ctx, &namespaces, client.MatchingLabels{v1alpha1.NamespaceInjectionLabel: "enabled"}); err != nil {
		return webhookTrial{namespace: "(any)", syncer: "(any)", webhooks: webhooks, err: fmt.Errorf("list the opted-in namespaces: %w", err)}
	}
	var candidates []*v1alpha1.EurekaSyncer
	for _, ns := range namespaces.Items {
		if slices.Contains(excluded, ns.Name) || ns.DeletionTimestamp != nil {
			continue
		}
		for i := range syncers {
			s := &syncers[i]
			if s.Namespace != ns.Name || s.EffectiveMode() != v1alpha1.ModePod || s.DeletionTimestamp != nil {
				continue
			}
			if ok, err := s.Selects(trialPod(s).Labels); err != nil || !ok {
				continue // a selector no simple labels satisfy
			}
			candidates = append(candidates, s)
		}
	}
	if len(candidates) == 0 {
		return webhookTrial{}
	}
	slices.SortStableFunc(candidates, func(a, b *v1alpha1.EurekaSyncer) int { return permittedRank(a) - permittedRank(b) })
	s := candidates[0]
	t := webhookTrial{namespace: s.Namespace, syncer: s.Name, webhooks: webhooks}
	if c := meta.FindStatusCondition(s.Status.Conditions, v1alpha1.ConditionPermitted); c != nil && c.Status == metav1.ConditionFalse {
		t.refused = c.Reason
	}
	pod := trialPod(s)
	if t.err = c.Create(ctx, pod, client.DryRunAll); t.err == nil {
		t.injected = v1alpha1.RunsRegistrar(pod)
	}
	return t
}

// permittedRank orders the syncers a trial prefers: permitted for its
// current spec first, then those the manager has not judged (no
// condition, or one of an older spec), refused last.
func permittedRank(s *v1alpha1.EurekaSyncer) int {
	c := meta.FindStatusCondition(s.Status.Conditions, v1alpha1.ConditionPermitted)
	switch {
	case c == nil || c.ObservedGeneration != s.Generation:
		return 1
	case c.Status == metav1.ConditionTrue:
		return 0
	case c.Status == metav1.ConditionFalse:
		return 2
	}
	return 1
}

// webhookNames are the names of mwc's webhooks; none when it is nil.
func webhookNames(mwc *admissionregistrationv1.MutatingWebhookConfiguration) []string {
	if mwc == nil {
		return nil
	}
	names := make([]string, 0, len(mwc.Webhooks))
	for _, w := range mwc.Webhooks {
		names = append(names, w.Name)
	}
	return names
}

// trialPod is a minimal pod the syncer selects, declaring its port, that
// passes Pod Security "restricted". Its image is never pulled.
func trialPod(s *v1alpha1.EurekaSyncer) *corev1.Pod {
	labels := map[string]string{}
	for k, v := range s.Spec.Selector.MatchLabels {
		labels[k] = v
	}
	for _, r := range s.Spec.Selector.MatchExpressions {
		switch r.Operator {
		case metav1.LabelSelectorOpIn:
			if len(r.Values) > 0 {
				labels[r.Key] = r.Values[0]
			}
		case metav1.LabelSelectorOpExists:
			labels[r.Key] = "eurekube-check"
		}
	}
	port := corev1.ContainerPort{Name: "http", ContainerPort: 8080}
	if s.Spec.Port.Type == intstr.Int {
		port = corev1.ContainerPort{ContainerPort: s.Spec.Port.IntVal}
	} else if s.Spec.Port.StrVal != "" {
		port.Name = s.Spec.Port.StrVal
	}
	yes, no := true, false
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "eurekube-check-", Namespace: s.Namespace, Labels: labels},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name:  "app",
			Image: "registry.k8s.io/pause:3.10",
			Ports: []corev1.ContainerPort{port},
			SecurityContext: &corev1.SecurityContext{
				RunAsNonRoot:             &yes,
				AllowPrivilegeEscalation: &no,
				Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
				SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
			},
		}}},
	}
}

// reviewCredentials asks the API server whether the manager's
// ServiceAccount may get each Secret and ConfigMap the syncers'
// spec.eureka names.
func reviewCredentials(ctx context.Context, c client.Client, syncers []v1alpha1.EurekaSyncer, grant v1alpha1.ReadGrant) []credentialsAccess {
	// Who the manager is to the API server: its ServiceAccount's user and
	// groups.
	username := serviceaccount.MakeUsername(grant.ServiceAccountNamespace, grant.ServiceAccountName)
	groups := append(serviceaccount.MakeGroupNames(grant.ServiceAccountNamespace), user.AllAuthenticated)
	var out []credentialsAccess
	for i := range syncers {
		s := &syncers[i]
		for _, obj := range s.Spec.Eureka.ReadObjects() {
			review := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
				User:   username,
				Groups: groups,
				ResourceAttributes: &authorizationv1.ResourceAttributes{
					Namespace: s.Namespace, Verb: "get", Resource: obj.Resource, Name: obj.Name,
				},
			}}
			a := credentialsAccess{syncer: s, object: obj}
			if a.err = c.Create(ctx, review); a.err == nil {
				a.allowed, a.reason = review.Status.Allowed, review.Status.Reason
			}
			if obj.Kind == "Secret" {
				a.consented, a.consentErr = secretConsent(ctx, c, s.Namespace, obj.Name)
			}
			out = append(out, a)
		}
	}
	return out
}

// secretConsent reads whether a Secret consents to its use for Eureka
// (v1alpha1.SecretConsented): its metadata alone, never its data. nil: it
// does not exist (the syncer's condition says so).
func secretConsent(ctx context.Context, c client.Reader, namespace, name string) (*bool, error) {
	var m metav1.PartialObjectMetadata
	m.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Secret"))
	if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, &m); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("read the labels of Secret %s/%s: %w", namespace, name, err)
	}
	consented := v1alpha1.SecretConsented(m.Labels)
	return &consented, nil
}

// podFindings are, across the syncers' namespaces, the selected pods
// without the registrar and the injected pods on another registrar than
// the one the webhook injects now (m nil: not known), as namespace/name.
func podFindings(ctx context.Context, c client.Reader, syncers []v1alpha1.EurekaSyncer, m *managerDeployment) (uninjected, outdated []string, err error) {
	pods := map[string][]corev1.Pod{}
	seen := map[string]bool{}
	for i := range syncers {
		s := &syncers[i]
		if s.EffectiveMode() != v1alpha1.ModePod || s.DeletionTimestamp != nil {
			continue
		}
		if _, ok := pods[s.Namespace]; !ok {
			var list corev1.PodList
			if err := c.List(ctx, &list, client.InNamespace(s.Namespace)); err != nil {
				return nil, nil, fmt.Errorf("list the pods of namespace %s: %w", s.Namespace, err)
			}
			pods[s.Namespace] = list.Items
		}
		for j := range pods[s.Namespace] {
			p := &pods[s.Namespace][j]
			name := p.Namespace + "/" + p.Name
			if !running(p) || seen[name] {
				continue
			}
			if v1alpha1.RunsRegistrar(p) {
				if m != nil && p.Annotations[v1alpha1.SyncerAnnotation] == s.Name &&
					v1alpha1.InjectedRegistrarImage(p) != s.EffectiveRegistrarImage(m.cfg.RegistrarImage) {
					seen[name] = true
					outdated = append(outdated, name)
				}
				continue
			}
			if p.Annotations[v1alpha1.StatusAnnotation] == v1alpha1.StatusSkipped {
				continue // left without the registrar on purpose
			}
			if selects, err := s.Selects(p.Labels); err == nil && selects {
				seen[name] = true
				uninjected = append(uninjected, name)
			}
		}
	}
	return uninjected, outdated, nil
}

// running is true for a pod that is neither finished nor being deleted.
func running(p *corev1.Pod) bool {
	return p.DeletionTimestamp == nil && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed
}
