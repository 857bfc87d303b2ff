package admission

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/eurekube/eurekube/api/v1alpha1"
	"github.com/eurekube/eurekube/controller"
	"github.com/eurekube/eurekube/internal/builders"
	"github.com/eurekube/eurekube/tests/harness"
)

// The ValidatingAdmissionPolicy of manifests/pod-write-policy, as
// manifests/default renders it.
const podWritePolicy = "eurekube-manager-pod-writes"

// RBAC lets the manager patch any pod in the cluster; the policy lets its
// ServiceAccount change only the traffic annotation and the zone label, of
// pods in opted-in namespaces. The test impersonates the ServiceAccount
// with the shipped RBAC and policy installed; the writes it expects to
// pass are the reconciler's own patch (controller.PodPatch).
func TestPodWritePolicy_TheManagerChangesOnlyItsAnnotationAndLabelOfOptedInPods(t *testing.T) {
	requireInjection(t)
	ctx := testContext(t)
	asManager := managerWithPodWritePolicy(t)

	system := createPod(t, builders.Pod("kube-system", "vap-system"))
	optedIn := optedInNamespace(ctx, t, "vap-opted-in")
	// An app of its own: an app name belongs to the first namespace that
	// registers it.
	createSyncer(t, builders.Syncer(optedIn, optedIn))
	injected := createPod(t, builders.Pod(optedIn, optedIn))
	if !v1alpha1.MarkedInjected(injected) {
		t.Fatalf("the opted-in namespace's pod was not injected: annotations %v", injected.Annotations)
	}
	notOptedIn := createPod(t, builders.Pod(namespace(ctx, t, "vap-not-opted-in", nil), "orders"))

	standby := podPatch(t, string(v1alpha1.TrafficStandby), "zone-b")
	image := []byte(`[{"op": "replace", "path": "/spec/containers/0/image", "value": "attacker.example/miner:1"}]`)
	denied := []struct {
		what  string
		pod   *corev1.Pod
		patch client.Patch
		// want is in the refusal after the policy's name.
		want string
	}{
		{"a kube-system pod's image", system, client.RawPatch(types.JSONPatchType, image),
			"namespaces labelled " + v1alpha1.NamespaceInjectionLabel + "=enabled, and kube-system is not"},
		{"a kube-system pod's traffic annotation and zone", system, standby,
			"kube-system is not"},
		{"the traffic annotation of a pod of a namespace not opted in", notOptedIn, standby,
			notOptedIn.Namespace + " is not"},
		{"an injected pod's image", injected, client.RawPatch(types.JSONPatchType, image),
			"this request changes spec"},
		{"another annotation beside the traffic one", injected,
			mergePatch(t, map[string]any{"annotations": map[string]string{v1alpha1.TrafficAnnotation: "Standby", "team.example/owner": "mallory"}}),
			"this request changes annotation team.example/owner"},
		{"the injection marker", injected,
			mergePatch(t, map[string]any{"annotations": map[string]any{v1alpha1.StatusAnnotation: nil}}),
			"annotation " + v1alpha1.StatusAnnotation},
		{"the app label, which selects the pod", injected,
			mergePatch(t, map[string]any{"labels": map[string]string{builders.AppLabel: "payments"}}),
			"label " + builders.AppLabel},
		{"a finalizer", injected,
			mergePatch(t, map[string]any{"finalizers": []string{"example.com/hold"}}),
			"metadata.finalizers"},
	}
	for _, d := range denied {
		t.Run("denies "+d.what, func(t *testing.T) {
			requireDenied(t, asManager, d.pod, d.patch, d.want)
		})
	}

	t.Run("allows the reconciler's own patch", func(t *testing.T) {
		for _, p := range []struct{ traffic, zone string }{
			{string(v1alpha1.TrafficStandby), "zone-b"},
			{string(v1alpha1.TrafficServe), ""},
			{string(v1alpha1.TrafficDetached), ""},
			{"", "zone-c"},
		} {
			if err := asManager.Patch(ctx, injected.DeepCopy(), podPatch(t, p.traffic, p.zone)); err != nil {
				t.Fatalf("the manager's patch of traffic %q, zone %q was refused: %v", p.traffic, p.zone, err)
			}
			got := getPod(t, injected)
			if p.traffic != "" && got.Annotations[v1alpha1.TrafficAnnotation] != p.traffic {
				t.Errorf("%s = %q after the patch, want %q", v1alpha1.TrafficAnnotation, got.Annotations[v1alpha1.TrafficAnnotation], p.traffic)
			}
			if p.zone != "" && got.Labels[corev1.LabelTopologyZone] != p.zone {
				t.Errorf("%s = %q after the patch, want %q", corev1.LabelTopologyZone, got.Labels[corev1.LabelTopologyZone], p.zone)
			}
		}
	})

	t.Run("the denied pods are unchanged", func(t *testing.T) {
		for _, p := range []*corev1.Pod{system, notOptedIn} {
			got := getPod(t, p)
			if got.Spec.Containers[0].Image != p.Spec.Containers[0].Image || got.ResourceVersion != p.ResourceVersion {
				t.Errorf("pod %s/%s changed: image %s, resourceVersion %s → %s", p.Namespace, p.Name, got.Spec.Containers[0].Image, p.ResourceVersion, got.ResourceVersion)
			}
		}
	})
}

