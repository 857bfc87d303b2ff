package controller

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/eurekube/eurekube/api/v1alpha1"
)

func TestLeaseSafe_ARenewalIntervalTheServerDoesNotExpectIsExplained(t *testing.T) {
	tests := []struct {
		renewal, expected int32
		status            metav1.ConditionStatus
		reason            string
		says              []string
	}{
		{0, 0, metav1.ConditionTrue, reasonLeaseAsExpected, []string{"every 30s"}},
		{15, 15, metav1.ConditionTrue, reasonLeaseAsExpected, []string{"every 15s"}},
		{10, 0, metav1.ConditionFalse, reasonRenewsMoreOften, []string{"counts as 3 clients", "until 72% of these stop renewing", "Renew every 30s"}},
		{60, 0, metav1.ConditionFalse, reasonRenewsLessOften, []string{"50% of the renewals it expects", "stops expiring any lease", "Renew every 30s"}},
		{32, 30, metav1.ConditionFalse, reasonRenewsLessOften, []string{"94% of the renewals", "fewer than the usual 15%"}},
	}
	for _, tc := range tests {
		s := &v1alpha1.EurekaSyncer{}
		s.Spec.Lease.RenewalIntervalSeconds, s.Spec.Eureka.ExpectedRenewalIntervalSeconds = tc.renewal, tc.expected
		c := leaseSafe(s)
		if c.Type != v1alpha1.ConditionLeaseSafe || c.Status != tc.status || c.Reason != tc.reason {
			t.Errorf("renewal %d s, expected %d s: %s %s %s, want %s %s", tc.renewal, tc.expected, c.Type, c.Status, c.Reason, tc.status, tc.reason)
		}
		for _, want := range tc.says {
			if !strings.Contains(c.Message, want) {
				t.Errorf("renewal %d s, expected %d s: message %q does not say %q", tc.renewal, tc.expected, c.Message, want)
			}
		}
	}
}

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
