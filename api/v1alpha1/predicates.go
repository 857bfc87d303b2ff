package v1alpha1

import (
	"cmp"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// RunsRegistrar is true when the pod has the registrar container, whoever
// put it there: by its name, as the webhook injects it. The webhook reads a
// pod's registrars by image too (webhook/registrars.go), and refuses those
// it cannot read; this is what the reconciler and the CLI go by.
func RunsRegistrar(pod *corev1.Pod) bool {
	return RegistrarContainer(pod) != nil
}

// RegistrarContainer is the pod's registrar container, or nil.
func RegistrarContainer(pod *corev1.Pod) *corev1.Container {
	for i := range pod.Spec.Containers {
		if pod.Spec.Containers[i].Name == RegistrarContainerName {
			return &pod.Spec.Containers[i]
		}
	}
	return nil
}

// MarkedInjected is true when the webhook recorded the pod as injected.
func MarkedInjected(pod *corev1.Pod) bool {
	return pod.Annotations[StatusAnnotation] == StatusInjected
}

// InjectedRegistrarImage is the registrar image the webhook injected into
// the pod: its annotation, else (pods injected before it was recorded) the
// registrar container's image; "" when the pod runs no registrar.
func InjectedRegistrarImage(pod *corev1.Pod) string {
	if image := pod.Annotations[RegistrarImageAnnotation]; image != "" {
		return image
	}
	if c := RegistrarContainer(pod); c != nil {
		return c.Image
	}
	return ""
}

// EffectiveRegistrarImage is the registrar image the webhook injects for
// this syncer: spec.sidecar.image, else the manager's default.
func (s *EurekaSyncer) EffectiveRegistrarImage(managerDefault string) string {
	return cmp.Or(s.Spec.Sidecar.Image, managerDefault)
}

// PodSelector is the syncer's selector as a labels.Selector. An empty
// selector selects no pod: a syncer registers the pods it names, never a
// whole namespace by accident.
func (s *EurekaSyncer) PodSelector() (labels.Selector, error) {
	selector, err := metav1.LabelSelectorAsSelector(&s.Spec.Selector)
	if err != nil {
		return nil, err
	}
	if selector.Empty() {
		return labels.Nothing(), nil
	}
	return selector, nil
}

// Selects is true when the syncer's selector matches podLabels; an invalid
// selector is an error.
func (s *EurekaSyncer) Selects(podLabels map[string]string) (bool, error) {
	selector, err := s.PodSelector()
	if err != nil {
		return false, err
	}
	return selector.Matches(labels.Set(podLabels)), nil
}

// NonHTTPPortName is true for the port names (and Service appProtocols)
// that say a port speaks something other than HTTP/1: grpc, tcp or tls,
// alone or before '-', as Istio names ports. spec.protocol defaults to TCP
// for them.
func NonHTTPPortName(name string) bool {
	prefix, _, _ := strings.Cut(name, "-")
	return prefix == "grpc" || prefix == "tcp" || prefix == "tls"
}

// EffectiveProtocol is what an instance's port speaks: the first protocol
// set in chosen (a pod's annotation, then the syncer's spec.protocol), else
// TCP when nonHTTP (a port name or appProtocol NonHTTPPortName accepts, a
// gRPC readiness probe), else HTTP.
func EffectiveProtocol(nonHTTP bool, chosen ...Protocol) Protocol {
	if p := cmp.Or(chosen...); p != "" {
		return p
	}
	if nonHTTP {
		return ProtocolTCP
	}
	return ProtocolHTTP
}
