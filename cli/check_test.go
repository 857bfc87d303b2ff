package cli

import (
	"errors"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/eurekube/eurekube/api/v1alpha1"
	"github.com/eurekube/eurekube/certs"
	"github.com/eurekube/eurekube/internal/builders"
	"github.com/eurekube/eurekube/manager"
)

// expect fails t unless f has the verdict and its detail (and fix, for a
// failure) hold the words.
func expect(t *testing.T, f Finding, verdict Verdict, detail ...string) {
	t.Helper()
	if f.Verdict != verdict {
		t.Errorf("%s: %s %q, want %s", f.Check, f.Verdict, f.Detail, verdict)
	}
	for _, w := range detail {
		if !strings.Contains(f.Detail+" fix: "+f.Fix, w) {
			t.Errorf("%s: %q (fix %q) does not say %q", f.Check, f.Detail, f.Fix, w)
		}
	}
	if verdict == Fail && f.Fix == "" {
		t.Errorf("%s: a failure without a fix", f.Check)
	}
}

func TestCheckCRD_MissingOrNotEstablishedFails(t *testing.T) {
	expect(t, evaluateCRD(nil), Fail, "eurekasyncers.eurekube.io not found", "kubectl apply -k manifests/crd")
	crd := &apiextensionsv1.CustomResourceDefinition{Spec: apiextensionsv1.CustomResourceDefinitionSpec{
		Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v1alpha1", Served: true}},
	}}
	expect(t, evaluateCRD(crd), Fail, "not established")
	crd.Status.Conditions = []apiextensionsv1.CustomResourceDefinitionCondition{{Type: apiextensionsv1.Established, Status: apiextensionsv1.ConditionTrue}}
	expect(t, evaluateCRD(crd), Pass, "established, serving v1alpha1")
}

func webhookConfig(caBundle []byte) *admissionregistrationv1.MutatingWebhookConfiguration {
	return &admissionregistrationv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "eurekube"},
		Webhooks: []admissionregistrationv1.MutatingWebhook{{
			Name: "inject.eurekube.io",
			ClientConfig: admissionregistrationv1.WebhookClientConfig{
				CABundle: caBundle,
				Service:  &admissionregistrationv1.ServiceReference{Namespace: "eurekube-system", Name: "eurekube-webhook"},
			},
		}},
	}
}

func TestCheckWebhookConfig_NeedsACABundleAndAReadyService(t *testing.T) {
	svc := &corev1.Service{}
	ready, notReady := true, false
	slices := []discoveryv1.EndpointSlice{{Endpoints: []discoveryv1.Endpoint{
		{Conditions: discoveryv1.EndpointConditions{Ready: &ready}},
		{Conditions: discoveryv1.EndpointConditions{Ready: &notReady}},
	}}}
	expect(t, evaluateWebhookConfig("eurekube", nil, webhookTarget{}, manager.CertificateModeCertManager), Fail, "MutatingWebhookConfiguration eurekube not found")
	expect(t, evaluateWebhookConfig("eurekube", webhookConfig(nil), webhookTarget{service: svc, slices: slices}, manager.CertificateModeCertManager),
		Fail, "webhook inject.eurekube.io has no caBundle", "cert-manager")
	expect(t, evaluateWebhookConfig("eurekube", webhookConfig(nil), webhookTarget{}, manager.CertificateModeSelfManaged), Fail, "no caBundle", "leader writes it")
	expect(t, evaluateWebhookConfig("eurekube", webhookConfig([]byte("x")), webhookTarget{}, manager.CertificateModeCertManager), Fail, "Service eurekube-system/eurekube-webhook is not found")
	expect(t, evaluateWebhookConfig("eurekube", webhookConfig([]byte("x")), webhookTarget{service: svc, slices: slices[:0]}, ""), Fail, "has no ready endpoint")
	expect(t, evaluateWebhookConfig("eurekube", webhookConfig([]byte("x")), webhookTarget{service: svc, slices: slices}, ""), Pass, "has 1 ready endpoint")
}

