package controller

import (
	"encoding/json"

	corev1 "k8s.io/api/core/v1"

	"github.com/eurekube/eurekube/api/v1alpha1"
)

// PodPatch is the JSON merge patch the reconciler sends a pod it injected:
// the eurekube.io/traffic annotation set to traffic and the
// topology.kubernetes.io/zone label set to zone, each left out when "".
// It is all the manager writes to pods, and all that the
// ValidatingAdmissionPolicy of manifests/pod-write-policy lets its
// ServiceAccount write (tests/admission sends this very patch as it).
func PodPatch(traffic, zone string) ([]byte, error) {
	var patch podPatch
	if traffic != "" {
		patch.Metadata.Annotations = map[string]string{v1alpha1.TrafficAnnotation: traffic}
	}
	if zone != "" {
		patch.Metadata.Labels = map[string]string{corev1.LabelTopologyZone: zone}
	}
	return json.Marshal(patch)
}

// podPatch is a JSON merge patch of a pod's labels and annotations.
type podPatch struct {
	Metadata struct {
		Labels      map[string]string `json:"labels,omitempty"`
		Annotations map[string]string `json:"annotations,omitempty"`
	} `json:"metadata"`
}
