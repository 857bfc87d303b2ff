package cli

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/eurekube/eurekube/api/v1alpha1"
	"github.com/eurekube/eurekube/eureka"
	"github.com/eurekube/eurekube/manager"
)

// Verdict is a check's outcome.
type Verdict string

// Verdicts.
const (
	Pass Verdict = "PASS"
	Warn Verdict = "WARN"
	Fail Verdict = "FAIL"
)

// Finding is one line of eurekube check.
type Finding struct {
	Verdict Verdict
	// Check names the check: crd, webhook-config, …
	Check string
	// Detail says what was found, naming the objects.
	Detail string
	// Fix says what to do (FAIL only).
	Fix string
}

// Names of the checks, in the order they run.
const (
	checkCRD            = "crd"
	checkManager        = "manager"
	checkWebhookConfig  = "webhook-config"
	checkWebhookCert    = "webhook-cert"
	checkWebhookAnswers = "webhook-answers"
	checkEureka         = "eureka"
	checkCredentials    = "credentials-rbac"
	checkInjected       = "pods-injected"
	checkRegistrar      = "registrar-current"
	checkImports        = "imports"
)

// CRDName is the name of the EurekaSyncer CRD.
var CRDName = "eurekasyncers." + v1alpha1.GroupVersion.Group

// maxNamed bounds the pods a finding names.
const maxNamed = 5

// evaluateCRD: the CRD exists and is established. crd is nil when absent.
func evaluateCRD(crd *apiextensionsv1.CustomResourceDefinition) Finding {
	f := Finding{Check: checkCRD}
	if crd == nil {
		f.Verdict, f.Detail = Fail, "CustomResourceDefinition "+CRDName+" not found"
		f.Fix = "install Eurekube's CRD: kubectl apply -k manifests/crd (or install the Helm chart)"
		return f
	}
	var established bool
	for _, c := range crd.Status.Conditions {
		if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
			established = true
		}
	}
	var versions []string
	for _, v := range crd.Spec.Versions {
		if v.Served {
			versions = append(versions, v.Name)
		}
	}
	if !established {
		f.Verdict, f.Detail = Fail, fmt.Sprintf("CustomResourceDefinition %s is not established yet", CRDName)
		f.Fix = "kubectl describe crd " + CRDName + " (its conditions say why; a name conflict or a bad schema)"
		return f
	}
	f.Verdict, f.Detail = Pass, fmt.Sprintf("%s established, serving %s", CRDName, strings.Join(versions, ", "))
	return f
}

// evaluateManager: the manager's Deployment exists and has a ready replica.
func evaluateManager(m *managerDeployment, namespace, name string) Finding {
	f := Finding{Check: checkManager}
	if m == nil {
		f.Verdict, f.Detail = Fail, fmt.Sprintf("Deployment %s/%s not found", namespace, name)
		f.Fix = "install the manager (kubectl apply -k manifests/default, or the Helm chart); --manager-namespace and --manager-deployment name another"
		return f
	}
	d := m.deployment
	want := int32(1)
	if d.Spec.Replicas != nil {
		want = *d.Spec.Replicas
	}
	detail := fmt.Sprintf("Deployment %s/%s: %d/%d replicas ready, registrar %s", namespace, name, d.Status.ReadyReplicas, want, orDash(m.cfg.RegistrarImage))
	if len(m.ignored) > 0 {
		detail += fmt.Sprintf(" (flags unknown to this eurekube, ignored: %s)", strings.Join(m.ignored, ", "))
	}
	if d.Status.ReadyReplicas == 0 {
		f.Verdict, f.Detail = Fail, detail
		f.Fix = fmt.Sprintf("kubectl -n %s describe deployment %s; kubectl -n %s logs deployment/%s", namespace, name, namespace, name)
		return f
	}
	f.Verdict, f.Detail = Pass, detail
	return f
}

// webhookTarget is the Service a webhook configuration calls, with its
// ready endpoints, or its URL.
type webhookTarget struct {
	service *corev1.Service
	slices  []discoveryv1.EndpointSlice
}

