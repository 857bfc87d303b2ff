package builders_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/eurekube/eurekube/api/v1alpha1"
	"github.com/eurekube/eurekube/internal/builders"
	"github.com/eurekube/eurekube/webhook"
)

func TestPod_IsNamedByTheAPIServerAndDeclaresThePortHTTP(t *testing.T) {
	p := builders.Pod("shop", "orders")
	if p.Namespace != "shop" || p.Name != "" || p.GenerateName != "orders-" || p.Labels["app"] != "orders" {
		t.Errorf("pod meta %+v, want generateName orders- in shop, labelled app=orders", p.ObjectMeta)
	}
	if len(p.Spec.Containers) != 1 {
		t.Fatalf("containers %+v, want one", p.Spec.Containers)
	}
	c := p.Spec.Containers[0]
	if c.Name != "app" || c.Image != "registry.example/orders:1" || len(c.Ports) != 1 || c.Ports[0].Name != "http" || c.Ports[0].ContainerPort != 8080 {
		t.Errorf("container %+v, want app serving http 8080", c)
	}
}

func TestPod_Options(t *testing.T) {
	annotations := map[string]string{v1alpha1.AnnotationPort: "9090"}
	p := builders.Pod("shop", "orders", builders.Named("orders-1"), nil, builders.Image("example.com/orders:2"),
		builders.Annotations(annotations), builders.Annotations(map[string]string{"b": "2"}), builders.OnNode("node-a"),
		func(p *corev1.Pod) {
			p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: "proxy", Image: "example.com/proxy:1"})
		},
		builders.Restricted())
	annotations["a"] = "1"
	switch {
	case p.Name != "orders-1" || p.GenerateName != "":
		t.Errorf("Named: name %q, generateName %q", p.Name, p.GenerateName)
	case p.Spec.Containers[0].Image != "example.com/orders:2":
		t.Errorf("Image: %q", p.Spec.Containers[0].Image)
	case len(p.Annotations) != 2 || p.Annotations[v1alpha1.AnnotationPort] != "9090" || p.Annotations["b"] != "2":
		t.Errorf("Annotations: %v, want both maps' keys, copied", p.Annotations)
	case p.Spec.NodeName != "node-a":
		t.Errorf("OnNode: %q", p.Spec.NodeName)
	}
	if builders.Pod("shop", "orders", builders.Named("")).GenerateName != "orders-" {
		t.Error(`Named(""): want generateName kept`)
	}
	for _, c := range p.Spec.Containers {
		sc := c.SecurityContext
		if sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation ||
			sc.Capabilities == nil || len(sc.Capabilities.Drop) != 1 || sc.Capabilities.Drop[0] != "ALL" ||
			sc.SeccompProfile == nil || sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
			t.Errorf("Restricted: container %s has security context %+v", c.Name, sc)
		}
	}
	if p.Spec.SecurityContext != nil {
		t.Errorf("Restricted: pod security context %+v, want none: each container carries its own", p.Spec.SecurityContext)
	}
}

func TestDeployment_RunsThePodTheSyncerSelects(t *testing.T) {
	d := builders.Deployment("shop", "orders", 3, builders.Image("example.com/orders:2"), builders.Annotations(map[string]string{"a": "1"}))
	if d.Namespace != "shop" || d.Name != "orders" || d.Labels["app"] != "orders" || d.Spec.Replicas == nil || *d.Spec.Replicas != 3 {
		t.Errorf("Deployment %s/%s labels %v replicas %v, want shop/orders app=orders, 3", d.Namespace, d.Name, d.Labels, d.Spec.Replicas)
	}
	selector, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
	if err != nil {
		t.Fatal(err)
	}
	if !selector.Matches(labels.Set(d.Spec.Template.Labels)) {
		t.Errorf("the selector %v does not pick the template's pods %v", selector, d.Spec.Template.Labels)
	}
	if c := d.Spec.Template.Spec.Containers; len(c) != 1 || c[0].Image != "example.com/orders:2" || d.Spec.Template.Annotations["a"] != "1" {
		t.Errorf("template %+v, want the pod the options shape", d.Spec.Template)
	}
	// Each label map is the Deployment's own: a test that adds a label to
	// its pods leaves the selector as it was.
	d.Spec.Template.Labels["track"] = "canary"
	if len(d.Spec.Selector.MatchLabels) != 1 || len(d.Labels) != 1 {
		t.Errorf("a label added to the template reached the selector %v or the Deployment's labels %v", d.Spec.Selector.MatchLabels, d.Labels)
	}
}

// The syncer and the pod fit: the webhook injects the pod under the syncer
// without an adaptation (the registered port is declared).
func TestSyncerAndPod_TheWebhookInjectsThePodAsItIs(t *testing.T) {
	defaults := webhook.Defaults{
		RegistrarImage: "eurekube/registrar:test", EurekaURLs: []string{"http://eureka:8761/eureka"},
		PreStopSleepSeconds: 100, ClusterID: "cluster-1", RegistrarPort: 9901, RegistrarLogLevel: "info",
		RegistrarResources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m")}},
	}
	ns := webhook.Namespace{Labels: map[string]string{v1alpha1.NamespaceInjectionLabel: "enabled"}}
	for name, pod := range map[string]*corev1.Pod{
		"pod":                        builders.Pod("shop", "orders"),
		"the Deployment's pod":       {ObjectMeta: builders.Deployment("shop", "orders", 1).Spec.Template.ObjectMeta, Spec: builders.Deployment("shop", "orders", 1).Spec.Template.Spec},
		"restricted pod on its node": builders.Pod("shop", "orders", builders.Named("orders-1"), builders.Restricted(), builders.OnNode("node-a")),
	} {
		t.Run(name, func(t *testing.T) {
			r := webhook.Inject(pod, ns, []v1alpha1.EurekaSyncer{*builders.Syncer("shop", "orders")}, defaults)
			if !r.Inject || r.Err != nil || r.Denied != "" {
				t.Fatalf("not injected: %s %v %s", r.Reason, r.Err, r.Denied)
			}
			if len(r.Adaptations) != 0 {
				t.Errorf("adaptations %+v, want none", r.Adaptations)
			}
		})
	}
}
