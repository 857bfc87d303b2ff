package admission

//lint:file-ignore SA1019 an import keeps core/v1 Endpoints (for Spring Cloud Kubernetes), and the policy holds the manager to its own.

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

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
			// What the API server answered, not a read after it: the
			// suite's running reconciler keeps the annotation as the
			// syncer's spec says, and may already have set it back.
			got := injected.DeepCopy()
			if err := asManager.Patch(ctx, got, podPatch(t, p.traffic, p.zone)); err != nil {
				t.Fatalf("the manager's patch of traffic %q, zone %q was refused: %v", p.traffic, p.zone, err)
			}
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

// managerWithPodWritePolicy is a client acting as the manager's
// ServiceAccount, with the pod write policy enforced (managerBoundBy).
func managerWithPodWritePolicy(t *testing.T) client.Client {
	t.Helper()
	probe := createPod(t, builders.Pod("kube-system", "vap-probe"))
	return managerBoundBy(t, podWritePolicy, func(ctx context.Context, asManager client.Client) error {
		return asManager.Patch(ctx, probe.DeepCopy(), podPatch(t, string(v1alpha1.TrafficStandby), ""))
	})
}

// managerBoundBy installs the manager's ClusterRole and binding and the
// policy named (and its binding) from manifests/default, waits until the
// API server enforces the policy, and returns a client acting as the
// manager's ServiceAccount. It removes them when the test ends. probe is
// a write RBAC allows and the policy refuses.
func managerBoundBy(t *testing.T, policy string, probe func(context.Context, client.Client) error) client.Client {
	t.Helper()
	ctx := testContext(t)
	r := renderDefault(t)
	sa := r.object(t, "ServiceAccount", "eurekube-manager")
	for _, obj := range []*unstructured.Unstructured{
		r.object(t, "ClusterRole", "eurekube-manager"),
		r.object(t, "ClusterRoleBinding", "eurekube-manager"),
		r.object(t, "ValidatingAdmissionPolicy", policy),
		r.object(t, "ValidatingAdmissionPolicyBinding", policy),
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
	// chain through informers, a moment after they are created: the probe
	// is allowed (RBAC only), then refused (the policy).
	harness.Eventually(t, 30*time.Second, "the API server enforcing "+policy, func() error {
		err := probe(ctx, asManager)
		if err == nil || !strings.Contains(err.Error(), policy) {
			return fmt.Errorf("the manager's probe write returned %v", err)
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

// The ValidatingAdmissionPolicy of manifests/import-write-policy, as
// manifests/default renders it.
const importWritePolicy = "eurekube-manager-import-writes"

// The marks of an import's Service and slices, in the words of the
// policy's refusals.
const (
	markLabel      = "the label " + controller.ImportLabel
	markOwner      = "an ownerReference with controller: true to the EurekaImport (eurekube.io/v1alpha1) that label names"
	markManagedBy  = "the label " + discoveryv1.LabelManagedBy + "=" + controller.ImportManagedBy
	markSkipMirror = "the label " + discoveryv1.LabelSkipMirror + "=true"
)

// RBAC lets the manager create, update and delete any Service and
// EndpointSlice in the cluster; the policy lets its ServiceAccount write
// only those of an import. The test impersonates the ServiceAccount with
// the shipped RBAC and policy installed; the writes it expects to pass are
// the reconciler's (controller/imports.go), on objects built as
// controller/import_plan.go builds them.
func TestImportWritePolicy_TheManagerWritesOnlyItsImportsServicesAndSlices(t *testing.T) {
	ctx := testContext(t)
	asManager := managerWithImportWritePolicy(t)
	ns := namespace(ctx, t, "vap-import", nil)
	imp := importOwner(ns, "payments")

	// What is not the manager's: kube-system's DNS, a team's Service in an
	// opted-in namespace and the slice the endpoint slice controller keeps
	// for it.
	dns := createAsAdmin(t, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "kube-dns", Labels: map[string]string{"k8s-app": "kube-dns"}},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"k8s-app": "kube-dns"},
			Ports: []corev1.ServicePort{{Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP}}},
	})
	team := optedInNamespace(ctx, t, "vap-team")
	teams := createAsAdmin(t, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: team, Name: "orders"},
		Spec:       corev1.ServiceSpec{Selector: map[string]string{"app": "orders"}, Ports: []corev1.ServicePort{{Name: "http", Port: 80}}},
	})
	teamsSlice := createAsAdmin(t, &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: team, Name: "orders-x7k2p", Labels: map[string]string{
			discoveryv1.LabelServiceName: "orders", discoveryv1.LabelManagedBy: "endpointslice-controller.k8s.io"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"10.1.0.7"}}},
	})
	// The Endpoints Kubernetes' endpoints controller keeps for it.
	teamsEndpoints := createAsAdmin(t, &corev1.Endpoints{
		ObjectMeta: metav1.ObjectMeta{Namespace: team, Name: "orders"},
		Subsets: []corev1.EndpointSubset{{Addresses: []corev1.EndpointAddress{{IP: "10.1.0.7"}},
			Ports: []corev1.EndpointPort{{Name: "http", Port: 8080, Protocol: corev1.ProtocolTCP}}}},
	})
	// An import's, made by the manager.
	svc := importService(t, imp, "payments")
	slice := importSlice(t, imp, "payments", "10.0.0.1")
	eps := importEndpoints(t, imp, "payments", "10.0.0.1")
	for _, obj := range []client.Object{svc, slice, eps} {
		if err := asManager.Create(ctx, obj); err != nil {
			t.Fatalf("the manager's create of %T %s was refused: %v", obj, obj.GetName(), err)
		}
		t.Cleanup(func() { _ = suite.c.Delete(context.Background(), obj) })
	}

	other := importOwner(ns, "orders")
	denied := []struct {
		what  string
		write func(t *testing.T) error
		// want is in the refusal after the policy's name.
		want string
	}{
		{"a change to kube-system's kube-dns", func(t *testing.T) error {
			s := dns.DeepCopy()
			s.Spec.Ports[0].Port = 5353
			return asManager.Update(ctx, s)
		}, "Service kube-system/kube-dns is not one: it lacks " + markLabel + ", " + markOwner},
		{"deleting kube-system's kube-dns", func(t *testing.T) error {
			return asManager.Delete(ctx, dns.DeepCopy(), client.Preconditions{UID: &dns.UID})
		}, "Service kube-system/kube-dns is not one"},
		{"a team's Service marked as the import's, to adopt it", func(t *testing.T) error {
			s := teams.DeepCopy()
			teamImport := importOwner(team, imp.Name)
			s.Labels = map[string]string{controller.ImportLabel: teamImport.Name}
			mustOwn(t, teamImport, s)
			return asManager.Update(ctx, s)
		}, "Service " + team + "/orders is not one"},
		{"deleting a team's Service", func(t *testing.T) error {
			return asManager.Delete(ctx, teams.DeepCopy())
		}, "Service " + team + "/orders is not one"},
		{"a change to the endpoint slice controller's slice", func(t *testing.T) error {
			s := teamsSlice.DeepCopy()
			s.Endpoints[0].Addresses = []string{"203.0.113.9"}
			return asManager.Update(ctx, s)
		}, "EndpointSlice " + team + "/orders-x7k2p is not one: it lacks " + markLabel + ", " + markOwner + ", " + markManagedBy},
		{"deleting the endpoint slice controller's slice", func(t *testing.T) error {
			return asManager.Delete(ctx, teamsSlice.DeepCopy())
		}, "EndpointSlice " + team + "/orders-x7k2p is not one"},
		{"a slice for kube-dns in kube-system, unmarked", func(t *testing.T) error {
			s := &discoveryv1.EndpointSlice{
				ObjectMeta:  metav1.ObjectMeta{Namespace: "kube-system", Name: "kube-dns-eurekube", Labels: map[string]string{discoveryv1.LabelServiceName: "kube-dns"}},
				AddressType: discoveryv1.AddressTypeIPv4,
				Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"203.0.113.9"}}},
			}
			return asManager.Create(ctx, s)
		}, "the EndpointSlice kube-system/kube-dns-eurekube it creates lacks " + markLabel},
		{"a change to the Endpoints Kubernetes keeps for a team's Service", func(t *testing.T) error {
			e := teamsEndpoints.DeepCopy()
			e.Subsets[0].Addresses[0].IP = "203.0.113.9"
			return asManager.Update(ctx, e)
		}, "Endpoints " + team + "/orders is not one: it lacks " + markLabel + ", " + markOwner + ", " + markSkipMirror},
		{"a team's Endpoints marked as the import's, to adopt it", func(t *testing.T) error {
			e := teamsEndpoints.DeepCopy()
			teamImport := importOwner(team, imp.Name)
			e.Labels = map[string]string{controller.ImportLabel: teamImport.Name, discoveryv1.LabelSkipMirror: "true"}
			mustOwn(t, teamImport, e)
			return asManager.Update(ctx, e)
		}, "Endpoints " + team + "/orders is not one"},
		{"deleting the Endpoints of a team's Service", func(t *testing.T) error {
			return asManager.Delete(ctx, teamsEndpoints.DeepCopy())
		}, "Endpoints " + team + "/orders is not one"},
		{"Endpoints for kube-dns in kube-system, unmarked", func(t *testing.T) error {
			e := &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "kube-dns-eurekube"},
				Subsets: []corev1.EndpointSubset{{Addresses: []corev1.EndpointAddress{{IP: "203.0.113.9"}},
					Ports: []corev1.EndpointPort{{Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP}}}}}
			return asManager.Create(ctx, e)
		}, "the Endpoints kube-system/kube-dns-eurekube it creates lacks " + markLabel},
		{"taking skip-mirror off its Endpoints, to have Kubernetes mirror it", func(t *testing.T) error {
			e := getAsAdmin(t, eps)
			delete(e.Labels, discoveryv1.LabelSkipMirror)
			return asManager.Update(ctx, e)
		}, "this request leaves Endpoints " + ns + "/payments without " + markSkipMirror},
		{"handing its Endpoints to another import", func(t *testing.T) error {
			e := getAsAdmin(t, eps)
			e.Labels[controller.ImportLabel] = other.Name
			e.OwnerReferences = nil
			mustOwn(t, other, e)
			return asManager.Update(ctx, e)
		}, "may not hand Endpoints " + ns + "/payments from one EurekaImport to another"},
		{"taking the import label off its Service", func(t *testing.T) error {
			s := getAsAdmin(t, svc)
			delete(s.Labels, controller.ImportLabel)
			return asManager.Update(ctx, s)
		}, "this request leaves Service " + ns + "/payments without " + markLabel},
		{"taking the owner off its slice", func(t *testing.T) error {
			s := getAsAdmin(t, slice)
			s.OwnerReferences = nil
			return asManager.Update(ctx, s)
		}, "this request leaves EndpointSlice " + ns + "/" + slice.Name + " without " + markOwner},
		{"taking managed-by off its slice", func(t *testing.T) error {
			s := getAsAdmin(t, slice)
			s.Labels[discoveryv1.LabelManagedBy] = "endpointslice-controller.k8s.io"
			return asManager.Update(ctx, s)
		}, "without " + markManagedBy},
		{"handing its Service to another import", func(t *testing.T) error {
			s := getAsAdmin(t, svc)
			s.Labels[controller.ImportLabel] = other.Name
			s.OwnerReferences = nil
			mustOwn(t, other, s)
			return asManager.Update(ctx, s)
		}, "may not hand Service " + ns + "/payments from one EurekaImport to another"},
		{"externalIPs on its Service, to capture another address's traffic", func(t *testing.T) error {
			s := getAsAdmin(t, svc)
			s.Spec.ExternalIPs = []string{"203.0.113.10"}
			return asManager.Update(ctx, s)
		}, "Service " + ns + "/payments has externalIPs"},
		{"a marked Service with a selector, of type NodePort", func(t *testing.T) error {
			s := importService(t, imp, "payments-nodeport")
			s.Spec.Type = corev1.ServiceTypeNodePort
			s.Spec.Selector = map[string]string{"app": "orders"}
			return asManager.Create(ctx, s)
		}, "Service " + ns + "/payments-nodeport has type NodePort, a selector"},
	}
	for _, d := range denied {
		t.Run("denies "+d.what, func(t *testing.T) {
			requireRefused(t, importWritePolicy, d.write(t), "the eurekube manager", d.want)
		})
	}

	t.Run("the denied objects are unchanged", func(t *testing.T) {
		for _, obj := range []client.Object{dns, teams, teamsSlice, teamsEndpoints, svc, slice, eps} {
			got := obj.DeepCopyObject().(client.Object)
			if err := suite.c.Get(ctx, client.ObjectKeyFromObject(obj), got); err != nil {
				t.Fatalf("%T %s/%s: %v", obj, obj.GetNamespace(), obj.GetName(), err)
			}
			if got.GetResourceVersion() != obj.GetResourceVersion() {
				t.Errorf("%T %s/%s changed: resourceVersion %s → %s", obj, obj.GetNamespace(), obj.GetName(), obj.GetResourceVersion(), got.GetResourceVersion())
			}
		}
	})

	// As applyImport and removeImported write: Update of the object read,
	// Delete with the UID as precondition.
	t.Run("allows the reconciler's own writes", func(t *testing.T) {
		s := getAsAdmin(t, slice)
		s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{Addresses: []string{"10.0.0.2"},
			Conditions: discoveryv1.EndpointConditions{Ready: ptr(false), Serving: ptr(false), Terminating: ptr(false)}})
		s.Labels[discoveryv1.LabelServiceName] = "payments-renamed"
		if err := asManager.Update(ctx, s); err != nil {
			t.Fatalf("the manager's update of its slice's endpoints was refused: %v", err)
		}
		v := getAsAdmin(t, svc)
		v.Spec.Ports = append(v.Spec.Ports, corev1.ServicePort{Name: "https", Port: 443, Protocol: corev1.ProtocolTCP})
		if err := asManager.Update(ctx, v); err != nil {
			t.Fatalf("the manager's update of its Service's ports was refused: %v", err)
		}
		headless := importService(t, imp, "payments-headless")
		headless.Spec.ClusterIP = corev1.ClusterIPNone
		if err := asManager.Create(ctx, headless); err != nil {
			t.Fatalf("the manager's create of a headless Service was refused: %v", err)
		}
		e := getAsAdmin(t, eps)
		e.Subsets[0].NotReadyAddresses = []corev1.EndpointAddress{{IP: "10.0.0.2"}}
		e.Annotations = map[string]string{corev1.EndpointsOverCapacity: "truncated"}
		if err := asManager.Update(ctx, e); err != nil {
			t.Fatalf("the manager's update of its Endpoints' subsets was refused: %v", err)
		}
		// The Endpoints first: Kubernetes' endpoints controller deletes
		// the Endpoints of a Service deleted.
		for _, obj := range []client.Object{getAsAdmin(t, eps), s, getAsAdmin(t, svc), headless} {
			uid := obj.GetUID()
			if err := asManager.Delete(ctx, obj, client.Preconditions{UID: &uid}); err != nil {
				t.Fatalf("the manager's delete of %T %s was refused: %v", obj, obj.GetName(), err)
			}
		}
	})
}

