package admission

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	eurekubev1alpha1 "github.com/eurekube/eurekube/api/v1alpha1"
	"github.com/eurekube/eurekube/internal/builders"
)

func TestInject_InjectedPodIsAdmittedUnderPodSecurityRestricted(t *testing.T) {
	requireInjection(t)
	ctx := testContext(t)
	ns := optedInNamespace(ctx, t, "restricted", "pod-security.kubernetes.io/enforce", "restricted")
	createSyncer(t, builders.Syncer(ns, "orders"))

	t.Run("a compliant app is admitted with the registrar beside it", func(t *testing.T) {
		pod := builders.Pod(ns, "orders", builders.Restricted())
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
		pod := builders.Pod(ns, "orders", builders.Restricted())
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
		pod := builders.Pod(ns, "orders", builders.Restricted())
		pod.Spec.Containers[0].SecurityContext = nil
		err := suite.c.Create(ctx, pod)
		if err == nil || !strings.Contains(err.Error(), "violates PodSecurity") {
			t.Fatalf("create a pod without securityContext in a restricted namespace: %v, want a PodSecurity violation", err)
		}
	})
}

// A syncer with Eureka credentials, a CA bundle and a client certificate:
// the pod gets them as one projected volume mounted read-only into the
// registrar alone, no Secret in any environment, and Pod Security
// restricted still admits it (projected Secret and ConfigMap volumes are
// allowed there).
func TestInject_EurekaCredentialsAndTLSAreFilesOfTheRegistrarUnderRestricted(t *testing.T) {
	requireInjection(t)
	ctx := testContext(t)
	ns := optedInNamespace(ctx, t, "restricted-tls", "pod-security.kubernetes.io/enforce", "restricted")
	createSyncer(t, builders.Syncer(ns, "ledger", builders.EurekaURLs("https://eureka.corp.example:8761/eureka"), builders.Credentials("eureka-login"), func(s *eurekubev1alpha1.EurekaSyncer) {
		s.Spec.Eureka.TLS = &eurekubev1alpha1.EurekaTLS{
			CABundleRef:                &eurekubev1alpha1.CABundleRef{Name: "corp-ca"},
			ClientCertificateSecretRef: &corev1.LocalObjectReference{Name: "eureka-client"},
		}
	}))
	// The Secrets consent to being sent to the syncer's servers; the
	// webhook mounts none without it (attack_registrar_test.go).
	for _, name := range []string{"eureka-login", "eureka-client"} {
		if err := suite.c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name,
			Labels: map[string]string{eurekubev1alpha1.EurekaCredentialsLabel: "true"}}}); err != nil {
			t.Fatal(err)
		}
	}
	pod := builders.Pod(ns, "ledger", builders.Restricted())
	if err := suite.c.Create(ctx, pod); err != nil {
		t.Fatalf("Pod Security refused the injected pod with the Eureka files: %v", err)
	}
	var got corev1.Pod
	if err := suite.c.Get(ctx, client.ObjectKeyFromObject(pod), &got); err != nil {
		t.Fatal(err)
	}
	if !eurekubev1alpha1.RunsRegistrar(&got) {
		t.Fatalf("the pod was not injected; containers: %v", containerNames(&got))
	}
	var volume string
	for _, v := range got.Spec.Volumes {
		if v.Projected != nil {
			for _, src := range v.Projected.Sources {
				if src.Secret != nil && src.Secret.Name == "eureka-login" {
					volume = v.Name
				}
			}
		}
	}
	if volume == "" {
		t.Fatalf("no projected volume of Secret eureka-login in %+v", got.Spec.Volumes)
	}
	for _, c := range append(append([]corev1.Container{}, got.Spec.InitContainers...), got.Spec.Containers...) {
		for _, e := range c.Env {
			if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
				t.Errorf("container %s: env %s from a Secret", c.Name, e.Name)
			}
		}
		mounted := false
		for _, m := range c.VolumeMounts {
			if m.Name == volume {
				mounted = m.ReadOnly
			}
		}
		if mounted != (c.Name == eurekubev1alpha1.RegistrarContainerName) {
			t.Errorf("container %s mounts the Eureka files read-only: %v; want the registrar alone to", c.Name, mounted)
		}
	}
}
