package controller

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/eurekube/eurekube/api/v1alpha1"
	"github.com/eurekube/eurekube/eureka"
	"github.com/eurekube/eurekube/internal/builders"
	"github.com/eurekube/eurekube/webhook"
	"github.com/eurekube/eurekube/webhook/webhooktest"
)

// The builders and fakes of the pure tests (package controller), which run
// without servers. The suite's helpers (package controller_test) are in
// helpers_test.go.

// syncerFixture is the syncer shop/orders at generation 3, changed by
// mutate.
func syncerFixture(mutate ...builders.SyncerOption) *v1alpha1.EurekaSyncer {
	return builders.Syncer("shop", "orders", append([]builders.SyncerOption{func(s *v1alpha1.EurekaSyncer) { s.Generation = 3 }}, mutate...)...)
}

func instancesFixture(statuses ...eureka.Status) []eureka.Instance {
	out := make([]eureka.Instance, len(statuses))
	for i, st := range statuses {
		out[i] = eureka.Instance{App: "ORDERS", InstanceID: fmt.Sprintf("orders-%d:orders:8080", i), Status: st}
	}
	return out
}

// podFixture builds a pod; annotations come as key, value pairs.
func podFixture(name string, registrar, ready bool, annotations ...string) corev1.Pod {
	p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name), Annotations: map[string]string{}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app"}}}}
	if registrar {
		p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: v1alpha1.RegistrarContainerName})
	}
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: status}}
	for i := 0; i+1 < len(annotations); i += 2 {
		p.Annotations[annotations[i]] = annotations[i+1]
	}
	return p
}

// injectedBy are the annotations the webhook puts on a pod it injected.
func injectedBy(syncer string, drain string, adaptations ...v1alpha1.Adaptation) []string {
	a := []string{v1alpha1.SyncerAnnotation, syncer, v1alpha1.StatusAnnotation, v1alpha1.StatusInjected, v1alpha1.DrainAnnotation, drain}
	if len(adaptations) > 0 {
		a = append(a, v1alpha1.AdaptationsAnnotation, v1alpha1.EncodeAdaptations(adaptations))
	}
	return a
}

// count classifies pods for the syncer orders, the webhook injecting
// registrarImage.
func count(pods []corev1.Pod, registrarImage string) podCounts {
	return countPods(pods, syncerFixture(), webhook.Defaults{RegistrarImage: registrarImage}, nil, time.Now())
}

var driftDefaults = webhook.Defaults{RegistrarImage: "eurekube/registrar:2.0", ClusterID: "cluster-1", PreStopSleepSeconds: 100, RegistrarPort: 9901}

// springSyncer selects the webhook's Spring Boot test pod.
func springSyncer(urls ...string) *v1alpha1.EurekaSyncer {
	return builders.Syncer("shop", "orders", builders.EurekaURLs(urls...))
}

// injected is the Spring Boot pod as the webhook admits it under s, ready.
func injected(t *testing.T, name string, s *v1alpha1.EurekaSyncer, annotations ...string) corev1.Pod {
	t.Helper()
	pod := webhooktest.SpringBootPod("shop", name)
	pod.UID = types.UID("uid-" + name)
	for i := 0; i+1 < len(annotations); i += 2 {
		if pod.Annotations == nil {
			pod.Annotations = map[string]string{}
		}
		pod.Annotations[annotations[i]] = annotations[i+1]
	}
	overrides, err := webhook.ParseAnnotations(pod.Annotations)
	if err != nil {
		t.Fatal(err)
	}
	out, _, err := webhook.Mutate(pod, webhook.Config{Syncer: s, Overrides: overrides, Defaults: driftDefaults})
	if err != nil {
		t.Fatal(err)
	}
	out.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	return *out
}

// withRegistrarStatus gives the pod's registrar container a status.
func withRegistrarStatus(pod corev1.Pod, cs corev1.ContainerStatus) corev1.Pod {
	cs.Name = v1alpha1.RegistrarContainerName
	pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "app", Ready: true}, cs}
	return pod
}

// svcShape builds the Service of a test case.
type svcShape struct {
	typ       corev1.ServiceType
	clusterIP string
	ports     []corev1.ServicePort
	ingress   []corev1.LoadBalancerIngress
	local     bool
}

func (s svcShape) build() *corev1.Service {
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "orders", Namespace: "shop"}}
	svc.Spec.Type, svc.Spec.ClusterIP, svc.Spec.Ports = s.typ, s.clusterIP, s.ports
	if svc.Spec.ClusterIP == "" {
		svc.Spec.ClusterIP = "10.96.0.10"
	}
	if svc.Spec.Ports == nil {
		svc.Spec.Ports = []corev1.ServicePort{{Name: "http", Port: 80, NodePort: 31080}}
	}
	if s.local {
		svc.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
	}
	svc.Status.LoadBalancer.Ingress = s.ingress
	return svc
}

func testNode(name string, ready bool, addrs ...corev1.NodeAddress) corev1.Node {
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	return corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name},
		Status: corev1.NodeStatus{Addresses: addrs, Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: status}}}}
}

func internal(ip string) corev1.NodeAddress {
	return corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: ip}
}

func external(ip string) corev1.NodeAddress {
	return corev1.NodeAddress{Type: corev1.NodeExternalIP, Address: ip}
}

// slice is an EndpointSlice with one endpoint per entry: node → ready.
func slice(endpoints ...endpointShape) discoveryv1.EndpointSlice {
	s := discoveryv1.EndpointSlice{AddressType: discoveryv1.AddressTypeIPv4}
	for _, e := range endpoints {
		node, ready := e.node, e.ready
		s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{Addresses: []string{e.ip}, NodeName: &node, Conditions: discoveryv1.EndpointConditions{Ready: &ready}})
	}
	return s
}

type endpointShape struct {
	ip, node string
	ready    bool
}

// recordingReader serves Secrets and ConfigMaps by name and records each
// Get as "<Kind>/<name>". Its Secrets consent to their use
// (v1alpha1.EurekaCredentialsLabel), those named in unconsented aside.
type recordingReader struct {
	secrets     map[string]map[string][]byte
	unconsented map[string]bool
	configMaps  map[string]map[string]string
	got         []string
}

func (r *recordingReader) Get(_ context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	switch o := obj.(type) {
	case *corev1.Secret:
		r.got = append(r.got, "Secret/"+key.Name)
		o.Data = r.secrets[key.Name]
		if !r.unconsented[key.Name] {
			o.Labels = map[string]string{v1alpha1.EurekaCredentialsLabel: "true"}
		}
	case *corev1.ConfigMap:
		r.got = append(r.got, "ConfigMap/"+key.Name)
		o.Data = r.configMaps[key.Name]
	default:
		return fmt.Errorf("unexpected Get of %T", obj)
	}
	return nil
}

func (r *recordingReader) List(context.Context, client.ObjectList, ...client.ListOption) error {
	return fmt.Errorf("unexpected List")
}

// forbiddenReader answers every Get as the API server does where no
// namespace granted the manager.
type forbiddenReader struct{ recordingReader }

func (*forbiddenReader) Get(_ context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	return apierrors.NewForbidden(schema.GroupResource{Resource: "secrets"}, key.Name, fmt.Errorf("no RBAC policy matched"))
}