// Every combination of the marks, present, absent or wrong, on a Service
// and a slice the manager creates: the API server admits exactly the
// combination the reconciler writes, and each refusal names the marks
// that are missing or wrong.
func TestImportWritePolicy_ACreateLackingAnyMarkIsRefusedNamingIt(t *testing.T) {
	ctx := testContext(t)
	asManager := managerWithImportWritePolicy(t)
	ns := namespace(ctx, t, "vap-import-marks", nil)
	imp := importOwner(ns, "payments")

	labels := map[string]*string{"absent": nil, "the import's": &imp.Name, "another import's": ptr("orders")}
	owners := map[string]func(*metav1.OwnerReference){
		"absent":     nil,
		"the import": func(*metav1.OwnerReference) {},
		// blockOwnerDeletion: OwnerReferencesPermissionEnforcement, before
		// the policy, would refuse it on an owner of another kind.
		"not controller":  func(r *metav1.OwnerReference) { r.Controller = ptr(false) },
		"another kind":    func(r *metav1.OwnerReference) { r.Kind, r.BlockOwnerDeletion = "EurekaSyncer", nil },
		"another version": func(r *metav1.OwnerReference) { r.APIVersion, r.BlockOwnerDeletion = "eurekube.io/v1", nil },
	}
	managedBy := map[string]*string{"absent": nil, "eurekube.io": ptr(controller.ImportManagedBy), "another manager's": ptr("endpointslice-controller.k8s.io")}
	// On Endpoints, the third mark is skip-mirror.
	skipMirror := map[string]*string{"absent": nil, "eurekube.io": ptr("true"), "another manager's": ptr("false")}

	n := 0
	for labelCase, label := range labels {
		for ownerCase, owner := range owners {
			for managedByCase, manager := range managedBy {
				for _, kind := range []string{"Service", "EndpointSlice", "Endpoints"} {
					if kind == "Service" && managedByCase != "absent" {
						continue
					}
					n++
					name := fmt.Sprintf("marks-%d", n)
					var obj client.Object = &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
						Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP}}}}
					thirdKey, third := discoveryv1.LabelManagedBy, manager
					switch kind {
					case "EndpointSlice":
						obj = &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
							AddressType: discoveryv1.AddressTypeIPv4, Endpoints: []discoveryv1.Endpoint{{Addresses: []string{"10.0.0.1"}}}}
					case "Endpoints":
						obj = &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
							Subsets: []corev1.EndpointSubset{{Addresses: []corev1.EndpointAddress{{IP: "10.0.0.1"}},
								Ports: []corev1.EndpointPort{{Name: "http", Port: 8080, Protocol: corev1.ProtocolTCP}}}}}
						thirdKey, third = discoveryv1.LabelSkipMirror, skipMirror[managedByCase]
					}
					l := map[string]string{}
					if label != nil {
						l[controller.ImportLabel] = *label
					}
					if third != nil {
						l[thirdKey] = *third
					}
					obj.SetLabels(l)
					if owner != nil {
						mustOwn(t, imp, obj)
						refs := obj.GetOwnerReferences()
						owner(&refs[0])
						obj.SetOwnerReferences(refs)
					}

					var lacks []string
					if label == nil {
						lacks = append(lacks, markLabel)
					}
					if ownerCase != "the import" || labelCase == "another import's" {
						lacks = append(lacks, markOwner)
					}
					if kind == "EndpointSlice" && managedByCase != "eurekube.io" {
						lacks = append(lacks, markManagedBy)
					}
					if kind == "Endpoints" && managedByCase != "eurekube.io" {
						lacks = append(lacks, markSkipMirror)
					}
					what := fmt.Sprintf("%s with label %s, owner %s, managed-by %s", kind, labelCase, ownerCase, managedByCase)
					if kind == "Endpoints" {
						what = fmt.Sprintf("%s with label %s, owner %s, skip-mirror %s", kind, labelCase, ownerCase, map[string]string{"absent": "absent", "eurekube.io": "true", "another manager's": "false"}[managedByCase])
					}
					err := asManager.Create(ctx, obj)
					if len(lacks) == 0 {
						if err != nil {
							t.Fatalf("the manager's create of a %s was refused: %v", what, err)
						}
						uid := obj.GetUID()
						if err := asManager.Delete(ctx, obj, client.Preconditions{UID: &uid}); err != nil {
							t.Fatalf("the manager's delete of a %s was refused: %v", what, err)
						}
						continue
					}
					if err == nil {
						_ = suite.c.Delete(context.Background(), obj)
					}
					t.Run(what, func(t *testing.T) {
						requireRefused(t, importWritePolicy, err, "the eurekube manager may write only",
							"the "+kind+" "+ns+"/"+name+" it creates lacks "+strings.Join(lacks, ", "))
					})
				}
			}
		}
	}
}