// evaluateWebhookConfig: the configuration exists, every webhook of it has
// a caBundle, and its Service exists with ready endpoints.
func evaluateWebhookConfig(name string, mwc *admissionregistrationv1.MutatingWebhookConfiguration, target webhookTarget, certMode string) Finding {
	f := Finding{Check: checkWebhookConfig, Verdict: Fail}
	if mwc == nil {
		f.Detail = "MutatingWebhookConfiguration " + name + " not found: no pod is injected"
		f.Fix = "install it (kubectl apply -k manifests/default, or the Helm chart); --webhook-configuration names another"
		return f
	}
	if len(mwc.Webhooks) == 0 {
		f.Detail = "MutatingWebhookConfiguration " + name + " has no webhook"
		f.Fix = "apply manifests/webhook/mutating_webhook.yaml again"
		return f
	}
	for _, w := range mwc.Webhooks {
		if len(w.ClientConfig.CABundle) == 0 {
			f.Detail = fmt.Sprintf("MutatingWebhookConfiguration %s: webhook %s has no caBundle: the API server cannot trust the manager", name, w.Name)
			if certMode == manager.CertificateModeSelfManaged {
				f.Fix = "the manager's leader writes it in self-managed mode: read its logs (kubectl -n <manager namespace> logs deployment/eurekube-manager)"
			} else {
				f.Fix = "cert-manager's CA injector writes it (annotation cert-manager.io/inject-ca-from): check that cert-manager runs (kubectl -n cert-manager get pods) and the Certificate is Ready"
			}
			return f
		}
	}
	svcRef := mwc.Webhooks[0].ClientConfig.Service
	if svcRef == nil {
		f.Verdict = Pass
		f.Detail = fmt.Sprintf("MutatingWebhookConfiguration %s: caBundle set; calls %s directly (no Service to check)", name, strDeref(mwc.Webhooks[0].ClientConfig.URL))
		return f
	}
	svc := svcRef.Namespace + "/" + svcRef.Name
	if target.service == nil {
		f.Detail = fmt.Sprintf("MutatingWebhookConfiguration %s: caBundle set, but its Service %s is not found", name, svc)
		f.Fix = "install it (manifests/webhook/service.yaml, or the Helm chart)"
		return f
	}
	ready := readyEndpoints(target.slices)
	if ready == 0 {
		f.Detail = fmt.Sprintf("MutatingWebhookConfiguration %s: caBundle set, but Service %s has no ready endpoint: no manager replica is ready to answer", name, svc)
		f.Fix = fmt.Sprintf("kubectl -n %s get pods,endpointslices -l app.kubernetes.io/name=eurekube; read the manager's logs", svcRef.Namespace)
		return f
	}
	f.Verdict = Pass
	f.Detail = fmt.Sprintf("MutatingWebhookConfiguration %s: caBundle set, Service %s has %d ready endpoint(s)", name, svc, ready)
	return f
}

func readyEndpoints(slices []discoveryv1.EndpointSlice) int {
	n := 0
	for _, s := range slices {
		for _, ep := range s.Endpoints {
			if ep.Conditions.Ready == nil || *ep.Conditions.Ready {
				n++
			}
		}
	}
	return n
}

// webhookHost is the name the API server verifies the webhook's
// certificate for: <service>.<namespace>.svc, or the URL's host.
func webhookHost(mwc *admissionregistrationv1.MutatingWebhookConfiguration) string {
	if mwc == nil || len(mwc.Webhooks) == 0 {
		return ""
	}
	cc := mwc.Webhooks[0].ClientConfig
	if cc.Service != nil {
		return cc.Service.Name + "." + cc.Service.Namespace + ".svc"
	}
	host := strDeref(cc.URL)
	host = strings.TrimPrefix(host, "https://")
	host, _, _ = strings.Cut(host, "/")
	if i := strings.LastIndex(host, ":"); i >= 0 && !strings.HasSuffix(host, "]") {
		host = host[:i]
	}
	return strings.Trim(host, "[]")
}

