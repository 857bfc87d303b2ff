package admission

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	eurekubev1alpha1 "github.com/eurekube/eurekube/api/v1alpha1"
)

func TestInject_InjectedPodIsAdmittedUnderPodSecurityRestricted(t *testing.T) {
	requireInjection(t)
	ctx := testContext(t)
	ns := optedInNamespace(ctx, t, "restricted", "pod-security.kubernetes.io/enforce", "restricted")
	createSyncer(t, syncer(ns, "orders", nil))

	t.Run("a compliant app is admitted with the registrar beside it", func(t *testing.T) {
		pod := appPod(ns, "orders")
		if err := suite.c.Create(ctx, pod); err != nil {
			t.Fatalf("Pod Security refused the injected pod: %v", err)
		}
		var got corev1.Pod
		if err := suite.c.Get(ctx, client.ObjectKeyFromObject(pod), &got); err != nil {
			t.Fatal(err)
		}
		if !eurekubev1alpha1.RunsRegistrar(&got) {
			t.Fatalf("the pod was not injected; containers: %v", containerNames(&got))
		}
	})
	// An exec hook is drained through the helper: an init container and a
	// volume more, which must pass Pod Security too.
	t.Run("an app with an exec preStop is admitted with the drain helper", func(t *testing.T) {
		pod := appPod(ns, "orders")
		pod.Spec.Containers[0].Lifecycle = &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Exec: &corev1.ExecAction{Command: []string{"/app/flush"}}}}
		if err := suite.c.Create(ctx, pod); err != nil {
			t.Fatalf("Pod Security refused the injected pod with the drain helper: %v", err)
		}
		var got corev1.Pod
		if err := suite.c.Get(ctx, client.ObjectKeyFromObject(pod), &got); err != nil {
			t.Fatal(err)
		}
		if len(got.Spec.InitContainers) != 1 || got.Spec.Containers[0].Lifecycle.PreStop.Exec == nil {
			t.Fatalf("the drain helper was not installed: init containers %d, preStop %+v", len(got.Spec.InitContainers), got.Spec.Containers[0].Lifecycle.PreStop)
		}
	})
	// Without this, the test above would also pass if Pod Security were
	// not enforced at all.
	t.Run("a non-compliant app is still refused", func(t *testing.T) {
		pod := appPod(ns, "orders")
		pod.Spec.Containers[0].SecurityContext = nil
		err := suite.c.Create(ctx, pod)
		if err == nil || !strings.Contains(err.Error(), "violates PodSecurity") {
			t.Fatalf("create a pod without securityContext in a restricted namespace: %v, want a PodSecurity violation", err)
		}
	})
}