// managerWithImportWritePolicy is a client acting as the manager's
// ServiceAccount, with the import write policy enforced (managerBoundBy).
func managerWithImportWritePolicy(t *testing.T) client.Client {
	t.Helper()
	probe := createAsAdmin(t, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", GenerateName: "vap-probe-"},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}},
	})
	return managerBoundBy(t, importWritePolicy, func(ctx context.Context, asManager client.Client) error {
		return asManager.Update(ctx, probe.DeepCopy())
	})
}

// importOwner is an EurekaImport as the manager's owner references name
// it. It is never created: the API server checks no owner's existence, and
// the policy reads only the reference (the suite's manager then has no
// import to act on).
func importOwner(ns, name string) *v1alpha1.EurekaImport {
	return &v1alpha1.EurekaImport{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: uuid.NewUUID()}}
}

// importService is the Service planImport builds for imp, owned as
// applyImport sets it (controllerutil.SetControllerReference).
func importService(t *testing.T, imp *v1alpha1.EurekaImport, name string) *corev1.Service {
	t.Helper()
	s := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: imp.Namespace, Name: name, Labels: map[string]string{controller.ImportLabel: imp.Name}},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP,
			Ports: []corev1.ServicePort{{Name: "http", Port: v1alpha1.DefaultImportPort, Protocol: corev1.ProtocolTCP}}},
	}
	mustOwn(t, imp, s)
	return s
}

