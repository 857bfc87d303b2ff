package admission

import (
	"bytes"
	"context"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	eurekubev1alpha1 "github.com/eurekube/eurekube/api/v1alpha1"
	"github.com/eurekube/eurekube/tests/harness"
)

func TestManifests_DefaultOverlayRendersAFailClosedWebhookWiredToTheManager(t *testing.T) {
	r := renderDefault(t)

	var mwc admissionregistrationv1.MutatingWebhookConfiguration
	r.typed(t, "MutatingWebhookConfiguration", "eurekube", &mwc)
	if len(mwc.Webhooks) != 1 {
		t.Fatalf("want one webhook, got %d", len(mwc.Webhooks))
	}
	wh := mwc.Webhooks[0]
	checks := []struct {
		what      string
		got, want any
	}{
		{"failurePolicy", deref(wh.FailurePolicy), admissionregistrationv1.Fail},
		{"sideEffects", deref(wh.SideEffects), admissionregistrationv1.SideEffectClassNoneOnDryRun},
		{"timeoutSeconds", deref(wh.TimeoutSeconds), int32(5)},
		{"reinvocationPolicy", deref(wh.ReinvocationPolicy), admissionregistrationv1.IfNeededReinvocationPolicy},
		{"matchPolicy", deref(wh.MatchPolicy), admissionregistrationv1.Equivalent},
		{"admissionReviewVersions", strings.Join(wh.AdmissionReviewVersions, ","), "v1"},
		{"rules", len(wh.Rules) == 1 && slices.Equal(wh.Rules[0].Operations, []admissionregistrationv1.OperationType{admissionregistrationv1.Create}) &&
			slices.Equal(wh.Rules[0].Resources, []string{"pods"}), true},
		{"namespaceSelector opts in", wh.NamespaceSelector.MatchLabels[eurekubev1alpha1.NamespaceInjectionLabel], "enabled"},
		{"namespaceSelector excludes", wh.NamespaceSelector.MatchExpressions[0].Values, []string{"eurekube-system", "kube-system"}},
		{"objectSelector opts out", wh.ObjectSelector.MatchExpressions[0].Key + " " + string(wh.ObjectSelector.MatchExpressions[0].Operator) + " " + strings.Join(wh.ObjectSelector.MatchExpressions[0].Values, ","), eurekubev1alpha1.InjectLabel + " NotIn false"},
	}
	for _, c := range checks {
		if !equal(c.got, c.want) {
			t.Errorf("webhook %s = %v, want %v", c.what, c.got, c.want)
		}
	}

	// The API server reaches the webhook through the Service, the Service
	// reaches the manager's webhook port, and the manager serves the
	// certificate that cert-manager issues for the Service's name.
	svcRef := wh.ClientConfig.Service
	if svcRef == nil || deref(svcRef.Path) != "/mutate-v1-pod" {
		t.Fatalf("webhook clientConfig.service = %+v, want the manager's Service at /mutate-v1-pod", svcRef)
	}
	var svc corev1.Service
	r.typed(t, "Service", svcRef.Name, &svc)
	if svc.Namespace != svcRef.Namespace {
		t.Errorf("Service %s is in namespace %s, the webhook calls it in %s", svc.Name, svc.Namespace, svcRef.Namespace)
	}
	var dep appsv1.Deployment
	r.typed(t, "Deployment", "eurekube-manager", &dep)
	mgr := dep.Spec.Template.Spec.Containers[0]
	webhookPort := containerPort(mgr, svc.Spec.Ports[0].TargetPort.StrVal)
	if svc.Spec.Ports[0].Port != deref(svcRef.Port) || webhookPort == 0 {
		t.Errorf("Service port %d → %s does not reach a manager port for webhook port %d", svc.Spec.Ports[0].Port, svc.Spec.Ports[0].TargetPort.String(), deref(svcRef.Port))
	}
	if !slices.Contains(mgr.Args, "--webhook-port="+itoa(webhookPort)) {
		t.Errorf("manager args %v do not serve the webhook on container port %d", mgr.Args, webhookPort)
	}
	certDir := flagValue(mgr.Args, "--cert-dir")
	secret := mountedSecret(dep.Spec.Template.Spec, mgr, certDir)
	if secret == "" {
		t.Errorf("no Secret is mounted at the manager's --cert-dir %q", certDir)
	}

	caFrom := mwc.Annotations["cert-manager.io/inject-ca-from"]
	ns, name, _ := strings.Cut(caFrom, "/")
	cert := r.object(t, "Certificate", name)
	if cert.GetNamespace() != ns {
		t.Errorf("inject-ca-from %q: the Certificate is in namespace %s", caFrom, cert.GetNamespace())
	}
	if got, _, _ := unstructured.NestedString(cert.Object, "spec", "secretName"); got != secret {
		t.Errorf("Certificate %s writes Secret %q, the manager mounts %q", name, got, secret)
	}
	dnsNames, _, _ := unstructured.NestedStringSlice(cert.Object, "spec", "dnsNames")
	if host := svc.Name + "." + svc.Namespace + ".svc"; !slices.Contains(dnsNames, host) {
		t.Errorf("Certificate %s dnsNames %v lack %s, the name the API server calls", name, dnsNames, host)
	}
}

