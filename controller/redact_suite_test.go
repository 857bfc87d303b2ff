package controller_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/eurekube/eurekube/api/v1alpha1"
	"github.com/eurekube/eurekube/internal/builders"
	"github.com/eurekube/eurekube/tests/harness"
)

// A Eureka password in a URL reaches no condition or Event. The API server
// refuses a syncer that carries one now, pointing to the Secret; a
// registrar injected before that quoted its URLs whole in its last words,
// and the manager quotes them redacted. (A syncer stored before the rule
// cannot be made on this API server: its Go path is in redact_test.go.)
func TestRedaction_APasswordInAURLReachesNoConditionOrEvent(t *testing.T) {
	needsServers(t)
	ctx := context.Background()
	ns := newNamespace(t)

	refused := builders.Syncer(ns, "ledger", builders.EurekaURLs("http://ledger:s3cret@eureka:8761/eureka"))
	err := k8s.Create(ctx, refused)
	if err == nil || !strings.Contains(err.Error(), "spec.eureka.credentialsSecretRef") || strings.Contains(err.Error(), "s3cret") {
		t.Fatalf("create a syncer with a password in its URL: %v, want a refusal pointing to spec.eureka.credentialsSecretRef without the password", err)
	}

	s := newSyncer(t, ns, "invoices") // default URL: through the proxy
	pod := newPod(t, ns, "invoices", "invoices-1", true, "10.0.8.1")
	lastWords := "registrar: register INVOICES/invoices-1: POST http://invoices:s3cret@eureka:8761/eureka/apps/INVOICES: HTTP 401"
	before := pod.DeepCopy()
	pod.Status.ContainerStatuses = []corev1.ContainerStatus{
		{Name: "app", Image: "app:1", Ready: true, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.Now()}}},
		{Name: v1alpha1.RegistrarContainerName, Image: "eurekube/registrar:old", RestartCount: 4,
			State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}},
			LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error",
				Message: lastWords + "\n", StartedAt: metav1.Now(), FinishedAt: metav1.Now()}}},
	}
	if err := k8s.Status().Patch(ctx, pod, client.MergeFrom(before)); err != nil {
		t.Fatal(err)
	}

	redacted := "POST http://invoices:xxxxx@eureka:8761/eureka/apps/INVOICES: HTTP 401"
	harness.Eventually(t, patience, "RegistrarHealthy and a Warning Event quoting the registrar, redacted", func() error {
		c, got, err := condition(s, v1alpha1.ConditionRegistrarHealthy)
		if err != nil {
			return err
		}
		if c.Status != metav1.ConditionFalse || !strings.Contains(c.Message, redacted) {
			return fmt.Errorf("RegistrarHealthy %s %q, want False quoting %q", c.Status, c.Message, redacted)
		}
		events, err := syncerEvents(ns, s.Name)
		if err != nil {
			return err
		}
		said := []string{}
		for _, c := range got.Status.Conditions {
			said = append(said, c.Type+": "+c.Message)
		}
		quoted := false
		for _, e := range events {
			said = append(said, "Event "+e.Reason+": "+e.Message)
			quoted = quoted || (e.Type == corev1.EventTypeWarning && strings.Contains(e.Message, redacted))
		}
		if all := strings.Join(said, "\n"); strings.Contains(all, "s3cret") {
			t.Fatalf("the password is shown:\n%s", all)
		}
		if !quoted {
			return fmt.Errorf("no Warning Event quoting %q among %d events", redacted, len(events))
		}
		return nil
	})
}
