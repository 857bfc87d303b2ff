package lifecycle_test

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/eurekube/eurekube/api/v1alpha1"
	managerapp "github.com/eurekube/eurekube/manager"
	"github.com/eurekube/eurekube/tests/cluster"
	"github.com/eurekube/eurekube/tests/harness"
	"github.com/eurekube/eurekube/tests/images"
	"github.com/eurekube/eurekube/tests/node"
)

// release is the Helm release, named as the README installs it, so its
// objects carry the names manifests/ gives them.
const release = "eurekube"

// nextTag tags the images of the release the upgrade moves to.
const nextTag = "next"

// One story, as a platform team lives it on a cluster without
// cert-manager: install with Helm (the manager issues its own
// certificates), register an app, upgrade Eurekube to new manager and
// registrar images while the app keeps its registrations, see the pods left
// on the old registrar counted and cleared by a rollout, uninstall with
// Helm, leaving nothing in Eureka while the app runs on; then the same
// with kustomize (manifests/self-managed) and `eurekube uninstall`.
func TestLifecycle_HelmInstallUpgradeUninstallWithoutCertManager(t *testing.T) {
	ctx := context.Background()
	root, err := harness.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	app := cluster.App{Namespace: "ledger", Name: "ledger", Replicas: 2, DrainSeconds: ptr.To[int32](5)}
	syncer := client.ObjectKey{Namespace: app.Namespace, Name: app.Name}
	// A failure keeps the app's and the manager's pods, logs, Events and
	// slices in bin/test-artifacts/lifecycle/.
	c.Record(t, "lifecycle").Watch(app.Namespace)

	var crd apiextensionsv1.CustomResourceDefinition
	if err := kube.Get(ctx, client.ObjectKey{Name: "certificates.cert-manager.io"}, &crd); !apierrors.IsNotFound(err) {
		t.Fatalf("cert-manager is installed (%v); this story runs without it", err)
	}

	t.Log("helm install, certificates self-managed")
	runHelm(t, "install", release, filepath.Join(root, "charts", "eurekube"), "--namespace", cluster.ManagerNamespace, "--create-namespace",
		"--set", "certificates.mode=self-managed", "--set", "manager.image.tag=dev", "--set", "registrar.image.tag=dev",
		"--set-json", fmt.Sprintf("manager.eurekaURLs=[%q]", c.Eureka.URL()),
		// The syncer names every peer, each on a port of its own.
		"--set-json", fmt.Sprintf("manager.allowedEurekaHosts=[%q]", node.NodeIP), "--wait", "--timeout", "5m")
	waitInstalled(t)
	if err := c.Deploy(ctx, app, nil); err != nil {
		t.Fatal(err)
	}
	waitSettled(t, app)
	waitRegistrarImage(t, app, c.Node.Image(images.Registrar.Name))
	t.Logf("eurekube check on the healthy install:\n%s", runCLI(t, 0, "check"))

	t.Log("helm upgrade to the next manager and registrar images")
	ups := watchUp(t, app)
	if err := c.Node.ImportRelease(ctx, nextTag, images.Manager, images.Registrar); err != nil {
		t.Fatal(err)
	}
	runHelm(t, "upgrade", release, filepath.Join(root, "charts", "eurekube"), "--namespace", cluster.ManagerNamespace, "--reuse-values",
		"--set", "manager.image.tag="+nextTag, "--set", "registrar.image.tag="+nextTag, "--wait", "--timeout", "5m")
	waitInstalled(t)
	waitManagerImage(t, images.Repository+"/"+images.Manager.Name+":"+nextTag)
	harness.Eventually(t, 2*time.Minute, "status counts both pods on the old registrar", func() error {
		s, err := getSyncer(ctx, syncer)
		if err != nil {
			return err
		}
		c := meta.FindStatusCondition(s.Status.Conditions, v1alpha1.ConditionRegistrarCurrent)
		if s.Status.OutdatedRegistrarPods != 2 || c == nil || c.Status != metav1.ConditionFalse {
			return fmt.Errorf("outdatedRegistrarPods %d, RegistrarCurrent %+v; want 2 and False", s.Status.OutdatedRegistrarPods, c)
		}
		t.Logf("RegistrarCurrent: %s", c.Message)
		return nil
	})
	if dropped := ups.stop(); len(dropped) > 0 {
		t.Fatalf("the app's registrations dropped during the upgrade: %v", dropped)
	}
	t.Logf("eurekube check after the upgrade, before the rollout:\n%s", runCLI(t, 0, "check"))

	t.Log("a rollout gives the pods the new registrar")
	restart(t, app)
	waitRegistrarImage(t, app, images.Repository+"/"+images.Registrar.Name+":"+nextTag)
	harness.Eventually(t, 2*time.Minute, "no pod on an outdated registrar", func() error {
		s, err := getSyncer(ctx, syncer)
		if err != nil {
			return err
		}
		if s.Status.OutdatedRegistrarPods != 0 || !meta.IsStatusConditionTrue(s.Status.Conditions, v1alpha1.ConditionRegistrarCurrent) {
			return fmt.Errorf("outdatedRegistrarPods %d, conditions %+v", s.Status.OutdatedRegistrarPods, s.Status.Conditions)
		}
		return nil
	})
	waitSettled(t, app)

	t.Log("helm uninstall: the pre-delete hook detaches every syncer first")
	start := time.Now()
	runHelm(t, "uninstall", release, "--namespace", cluster.ManagerNamespace, "--wait", "--timeout", "8m")
	t.Logf("helm uninstall took %s", time.Since(start).Round(time.Second))
	waitNothingLeft(t, app)

	t.Log("kustomize: manifests/self-managed, the app's syncer again, then eurekube uninstall and kubectl delete -k")
	kubectl(t, "apply", "--server-side", "-k", selfManaged(t))
	waitInstalled(t)
	harness.Eventually(t, 2*time.Minute, "the CRD served", func() error {
		return kube.List(ctx, &v1alpha1.EurekaSyncerList{}) // a fresh client: no stale discovery
	})
	if err := c.Deploy(ctx, app, nil); err != nil { // the syncer again; the pods run on
		t.Fatal(err)
	}
	waitSettled(t, app) // the pods, told Serve again, register again
	start = time.Now()
	t.Logf("eurekube uninstall:\n%s", runCLI(t, 0, "uninstall", "--timeout=5m"))
	t.Logf("eurekube uninstall took %s", time.Since(start).Round(time.Second))
	kubectl(t, "delete", "-k", filepath.Join(root, "manifests", "self-managed"), "--wait", "--timeout=3m")
	waitNothingLeft(t, app)
}