// evaluateCertificate: the serving certificate in the Secret chains to the
// caBundle, covers host and is valid for more than minDays from now.
func evaluateCertificate(secretName string, secret *corev1.Secret, caBundle []byte, host string, now time.Time, minDays int, certMode string) Finding {
	f := Finding{Check: checkWebhookCert, Verdict: Fail}
	renewFix := "cert-manager renews it before it expires: kubectl describe certificate -n <manager namespace> (is cert-manager running? is the Certificate Ready?)"
	if certMode == manager.CertificateModeSelfManaged {
		renewFix = "the manager's leader renews it in self-managed mode: read its logs; deleting the Secret makes it issue a new one"
	}
	if secret == nil {
		f.Detail, f.Fix = "Secret "+secretName+" not found: the webhook server has no certificate", renewFix
		return f
	}
	chain, err := parseCertificates(secret.Data[corev1.TLSCertKey])
	if err != nil {
		f.Detail, f.Fix = fmt.Sprintf("Secret %s: %s: %v", secretName, corev1.TLSCertKey, err), renewFix
		return f
	}
	leaf := chain[0]
	days := int(leaf.NotAfter.Sub(now).Hours() / 24)
	switch {
	case now.After(leaf.NotAfter):
		f.Detail, f.Fix = fmt.Sprintf("Secret %s: the serving certificate expired on %s", secretName, leaf.NotAfter.UTC().Format(time.DateOnly)), renewFix
		return f
	case now.Before(leaf.NotBefore):
		f.Detail, f.Fix = fmt.Sprintf("Secret %s: the serving certificate is valid only from %s (is this machine's clock right?)", secretName, leaf.NotBefore.UTC().Format(time.RFC3339)), renewFix
		return f
	case leaf.NotAfter.Sub(now) < time.Duration(minDays)*24*time.Hour:
		f.Detail, f.Fix = fmt.Sprintf("Secret %s: the serving certificate expires in %d days (%s), within --cert-days %d", secretName, days, leaf.NotAfter.UTC().Format(time.DateOnly), minDays), renewFix
		return f
	}
	if len(caBundle) == 0 {
		f.Detail, f.Fix = fmt.Sprintf("Secret %s: valid for %d days, but there is no caBundle to verify it against", secretName, days), "see the webhook-config check"
		return f
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(caBundle) {
		f.Detail, f.Fix = "the webhook configuration's caBundle holds no PEM certificate", renewFix
		return f
	}
	intermediates := x509.NewCertPool()
	for _, c := range chain[1:] {
		intermediates.AddCert(c)
	}
	_, err = leaf.Verify(x509.VerifyOptions{Roots: roots, Intermediates: intermediates, DNSName: host, CurrentTime: now, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
	if err != nil {
		f.Detail = fmt.Sprintf("Secret %s: the serving certificate does not verify for %s against the caBundle: %v", secretName, host, err)
		f.Fix = "the caBundle and the Secret must come from the same CA: " + renewFix
		return f
	}
	f.Verdict = Pass
	f.Detail = fmt.Sprintf("Secret %s: valid until %s (%d days), chains to the caBundle, covers %s", secretName, leaf.NotAfter.UTC().Format(time.DateOnly), days, host)
	return f
}

func parseCertificates(data []byte) ([]*x509.Certificate, error) {
	var chain []*x509.Certificate
	for {
		var block *pem.Block
		block, data = pem.Decode(data)
		if block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, err
		}
		chain = append(chain, c)
	}
	if len(chain) == 0 {
		return nil, errors.New("no PEM certificate")
	}
	return chain, nil
}

// webhookTrial is the outcome of a dry-run pod create.
type webhookTrial struct {
	// namespace and syncer of the trial; empty when none could be tried.
	namespace, syncer string
	// refused is the reason of the syncer's Permitted condition when it
	// was False: no permitted syncer had a pod to try.
	refused string
	// webhooks are the names of the webhooks of Eurekube's
	// MutatingWebhookConfiguration (none when it was not read).
	webhooks []string
	// injected is true when the returned pod runs the registrar.
	injected bool
	err      error
}

// How a dry-run pod's refusal came about: the answer tells the webhook
// that works and denies a pod by policy apart from the webhook that
// cannot be reached.
type trialRefusal int

const (
	// deniedByWebhook: Eurekube's webhook answered and denied the pod.
	deniedByWebhook trialRefusal = iota
	// webhookErrored: Eurekube's webhook answered with an error of its own
	// (a 5xx: it could not read what it decides from).
	webhookErrored
	// webhookUnreachable: the API server could not call the webhook (no
	// endpoints, TLS, network, timeout).
	webhookUnreachable
	// refusedOtherwise: something else refused the pod (RBAC, another
	// webhook, an admission policy, Pod Security).
	refusedOtherwise
)

// The API server's words for a webhook's denial and for a call that
// failed (k8s.io/apiserver's webhook errors); a denial's code is the
// webhook's own.
var (
	deniedByRE    = regexp.MustCompile(`admission webhook "([^"]+)" denied the request`)
	callFailedRE  = regexp.MustCompile(`failed calling webhook "([^"]+)"`)
	eurekubeHooks = []string{"inject.eurekube.io"}
)

// classifyTrialError says how the API server's refusal of the dry-run pod
// came about, and which webhook it names. webhooks are Eurekube's (the
// manifests' name when none were read).
func classifyTrialError(err error, webhooks []string) (trialRefusal, string) {
	if len(webhooks) == 0 {
		webhooks = eurekubeHooks
	}
	msg := err.Error()
	if m := callFailedRE.FindStringSubmatch(msg); m != nil && slices.Contains(webhooks, m[1]) {
		return webhookUnreachable, m[1]
	}
	if m := deniedByRE.FindStringSubmatch(msg); m != nil && slices.Contains(webhooks, m[1]) {
		var status apierrors.APIStatus
		if errors.As(err, &status) && status.Status().Code >= 500 {
			return webhookErrored, m[1]
		}
		return deniedByWebhook, m[1]
	}
	if apierrors.IsTimeout(err) || apierrors.IsServerTimeout(err) || errors.Is(err, context.DeadlineExceeded) {
		return webhookUnreachable, ""
	}
	return refusedOtherwise, ""
}

// evaluateWebhookAnswers: the API server called the webhook for a dry-run
// pod and the pod came back injected, or the webhook denied it by policy
// (it answered: a PASS that says so).
func evaluateWebhookAnswers(t webhookTrial) Finding {
	f := Finding{Check: checkWebhookAnswers}
	where := fmt.Sprintf("a dry-run pod in namespace %s selected by EurekaSyncer %s", t.namespace, t.syncer)
	if t.err == nil {
		switch {
		case t.namespace == "":
			f.Verdict, f.Detail = Warn, "nothing to try: no namespace labelled "+v1alpha1.NamespaceInjectionLabel+"=enabled has a Pod-mode EurekaSyncer"
		case !t.injected:
			f.Verdict, f.Detail = Fail, where+" came back without the "+v1alpha1.RegistrarContainerName+" container"
			f.Fix = "the webhook did not inject it: check the webhook configuration's namespaceSelector and objectSelector, and the manager's logs (each decision is logged with its reason)"
		default:
			f.Verdict, f.Detail = Pass, where+" came back with the "+v1alpha1.RegistrarContainerName+" container"
		}
		return f
	}
	kind, hook := classifyTrialError(t.err, t.webhooks)
	switch kind {
	case deniedByWebhook:
		f.Verdict, f.Detail = Pass, fmt.Sprintf("%s was denied by policy (the webhook works: %s answered): %v", where, hook, t.err)
		if t.refused != "" {
			f.Detail += fmt.Sprintf(". EurekaSyncer %s is refused (Permitted False, %s: kubectl -n %s describe esync %s says why), and no permitted syncer selects a pod to try",
				t.syncer, t.refused, t.namespace, t.syncer)
		}
	case webhookErrored:
		f.Verdict, f.Detail = Fail, fmt.Sprintf("%s: the webhook %s answered with an error of its own: %v", where, hook, t.err)
		f.Fix = "the API server reaches the webhook, which could not decide: read the manager's logs (each decision is logged with its reason) and check that its ServiceAccount may read pods' namespaces, EurekaSyncers and EurekaAppPolicies"
	case webhookUnreachable:
		f.Verdict, f.Detail = Fail, fmt.Sprintf("%s was refused: the API server cannot reach the webhook: %v", where, t.err)
		f.Fix = "the API server could not call the webhook: check the manager's pods and logs, the webhook-config and webhook-cert checks, and network policies between the API server and the manager"
	default:
		f.Verdict, f.Detail = Warn, fmt.Sprintf("%s was refused, not by Eurekube's webhook, so whether it answers is not known: %v (read the refusal: RBAC to create pods there, another admission webhook or policy, Pod Security)", where, t.err)
	}
	return f
}

// evaluateEureka: what the manager found when it last read each syncer's
// Eureka servers, from the EurekaReachable condition.
func evaluateEureka(syncers []v1alpha1.EurekaSyncer) []Finding {
	if len(syncers) == 0 {
		return []Finding{{Verdict: Pass, Check: checkEureka, Detail: "no EurekaSyncer yet"}}
	}
	var out []Finding
	for i := range syncers {
		s := &syncers[i]
		f := Finding{Check: checkEureka}
		c := meta.FindStatusCondition(s.Status.Conditions, v1alpha1.ConditionEurekaReachable)
		refused := meta.FindStatusCondition(s.Status.Conditions, v1alpha1.ConditionPermitted)
		name := s.Namespace + "/" + s.Name
		switch {
		case refused != nil && refused.Status == metav1.ConditionFalse && (c == nil || c.Status != metav1.ConditionTrue):
			// Not a fault of Eureka or of the installation: the platform
			// refuses what the syncer asks for, and the manager contacts
			// no Eureka for it.
			f.Verdict, f.Detail = Warn, fmt.Sprintf("%s: refused by the platform (Permitted False, %s: %s); its Eureka servers are not contacted; kubectl -n %s describe esync %s says why and the fix",
				name, refused.Reason, refused.Message, s.Namespace, s.Name)
		case c == nil:
			f.Verdict, f.Detail = Warn, name+": not reconciled yet (no "+v1alpha1.ConditionEurekaReachable+" condition): is the manager running?"
		case c.Status == metav1.ConditionFalse:
			f.Verdict, f.Detail = Fail, fmt.Sprintf("%s: %s: %s", name, c.Reason, c.Message)
			f.Fix = fmt.Sprintf("check spec.eureka of %s (or the manager's --eureka-url), its credentials Secret, and that the manager's pods reach Eureka; the manager reads it again every resync", name)
		case c.Status == metav1.ConditionTrue:
			f.Verdict, f.Detail = Pass, fmt.Sprintf("%s: %s", name, cmpOr(c.Message, c.Reason))
		default:
			f.Verdict, f.Detail = Warn, fmt.Sprintf("%s: %s %s: %s", name, v1alpha1.ConditionEurekaReachable, c.Status, c.Message)
		}
		out = append(out, f)
	}
	return out
}

// credentialsAccess is whether the manager may get one object a syncer's
// spec.eureka names (a SubjectAccessReview), and for a Secret whether it
// consents to its use (nil: not known).
type credentialsAccess struct {
	syncer     *v1alpha1.EurekaSyncer
	object     v1alpha1.ReadObject
	allowed    bool
	reason     string
	err        error
	consented  *bool
	consentErr error
}

// evaluateCredentials: the manager's ServiceAccount can get each Secret
// and ConfigMap the syncers' spec.eureka names (credentials, CA bundle,
// client certificate), and each Secret consents to its use; grant is how
// a namespace lets it.
func evaluateCredentials(access []credentialsAccess, grant v1alpha1.ReadGrant) []Finding {
	if len(access) == 0 {
		return []Finding{{Verdict: Pass, Check: checkCredentials, Detail: "no EurekaSyncer names a Secret or ConfigMap for Eureka"}}
	}
	var out []Finding
	for _, a := range access {
		ns := a.syncer.Namespace
		what := fmt.Sprintf("%s %s/%s (%s)", a.object.Kind, ns, a.object.Name, a.object.Field)
		f := Finding{Check: checkCredentials}
		who := fmt.Sprintf("ServiceAccount %s/%s", grant.ServiceAccountNamespace, grant.ServiceAccountName)
		switch {
		case a.err != nil:
			f.Verdict, f.Detail = Warn, fmt.Sprintf("%s/%s: could not ask whether %s can get %s: %v", ns, a.syncer.Name, who, what, a.err)
		case a.allowed && a.consentErr != nil:
			f.Verdict, f.Detail = Warn, fmt.Sprintf("%s/%s: %s can get %s; could not check its consent: %v", ns, a.syncer.Name, who, what, a.consentErr)
		case a.allowed && a.consented != nil && !*a.consented:
			f.Verdict, f.Detail = Fail, fmt.Sprintf("%s/%s: %s", ns, a.syncer.Name, v1alpha1.SecretNotConsented(ns, a.object.Name, a.object.Field))
			f.Fix = v1alpha1.SecretConsentCommand(ns, a.object.Name)
		case a.allowed:
			f.Verdict, f.Detail = Pass, fmt.Sprintf("%s/%s: %s can get %s", ns, a.syncer.Name, who, what)
		default:
			f.Verdict, f.Detail = Fail, fmt.Sprintf("%s/%s: %s cannot get %s, so the manager cannot check its instances", ns, a.syncer.Name, who, what)
			f.Fix = grant.Command(ns)
		}
		out = append(out, f)
	}
	return out
}

// evaluateInjected: every selected pod runs the registrar, by the
// syncers' status (selectedPods, injectedPods) and by the pods themselves.
// uninjected are the selected pods without the registrar, by name.
func evaluateInjected(syncers []v1alpha1.EurekaSyncer, uninjected []string) Finding {
	f := Finding{Check: checkInjected}
	var short []string
	for _, s := range syncers {
		if missing := s.Status.SelectedPods - s.Status.InjectedPods; s.EffectiveMode() == v1alpha1.ModePod && missing > 0 {
			short = append(short, fmt.Sprintf("%s/%s %d of %d injected", s.Namespace, s.Name, s.Status.InjectedPods, s.Status.SelectedPods))
		}
	}
	if len(short) == 0 && len(uninjected) == 0 {
		f.Verdict, f.Detail = Pass, fmt.Sprintf("every selected pod of %d EurekaSyncer(s) runs the registrar", len(syncers))
		return f
	}
	f.Verdict = Fail
	f.Detail = fmt.Sprintf("%d selected pod(s) run without the registrar", len(uninjected))
	if len(uninjected) > 0 {
		f.Detail += ": " + named(uninjected)
	}
	if len(short) > 0 {
		f.Detail += " (status: " + strings.Join(short, ", ") + ")"
	}
	f.Fix = "restart them so the webhook injects them (kubectl rollout restart deployment/<name>): they were created before their namespace was labelled, while the webhook was down, or opted out with eurekube.io/inject=false"
	return f
}

// evaluateRegistrar: pods run the registrar the webhook injects now, by
// the syncers' status (outdatedRegistrarPods, RegistrarCurrent) and by
// the pods. outdated names the pods on another image.
func evaluateRegistrar(syncers []v1alpha1.EurekaSyncer, outdated []string, current string) Finding {
	f := Finding{Check: checkRegistrar}
	var stale []string
	for _, s := range syncers {
		c := meta.FindStatusCondition(s.Status.Conditions, v1alpha1.ConditionRegistrarCurrent)
		if s.Status.OutdatedRegistrarPods > 0 || c != nil && c.Status == metav1.ConditionFalse {
			stale = append(stale, fmt.Sprintf("%s/%s %d outdated", s.Namespace, s.Name, s.Status.OutdatedRegistrarPods))
		}
	}
	if len(stale) == 0 && len(outdated) == 0 {
		f.Verdict, f.Detail = Pass, "every injected pod runs the registrar the webhook injects now ("+orDash(current)+")"
		return f
	}
	f.Verdict = Warn
	f.Detail = fmt.Sprintf("%d pod(s) run an older registrar than %s", len(outdated), orDash(current))
	if len(outdated) > 0 {
		f.Detail += ": " + named(outdated)
	}
	if len(stale) > 0 {
		f.Detail += " (status: " + strings.Join(stale, ", ") + ")"
	}
	f.Detail += "; a rollout of their workloads picks the current one up"
	return f
}

// importTarget is an import with the Service of its name (nil: none).
type importTarget struct {
	imp     *v1alpha1.EurekaImport
	service *corev1.Service
}

// evaluateImports: per import, what the manager last wrote (Permitted,
// EurekaReachable, ServiceOwned, Synced) and that the Service exists and
// is the import's.
func evaluateImports(targets []importTarget, now time.Time) []Finding {
	if len(targets) == 0 {
		return []Finding{{Verdict: Pass, Check: checkImports, Detail: "no EurekaImport"}}
	}
	out := make([]Finding, 0, len(targets))
	for _, t := range targets {
		out = append(out, evaluateImport(t, now))
	}
	return out
}

func evaluateImport(t importTarget, now time.Time) Finding {
	imp := t.imp
	name := imp.Namespace + "/" + imp.Name
	svcName := cmpOr(imp.Status.ServiceName, imp.EffectiveServiceName())
	f := Finding{Check: checkImports, Verdict: Fail}
	conds := imp.Status.Conditions
	synced := meta.FindStatusCondition(conds, v1alpha1.ConditionSynced)
	falseOf := func(typ string) *metav1.Condition {
		if c := meta.FindStatusCondition(conds, typ); c != nil && c.Status == metav1.ConditionFalse {
			return c
		}
		return nil
	}
	said := func(c *metav1.Condition) string { return fmt.Sprintf("%s: %s: %s", name, c.Reason, c.Message) }
	switch {
	case synced == nil:
		f.Verdict, f.Detail = Warn, name+": not reconciled yet (no "+v1alpha1.ConditionSynced+" condition): is the manager running?"
		return f
	case falseOf(v1alpha1.ConditionPermitted) != nil:
		f.Detail = said(falseOf(v1alpha1.ConditionPermitted))
		f.Fix = fmt.Sprintf("the platform decides: an EurekaAppPolicy must grant namespace %s the app %s, and the manager's --allowed-eureka-host its Eureka servers; or change spec.eureka", imp.Namespace, imp.EffectiveApp())
		return f
	case falseOf(v1alpha1.ConditionEurekaReachable) != nil:
		f.Detail = said(falseOf(v1alpha1.ConditionEurekaReachable)) + "; " + synced.Message
		f.Fix = fmt.Sprintf("check spec.eureka of %s (or the manager's --eureka-url), its credentials Secret, and that the manager's pods reach Eureka; the endpoints stay as last read until it answers", name)
		return f
	case falseOf(v1alpha1.ConditionServiceOwned) != nil:
		f.Detail = said(falseOf(v1alpha1.ConditionServiceOwned))
		f.Fix = fmt.Sprintf("set spec.service.name of %s to a free name, or delete Service %s/%s if nothing needs it", name, imp.Namespace, svcName)
		return f
	case synced.Status != metav1.ConditionTrue && synced.Reason == v1alpha1.ReasonRegistryEmptied:
		// The endpoints are served as last written while the hold lasts.
		f.Verdict, f.Detail = Warn, said(synced)
		return f
	case synced.Status != metav1.ConditionTrue:
		f.Detail = said(synced)
		f.Fix = fmt.Sprintf("the message says what the manager saw: an app Eureka does not list yet (check spec.app), or instances the Service cannot serve: none of its ports enabled (spec.service.ports[].instancePort), a host name for ipAddr, an IP family the Service lacks; kubectl -n %s describe eimp %s", imp.Namespace, imp.Name)
		return f
	case imp.IsPattern():
		// A pattern of apps: each app's import, checked on its own, has
		// the Service.
		f.Verdict, f.Detail = Pass, fmt.Sprintf("%s: pattern %s: %s, %s endpoint(s) ready", name, imp.EffectiveApp(), cmpOr(imp.Status.ServiceName, "no Service"), cmpOr(imp.Status.Endpoints, "0/0"))
		return f
	case t.service == nil:
		f.Detail = fmt.Sprintf("%s: Service %s/%s not found, though the import is Synced", name, imp.Namespace, svcName)
		f.Fix = "the manager makes it again at its next resync; if it stays missing, read the manager's logs"
		return f
	case !metav1.IsControlledBy(t.service, imp):
		owner := "no controller"
		if ref := metav1.GetControllerOf(t.service); ref != nil {
			owner = "controlled by " + ref.Kind + " " + ref.Name
		}
		f.Detail = fmt.Sprintf("%s: Service %s/%s is not this import's (%s)", name, imp.Namespace, svcName, owner)
		f.Fix = fmt.Sprintf("set spec.service.name of %s to a free name, or delete that Service if nothing needs it", name)
		return f
	}
	lastSync := "never"
	if imp.Status.LastSyncTime != nil {
		lastSync = age(imp.Status.LastSyncTime.Time, now) + " ago"
	}
	detail := fmt.Sprintf("%s: Service %s, %s endpoint(s) ready, synced %s", name, svcName, cmpOr(imp.Status.Endpoints, "0/0"), lastSync)
	switch {
	case synced.Reason == v1alpha1.ReasonLeasesExpired:
		f.Verdict, f.Detail = Warn, name+": "+synced.Message
	case imp.Status.ReadyEndpoints == 0:
		f.Verdict, f.Detail = Warn, detail+": no instance of "+imp.EffectiveApp()+" is UP, so calls to the Service fail"
	case falseOf(v1alpha1.ConditionInstancesServed) != nil:
		f.Verdict, f.Detail = Warn, detail+"; "+said(falseOf(v1alpha1.ConditionInstancesServed))
	default:
		f.Verdict, f.Detail = Pass, detail
	}
	return f
}

// named lists up to maxNamed names, sorted, and how many more.
func named(names []string) string {
	names = slices.Sorted(slices.Values(names))
	if len(names) <= maxNamed {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(names[:maxNamed], ", "), len(names)-maxNamed)
}

func strDeref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// failed is true when a finding failed.
func failed(findings []Finding) bool {
	return slices.ContainsFunc(findings, func(f Finding) bool { return f.Verdict == Fail })
}

// printFindings writes one line per finding, the check names aligned, and
// an indented fix: line under each failure.
func printFindings(w interface{ Write([]byte) (int, error) }, findings []Finding) {
	width := 0
	for _, f := range findings {
		width = max(width, len(f.Check))
	}
	// Redacted: a detail may quote what an older manager wrote, or a
	// syncer's URL, with a password.
	for _, f := range findings {
		fmt.Fprintf(w, "%s  %-*s  %s\n", f.Verdict, width, f.Check, eureka.Redact(f.Detail))
		if f.Verdict == Fail && f.Fix != "" {
			fmt.Fprintf(w, "      fix: %s\n", eureka.Redact(f.Fix))
		}
	}
}
