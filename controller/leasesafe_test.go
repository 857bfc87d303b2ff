package controller

import (
	"strings"
	"testing"

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