func runHelm(t *testing.T, args ...string) {
	t.Helper()
	out, err := exec.Command(helm, append(args, "--kubeconfig", c.Node.Kubeconfig)...).CombinedOutput()
	if err != nil {
		t.Fatalf("helm %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

func waitSettled(t *testing.T, app cluster.App) {
	t.Helper()
	harness.Eventually(t, 4*time.Minute, "Eureka lists every ready pod UP", func() error {
		v, err := c.Look(context.Background(), app)
		if err != nil {
			return err
		}
		return v.Settled(int(app.Replicas))
	})
}

// waitRegistrarImage waits until the app's live pods are the ones the
// webhook injected with image, recorded on each.
func waitRegistrarImage(t *testing.T, app cluster.App, image string) {
	t.Helper()
	harness.Eventually(t, 4*time.Minute, "every live pod injected with "+image, func() error {
		var pods corev1.PodList
		if err := c.Node.Client.List(context.Background(), &pods, client.InNamespace(app.Namespace), client.MatchingLabels{"app": app.Name}); err != nil {
			return err
		}
		live := 0
		for _, p := range pods.Items {
			if p.DeletionTimestamp != nil {
				continue
			}
			live++
			if got := v1alpha1.InjectedRegistrarImage(&p); got != image {
				return fmt.Errorf("pod %s was injected with %q", p.Name, got)
			}
		}
		if live != int(app.Replicas) {
			return fmt.Errorf("%d live pods, want %d", live, app.Replicas)
		}
		return nil
	})
}

func waitManagerImage(t *testing.T, image string) {
	t.Helper()
	harness.Eventually(t, 4*time.Minute, "the manager runs "+image, func() error {
		pods, err := c.ManagerPods(context.Background())
		if err != nil {
			return err
		}
		for _, p := range pods {
			if p.Spec.Containers[0].Image != image || !cluster.PodReady(&p) {
				return fmt.Errorf("manager pod %s runs %s (ready %v)", p.Name, p.Spec.Containers[0].Image, cluster.PodReady(&p))
			}
		}
		return nil
	})
}

// restart rolls the app's Deployment, as kubectl rollout restart does.
func restart(t *testing.T, app cluster.App) {
	t.Helper()
	patch := fmt.Sprintf(`{"spec":{"template":{"metadata":{"annotations":{"kubectl.kubernetes.io/restartedAt":%q}}}}}`, time.Now().Format(time.RFC3339))
	dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: app.Namespace, Name: app.Name}}
	if err := c.Node.Client.Patch(context.Background(), dep, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
		t.Fatal(err)
	}
}

// upWatch samples the app's UP instances until stopped.
type upWatch struct {
	done    chan struct{}
	wg      sync.WaitGroup
	dropped []string
}

// watchUp records every moment the registry lists fewer of the app's
// pods UP than it has replicas.
func watchUp(t *testing.T, app cluster.App) *upWatch {
	w := &upWatch{done: make(chan struct{})}
	w.wg.Go(func() {
		for {
			select {
			case <-w.done:
				return
			case <-time.After(500 * time.Millisecond):
			}
			v, err := c.Look(context.Background(), app)
			if err != nil {
				continue // the registry read itself failed: not the app's registrations
			}
			if len(v.UP) < int(app.Replicas) {
				w.dropped = append(w.dropped, fmt.Sprintf("%s: UP %v", time.Now().Format(time.TimeOnly), v.UP))
			}
		}
	})
	t.Cleanup(func() { w.stop() })
	return w
}

func (w *upWatch) stop() []string {
	select {
	case <-w.done:
	default:
		close(w.done)
	}
	w.wg.Wait()
	return w.dropped
}

// waitNothingLeft: Eurekube is gone, nothing is stuck on a finalizer, and
// Eureka holds nothing of this cluster, while the app's pods run on.
func waitNothingLeft(t *testing.T, app cluster.App) {
	t.Helper()
	ctx := context.Background()
	harness.Eventually(t, 3*time.Minute, "no CRD, no webhook configuration, no manager, no certificate Secret", func() error {
		var crd apiextensionsv1.CustomResourceDefinition
		if err := kube.Get(ctx, client.ObjectKey{Name: "eurekasyncers.eurekube.io"}, &crd); !apierrors.IsNotFound(err) {
			return fmt.Errorf("CRD eurekasyncers.eurekube.io still there (finalizers %v, %v)", crd.Finalizers, err)
		}
		var wh admissionregistrationv1.MutatingWebhookConfiguration
		if err := c.Node.Client.Get(ctx, client.ObjectKey{Name: cluster.WebhookConfig}, &wh); !apierrors.IsNotFound(err) {
			return fmt.Errorf("webhook configuration still there (%v)", err)
		}
		var dep appsv1.Deployment
		if err := c.Node.Client.Get(ctx, client.ObjectKey{Namespace: cluster.ManagerNamespace, Name: cluster.ManagerDeployment}, &dep); !apierrors.IsNotFound(err) {
			return fmt.Errorf("manager Deployment still there (%v)", err)
		}
		// The manager created it (self-managed certificates), owned by the
		// webhook configuration: the garbage collector deletes it, CA key
		// and all.
		var secret corev1.Secret
		if err := c.Node.Client.Get(ctx, client.ObjectKey{Namespace: cluster.ManagerNamespace, Name: managerapp.DefaultCertificateSecret}, &secret); !apierrors.IsNotFound(err) {
			return fmt.Errorf("Secret %s still there (owners %+v, %v)", managerapp.DefaultCertificateSecret, secret.OwnerReferences, err)
		}
		return nil
	})
	v, err := c.Look(ctx, app)
	if err != nil {
		t.Fatal(err)
	}
	if len(v.UP) > 0 || len(v.Other) > 0 {
		t.Fatalf("Eureka still lists this cluster's instances: UP %v, other %v", v.UP, v.Other)
	}
	if len(v.ReadyPods) != int(app.Replicas) {
		t.Fatalf("the app's pods did not run on: ready %v", v.ReadyPods)
	}
	var left corev1.SecretList
	if err := c.Node.Client.List(ctx, &left, client.InNamespace(cluster.ManagerNamespace)); err != nil {
		t.Fatal(err)
	}
	for _, s := range left.Items {
		t.Logf("left in %s: Secret %s", cluster.ManagerNamespace, s.Name)
	}
}