// servingSecret is a Secret with a serving certificate for hosts, valid
// for validity, issued by ca.
func servingSecret(t *testing.T, ca *certs.CA, validity time.Duration, hosts ...string) *corev1.Secret {
	t.Helper()
	s, err := ca.Issue(certs.ServingOptions{DNSNames: hosts, Validity: validity})
	if err != nil {
		t.Fatal(err)
	}
	return &corev1.Secret{Data: map[string][]byte{corev1.TLSCertKey: s.CertPEM, corev1.TLSPrivateKeyKey: s.KeyPEM, "ca.crt": ca.PEM}}
}

func TestCheckCertificate_ChainsToTheCABundleCoversTheServiceAndIsNotExpiring(t *testing.T) {
	ca, err := certs.NewCA("test-ca", 0)
	if err != nil {
		t.Fatal(err)
	}
	other, err := certs.NewCA("other-ca", 0)
	if err != nil {
		t.Fatal(err)
	}
	host := "eurekube-webhook.eurekube-system.svc"
	good := servingSecret(t, ca, 90*24*time.Hour, host)
	// Each check is at a moment after its certificate was issued: one is
	// valid from the second it was made in (NotBefore, as cert-manager's),
	// and a moment taken before it may lie in the second before.
	check := func(secret *corev1.Secret, caBundle []byte, at time.Time) Finding {
		return evaluateCertificate("eurekube-system/eurekube-webhook-tls", secret, caBundle, host, at, 14, manager.CertificateModeCertManager)
	}
	expect(t, check(nil, ca.PEM, time.Now()), Fail, "Secret eurekube-system/eurekube-webhook-tls not found")
	expect(t, check(good, ca.PEM, time.Now()), Pass, "chains to the caBundle", "covers "+host, "(89 days)")
	expect(t, check(servingSecret(t, ca, 5*24*time.Hour, host), ca.PEM, time.Now()), Fail, "expires in 4 days", "--cert-days 14")
	expect(t, check(good, ca.PEM, time.Now().Add(100*24*time.Hour)), Fail, "expired on")
	expect(t, check(good, other.PEM, time.Now()), Fail, "does not verify", "same CA")
	expect(t, check(servingSecret(t, ca, 90*24*time.Hour, "elsewhere.example"), ca.PEM, time.Now()), Fail, "does not verify for "+host)
	expect(t, check(&corev1.Secret{}, ca.PEM, time.Now()), Fail, "tls.crt: no PEM certificate")
}

func TestCheckWebhookAnswers(t *testing.T) {
	expect(t, evaluateWebhookAnswers(webhookTrial{}), Warn, "nothing to try")
	expect(t, evaluateWebhookAnswers(webhookTrial{namespace: "shop", syncer: "orders", err: errors.New(`Internal error occurred: failed calling webhook "inject.eurekube.io": connection refused`)}),
		Fail, "namespace shop selected by EurekaSyncer orders was refused", "cannot reach the webhook", "connection refused")
	expect(t, evaluateWebhookAnswers(webhookTrial{namespace: "shop", syncer: "orders"}), Fail, "without the eurekube-registrar container")
	expect(t, evaluateWebhookAnswers(webhookTrial{namespace: "shop", syncer: "orders", injected: true}), Pass, "came back with the eurekube-registrar container")
}

// The API server's refusals of a dry-run pod, as it words them
// (k8s.io/apiserver's webhook errors): only a failed call is the network.
var (
	deniedByPolicy = &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: 400, Reason: metav1.StatusReasonBadRequest,
		Message: `admission webhook "inject.eurekube.io" denied the request: Eureka app PROBE belongs to namespace probe, the first of this cluster to register it; the pod is not admitted`}}
	callFailed        = apierrors.NewInternalError(errors.New(`failed calling webhook "inject.eurekube.io": failed to call webhook: Post "https://eurekube-webhook.eurekube-system.svc:443/mutate-v1-pod?timeout=10s": dial tcp 10.96.0.12:443: connect: connection refused`))
	answeredWithError = &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: 500, Reason: metav1.StatusReasonInternalError,
		Message: `admission webhook "inject.eurekube.io" denied the request: list EurekaSyncers: forbidden`}}
	otherWebhook = &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: 400,
		Message: `admission webhook "validate.kyverno.svc" denied the request: images must come from registry.example.com`}}
	forbidden = apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, "", errors.New(`violates PodSecurity "restricted:latest"`))
)

