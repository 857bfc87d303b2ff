package selfmanaged_test

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	"github.com/eurekube/eurekube/manager"
	"github.com/eurekube/eurekube/tests/harness"
)

// The overlay's objects that matter without a node: the namespace, the
// identity and its RBAC, the webhook configuration.
var installedKinds = []string{"Namespace", "ServiceAccount", "Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding", "MutatingWebhookConfiguration"}

// TestManifests_SelfManagedOverlayRunsTheManagerWithItsOwnRBAC renders
// manifests/self-managed, installs its namespace, RBAC and webhook
// configuration, and runs the manager with the Deployment's arguments as
// its service account: the certificates are issued and served, and no
// request is refused. The overlay builds nothing of cert-manager.
func TestManifests_SelfManagedOverlayRunsTheManagerWithItsOwnRBAC(t *testing.T) {
	harness.SkipWhenShort(t, "a kube-apiserver and etcd")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	objs := renderOverlay(t, "manifests/self-managed")

	var dep appsv1.Deployment
	for _, o := range objs {
		if strings.Contains(o.GetAPIVersion(), "cert-manager.io") || o.GetAnnotations()["cert-manager.io/inject-ca-from"] != "" {
			t.Errorf("%s %s belongs to cert-manager", o.GetKind(), o.GetName())
		}
		switch {
		case o.GetKind() == "Deployment":
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &dep); err != nil {
				t.Fatal(err)
			}
		case contains(installedKinds, o.GetKind()):
			if err := cp.Client.Create(ctx, o); err != nil {
				t.Fatalf("install %s %s: %v", o.GetKind(), o.GetName(), err)
			}
		}
	}
	// No certificate from a Secret: the leader issues it. The one volume
	// left is the manager's projected token for the gateway.
	for _, v := range dep.Spec.Template.Spec.Volumes {
		if v.Secret != nil || v.Projected == nil || len(v.Projected.Sources) != 1 || v.Projected.Sources[0].ServiceAccountToken == nil {
			t.Errorf("the manager mounts volume %s (%+v), want only its projected token for the gateway", v.Name, v.VolumeSource)
		}
	}
	args := dep.Spec.Template.Spec.Containers[0].Args
	if !contains(args, "--certificate-mode="+manager.CertificateModeSelfManaged) {
		t.Fatalf("the manager's args %q do not select self-managed certificates", args)
	}

	sa := "system:serviceaccount:" + dep.Namespace + ":" + dep.Spec.Template.Spec.ServiceAccountName
	user, err := cp.Env.ControlPlane.AddUser(envtest.User{Name: sa, Groups: []string{"system:serviceaccounts", "system:authenticated"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, namespace: dep.Namespace, webhook: manager.DefaultWebhookConfiguration, ctx: ctx}
	r := e.startWith(user.Config(), manager.CertificateLifetimes{}, args)
	secret := e.waitForCertificates()
	if _, err := e.handshake(r); err != nil {
		t.Fatalf("a client trusting the caBundle: %v", err)
	}
	// Created with its owner, which OwnerReferencesPermissionEnforcement
	// allows without delete on the Secret or the configuration's finalizers.
	if owners := secret.OwnerReferences; len(owners) != 1 || owners[0].Name != manager.DefaultWebhookConfiguration {
		t.Errorf("the Secret's owners are %+v, want the webhook configuration %s", owners, manager.DefaultWebhookConfiguration)
	}
}

func renderOverlay(t *testing.T, dir string) []*unstructured.Unstructured {
	t.Helper()
	kubectl, err := cp.Kubectl()
	if err != nil {
		t.Fatal(err)
	}
	root, err := harness.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(kubectl, "kustomize", filepath.Join(root, dir)).Output()
	if err != nil {
		t.Fatalf("kubectl kustomize %s: %v", dir, err)
	}
	var objs []*unstructured.Unstructured
	for _, doc := range strings.Split(string(out), "\n---\n") {
		var o unstructured.Unstructured
		if err := yaml.Unmarshal([]byte(doc), &o.Object); err != nil {
			t.Fatalf("%s: %v", dir, err)
		}
		if o.Object != nil {
			objs = append(objs, &o)
		}
	}
	return objs
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
