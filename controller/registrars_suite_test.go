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
	"github.com/eurekube/eurekube/webhook"
	"github.com/eurekube/eurekube/webhook/webhooktest"
)

// admitted creates the webhook's Spring Boot test pod (app=orders) as the
// webhook admits it under s, and sets its status as a kubelet would:
// running, ready.
func admitted(t *testing.T, s *v1alpha1.EurekaSyncer, name, ip string) *corev1.Pod {
	t.Helper()
	ctx := context.Background()
	pod, _, err := webhook.Mutate(webhooktest.SpringBootPod(s.Namespace, name), webhook.Config{Syncer: s, Defaults: webhook.Defaults{
		RegistrarImage: "eurekube/registrar:test", ClusterID: clusterID, PreStopSleepSeconds: 100, RegistrarPort: 9901,
	}})
	if err != nil {
		t.Fatal(err)
	}
	if err := k8s.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	created := pod.DeepCopy()
	pod.Status.Phase, pod.Status.PodIP = corev1.PodRunning, ip
	pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Now()}}
	if err := k8s.Status().Patch(ctx, pod, client.MergeFrom(created)); err != nil {
		t.Fatal(err)
	}
	return pod
}

// condition returns the syncer's condition of type typ, or an error.
func condition(s *v1alpha1.EurekaSyncer, typ string) (*metav1.Condition, *v1alpha1.EurekaSyncer, error) {
	got, err := getSyncer(s)
	if err != nil {
		return nil, nil, err
	}
	c := meta.FindStatusCondition(got.Status.Conditions, typ)
	if c == nil {
		return nil, nil, fmt.Errorf("no %s condition in %+v", typ, got.Status.Conditions)
	}
	return c, got, nil
}

func TestRegistrarCurrent_NamesThePodsInjectedFromAnOlderSpec(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	before := newSyncer(t, ns, "orders", server.URL())
	old := admitted(t, before, "orders-old", "10.0.9.1")
	harness.Eventually(t, patience, "finalizer added", func() error {
		got, err := getSyncer(before)
		if err != nil || len(got.Finalizers) == 0 {
			return fmt.Errorf("finalizers %v, %v", got.Finalizers, err)
		}
		return nil
	})
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