func TestClassifyTrialError_TellsADenialByPolicyApartFromAWebhookNotReached(t *testing.T) {
	for _, tc := range []struct {
		name     string
		err      error
		webhooks []string
		want     trialRefusal
	}{
		{"a denial by Eurekube's webhook", deniedByPolicy, []string{"inject.eurekube.io"}, deniedByWebhook},
		{"a denial by Eurekube's webhook, its configuration not read", deniedByPolicy, nil, deniedByWebhook},
		{"a denial by a webhook of another name", deniedByPolicy, []string{"inject.example.com"}, refusedOtherwise},
		{"a call that failed", callFailed, []string{"inject.eurekube.io"}, webhookUnreachable},
		{"an answer with the webhook's own error", answeredWithError, []string{"inject.eurekube.io"}, webhookErrored},
		{"another webhook's denial", otherWebhook, []string{"inject.eurekube.io"}, refusedOtherwise},
		{"Pod Security", forbidden, []string{"inject.eurekube.io"}, refusedOtherwise},
		{"the API server timing out", apierrors.NewTimeoutError("request did not complete within 10s", 0), []string{"inject.eurekube.io"}, webhookUnreachable},
	} {
		if got, _ := classifyTrialError(tc.err, tc.webhooks); got != tc.want {
			t.Errorf("%s: %d, want %d", tc.name, got, tc.want)
		}
	}
}

func TestCheckWebhookAnswers_ADenialByPolicyIsAPassThatSaysTheWebhookWorks(t *testing.T) {
	webhooks := []string{"inject.eurekube.io"}
	f := evaluateWebhookAnswers(webhookTrial{namespace: "evil", syncer: "probe", refused: "AppOwnedByAnotherNamespace", webhooks: webhooks, err: deniedByPolicy})
	expect(t, f, Pass, "denied by policy (the webhook works: inject.eurekube.io answered)", "belongs to namespace probe",
		"EurekaSyncer probe is refused (Permitted False, AppOwnedByAnotherNamespace", "kubectl -n evil describe esync probe")
	if strings.Contains(f.Detail+f.Fix, "network") {
		t.Errorf("a denial by policy blames the network: %+v", f)
	}
	f = evaluateWebhookAnswers(webhookTrial{namespace: "shop", syncer: "orders", webhooks: webhooks, err: callFailed})
	expect(t, f, Fail, "the API server cannot reach the webhook", "connection refused")
	if !strings.Contains(f.Fix, "network policies between the API server and the manager") {
		t.Errorf("a webhook not reached: fix %q", f.Fix)
	}
	f = evaluateWebhookAnswers(webhookTrial{namespace: "shop", syncer: "orders", webhooks: webhooks, err: answeredWithError})
	expect(t, f, Fail, "answered with an error of its own", "list EurekaSyncers: forbidden")
	if strings.Contains(f.Fix, "network") || !strings.Contains(f.Fix, "manager's logs") {
		t.Errorf("an answer with an error: fix %q", f.Fix)
	}
	expect(t, evaluateWebhookAnswers(webhookTrial{namespace: "shop", syncer: "orders", webhooks: webhooks, err: forbidden}),
		Warn, "not by Eurekube's webhook", "PodSecurity")
}

