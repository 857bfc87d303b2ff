package cli

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	"sigs.k8s.io/yaml"

	"github.com/eurekube/eurekube/api/v1alpha1"
	"github.com/eurekube/eurekube/manager"
	"github.com/eurekube/eurekube/webhook"
	"github.com/eurekube/eurekube/webhook/webhooktest"
)

// testManagerFlags are the manager's settings every offline inject test uses.
var testManagerFlags = []string{
	"--registrar-image=eurekube/registrar:test",
	"--eureka-url=http://eureka:8761/eureka",
	"--cluster-id=cluster-uid-1",
}

func TestInject_EachKindAsTheWebhookWouldAdmitIt(t *testing.T) {
	for _, tc := range []struct {
		kind, reason string
	}{
		{"pod", "(Pod shop/orders): injected (EurekaSyncer orders)"},
		{"deployment", "(Deployment shop/orders): injected (EurekaSyncer orders)"},
		{"statefulset", "(StatefulSet shop/orders): injected (EurekaSyncer orders)"},
		{"daemonset", "(DaemonSet shop/orders): injected (EurekaSyncer orders)"},
		{"replicaset", "(ReplicaSet shop/orders): injected (EurekaSyncer orders)"},
		// The webhook skips pods meant to finish on purpose: annotated,
		// no registrar.
		{"job", "(Job orders-migrate): meant-to-finish (EurekaSyncer orders)"},
		{"cronjob", "(CronJob shop/orders-report): meant-to-finish (EurekaSyncer orders)"},
	} {
		t.Run(tc.kind, func(t *testing.T) {
			code, out, stderr := run(t, "", injectArgs("testdata/inject/"+tc.kind+".yaml", "--namespace=shop")...)
			if code != ExitOK {
				t.Fatalf("exit %d\n%s", code, stderr)
			}
			if !strings.Contains(stderr, tc.reason) {
				t.Errorf("standard error does not say %q:\n%s", tc.reason, stderr)
			}
			golden(t, "inject/"+tc.kind+".golden.yaml", out)
		})
	}
}

func TestInject_CopiesOtherDocumentsAsTheyAreInOrder(t *testing.T) {
	_, out, _ := run(t, "", injectArgs("testdata/inject/deployment.yaml")...)
	first, _, ok := strings.Cut(out, "---\n")
	if !ok || !strings.Contains(first, "greeting: hello # kept") || !strings.HasPrefix(first, "# A ConfigMap before") {
		t.Errorf("the ConfigMap is not the first document, as it was, comments included:\n%s", out)
	}
}

func TestInject_ReadsStandardInputAndTheStreamsOwnSyncer(t *testing.T) {
	syncers, err := os.ReadFile("testdata/inject/syncers.yaml")
	if err != nil {
		t.Fatal(err)
	}
	pod, err := os.ReadFile("testdata/inject/pod.yaml")
	if err != nil {
		t.Fatal(err)
	}
	args := append([]string{"inject", "-f", "-"}, testManagerFlags...)
	code, out, stderr := run(t, string(syncers)+"---\n"+string(pod), args...)
	if code != ExitOK || !strings.Contains(out, v1alpha1.RegistrarContainerName) {
		t.Errorf("exit %d; the pod after its syncer in one stream is not injected:\n%s\n%s", code, out, stderr)
	}
}

func TestInject_NamespaceOfTheStreamWithoutTheLabelIsNotInjected(t *testing.T) {
	stream := "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: shop\n---\n" + readFile(t, "testdata/inject/pod.yaml")
	code, out, stderr := run(t, stream, injectArgs("-")...)
	if code != ExitOK || strings.Contains(out, v1alpha1.RegistrarContainerName) || !strings.Contains(stderr, "namespace-not-enabled") {
		t.Errorf("exit %d; want the pod as it was and namespace-not-enabled:\n%s\n%s", code, out, stderr)
	}
	if !strings.HasSuffix(out, readFile(t, "testdata/inject/pod.yaml")) {
		t.Errorf("the pod was not copied as it was:\n%s", out)
	}
}

func TestInject_DeniedDocumentIsNamedWithTheWebhooksReasonAndExits1(t *testing.T) {
	pod := strings.Replace(readFile(t, "testdata/inject/pod.yaml"), "  labels:\n", "  annotations:\n    eurekube.io/prestop-sleeep: \"30\"\n  labels:\n", 1)
	stream := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n---\n" + pod
	code, out, stderr := run(t, stream, injectArgs("-")...)
	if code != ExitFailure || out != "" {
		t.Errorf("exit %d, want %d and nothing printed; out:\n%s", code, ExitFailure, out)
	}
	if !strings.Contains(stderr, "document 2 (Pod shop/orders): denied:") || !strings.Contains(stderr, "eurekube.io/prestop-sleeep") {
		t.Errorf("standard error does not name the document and the annotation:\n%s", stderr)
	}
}