// importSlice is an EndpointSlice planImport builds for imp's Service, one
// UP instance at addr.
func importSlice(t *testing.T, imp *v1alpha1.EurekaImport, service, addr string) *discoveryv1.EndpointSlice {
	t.Helper()
	s := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: imp.Namespace, Name: service + "-eurekube-0a1b2c3d-0", Labels: map[string]string{
			controller.ImportLabel:       imp.Name,
			discoveryv1.LabelServiceName: service,
			discoveryv1.LabelManagedBy:   controller.ImportManagedBy,
		}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints: []discoveryv1.Endpoint{{Addresses: []string{addr},
			Conditions: discoveryv1.EndpointConditions{Ready: ptr(true), Serving: ptr(true), Terminating: ptr(false)}}},
		Ports: []discoveryv1.EndpointPort{{Name: ptr("http"), Port: ptr(int32(8080)), Protocol: ptr(corev1.ProtocolTCP)}},
	}
	mustOwn(t, imp, s)
	return s
}

// importEndpoints is the Endpoints planImport builds for imp's Service,
// one UP instance at addr.
func importEndpoints(t *testing.T, imp *v1alpha1.EurekaImport, service, addr string) *corev1.Endpoints {
	t.Helper()
	e := &corev1.Endpoints{
		ObjectMeta: metav1.ObjectMeta{Namespace: imp.Namespace, Name: service, Labels: map[string]string{
			controller.ImportLabel:      imp.Name,
			discoveryv1.LabelSkipMirror: "true",
		}},
		Subsets: []corev1.EndpointSubset{{Addresses: []corev1.EndpointAddress{{IP: addr}},
			Ports: []corev1.EndpointPort{{Name: "http", Port: 8080, Protocol: corev1.ProtocolTCP}}}},
	}
	mustOwn(t, imp, e)
	return e
}