// A refused syncer's Eureka, which the manager does not contact, is not a
// fault of Eureka: a WARN naming the refusal, not a FAIL blaming Eureka.
func TestCheckEureka_ARefusedSyncerIsNotBlamedOnEureka(t *testing.T) {
	s := syncerWith("probe",
		metav1.Condition{Type: v1alpha1.ConditionPermitted, Status: metav1.ConditionFalse, Reason: "EurekaHostNotAllowed", Message: "spec.eureka.serviceURLs[0]: host evil.example is not allowed"},
		metav1.Condition{Type: v1alpha1.ConditionEurekaReachable, Status: metav1.ConditionFalse, Reason: "EurekaHostNotAllowed", Message: "not contacted"})
	fs := evaluateEureka([]v1alpha1.EurekaSyncer{s})
	if len(fs) != 1 {
		t.Fatalf("findings %+v", fs)
	}
	expect(t, fs[0], Warn, "shop/probe: refused by the platform (Permitted False, EurekaHostNotAllowed", "host evil.example is not allowed", "kubectl -n shop describe esync probe")
}

// A trial prefers a syncer permitted for its spec, then one not judged,
// and tries a refused one only when nothing else selects a pod.
func TestPermittedRank_PrefersAPermittedSyncer(t *testing.T) {
	judged := func(status metav1.ConditionStatus, generation int64) *v1alpha1.EurekaSyncer {
		s := builders.Syncer("shop", "orders")
		s.Generation = 2
		s.Status.Conditions = []metav1.Condition{{Type: v1alpha1.ConditionPermitted, Status: status, ObservedGeneration: generation}}
		return s
	}
	permitted, refused, stale, unjudged := judged(metav1.ConditionTrue, 2), judged(metav1.ConditionFalse, 2), judged(metav1.ConditionTrue, 1), builders.Syncer("shop", "new")
	if !(permittedRank(permitted) < permittedRank(unjudged) && permittedRank(unjudged) == permittedRank(stale) && permittedRank(stale) < permittedRank(refused)) {
		t.Errorf("ranks permitted %d, unjudged %d, stale %d, refused %d", permittedRank(permitted), permittedRank(unjudged), permittedRank(stale), permittedRank(refused))
	}
}

// syncerWith is the syncer name of namespace shop with the conditions the
// manager wrote.
func syncerWith(name string, conditions ...metav1.Condition) v1alpha1.EurekaSyncer {
	return *builders.Syncer("shop", name, builders.Conditions(conditions...))
}

func TestCheckEureka_ReportsTheManagersCondition(t *testing.T) {
	got := evaluateEureka([]v1alpha1.EurekaSyncer{
		syncerWith("new"),
		syncerWith("down", metav1.Condition{Type: v1alpha1.ConditionEurekaReachable, Status: metav1.ConditionFalse, Reason: "EurekaUnreachable", Message: "http://eureka:8761/eureka: connection refused"}),
		syncerWith("up", metav1.Condition{Type: v1alpha1.ConditionEurekaReachable, Status: metav1.ConditionTrue, Reason: "Reachable", Message: "http://eureka:8761/eureka answered"}),
	})
	expect(t, got[0], Warn, "shop/new: not reconciled yet", "is the manager running?")
	expect(t, got[1], Fail, "shop/down: EurekaUnreachable: http://eureka:8761/eureka: connection refused")
	expect(t, got[2], Pass, "shop/up: http://eureka:8761/eureka answered")
	expect(t, evaluateEureka(nil)[0], Pass, "no EurekaSyncer yet")
}

