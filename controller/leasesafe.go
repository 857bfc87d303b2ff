package controller

import (
	"fmt"
	"math"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/eurekube/eurekube/api/v1alpha1"
	"github.com/eurekube/eurekube/sidecar"
)

// Reasons of the LeaseSafe condition.
const (
	reasonLeaseAsExpected     = "RenewalIntervalAsExpected"
	reasonRenewsMoreOften     = "RenewsMoreOftenThanExpected"
	reasonRenewsLessOften     = "RenewsLessOftenThanExpected"
	selfPreservationThreshold = 0.85 // eureka.server.renewal-percent-threshold's default
)

// leaseSafe says whether the syncer's instances renew as often as their
// Eureka servers expect. A server computes the renewals it needs per
// minute from the number of instances and the interval it expects
// (eureka.server.expected-client-renewal-interval-seconds) times 85 %
// (renewal-percent-threshold), and stops expiring leases
// (self-preservation) while it receives fewer: instances renewing at
// another interval skew that count for every app on the server.
func leaseSafe(s *v1alpha1.EurekaSyncer) metav1.Condition {
	expected := s.EffectiveExpectedRenewalInterval()
	renewal := sidecar.DefaultRenewalInterval
	if n := s.Spec.Lease.RenewalIntervalSeconds; n > 0 {
		renewal = time.Duration(n) * time.Second
	}
	c := metav1.Condition{Type: v1alpha1.ConditionLeaseSafe, Status: metav1.ConditionTrue, Reason: reasonLeaseAsExpected,
		Message: fmt.Sprintf("instances renew every %v, as the Eureka servers expect (spec.eureka.expectedRenewalIntervalSeconds)", renewal)}
	ratio := float64(expected) / float64(renewal) // how many clients one instance counts as
	switch {
	case renewal < expected:
		// The server's self-preservation waits until renewals fall below
		// 85 % of what it expects: with each instance counting ratio times,
		// that is when more than 1 − 0.85/ratio of them are silent.
		c.Status, c.Reason = metav1.ConditionFalse, reasonRenewsMoreOften
		c.Message = fmt.Sprintf("instances renew every %v but the Eureka servers expect a renewal every %v (eureka.server.expected-client-renewal-interval-seconds; spec.eureka.expectedRenewalIntervalSeconds): "+
			"each instance counts as %.3g clients in the servers' self-preservation arithmetic, so a server keeps expiring instances until %.0f%% of these stop renewing, "+
			"and a network partition empties the registry instead of triggering self-preservation. Renew every %v (spec.lease.renewalIntervalSeconds), or set expectedRenewalIntervalSeconds to the servers' setting",
			renewal, expected, ratio, math.Min(100, 100*(1-selfPreservationThreshold/ratio)), expected)
	case renewal > expected:
		c.Status, c.Reason = metav1.ConditionFalse, reasonRenewsLessOften
		effect := fmt.Sprintf("a server whose instances are mostly these receives %.0f%% of the renewals it expects", 100*ratio)
		if ratio < selfPreservationThreshold {
			effect += ", below its 85% threshold: it enters self-preservation and stops expiring any lease, so instances that died stay listed for every app on it"
		} else {
			effect += ", so fewer than the usual 15% of instances may vanish before it enters self-preservation and stops expiring any lease"
		}
		c.Message = fmt.Sprintf("instances renew every %v but the Eureka servers expect a renewal every %v (eureka.server.expected-client-renewal-interval-seconds; spec.eureka.expectedRenewalIntervalSeconds): %s. "+
			"Renew every %v (spec.lease.renewalIntervalSeconds), or set expectedRenewalIntervalSeconds to the servers' setting",
			renewal, expected, effect, expected)
	}
	return c
}