// mustOwn makes imp obj's controller, as the reconciler does.
func mustOwn(t *testing.T, imp *v1alpha1.EurekaImport, obj client.Object) {
	t.Helper()
	if err := controllerutil.SetControllerReference(imp, obj, suite.cp.Scheme); err != nil {
		t.Fatal(err)
	}
}

// createAsAdmin creates obj as an administrator and deletes it when the
// test ends.
func createAsAdmin[T client.Object](t *testing.T, obj T) T {
	t.Helper()
	if err := suite.c.Create(testContext(t), obj); err != nil {
		t.Fatalf("create %T %s/%s: %v", obj, obj.GetNamespace(), obj.GetName(), err)
	}
	t.Cleanup(func() { _ = suite.c.Delete(context.Background(), obj) })
	return obj
}

// getAsAdmin reads obj as it is stored.
func getAsAdmin[T client.Object](t *testing.T, obj T) T {
	t.Helper()
	got := obj.DeepCopyObject().(T)
	if err := suite.c.Get(testContext(t), client.ObjectKeyFromObject(obj), got); err != nil {
		t.Fatal(err)
	}
	return got
}

// requireRefused fails the test unless err is policy's refusal, its
// message holding each of want.
func requireRefused(t *testing.T, policy string, err error, want ...string) {
	t.Helper()
	switch {
	case err == nil:
		t.Fatalf("the manager's write was allowed, want refused by %s with %q", policy, want)
	case !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "ValidatingAdmissionPolicy '"+policy+"'"):
		t.Fatalf("the manager's write: %v, want refused by %s", err, policy)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Fatalf("the manager's write was refused with %q, want it to say %q", err, w)
		}
	}
}
