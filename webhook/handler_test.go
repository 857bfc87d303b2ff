package webhook

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/eurekube/eurekube/api/v1alpha1"
	"github.com/eurekube/eurekube/internal/ownership"
)

// newTestWebhook serves the handler the way the manager does, over HTTP,
// with a client holding plain data as the reader (the real API server path
// is tested in tests/admission).
func newTestWebhook(t testing.TB) *admission.Webhook {
	t.Helper()
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = v1alpha1.AddToScheme(scheme)
	s := syncer("orders", time.Hour)
	reader := fake.NewClientBuilder().WithScheme(scheme).WithObjects(
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shop", Labels: enabledNamespace().Labels}},
		&s,
	).Build()
	return &admission.Webhook{Handler: NewHandler(Options{
		Reader: reader,

		Defaults:           testDefaults,
		ExcludedNamespaces: []string{"eurekube-system", "kube-system"},
	})}
}

func review(t testing.TB, op admissionv1.Operation, kind string, obj any) []byte {
	t.Helper()
	raw, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	body, err := json.Marshal(admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{
			UID: "req-1", Operation: op, Namespace: "shop",
			Kind:     metav1.GroupVersionKind{Version: "v1", Kind: kind},
			Resource: metav1.GroupVersionResource{Version: "v1", Resource: strings.ToLower(kind) + "s"},
			Object:   runtime.RawExtension{Raw: raw},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	return body
}

// panicAnswer is the message of an answer that says the handler panicked,
// or "". The manager's webhook (admission.Webhook with its default
// RecoverPanic) recovers a handler's panic into a refusal with code 500
// and the message "panic: <value> [recovered]", written as an ordinary
// HTTP 200 answer: the API server then refuses the pod, so a test that
// accepts any refusal cannot see the panic.
func panicAnswer(out admissionv1.AdmissionReview) string {
	if out.Response == nil || out.Response.Result == nil {
		return ""
	}
	if r := out.Response.Result; r.Code == http.StatusInternalServerError && strings.HasPrefix(r.Message, "panic: ") && strings.Contains(r.Message, "[recovered]") {
		return r.Message
	}
	return ""
}

func serve(h http.Handler, body []byte) (int, admissionv1.AdmissionReview) {
	req := httptest.NewRequest(http.MethodPost, Path, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	var out admissionv1.AdmissionReview
	_ = json.Unmarshal(rec.Body.Bytes(), &out)
	return rec.Code, out
}

func TestHandler_InjectsAMatchingPodWithAJSONPatch(t *testing.T) {
	_, out := serve(newTestWebhook(t), review(t, admissionv1.Create, "Pod", springPod()))
	if out.Response == nil || !out.Response.Allowed || len(out.Response.Patch) == 0 {
		t.Fatalf("response = %+v, want allowed with a patch", out.Response)
	}
	if !strings.Contains(string(out.Response.Patch), v1alpha1.RegistrarContainerName) {
		t.Fatalf("patch does not add the registrar: %s", out.Response.Patch)
	}
}

// A namespace and a syncer created a moment before the pod (kubectl apply
// of one file) may not be in the manager's cache yet. The cache is a fake
// here, lagging on demand, which the real one cannot do at will; the live
// reader holds what the API server holds.
func TestHandler_AsksTheAPIServerWhenTheCacheLags(t *testing.T) {
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = v1alpha1.AddToScheme(scheme)
	s := syncer("orders", time.Hour)
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shop", Labels: enabledNamespace().Labels}}
	live := fake.NewClientBuilder().WithScheme(scheme).WithObjects(ns, &s).Build()
	for _, tc := range []struct {
		name   string
		cached []client.Object
	}{
		{"namespace not cached yet", nil},
		{"namespace cached without its label", []client.Object{&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shop"}}}},
		{"syncer not cached yet", []client.Object{ns.DeepCopy()}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stale := fake.NewClientBuilder().WithScheme(scheme).WithObjects(tc.cached...).Build()
			h := &admission.Webhook{Handler: NewHandler(Options{Reader: stale, LiveReader: live, Defaults: testDefaults})}
			_, out := serve(h, review(t, admissionv1.Create, "Pod", springPod()))
			if out.Response == nil || !out.Response.Allowed || !strings.Contains(string(out.Response.Patch), v1alpha1.RegistrarContainerName) {
				t.Fatalf("response = %+v, want the registrar injected from what the API server holds", out.Response)
			}
		})
	}
	t.Run("no syncer anywhere", func(t *testing.T) {
		empty := fake.NewClientBuilder().WithScheme(scheme).WithObjects(ns.DeepCopy()).Build()
		h := &admission.Webhook{Handler: NewHandler(Options{Reader: empty, LiveReader: empty, Defaults: testDefaults})}
		_, out := serve(h, review(t, admissionv1.Create, "Pod", springPod()))
		if out.Response == nil || !out.Response.Allowed || len(out.Response.Patch) != 0 {
			t.Fatalf("response = %+v, want allowed untouched", out.Response)
		}
	})
}

func TestHandler_DeniesAnInvalidAnnotationWithTheReason(t *testing.T) {
	pod := springPod()
	pod.Annotations = map[string]string{v1alpha1.AnnotationPreStopSleep: "forever"}
	_, out := serve(newTestWebhook(t), review(t, admissionv1.Create, "Pod", pod))
	if out.Response == nil || out.Response.Allowed || !strings.Contains(out.Response.Result.Message, v1alpha1.AnnotationPreStopSleep) || !strings.Contains(out.Response.Result.Message, "forever") {
		t.Fatalf("response = %+v, want a denial naming the annotation and value", out.Response)
	}
	if out.Response.Result.Code != http.StatusBadRequest {
		t.Fatalf("denial code = %d, want %d", out.Response.Result.Code, http.StatusBadRequest)
	}
}

func TestHandler_MalformedRequestsGetAnErrorResponseNeverAPanic(t *testing.T) {
	wh := newTestWebhook(t)
	for name, body := range map[string][]byte{
		"not JSON":               []byte("{{{"),
		"empty body":             nil,
		"review without request": []byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}`),
		"object is not a pod":    review(t, admissionv1.Create, "Pod", map[string]any{"spec": "nonsense"}),
		"object is garbage":      []byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"x","kind":{"version":"v1","kind":"Pod"},"operation":"CREATE","namespace":"shop","object":"AAAA"}}`),
		"pod without namespace":  []byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"x","kind":{"version":"v1","kind":"Pod"},"operation":"CREATE","object":{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"},"spec":{"containers":[{"name":"a","image":"a"}]}}}}`),
	} {
		t.Run(name, func(t *testing.T) {
			code, out := serve(wh, body)
			if code == http.StatusOK && (out.Response == nil || out.Response.Allowed && len(out.Response.Patch) > 0) {
				t.Fatalf("HTTP %d, response %+v: want an error answer", code, out.Response)
			}
			if out.Response != nil && out.Response.Allowed {
				t.Fatalf("malformed request allowed: %+v", out.Response)
			}
			if p := panicAnswer(out); p != "" {
				t.Fatalf("the handler panicked (controller-runtime recovered it): %s", p)
			}
			if out.Response.Result == nil || out.Response.Result.Code != http.StatusBadRequest {
				t.Fatalf("response %+v: want refused as a bad request (400), not a server error", out.Response.Result)
			}
		})
	}
}

func TestHandler_OtherKindsAndOperationsPassUntouched(t *testing.T) {
	wh := newTestWebhook(t)
	for name, body := range map[string][]byte{
		"pod update": review(t, admissionv1.Update, "Pod", springPod()),
		"a service":  review(t, admissionv1.Create, "Service", corev1.Service{}),
	} {
		_, out := serve(wh, body)
		if out.Response == nil || !out.Response.Allowed || len(out.Response.Patch) != 0 {
			t.Fatalf("%s: response = %+v, want allowed without a patch", name, out.Response)
		}
	}
}

func FuzzParseAnnotations(f *testing.F) {
	f.Add(v1alpha1.AnnotationPort, "8080")
	f.Add(v1alpha1.AnnotationMetadataPrefix+"zone", "a")
	f.Add(v1alpha1.AnnotationPreStopSleep, "-1")
	f.Add(v1alpha1.AnnotationPrefix+"typo", "x")
	f.Fuzz(func(t *testing.T, key, value string) {
		o, err := ParseAnnotations(map[string]string{key: value})
		if err != nil && !strings.Contains(err.Error(), key) {
			t.Fatalf("error %q does not name the annotation %q", err, key)
		}
		if err == nil && o.PreStopSleep != nil && (*o.PreStopSleep < 0 || *o.PreStopSleep > 3600) {
			t.Fatalf("accepted drain %d", *o.PreStopSleep)
		}
	})
}

// FuzzHandler sends arbitrary bodies through controller-runtime's decoding
// to the handler. Its webhook does not recover panics, as the manager's
// does (see panicAnswer): a panic in the handler fails the target, with
// its stack. Every body must be answered with an AdmissionReview.
func FuzzHandler(f *testing.F) {
	wh := newTestWebhook(f).WithRecoverPanic(false)
	f.Add(review(f, admissionv1.Create, "Pod", springPod()))
	bad := springPod()
	bad.Annotations = map[string]string{v1alpha1.AnnotationPreStopSleep: "forever", v1alpha1.AnnotationPort: "http"}
	f.Add(review(f, admissionv1.Create, "Pod", bad))
	f.Add([]byte(`{"request":{"kind":{"kind":"Pod"},"operation":"CREATE","object":{}}}`))
	f.Add([]byte(`{"request":{"uid":"x","kind":{"kind":"Pod"},"operation":"CREATE","namespace":"shop","object":{"metadata":{"labels":{"app":"orders"}},"spec":{"containers":[{}]}}}}`))
	f.Add([]byte("{}"))
	f.Fuzz(func(t *testing.T, body []byte) {
		code, out := serve(wh, body)
		if code != http.StatusOK || out.Response == nil {
			t.Fatalf("HTTP %d, response %+v: want an AdmissionReview with a response", code, out.Response)
		}
		if p := panicAnswer(out); p != "" {
			t.Fatalf("the handler panicked: %s", p)
		}
	})
}

// BenchmarkHandler measures the webhook server's work for the realistic
// pod (springPod, the bench's benchPod): the AdmissionReview decoded by
// controller-runtime, the namespace and syncers read from an informer cache
// as in the manager, Inject, the app's ownership checked against the
// policies and the claim in that cache (the app claimed already by the
// pod's namespace, as after the first pod), the patch and the encoded
// answer.
func BenchmarkHandler(b *testing.B) {
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = v1alpha1.AddToScheme(scheme)
	reader := informerCache(b, scheme,
		[]corev1.Namespace{{ObjectMeta: metav1.ObjectMeta{Name: "shop", Labels: enabledNamespace().Labels}}},
		[]v1alpha1.EurekaSyncer{syncer("orders", time.Hour)},
		*ownership.NewClaim("orders", "shop"))
	logger := logrus.New()
	logger.SetOutput(io.Discard)
	benchmarkWebhook(b, NewHandler(Options{
		Reader: reader, Defaults: testDefaults, ExcludedNamespaces: []string{"eurekube-system", "kube-system"}, Logger: logger,
		Ownership: &ownership.Checker{Reader: reader},
	}))
}

// BenchmarkPrecomputedHandler is BenchmarkHandler's anchor: the same
// request through the same controller-runtime server code, answered with
// the patch Inject makes for it, computed once. What BenchmarkHandler adds
// to it is Eurekube's own work.
func BenchmarkPrecomputedHandler(b *testing.B) {
	r := Inject(springPod(), enabledNamespace(), []v1alpha1.EurekaSyncer{syncer("orders", time.Hour)}, testDefaults)
	patch, err := encodePatch(r.Patch)
	if err != nil {
		b.Fatal(err)
	}
	benchmarkWebhook(b, admission.HandlerFunc(func(context.Context, admission.Request) admission.Response {
		resp := admission.Allowed(string(ReasonInjected))
		resp.Patch, resp.PatchType = patch, ptr.To(admissionv1.PatchTypeJSONPatch)
		return resp
	}))
}

// benchmarkWebhook serves springPod's CREATE to h the way the manager's
// webhook server does, once per iteration.
func benchmarkWebhook(b *testing.B, h admission.Handler) {
	wh := &admission.Webhook{Handler: h}
	body := review(b, admissionv1.Create, "Pod", springPod())
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		req := httptest.NewRequest(http.MethodPost, Path, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		wh.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK || !bytes.Contains(rec.Body.Bytes(), []byte(`"patch"`)) {
			b.Fatalf("HTTP %d: %.300s", rec.Code, rec.Body.Bytes())
		}
	}
}

// BenchmarkInject is BenchmarkHandler's own work without the server and
// the cache: Decide, Mutate and the patch for the same pod.
func BenchmarkInject(b *testing.B) {
	pod, syncers := springPod(), []v1alpha1.EurekaSyncer{syncer("orders", time.Hour)}
	b.ReportAllocs()
	for b.Loop() {
		if r := Inject(pod, enabledNamespace(), syncers, testDefaults); len(r.Patch) == 0 {
			b.Fatal(r.Denied)
		}
	}
}