func TestCheckCredentials_FailureNamesTheObjectAndTheRoleBindingToCreate(t *testing.T) {
	s := syncerWith("orders")
	s.Spec.Eureka.CredentialsSecretRef = &corev1.LocalObjectReference{Name: "eureka-creds"}
	s.Spec.Eureka.TLS = &v1alpha1.EurekaTLS{CABundleRef: &v1alpha1.CABundleRef{Name: "eureka-ca"}}
	objs := s.Spec.Eureka.ReadObjects()
	if len(objs) != 2 {
		t.Fatalf("ReadObjects() = %+v, want the credentials Secret and the CA bundle's ConfigMap", objs)
	}
	grant := v1alpha1.ReadGrant{ClusterRole: v1alpha1.EurekaAccessClusterRole, ServiceAccountNamespace: "eurekube-system", ServiceAccountName: "eurekube-manager"}
	got := evaluateCredentials([]credentialsAccess{{syncer: &s, object: objs[0], allowed: true}, {syncer: &s, object: objs[1]}}, grant)
	expect(t, got[0], Pass, "ServiceAccount eurekube-system/eurekube-manager can get Secret shop/eureka-creds (spec.eureka.credentialsSecretRef)")
	expect(t, got[1], Fail, "cannot get ConfigMap shop/eureka-ca (spec.eureka.tls.caBundleRef)",
		"kubectl -n shop create rolebinding eurekube-eureka-credentials --clusterrole=eurekube-eureka-credentials --serviceaccount=eurekube-system:eurekube-manager")
	expect(t, evaluateCredentials(nil, grant)[0], Pass, "no EurekaSyncer names a Secret or ConfigMap for Eureka")

	// A readable Secret without its consent label is not used: the fix is
	// the label.
	no := false
	expect(t, evaluateCredentials([]credentialsAccess{{syncer: &s, object: objs[0], allowed: true, consented: &no}}, grant)[0], Fail,
		"shop/orders: Secret shop/eureka-creds (spec.eureka.credentialsSecretRef) is not used: it lacks the label "+v1alpha1.EurekaCredentialsLabel+"=true",
		"kubectl -n shop label secret eureka-creds "+v1alpha1.EurekaCredentialsLabel+"=true")

	// A Helm release named acme: its ClusterRole and ServiceAccount.
	acme := v1alpha1.ReadGrant{ClusterRole: "acme-eurekube-eureka-credentials", ServiceAccountNamespace: "platform", ServiceAccountName: "acme-eurekube-manager"}
	expect(t, evaluateCredentials([]credentialsAccess{{syncer: &s, object: objs[0]}}, acme)[0], Fail, "ServiceAccount platform/acme-eurekube-manager cannot get Secret shop/eureka-creds",
		"kubectl -n shop create rolebinding acme-eurekube-eureka-credentials --clusterrole=acme-eurekube-eureka-credentials --serviceaccount=platform:acme-eurekube-manager")
}

func TestCheckInjected_NamesUpToFivePods(t *testing.T) {
	s := syncerWith("orders")
	s.Status.SelectedPods, s.Status.InjectedPods = 7, 0
	pods := []string{"shop/g", "shop/f", "shop/e", "shop/d", "shop/c", "shop/b", "shop/a"}
	expect(t, evaluateInjected([]v1alpha1.EurekaSyncer{s}, pods), Fail,
		"7 selected pod(s) run without the registrar: shop/a, shop/b, shop/c, shop/d, shop/e and 2 more", "shop/orders 0 of 7 injected", "rollout restart")
	s.Status.InjectedPods = 7
	expect(t, evaluateInjected([]v1alpha1.EurekaSyncer{s}, nil), Pass, "every selected pod")
}

func TestCheckRegistrar_OutdatedPodsWarn(t *testing.T) {
	s := syncerWith("orders", metav1.Condition{Type: v1alpha1.ConditionRegistrarCurrent, Status: metav1.ConditionFalse})
	s.Status.OutdatedRegistrarPods = 1
	expect(t, evaluateRegistrar([]v1alpha1.EurekaSyncer{s}, []string{"shop/orders-1"}, "eurekube/registrar:v2"), Warn,
		"1 pod(s) run an older registrar than eurekube/registrar:v2: shop/orders-1", "shop/orders 1 outdated", "rollout")
	expect(t, evaluateRegistrar([]v1alpha1.EurekaSyncer{syncerWith("orders")}, nil, "eurekube/registrar:v2"), Pass, "every injected pod")
}