func TestManifests_DefaultOverlayIsAcceptedByTheAPIServer(t *testing.T) {
	r := renderDefault(t)
	// cert-manager's CRDs, from the module go.mod pins, so its Issuers and
	// Certificates are validated against their real schemas too.
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/cert-manager/cert-manager").Output()
	if err != nil {
		t.Fatalf("locate the cert-manager module for its CRDs: %v", err)
	}
	crds := filepath.Join(strings.TrimSpace(string(out)), "deploy", "crds")
	if _, err := envtest.InstallCRDs(suite.cp.Config, envtest.CRDInstallOptions{
		Paths:              []string{filepath.Join(crds, "cert-manager.io_issuers.yaml"), filepath.Join(crds, "cert-manager.io_certificates.yaml")},
		ErrorIfPathMissing: true,
	}); err != nil {
		t.Fatalf("install cert-manager CRDs: %v", err)
	}
	// A dry run creates nothing, so the namespace everything goes into must
	// exist for real, with the Pod Security level the manifests give it:
	// the API server then warns about a Deployment whose pods would be
	// refused.
	var ns corev1.Namespace
	r.typed(t, "Namespace", managerNamespace, &ns)
	ensureNamespace(t, managerNamespace, ns.Labels)
	// The suite's own webhook configuration has the manifest's name but a
	// URL instead of the Service; a dry run merged into it would be refused
	// for having both, so the manifest's one is checked as a new object.
	var docs bytes.Buffer
	for _, u := range r.objects {
		u = u.DeepCopy()
		if u.GetKind() == "MutatingWebhookConfiguration" {
			u.SetName(u.GetName() + "-dry-run")
		}
		data, err := yaml.Marshal(u.Object)
		if err != nil {
			t.Fatal(err)
		}
		docs.WriteString("---\n")
		docs.Write(data)
	}
	cmd := exec.Command(kubectl(t), "--kubeconfig", suite.cp.Kubeconfig, "apply", "--server-side", "--force-conflicts", "--dry-run=server", "-f", "-")
	cmd.Stdin = &docs
	out, err = cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl apply --dry-run=server of manifests/default: %v\n%s", err, out)
	}
	if strings.Contains(string(out), "violate PodSecurity") {
		t.Errorf("the manager's pods would violate Pod Security in their own namespace:\n%s", out)
	}
}

// kubectl is the kubectl built beside the API server (tests/tools/envtest),
// so the manifests are checked on a machine without one.
func kubectl(t *testing.T) string {
	t.Helper()
	path, err := suite.cp.Kubectl()
	if err != nil {
		t.Fatal(err)
	}
	return path
}

// rendered is the output of kubectl kustomize.
type rendered struct {
	objects []*unstructured.Unstructured
}

func renderDefault(t *testing.T) *rendered {
	t.Helper()
	root, err := harness.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd := exec.Command(kubectl(t), "kustomize", filepath.Join(root, "manifests", "default"))
	cmd.Stderr = &stderr
	raw, err := cmd.Output()
	if err != nil {
		t.Fatalf("kubectl kustomize manifests/default: %v\n%s", err, stderr.String())
	}
	objs, err := harness.DecodeObjects(raw)
	if err != nil {
		t.Fatalf("decode the rendered manifests: %v", err)
	}
	r := &rendered{objects: objs}
	return r
}

