package admission

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	eurekubev1alpha1 "github.com/eurekube/eurekube/api/v1alpha1"
	"github.com/eurekube/eurekube/certs"
	"github.com/eurekube/eurekube/internal/builders"
	"github.com/eurekube/eurekube/tests/harness"
)

// neighbourLabel on a pod asks the neighbour webhook for a proxy: "classic"
// (a container) or "native" (an init container with restartPolicy Always).
const neighbourLabel = "eurekube.test/neighbour"

// startNeighbour serves a mesh-injector-like webhook beside Eurekube's,
// registered as zz-neighbour so that the API server calls it after
// Eurekube's and, since it changes the pod, calls Eurekube's again
// (reinvocationPolicy IfNeeded), as it does with Istio's, Linkerd's,
// Vault's or Kyverno's. It serves with the suite's certificate.
func startNeighbour(ctx context.Context, t *testing.T) {
	t.Helper()
	port, err := harness.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	cert, err := tls.LoadX509KeyPair(filepath.Join(suite.certDir, certs.CertFile), filepath.Join(suite.certDir, certs.KeyFile))
	if err != nil {
		t.Fatal(err)
	}
	ln, err := tls.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12})
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: &admission.Webhook{Handler: admission.HandlerFunc(neighbourInject)}, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("neighbour webhook: %v", err)
		}
	}()
	t.Cleanup(func() { srv.Close() })

	url := "https://127.0.0.1:" + strconv.Itoa(port) + "/inject"
	mwc := &admissionregistrationv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "zz-neighbour"},
		Webhooks: []admissionregistrationv1.MutatingWebhook{{
			Name:                    "proxy.neighbour.example",
			ClientConfig:            admissionregistrationv1.WebhookClientConfig{URL: &url, CABundle: suite.ca.PEM},
			Rules:                   []admissionregistrationv1.RuleWithOperations{{Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create}, Rule: admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}}}},
			ObjectSelector:          &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: neighbourLabel, Operator: metav1.LabelSelectorOpExists}}},
			SideEffects:             ptr(admissionregistrationv1.SideEffectClassNone),
			AdmissionReviewVersions: []string{"v1"},
			FailurePolicy:           ptr(admissionregistrationv1.Fail),
			ReinvocationPolicy:      ptr(admissionregistrationv1.IfNeededReinvocationPolicy),
		}},
	}
	if err := suite.c.Create(ctx, mwc); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = suite.c.Delete(context.Background(), mwc) })
}

// neighbourInject adds the proxy once, as a mesh injector does, with the
// 5 s drain of its own that istio-proxy has.
func neighbourInject(_ context.Context, req admission.Request) admission.Response {
	var pod corev1.Pod
	if err := json.Unmarshal(req.Object.Raw, &pod); err != nil {
		return admission.Errored(http.StatusBadRequest, err)
	}
	if pod.Annotations["neighbour.example/injected"] == "true" {
		return admission.Allowed("already")
	}
	proxy := corev1.Container{Name: "proxy", Image: "example.com/proxy:1",
		Lifecycle: &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Sleep: &corev1.SleepAction{Seconds: 5}}}}
	ops := []map[string]any{{"op": "add", "path": "/metadata/annotations/neighbour.example~1injected", "value": "true"}}
	if pod.Labels[neighbourLabel] == "native" {
		proxy.RestartPolicy = ptr(corev1.ContainerRestartPolicyAlways)
		if len(pod.Spec.InitContainers) == 0 {
			ops = append(ops, map[string]any{"op": "add", "path": "/spec/initContainers", "value": []corev1.Container{proxy}})
		} else {
			ops = append(ops, map[string]any{"op": "add", "path": "/spec/initContainers/-", "value": proxy})
		}
	} else {
		ops = append(ops, map[string]any{"op": "add", "path": "/spec/containers/-", "value": proxy})
	}
	if pod.Annotations == nil {
		ops[0] = map[string]any{"op": "add", "path": "/metadata/annotations", "value": map[string]string{"neighbour.example/injected": "true"}}
	}
	patch, err := json.Marshal(ops)
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, err)
	}
	resp := admission.Allowed("proxy added")
	resp.Patch, resp.PatchType = patch, ptr(admissionv1.PatchTypeJSONPatch)
	return resp
}