func TestCheck_PrintsOneLinePerCheckAndAFixUnderEachFailure(t *testing.T) {
	var out strings.Builder
	findings := []Finding{
		{Verdict: Pass, Check: checkCRD, Detail: "ok"},
		{Verdict: Fail, Check: checkWebhookCert, Detail: "expired", Fix: "renew it"},
		{Verdict: Warn, Check: checkWebhookAnswers, Detail: "nothing to try", Fix: "not printed"},
	}
	printFindings(&out, findings)
	want := "PASS  crd              ok\nFAIL  webhook-cert     expired\n      fix: renew it\nWARN  webhook-answers  nothing to try\n"
	if out.String() != want {
		t.Errorf("got\n%s\nwant\n%s", out.String(), want)
	}
	if !failed(findings) || failed(findings[:1]) {
		t.Error("failed() is wrong")
	}
}

func TestCheck_WebhookHostIsTheServiceNameOrTheURLHost(t *testing.T) {
	if got := webhookHost(webhookConfig(nil)); got != "eurekube-webhook.eurekube-system.svc" {
		t.Errorf("service: %q", got)
	}
	url := "https://127.0.0.1:9443/mutate-v1-pod"
	mwc := &admissionregistrationv1.MutatingWebhookConfiguration{Webhooks: []admissionregistrationv1.MutatingWebhook{{ClientConfig: admissionregistrationv1.WebhookClientConfig{URL: &url}}}}
	if got := webhookHost(mwc); got != "127.0.0.1" {
		t.Errorf("url: %q", got)
	}
}

