package controller

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestPodZonePatch_CopiesTheNodesZoneOnlyWhereThePodHasNone(t *testing.T) {
	zones := map[string]string{"node-a": "zone-a", "node-blank": ""}
	pod := func(node string, labels map[string]string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{NodeName: node}}
	}
	tests := []struct {
		name string
		pod  *corev1.Pod
		want string
	}{
		{"scheduled, no label: the node's zone", pod("node-a", nil), "zone-a"},
		{"labelled by Kubernetes already", pod("node-a", map[string]string{corev1.LabelTopologyZone: "zone-x"}), ""},
		{"not scheduled yet", pod("", nil), ""},
		{"a node without a zone", pod("node-none", nil), ""},
		{"a node with an empty zone", pod("node-blank", nil), ""},
	}
	for _, tc := range tests {
		got, ok := podZonePatch(tc.pod, zones)
		if got != tc.want || ok != (tc.want != "") {
			t.Errorf("%s: %q, %v; want %q", tc.name, got, ok, tc.want)
		}
	}
}
