package controller

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/eurekube/eurekube/eureka"
	"github.com/eurekube/eurekube/internal/builders"
)

// A syncer stored before the CRD refused credentials in serviceURLs (the
// API server refuses such a syncer now, so this is the Go path alone): the
// manager talks to no server with it, and its EurekaReachable condition,
// the Warning Event (the same message) and the detach note say why,
// pointing to the Secret, without the password.
func TestStatus_AStoredSyncersPasswordIsNotInItsConditions(t *testing.T) {
	s := syncerFixture(builders.EurekaURLs("http://eureka:8761/eureka", "http://orders:s3cret@eureka:8761/eureka"))
	c := &clients{reads: newAccessReads(nil), timeout: time.Second}
	_, err := c.forSyncer(context.Background(), s)
	if !errors.Is(err, eureka.ErrCredentialsInURL) {
		t.Fatalf("forSyncer = %v, want ErrCredentialsInURL", err)
	}
	obs := &observed{eurekaErr: err, eurekaReason: reasonEurekaConfig}
	said := []string{(&Reconciler{clients: c}).leftInEureka(s, &observed{detach: detachObserved{cause: err}})}
	for _, cond := range conditions(s, obs, 0) {
		said = append(said, cond.Type+": "+cond.Message)
	}
	all := strings.Join(said, "\n")
	for _, want := range []string{"orders:xxxxx@eureka", "spec.eureka.credentialsSecretRef"} {
		if !strings.Contains(all, want) {
			t.Errorf("the conditions do not say %s:\n%s", want, all)
		}
	}
	if strings.Contains(all, "s3cret") {
		t.Errorf("the password is shown:\n%s", all)
	}
}

// A registrar injected before the upgrade quoted its URLs whole in its
// last words; the manager quotes them redacted, before it shortens them (a
// cut password would no longer look like one).
func TestRegistrarFailure_QuotesAnOlderRegistrarWithoutItsPassword(t *testing.T) {
	said := "registrar: register ORDERS/orders-1: POST http://orders:s3cret@eureka:8761/eureka/apps/ORDERS: HTTP 503"
	long := strings.Repeat("x", maxLastWords-len("registrar: POST http://orders:s3c")) + " registrar: POST http://orders:s3cret@eureka:8761/eureka/apps/ORDERS"
	for _, message := range []string{said, long} {
		pod := withRegistrarStatus(podFixture("orders-1", true, true), corev1.ContainerStatus{RestartCount: 3,
			State:                corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}},
			LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Message: message}}})
		words, failing := registrarFailureOf(&pod, time.Now())
		if !failing || strings.Contains(words, "s3c") {
			t.Errorf("registrar failing %v, quoted as %q: want it failing, quoted without its password", failing, words)
		}
	}
	pod := withRegistrarStatus(podFixture("orders-1", true, false), corev1.ContainerStatus{
		State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CreateContainerConfigError", Message: said}}})
	if words, _ := registrarFailureOf(&pod, time.Now()); strings.Contains(words, "s3cret") || !strings.Contains(words, "orders:xxxxx@eureka") {
		t.Errorf("a registrar that cannot start quoted as %q, want its URL redacted", words)
	}
}