func TestCheckImports_EachFalseConditionFailsWithItsMessage(t *testing.T) {
	now := testNow
	imp := vmOnly()
	imp.UID = "payments-uid"
	cond := func(typ string, status metav1.ConditionStatus, reason, message string) metav1.Condition {
		return metav1.Condition{Type: typ, Status: status, Reason: reason, Message: message}
	}
	healthy := []metav1.Condition{
		cond(v1alpha1.ConditionPermitted, metav1.ConditionTrue, "Permitted", ""),
		cond(v1alpha1.ConditionEurekaReachable, metav1.ConditionTrue, "Reachable", "Eureka answered"),
		cond(v1alpha1.ConditionServiceOwned, metav1.ConditionTrue, "ServiceOwned", ""),
		cond(v1alpha1.ConditionSynced, metav1.ConditionTrue, "Imported", "2 of 3 endpoint(s) ready"),
	}
	yes := true
	owned := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "payments", OwnerReferences: []metav1.OwnerReference{{
		APIVersion: v1alpha1.GroupVersion.String(), Kind: "EurekaImport", Name: "payments", UID: imp.UID, Controller: &yes}}}}
	with := func(conds ...metav1.Condition) *v1alpha1.EurekaImport {
		i := imp.DeepCopy()
		i.Status.Conditions = append([]metav1.Condition(nil), healthy...)
		for _, c := range conds {
			meta.SetStatusCondition(&i.Status.Conditions, c)
		}
		return i
	}

	expect(t, evaluateImports(nil, now)[0], Pass, "no EurekaImport")
	expect(t, evaluateImport(importTarget{imp: with(), service: owned}, now), Pass, "shop/payments: Service payments, 2/3 endpoint(s) ready, synced 12s ago")

	notReconciled := imp.DeepCopy()
	notReconciled.Status.Conditions = nil
	expect(t, evaluateImport(importTarget{imp: notReconciled}, now), Warn, "not reconciled yet")

	expect(t, evaluateImport(importTarget{imp: with(
		cond(v1alpha1.ConditionPermitted, metav1.ConditionFalse, "AppNotGranted", "app PAYMENTS is not granted to namespace shop"),
		cond(v1alpha1.ConditionSynced, metav1.ConditionFalse, "AppNotGranted", "nothing is imported"),
	), service: owned}, now), Fail, "shop/payments: AppNotGranted: app PAYMENTS is not granted to namespace shop", "EurekaAppPolicy")

	expect(t, evaluateImport(importTarget{imp: with(
		cond(v1alpha1.ConditionEurekaReachable, metav1.ConditionFalse, "EurekaUnreachable", "http://eureka:8761/eureka: connection refused"),
		cond(v1alpha1.ConditionSynced, metav1.ConditionFalse, "EurekaUnreachable", "Eureka could not be read: the endpoints are kept as last read at 2026-11-23T11:53:00Z (7m0s ago)"),
	), service: owned}, now), Fail, "connection refused", "kept as last read", "check spec.eureka of shop/payments")

	expect(t, evaluateImport(importTarget{imp: with(
		cond(v1alpha1.ConditionServiceOwned, metav1.ConditionFalse, "ServiceNotOwned", "Service payments exists and is not this import's (it is managed by Helm)"),
	)}, now), Fail, "it is managed by Helm", "set spec.service.name of shop/payments")

	expect(t, evaluateImport(importTarget{imp: with(
		cond(v1alpha1.ConditionSynced, metav1.ConditionFalse, "NoInstances", "Eureka lists no instance of PAYMENTS yet"),
	), service: owned}, now), Fail, "NoInstances: Eureka lists no instance of PAYMENTS yet", "check spec.app")

	expect(t, evaluateImport(importTarget{imp: with()}, now), Fail, "Service shop/payments not found")
	byHand := owned.DeepCopy()
	byHand.OwnerReferences = nil
	expect(t, evaluateImport(importTarget{imp: with(), service: byHand}, now), Fail, "Service shop/payments is not this import's (no controller)")

	expect(t, evaluateImport(importTarget{imp: with(
		cond(v1alpha1.ConditionSynced, metav1.ConditionTrue, v1alpha1.ReasonLeasesExpired, "1 instance(s) are listed past their lease (vm-2): the server may be in self-preservation"),
	), service: owned}, now), Warn, "self-preservation")
	expect(t, evaluateImport(importTarget{imp: with(
		cond(v1alpha1.ConditionSynced, metav1.ConditionFalse, v1alpha1.ReasonRegistryEmptied, "Eureka lists no instance of PAYMENTS since 2026-11-23T12:00:00Z: kept as last written until 2026-11-23T12:02:00Z"),
	), service: owned}, now), Warn, "RegistryEmptied: Eureka lists no instance of PAYMENTS", "kept as last written")
	expect(t, evaluateImport(importTarget{imp: with(
		cond(v1alpha1.ConditionInstancesServed, metav1.ConditionFalse, v1alpha1.ReasonNoIPAddress, `1 instance(s) of PAYMENTS are no endpoint: vm-7 (ipAddr "vm-7.dc1" is not an IP address)`),
	), service: owned}, now), Warn, "2/3 endpoint(s) ready", "NoIPAddress: 1 instance(s) of PAYMENTS are no endpoint")
	expect(t, evaluateImport(importTarget{imp: with(
		cond(v1alpha1.ConditionSynced, metav1.ConditionFalse, v1alpha1.ReasonIPFamilyNotServed, "no instance of PAYMENTS is an endpoint"),
	), service: owned}, now), Fail, "IPFamilyNotServed", "an IP family the Service lacks")
	noneReady := with()
	noneReady.Status.Endpoints, noneReady.Status.ReadyEndpoints = "0/3", 0
	expect(t, evaluateImport(importTarget{imp: noneReady, service: owned}, now), Warn, "no instance of PAYMENTS is UP")

	// A pattern of apps has no Service of its own: its apps' imports do.
	pattern := with()
	pattern.Spec.App, pattern.Status.ServiceName, pattern.Status.Endpoints = "PAYMENTS-*", "2 Services", "3/4"
	expect(t, evaluateImport(importTarget{imp: pattern}, now), Pass, "shop/payments: pattern PAYMENTS-*: 2 Services, 3/4 endpoint(s) ready")
	expect(t, evaluateImport(importTarget{imp: func() *v1alpha1.EurekaImport {
		p := pattern.DeepCopy()
		meta.SetStatusCondition(&p.Status.Conditions, cond(v1alpha1.ConditionSynced, metav1.ConditionFalse, "PartlyImported", "1 of 2 apps matching PAYMENTS-*"))
		return p
	}()}, now), Fail, "PartlyImported: 1 of 2 apps")
}
