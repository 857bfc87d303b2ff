package helmchart

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/eurekube/eurekube/tests/harness"
)

// A cluster installed with kubectl apply -k manifests/default moves to Helm
// (helm install --take-ownership, as charts/eurekube's README says: the same
// objects, the Deployment's immutable selector included), helm upgrade changes the CRD (a template,
// not crds/), and helm uninstall removes the release. A real kube-apiserver,
// no controllers: nothing runs, so helm waits for nothing and the
// pre-delete Job is skipped (--no-hooks); tests/helmchart's other tests
// check the Job, tests/cluster runs it.
func TestHelm_AKustomizeInstallMovesToHelmUpgradesAndUninstalls(t *testing.T) {
	crds, err := harness.CertManagerCRDDir()
	if err != nil {
		t.Fatal(err)
	}
	cp := harness.ControlPlaneT(t, harness.ControlPlaneOptions{CRDPaths: []string{crds}})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	home := t.TempDir()
	env := []string{
		"KUBECONFIG=" + cp.Kubeconfig,
		"HELM_CACHE_HOME=" + filepath.Join(home, "cache"),
		"HELM_CONFIG_HOME=" + filepath.Join(home, "config"),
		"HELM_DATA_HOME=" + filepath.Join(home, "data"),
	}
	helm := func(args ...string) {
		t.Helper()
		if _, err := runEnv(env, tools.helm, args...); err != nil {
			t.Fatal(err)
		}
	}

	if _, err := run(tools.kubectl, "--kubeconfig", cp.Kubeconfig, "apply",
		"-k", filepath.Join(tools.root, "manifests", "default")); err != nil {
		t.Fatal(err)
	}
	// kubectl stays co-owner of the fields it applied (server-side apply):
	// Helm takes them where its values differ (--force-conflicts), here and
	// in the upgrade below.
	helm("install", releaseName, chartDir(), "--namespace", releaseNamespace, "--take-ownership", "--force-conflicts")
	var d appsv1.Deployment
	if err := cp.Client.Get(ctx, client.ObjectKey{Namespace: releaseNamespace, Name: "eurekube-manager"}, &d); err != nil {
		t.Fatal(err)
	}
	if got := d.Labels["app.kubernetes.io/managed-by"]; got != "Helm" {
		t.Errorf("after helm install the Deployment is managed by %q, want Helm", got)
	}

	helm("upgrade", releaseName, chartDir(), "--namespace", releaseNamespace, "--force-conflicts", "--set", "crds.keep=true", "--set", "webhook.timeoutSeconds=10")
	crd := &unstructured.Unstructured{}
	crd.SetGroupVersionKind(schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"})
	if err := cp.Client.Get(ctx, client.ObjectKey{Name: "eurekasyncers.eurekube.io"}, crd); err != nil {
		t.Fatal(err)
	}
	if crd.GetAnnotations()["helm.sh/resource-policy"] != "keep" {
		t.Errorf("helm upgrade did not change the CRD: annotations %v", crd.GetAnnotations())
	}
	var mwc admissionregistrationv1.MutatingWebhookConfiguration
	if err := cp.Client.Get(ctx, client.ObjectKey{Name: "eurekube"}, &mwc); err != nil {
		t.Fatal(err)
	}
	if got := *mwc.Webhooks[0].TimeoutSeconds; got != 10 {
		t.Errorf("after helm upgrade the webhook's timeoutSeconds is %d, want 10", got)
	}

	helm("uninstall", releaseName, "--namespace", releaseNamespace, "--no-hooks", "--wait")
	if err := cp.Client.Get(ctx, client.ObjectKey{Name: "eurekube"}, &mwc); !apierrors.IsNotFound(err) {
		t.Errorf("after helm uninstall, get the webhook configuration: %v, want NotFound", err)
	}
	if err := cp.Client.Get(ctx, client.ObjectKey{Name: crd.GetName()}, crd); err != nil {
		t.Errorf("helm uninstall removed the CRD despite crds.keep: %v", err)
	}
}