// Any key but the two, generated, is refused by name, alone or beside an
// allowed change; any value of the two is allowed.
func TestPodWritePolicy_AnyOtherLabelOrAnnotationIsRefusedByName(t *testing.T) {
	requireInjection(t)
	ctx := testContext(t)
	asManager := managerWithPodWritePolicy(t)
	ns := optedInNamespace(ctx, t, "vap-generated")
	createSyncer(t, builders.Syncer(ns, ns))
	pod := createPod(t, builders.Pod(ns, ns))

	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(uint64(seed), 0))
	for i := range 10 {
		key := randomName(r, 1+r.IntN(20)) + ".example/" + randomName(r, 1+r.IntN(30))
		value := randomName(r, r.IntN(40))
		field := []string{"annotations", "labels"}[i%2]
		what := map[string]string{"annotations": "annotation ", "labels": "label "}[field]
		changes := map[string]map[string]string{field: {key: value}}
		if r.IntN(2) == 0 { // beside an allowed change
			if changes["annotations"] == nil {
				changes["annotations"] = map[string]string{}
			}
			changes["annotations"][v1alpha1.TrafficAnnotation] = randomName(r, 8)
		}
		metadata := map[string]any{}
		for k, v := range changes {
			metadata[k] = v
		}
		requireDenied(t, asManager, pod, mergePatch(t, metadata), what+key)

		traffic, zone := randomName(r, 1+r.IntN(20)), randomName(r, 1+r.IntN(40))
		if err := asManager.Patch(ctx, pod.DeepCopy(), podPatch(t, traffic, zone)); err != nil {
			t.Fatalf("the manager's patch of traffic %q, zone %q was refused: %v", traffic, zone, err)
		}
	}
}