func TestInject_OfflineNeedsTheClusterIDAndTheRegistrarImage(t *testing.T) {
	for _, args := range [][]string{
		{"inject", "-f", "testdata/inject/pod.yaml", "--registrar-image=r:1"},
		{"inject", "-f", "testdata/inject/pod.yaml", "--cluster-id=c"},
		{"inject", "-f", "testdata/inject/pod.yaml", "--from-cluster", "--syncers=testdata/inject/syncers.yaml"},
		{"inject", "-f", "testdata/inject/pod.yaml", "--from-cluster", "--registrar-image=r:1"},
	} {
		if code, _, stderr := run(t, "", args...); code != ExitUsage {
			t.Errorf("%v: exit %d, want %d\n%s", args, code, ExitUsage, stderr)
		}
	}
}

// TestInject_PodEqualsWhatTheWebhookHandlerAdmits runs the webhook's
// handler on the same pod, with the manager's defaults from the same
// flags, applies its JSON patch as the API server would (through the fake
// client's patch) and compares with inject's output.
func TestInject_PodEqualsWhatTheWebhookHandlerAdmits(t *testing.T) {
	cfg, err := manager.ParseFlags(testManagerFlags, os.Stderr)
	if err != nil {
		t.Fatal(err)
	}
	syncers, err := syncersFile(strings.NewReader(readFile(t, "testdata/inject/syncers.yaml")), "default")
	if err != nil {
		t.Fatal(err)
	}
	scheme, err := newScheme()
	if err != nil {
		t.Fatal(err)
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shop", Labels: map[string]string{v1alpha1.NamespaceInjectionLabel: "enabled"}}}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(ns, &syncers[0]).Build()
	h := webhook.NewHandler(webhook.Options{Reader: c, Defaults: manager.WebhookDefaults(cfg, cfg.ClusterID), ExcludedNamespaces: cfg.ExcludedNamespaces})

	for name, pod := range map[string]*corev1.Pod{
		"spring boot":  webhooktest.SpringBootPod("shop", "orders-1"),
		"generateName": webhooktest.SpringBootPod("shop", ""),
		"job pod skipped": func() *corev1.Pod {
			p := webhooktest.SpringBootPod("shop", "orders-2")
			p.Spec.RestartPolicy = corev1.RestartPolicyNever
			return p
		}(),
	} {
		t.Run(name, func(t *testing.T) {
			pod.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}
			raw, err := json.Marshal(pod)
			if err != nil {
				t.Fatal(err)
			}
			resp := h.Handle(t.Context(), admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
				UID: "1", Kind: metav1.GroupVersionKind{Version: "v1", Kind: "Pod"}, Operation: admissionv1.Create,
				Namespace: "shop", Object: runtime.RawExtension{Raw: raw},
			}})
			if !resp.Allowed || resp.Result != nil && resp.Result.Code != http.StatusOK {
				t.Fatalf("the handler did not admit the pod: %+v", resp.Result)
			}
			admitted := pod.DeepCopy()
			if pod.Name == "" {
				admitted.Name = "orders-generated" // the fake client needs a name
			}
			if err := c.Create(t.Context(), admitted); err != nil {
				t.Fatal(err)
			}
			if err := c.Patch(t.Context(), admitted, client.RawPatch(types.JSONPatchType, resp.Patch)); err != nil {
				t.Fatalf("apply the handler's patch: %v", err)
			}

			podYAML, err := yaml.Marshal(pod)
			if err != nil {
				t.Fatal(err)
			}
			dir := t.TempDir()
			in := filepath.Join(dir, "pod.yaml")
			if err := os.WriteFile(in, podYAML, 0o644); err != nil {
				t.Fatal(err)
			}
			code, out, stderr := run(t, "", injectArgs(in)...)
			if code != ExitOK {
				t.Fatalf("inject: exit %d\n%s", code, stderr)
			}
			var injected corev1.Pod
			if err := yaml.UnmarshalStrict([]byte(out), &injected); err != nil {
				t.Fatalf("inject's output is not a pod: %v\n%s", err, out)
			}
			injected.Name = admitted.Name
			admitted.ResourceVersion, admitted.TypeMeta = "", injected.TypeMeta
			if !equality.Semantic.DeepEqual(&injected, admitted) {
				t.Errorf("inject printed\n%s\nthe webhook's patch made\n%s", out, mustYAML(t, admitted))
			}
		})
	}
}

func mustYAML(t *testing.T, v any) string {
	t.Helper()
	b, err := yaml.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