func (r *rendered) object(t *testing.T, kind, name string) *unstructured.Unstructured {
	t.Helper()
	for _, u := range r.objects {
		if u.GetKind() == kind && u.GetName() == name {
			return u
		}
	}
	t.Fatalf("manifests/default renders no %s %q", kind, name)
	return nil
}

func (r *rendered) typed(t *testing.T, kind, name string, into any) {
	t.Helper()
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(r.object(t, kind, name).Object, into); err != nil {
		t.Fatalf("%s %s: %v", kind, name, err)
	}
}

func containerPort(c corev1.Container, name string) int32 {
	for _, p := range c.Ports {
		if p.Name == name {
			return p.ContainerPort
		}
	}
	return 0
}

func flagValue(args []string, flag string) string {
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, flag+"="); ok {
			return v
		}
	}
	return ""
}

// mountedSecret is the name of the Secret volume c mounts at path.
func mountedSecret(spec corev1.PodSpec, c corev1.Container, path string) string {
	for _, m := range c.VolumeMounts {
		if m.MountPath != path {
			continue
		}
		for _, v := range spec.Volumes {
			if v.Name == m.Name && v.Secret != nil {
				return v.Secret.SecretName
			}
		}
	}
	return ""
}

func equal(a, b any) bool {
	if as, ok := a.([]string); ok {
		bs, ok := b.([]string)
		return ok && slices.Equal(as, bs)
	}
	return a == b
}

func itoa(n int32) string { return strconv.Itoa(int(n)) }

// The manager may read a Secret (a syncer's Eureka credentials) only in a
// namespace that grants it, as the README says, and nowhere else.
func TestManifests_TheManagerReadsSecretsOnlyWhereANamespaceGrantsIt(t *testing.T) {
	ctx := testContext(t)
	r := renderDefault(t)
	for _, obj := range []*unstructured.Unstructured{
		r.object(t, "ClusterRole", "eurekube-manager"),
		r.object(t, "ClusterRole", "eurekube-eureka-credentials"),
		r.object(t, "ClusterRoleBinding", "eurekube-manager"),
	} {
		obj = obj.DeepCopy()
		if err := suite.c.Create(ctx, obj); err != nil {
			t.Fatalf("create %s %s: %v", obj.GetKind(), obj.GetName(), err)
		}
		t.Cleanup(func() { _ = suite.c.Delete(context.Background(), obj) })
	}
	// The manager's ServiceAccount, as the API server names it.
	manager, err := suite.cp.Env.ControlPlane.AddUser(envtest.User{
		Name:   "system:serviceaccount:" + managerNamespace + ":eurekube-manager",
		Groups: []string{"system:serviceaccounts", "system:authenticated"},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	asManager, err := client.New(manager.Config(), client.Options{Scheme: suite.cp.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	secretIn := func(ns string) client.ObjectKey {
		ensureNamespace(t, ns, nil)
		s := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "eureka-auth"},
			StringData: map[string]string{"username": "u", "password": "p"},
		}
		if err := suite.c.Create(ctx, s); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
		return client.ObjectKeyFromObject(s)
	}
	granted, other := secretIn("creds-granted"), secretIn("creds-other")
	readable := func(key client.ObjectKey) error {
		return asManager.Get(ctx, key, &corev1.Secret{})
	}
	if err := readable(granted); !apierrors.IsForbidden(err) {
		t.Fatalf("the manager read a Secret no namespace granted: %v, want Forbidden", err)
	}
	// What the README tells a namespace whose syncers use credentials to run:
	// kubectl -n creds-granted create rolebinding eurekube-eureka-credentials
	//   --clusterrole=eurekube-eureka-credentials --serviceaccount=eurekube-system:eurekube-manager
	grant := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: granted.Namespace, Name: "eurekube-eureka-credentials"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "eurekube-eureka-credentials"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: managerNamespace, Name: "eurekube-manager"}},
	}
	if err := suite.c.Create(ctx, grant); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = suite.c.Delete(context.Background(), grant) })
	harness.Eventually(t, 30*time.Second, "the granted namespace's Secret readable", func() error { return readable(granted) })
	if err := readable(other); !apierrors.IsForbidden(err) {
		t.Fatalf("the manager read a Secret of a namespace that granted nothing: %v, want Forbidden", err)
	}
}
