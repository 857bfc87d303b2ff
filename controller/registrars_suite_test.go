package controller_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/eurekube/eurekube/api/v1alpha1"
	"github.com/eurekube/eurekube/tests/harness"
)

func TestRegistrarCurrent_NamesThePodsInjectedFromAnOlderSpec(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	before := newSyncer(t, ns, "orders", server.URL())
	old := admitted(t, before, "orders-old", "10.0.9.1")
	waitFinalizer(t, before)
	// Deleted and created again with another URL: the running pod keeps
	// registering where it was injected to.
	if err := k8s.Delete(ctx, before); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, patience, "the first syncer gone", func() error {
		if _, err := getSyncer(before); !apierrors.IsNotFound(err) {
			return fmt.Errorf("still there (%v)", err)
		}
		return nil
	})
	nowURL := "http://" + proxy.Addr() + "/eureka" // the same server, through the proxy
	now := newSyncer(t, ns, "orders", nowURL)
	admitted(t, now, "orders-new", "10.0.9.2")

	want := fmt.Sprintf("1 pod(s) injected from an older spec (EUREKUBE_EUREKA_URLS: %s → %s): %s", server.URL(), nowURL, old.Name)
	harness.Eventually(t, patience, "RegistrarCurrent naming the pod, what differs and the fix", func() error {
		c, got, err := condition(now, v1alpha1.ConditionRegistrarCurrent)
		if err != nil {
			return err
		}
		if c.Status != metav1.ConditionFalse || c.Reason != "OutdatedSpec" || !strings.Contains(c.Message, want) ||
			!strings.Contains(c.Message, "kubectl rollout restart") || strings.Contains(c.Message, "orders-new") {
			return fmt.Errorf("RegistrarCurrent %s %s %q, want False OutdatedSpec saying %q and the fix, not naming orders-new", c.Status, c.Reason, c.Message, want)
		}
		if got.Status.OutdatedRegistrarPods != 1 || got.Status.SelectedPods != 2 {
			return fmt.Errorf("status %+v, want 1 outdated of 2 selected", got.Status)
		}
		return nil
	})
}

func TestRegistrarHealthy_QuotesACrashLoopingRegistrar(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	s := newSyncer(t, ns, "invoices") // default URL: through the proxy
	pod := newPod(t, ns, "invoices", "invoices-1", true, "10.0.7.1")
	// What the kubelet reports of a registrar that exits at once on a bad
	// value: its last log line is its termination message
	// (FallbackToLogsOnError).
	lastWords := `registrar: bad configuration: EUREKUBE_HEALTH_TIMEOUT="10s": must not exceed EUREKUBE_HEALTH_PERIOD (5s)`
	before := pod.DeepCopy()
	pod.Status.ContainerStatuses = []corev1.ContainerStatus{
		{Name: "app", Image: "app:1", Ready: true, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.Now()}}},
		{Name: v1alpha1.RegistrarContainerName, Image: "eurekube/registrar:test", RestartCount: 4,
			State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff",
				Message: "back-off 1m20s restarting failed container=eurekube-registrar"}},
			LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 2, Reason: "Error",
				Message: lastWords + "\n", StartedAt: metav1.Now(), FinishedAt: metav1.Now()}}},
	}
	if err := k8s.Status().Patch(ctx, pod, client.MergeFrom(before)); err != nil {
		t.Fatal(err)
	}

	want := fmt.Sprintf("1 pod(s): %s (%s/%s)", lastWords, ns, pod.Name)
	harness.Eventually(t, patience, "RegistrarHealthy and Synced quoting the registrar", func() error {
		c, got, err := condition(s, v1alpha1.ConditionRegistrarHealthy)
		if err != nil {
			return err
		}
		if c.Status != metav1.ConditionFalse || c.Reason != "RegistrarFailing" || !strings.HasPrefix(c.Message, want) {
			return fmt.Errorf("RegistrarHealthy %s %s %q, want False RegistrarFailing starting %q", c.Status, c.Reason, c.Message, want)
		}
		synced := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionSynced)
		if synced == nil || synced.Status != metav1.ConditionFalse || synced.Reason != "RegistrarFailing" || !strings.Contains(synced.Message, want) {
			return fmt.Errorf("Synced %+v, want False RegistrarFailing saying %q", synced, want)
		}
		return nil
	})
	harness.Eventually(t, patience, "a Warning Event quoting the registrar", func() error {
		events, err := syncerEvents(ns, s.Name)
		if err != nil {
			return err
		}
		for _, e := range events {
			if e.Reason == "RegistrarFailing" && e.Type == corev1.EventTypeWarning && strings.Contains(e.Message, want) {
				return nil
			}
		}
		return fmt.Errorf("no RegistrarFailing Warning saying %q among %d events", want, len(events))
	})
}
