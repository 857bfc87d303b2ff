package harness_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/eurekube/eurekube/api/v1alpha1"
	"github.com/eurekube/eurekube/tests/harness"
)

// Two manager replicas behind one Service and a real kube-controller-manager:
// a Deployment's pods are created injected, and keep being created injected
// after one replica is killed.
func TestEurekube_DeploymentPodsAreInjectedThroughEitherReplica(t *testing.T) {
	cp := harness.ControlPlaneT(t, harness.ControlPlaneOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	dir := t.TempDir()
	kcm, err := cp.StartControllerManager(ctx, dir+"/kcm.log")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = kcm.Stop() })
	ek, err := harness.StartEurekube(ctx, cp, harness.EurekubeOptions{
		Replicas: 2, BinDir: dir, EurekaURLs: []string{"http://127.0.0.1:1/eureka"},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ek.Stop)

	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shop", Labels: map[string]string{v1alpha1.NamespaceInjectionLabel: "enabled"}}}
	syncer := &v1alpha1.EurekaSyncer{
		ObjectMeta: metav1.ObjectMeta{Name: "orders", Namespace: "shop"},
		Spec: v1alpha1.EurekaSyncerSpec{
			Selector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "orders"}},
			Port:     intstr.FromString("http"),
		},
	}
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "orders", Namespace: "shop"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](2),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "orders"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "orders"}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{
					Name: "app", Image: "orders:1",
					Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}},
				}}},
			},
		},
	}
	for _, obj := range []client.Object{ns, syncer, dep} {
		if err := cp.Client.Create(ctx, obj); err != nil {
			t.Fatalf("create %T: %v", obj, err)
		}
	}
	injected := func(want int) func() error {
		return func() error {
			var pods corev1.PodList
			if err := cp.Client.List(ctx, &pods, client.InNamespace("shop")); err != nil {
				return err
			}
			for _, p := range pods.Items {
				if p.Annotations[v1alpha1.StatusAnnotation] != v1alpha1.StatusInjected {
					t.Fatalf("pod %s exists without the registrar", p.Name)
				}
			}
			if len(pods.Items) != want {
				return fmt.Errorf("%d injected pods, want %d", len(pods.Items), want)
			}
			return nil
		}
	}
	harness.Eventually(t, time.Minute, "the Deployment's 2 pods, injected", injected(2))

	ek.Managers[0].Kill()
	if err := cp.Client.Patch(ctx, dep, client.RawPatch("application/merge-patch+json", []byte(`{"spec":{"replicas":4}}`))); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, time.Minute, "4 pods, injected through the surviving replica", injected(4))
}