// managerWithPodWritePolicy installs the manager's ClusterRole and binding
// and the pod write policy from manifests/default, waits until the API
// server enforces the policy, and returns a client acting as the manager's
// ServiceAccount. It removes them when the test ends.
func managerWithPodWritePolicy(t *testing.T) client.Client {
	t.Helper()
	ctx := testContext(t)
	r := renderDefault(t)
	sa := r.object(t, "ServiceAccount", "eurekube-manager")
	for _, obj := range []*unstructured.Unstructured{
		r.object(t, "ClusterRole", "eurekube-manager"),
		r.object(t, "ClusterRoleBinding", "eurekube-manager"),
		r.object(t, "ValidatingAdmissionPolicy", podWritePolicy),
		r.object(t, "ValidatingAdmissionPolicyBinding", podWritePolicy),
	} {
		obj = obj.DeepCopy()
		if err := suite.c.Create(ctx, obj); err != nil {
			t.Fatalf("create %s %s: %v", obj.GetKind(), obj.GetName(), err)
		}
		t.Cleanup(func() { _ = suite.c.Delete(context.Background(), obj) })
	}

	// The ServiceAccount as the API server authenticates it.
	cfg := rest.CopyConfig(suite.cp.Config)
	cfg.Impersonate = rest.ImpersonationConfig{
		UserName: "system:serviceaccount:" + sa.GetNamespace() + ":" + sa.GetName(),
		Groups:   []string{"system:serviceaccounts", "system:serviceaccounts:" + sa.GetNamespace(), "system:authenticated"},
	}
	asManager, err := client.New(cfg, client.Options{Scheme: suite.cp.Scheme})
	if err != nil {
		t.Fatal(err)
	}

	// RBAC and the policy reach the API server's authorizer and admission
	// chain through informers, a moment after they are created: a probe
	// pod's patch is allowed (RBAC only), then refused (the policy).
	probe := createPod(t, builders.Pod("kube-system", "vap-probe"))
	harness.Eventually(t, 30*time.Second, "the API server enforcing "+podWritePolicy, func() error {
		err := asManager.Patch(ctx, probe.DeepCopy(), podPatch(t, string(v1alpha1.TrafficStandby), ""))
		if err == nil || !strings.Contains(err.Error(), podWritePolicy) {
			return fmt.Errorf("the manager's patch of a kube-system pod returned %v", err)
		}
		return nil
	})
	return asManager
}

// requireDenied fails the test unless the manager's patch of pod is
// refused by the policy with want in the message.
func requireDenied(t *testing.T, asManager client.Client, pod *corev1.Pod, patch client.Patch, want string) {
	t.Helper()
	err := asManager.Patch(testContext(t), pod.DeepCopy(), patch)
	switch {
	case err == nil:
		t.Fatalf("the manager's patch of pod %s/%s was allowed, want refused with %q", pod.Namespace, pod.Name, want)
	case !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "ValidatingAdmissionPolicy '"+podWritePolicy+"'"):
		t.Fatalf("the manager's patch of pod %s/%s: %v, want refused by %s", pod.Namespace, pod.Name, err, podWritePolicy)
	case !strings.Contains(err.Error(), "the eurekube manager may change only") || !strings.Contains(err.Error(), want):
		t.Fatalf("the manager's patch of pod %s/%s was refused with %q, want it to say %q", pod.Namespace, pod.Name, err, want)
	}
}

// podPatch is the reconciler's patch (controller.PodPatch).
func podPatch(t *testing.T, traffic, zone string) client.Patch {
	t.Helper()
	raw, err := controller.PodPatch(traffic, zone)
	if err != nil {
		t.Fatal(err)
	}
	return client.RawPatch(types.MergePatchType, raw)
}

// mergePatch is a JSON merge patch of a pod's metadata.
func mergePatch(t *testing.T, metadata map[string]any) client.Patch {
	t.Helper()
	raw, err := json.Marshal(map[string]any{"metadata": metadata})
	if err != nil {
		t.Fatal(err)
	}
	return client.RawPatch(types.MergePatchType, raw)
}

// createPod creates p as an administrator and deletes it when the test ends.
func createPod(t *testing.T, p *corev1.Pod) *corev1.Pod {
	t.Helper()
	if err := suite.c.Create(testContext(t), p); err != nil {
		t.Fatalf("create a pod in %s: %v", p.Namespace, err)
	}
	t.Cleanup(func() { _ = suite.c.Delete(context.Background(), p) })
	return p
}

func getPod(t *testing.T, p *corev1.Pod) *corev1.Pod {
	t.Helper()
	var got corev1.Pod
	if err := suite.c.Get(testContext(t), client.ObjectKeyFromObject(p), &got); err != nil {
		t.Fatal(err)
	}
	return &got
}

// randomName is n characters valid in a label's name and value.
func randomName(r *rand.Rand, n int) string {
	const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
	b := make([]byte, n)
	for i := range b {
		b[i] = alphabet[r.IntN(len(alphabet))]
	}
	return string(b)
}
