package cli

import (
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/eurekube/eurekube/api/v1alpha1"
)

// TestInject_FromTheClusterEqualsOfflineWithTheSameSettings: the
// syncers, the namespace and the manager's flags read from the cluster
// make the same output as the same settings given offline, the cluster
// id defaulting to the UID of kube-system as in the manager.
func TestInject_FromTheClusterEqualsOfflineWithTheSameSettings(t *testing.T) {
	cp := controlPlane(t)
	ctx := testContext(t)
	c := cp.Client
	createNamespace(ctx, t, cp, "inject-system", false)
	createNamespace(ctx, t, cp, "shop", true)
	syncers, err := syncersFile(strings.NewReader(readFile(t, "testdata/inject/syncers.yaml")), "default")
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Create(ctx, &syncers[0]); err != nil {
		t.Fatal(err)
	}
	labels := map[string]string{"app": "manager"}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: "inject-system", Name: "eurekube-manager"},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{
					Name: "manager", Image: "eurekube/manager:test",
					Args: []string{"--leader-elect", "--registrar-image=eurekube/registrar:test", "--eureka-url=http://eureka:8761/eureka"},
				}}},
			},
		},
	}
	if err := c.Create(ctx, d); err != nil {
		t.Fatal(err)
	}
	var kubeSystem corev1.Namespace
	if err := c.Get(ctx, client.ObjectKey{Name: "kube-system"}, &kubeSystem); err != nil {
		t.Fatal(err)
	}

	code, fromCluster, stderr := runOn(t, cp, "inject", "-f", "testdata/inject/deployment.yaml", "--from-cluster", "--manager-namespace=inject-system")
	if code != ExitOK || !strings.Contains(fromCluster, v1alpha1.RegistrarContainerName) {
		t.Fatalf("--from-cluster: exit %d\n%s\n%s", code, fromCluster, stderr)
	}
	code, offline, stderr := run(t, "", "inject", "-f", "testdata/inject/deployment.yaml", "--syncers=testdata/inject/syncers.yaml",
		"--registrar-image=eurekube/registrar:test", "--eureka-url=http://eureka:8761/eureka", "--cluster-id="+string(kubeSystem.UID), "--manager-namespace=inject-system")
	if code != ExitOK {
		t.Fatalf("offline: exit %d\n%s", code, stderr)
	}
	if fromCluster != offline {
		t.Errorf("--from-cluster printed\n%s\noffline, with the same settings\n%s", fromCluster, offline)
	}

	// status reads the same syncer.
	code, out, stderr := runOn(t, cp, "status", "-n", "shop")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != ExitOK || len(lines) != 2 || !strings.HasPrefix(strings.Join(strings.Fields(lines[1]), " "), "shop orders ORDERS Pod Serve - 0/0 0 -") {
		t.Errorf("status -n shop: exit %d\n%s%s", code, out, stderr)
	}
	code, out, stderr = runOn(t, cp, "status", "-n", "nowhere")
	if code != ExitOK || out != "" || !strings.Contains(stderr, "No EurekaSyncer or EurekaImport found in namespace nowhere") {
		t.Errorf("status -n nowhere: exit %d\n%s%s", code, out, stderr)
	}
}
