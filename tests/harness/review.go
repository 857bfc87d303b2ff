package harness

import (
	"encoding/json"
	"fmt"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
)

// PodCreateReview is the AdmissionReview the API server sends a mutating
// webhook for creating pod in its namespace, encoded, with uid.
func PodCreateReview(uid string, pod *corev1.Pod) ([]byte, error) {
	raw, err := json.Marshal(pod)
	if err != nil {
		return nil, fmt.Errorf("admission review: %w", err)
	}
	pods := metav1.GroupVersionKind{Version: "v1", Kind: "Pod"}
	body, err := json.Marshal(admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{
			UID:         types.UID(uid),
			Kind:        pods,
			Resource:    metav1.GroupVersionResource{Version: "v1", Resource: "pods"},
			RequestKind: &pods,
			Namespace:   pod.Namespace,
			Operation:   admissionv1.Create,
			Object:      runtime.RawExtension{Raw: raw},
		},
	})
	if err != nil {
		return nil, fmt.Errorf("admission review: %w", err)
	}
	return body, nil
}