// A later webhook's classic proxy, added after Eurekube injected the pod,
// gets the drain when the API server calls Eurekube again, so it keeps
// carrying the app's traffic for the whole drain instead of stopping 5 s
// into it; the grace period grows once.
func TestNeighbour_AClassicProxyAddedLaterGetsTheDrainOnce(t *testing.T) {
	got := createBesideTheNeighbour(t, "neighbour-classic", "classic", nil)

	if registrar(got) == nil {
		t.Fatalf("not injected; containers %v", containerNames(got))
	}
	var proxy *corev1.Container
	for i := range got.Spec.Containers {
		if got.Spec.Containers[i].Name == "proxy" {
			proxy = &got.Spec.Containers[i]
		}
	}
	if proxy == nil {
		t.Fatalf("the neighbour's proxy is missing; containers %v", containerNames(got))
	}
	if ps := proxy.Lifecycle.PreStop; ps.Sleep == nil || ps.Sleep.Seconds != defaultDrain+5 {
		t.Errorf("the proxy's preStop is %+v, want the %d s drain before its own 5 s", ps, defaultDrain)
	}
	if g := got.Spec.TerminationGracePeriodSeconds; g == nil || *g != 30+defaultDrain {
		t.Errorf("terminationGracePeriodSeconds = %v, want %d: lengthened once", deref(g), 30+defaultDrain)
	}
	if !strings.Contains(got.Annotations[eurekubev1alpha1.AdaptationsAnnotation], string(eurekubev1alpha1.AdaptationDrainAdded)) {
		t.Errorf("the adaptations %s do not record the drain added to the proxy", got.Annotations[eurekubev1alpha1.AdaptationsAnnotation])
	}
}

// A native sidecar proxy (an init container with restartPolicy Always) is
// stopped by the kubelet after the app containers: it needs and gets no
// drain, and the pod is admitted.
func TestNeighbour_ANativeSidecarProxyIsAdmittedAsItIs(t *testing.T) {
	got := createBesideTheNeighbour(t, "neighbour-native", "native", nil)
	if registrar(got) == nil || len(got.Spec.InitContainers) == 0 {
		t.Fatalf("containers %v, init containers %d: want the registrar and the native proxy", containerNames(got), len(got.Spec.InitContainers))
	}
	if ps := got.Spec.InitContainers[len(got.Spec.InitContainers)-1].Lifecycle.PreStop; ps.Sleep == nil || ps.Sleep.Seconds != 5 {
		t.Errorf("the native proxy's preStop is %+v, want its own 5 s alone", ps)
	}
}

// A Job's pod, which Eurekube skips and annotates, changed by the later
// webhook and sent back, is admitted and stays skipped: the Job runs.
func TestNeighbour_ASkippedJobPodChangedLaterIsAdmitted(t *testing.T) {
	got := createBesideTheNeighbour(t, "neighbour-job", "classic", func(p *corev1.Pod) { p.Spec.RestartPolicy = corev1.RestartPolicyNever })
	if registrar(got) != nil || got.Annotations[eurekubev1alpha1.StatusAnnotation] != eurekubev1alpha1.StatusSkipped {
		t.Fatalf("containers %v, status %q: want the pod skipped", containerNames(got), got.Annotations[eurekubev1alpha1.StatusAnnotation])
	}
}

// createBesideTheNeighbour starts the neighbour webhook, creates a pod of
// a syncer's app asking it for a proxy of shape, changed by mutate, in a
// namespace of its own, and reads back what the API server stored.
func createBesideTheNeighbour(t *testing.T, prefix, shape string, mutate func(*corev1.Pod)) *corev1.Pod {
	t.Helper()
	requireInjection(t)
	ctx := testContext(t)
	startNeighbour(ctx, t)
	ns := optedInNamespace(ctx, t, prefix)
	createSyncer(t, builders.Syncer(ns, "orders"))
	pod := builders.Pod(ns, "orders", builders.Restricted())
	pod.Labels[neighbourLabel] = shape
	if mutate != nil {
		mutate(pod)
	}
	if err := suite.c.Create(ctx, pod); err != nil {
		t.Fatalf("create pod: %v", err)
	}
	var got corev1.Pod
	if err := suite.c.Get(ctx, client.ObjectKeyFromObject(pod), &got); err != nil {
		t.Fatal(err)
	}
	return &got
}
