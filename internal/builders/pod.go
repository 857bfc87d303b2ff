package builders

import (
	"maps"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// The app container's port, which a syncer registers by name.
const (
	PortName         = "http"
	PortNumber int32 = 8080
)

// PodOption changes a pod that Pod builds, or the pod template of a
// Deployment.
type PodOption func(*corev1.Pod)

// Pod is a pod of app in namespace as a ReplicaSet creates it: named by
// the API server from generateName "<app>-", labelled app=<app>, running
// one container, "app", of image registry.example/<app>:1, that declares
// port http (8080). opts change it in order; a nil one is skipped.
func Pod(namespace, app string, opts ...PodOption) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{GenerateName: app + "-", Namespace: namespace, Labels: map[string]string{AppLabel: app}},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{
				Name:  "app",
				Image: "registry.example/" + app + ":1",
				Ports: []corev1.ContainerPort{{Name: PortName, ContainerPort: PortNumber}},
			}},
		},
	}
	for _, o := range opts {
		if o != nil {
			o(p)
		}
	}
	return p
}

// Named names the pod, in place of generateName; an empty name keeps
// generateName.
func Named(name string) PodOption {
	return func(p *corev1.Pod) {
		if name != "" {
			p.Name, p.GenerateName = name, ""
		}
	}
}

// Image is the app container's image.
func Image(ref string) PodOption {
	return func(p *corev1.Pod) { p.Spec.Containers[0].Image = ref }
}

// Annotations adds annotations to the pod (a copy of m).
func Annotations(m map[string]string) PodOption {
	return func(p *corev1.Pod) {
		if len(m) == 0 {
			return
		}
		if p.Annotations == nil {
			p.Annotations = map[string]string{}
		}
		maps.Copy(p.Annotations, m)
	}
}

// OnNode binds the pod to node, as the scheduler would.
func OnNode(node string) PodOption {
	return func(p *corev1.Pod) { p.Spec.NodeName = node }
}

// Restricted gives each container of the pod so far the security context
// Pod Security "restricted" asks for, on the container itself: what the
// pod leaves unset (runAsNonRoot, seccompProfile) is then every container's
// own to set, the injected ones included.
func Restricted() PodOption {
	return func(p *corev1.Pod) {
		for i := range p.Spec.Containers {
			p.Spec.Containers[i].SecurityContext = &corev1.SecurityContext{
				RunAsNonRoot:             ptr.To(true),
				AllowPrivilegeEscalation: ptr.To(false),
				Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
				SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
			}
		}
	}
}

// Deployment is the Deployment named app in namespace, labelled
// app=<app>, of replicas pods: its selector picks app=<app>, and its pod
// template is the pod Pod(namespace, app, opts...) builds (its labels,
// annotations and spec).
func Deployment(namespace, app string, replicas int32, opts ...PodOption) *appsv1.Deployment {
	pod := Pod(namespace, app, opts...)
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: app, Namespace: namespace, Labels: map[string]string{AppLabel: app}},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{AppLabel: app}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: pod.Labels, Annotations: pod.Annotations},
				Spec:       pod.Spec,
			},
		},
	}
}
