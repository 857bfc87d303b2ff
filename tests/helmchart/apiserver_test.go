package helmchart

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	eurekubev1alpha1 "github.com/eurekube/eurekube/api/v1alpha1"
	"github.com/eurekube/eurekube/internal/builders"
	"github.com/eurekube/eurekube/tests/harness"
)

// A real kube-apiserver (envtest, with cert-manager's CRDs) takes every
// object the chart renders, and Pod Security `restricted`, enforced on the
// release namespace as manifests/default enforces it, admits the pods of
// the manager's and the gateway's Deployments and of the uninstall Job,
// and every pod spec any kustomize directory or chart rendering ships,
// also once given a UID as OpenShift's restricted-v2 would. There are no
// controllers: nothing runs, which is all validation and admission need.
func TestChart_TheAPIServerTakesEveryObjectAndPodSecurityRestrictedAdmitsItsPods(t *testing.T) {
	crds, err := harness.CertManagerCRDDir()
	if err != nil {
		t.Fatal(err)
	}
	cp := harness.ControlPlaneT(t, harness.ControlPlaneOptions{CRDPaths: []string{crds}})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name:   releaseNamespace,
		Labels: map[string]string{"pod-security.kubernetes.io/enforce": "restricted"},
	}}
	if err := cp.Client.Create(ctx, ns); err != nil {
		t.Fatal(err)
	}

	apply := func(t *testing.T, values string, extra ...string) objects {
		t.Helper()
		raw, err := helmTemplate(t, releaseNamespace, values)
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(t.TempDir(), "rendered.yaml")
		if err := os.WriteFile(path, raw, 0o644); err != nil {
			t.Fatal(err)
		}
		// The control plane installed manifests/crd/bases; the chart's CRD
		// takes it over, as a helm upgrade would.
		args := append([]string{"--kubeconfig", cp.Kubeconfig, "apply", "--server-side", "--force-conflicts", "--field-manager=helm", "-f", path}, extra...)
		if _, err := run(tools.kubectl, args...); err != nil {
			t.Fatal(err)
		}
		objs, err := harness.DecodeObjects(raw)
		if err != nil {
			t.Fatal(err)
		}
		return objs
	}

	// Created for real: the pods below run as its ServiceAccounts.
	objs := apply(t, "")
	t.Run("self-managed certificates", func(t *testing.T) {
		apply(t, "certificates: {mode: self-managed}\n", "--dry-run=server")
	})

	var d appsv1.Deployment
	objs.typed(t, "Deployment", "eurekube-manager", &d)
	var job batchv1.Job
	objs.typed(t, "Job", "eurekube-uninstall", &job)
	var gw appsv1.Deployment
	objs.typed(t, "Deployment", "eurekube-gateway", &gw)
	for name, spec := range map[string]corev1.PodSpec{"manager": d.Spec.Template.Spec, "uninstall": job.Spec.Template.Spec, "gateway": gw.Spec.Template.Spec} {
		t.Run("the "+name+" pod passes Pod Security restricted", func(t *testing.T) {
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: releaseNamespace}, Spec: spec}
			if err := cp.Client.Create(ctx, pod, client.DryRunAll); err != nil {
				t.Fatalf("the API server refused the %s pod: %v", name, err)
			}
		})
	}
	// Every pod spec of every kustomize directory and chart rendering
	// (podsecurity_test.go), as shipped and with the UID and fsGroup
	// OpenShift's restricted-v2 would give it: both pass Pod Security
	// restricted. They run as the ServiceAccounts created above, which
	// every rendering names alike.
	t.Run("every shipped pod passes Pod Security restricted, with an assigned UID too", func(t *testing.T) {
		n := 0
		for _, r := range shippedRenderings(t) {
			for _, p := range podSpecs(t, r.objs) {
				assigned, err := restrictedV2(p.spec)
				if err != nil {
					t.Errorf("%s: %s: %v", r.name, p, err)
					continue
				}
				for form, spec := range map[string]corev1.PodSpec{"as shipped": p.spec, "with the namespace's UID": assigned} {
					n++
					pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("shipped-%d", n), Namespace: releaseNamespace}, Spec: spec}
					if err := cp.Client.Create(ctx, pod, client.DryRunAll); err != nil {
						t.Errorf("%s: %s, %s: the API server refused it: %v", r.name, p, form, err)
					}
				}
			}
		}
		if n == 0 {
			t.Fatal("no pod spec found in what the project ships")
		}
	})
	t.Run("the uninstall Job's ServiceAccount may delete every syncer and import and wait", func(t *testing.T) {
		uninstallAsTheJob(ctx, t, cp)
	})
	t.Run("the gateway's ServiceAccount may do what it needs and no more", func(t *testing.T) {
		gatewayRBACIsWhatItNeedsAndNoMore(ctx, t, cp.Client, gw.Spec.Template.Spec.ServiceAccountName)
	})
	t.Run("the gateway runs as its ServiceAccount", func(t *testing.T) {
		gatewayRunsAsItsServiceAccount(ctx, t, cp, &gw)
	})
	t.Run("the sample NetworkPolicy for Eureka servers is valid", func(t *testing.T) {
		if err := cp.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "eureka"}}); err != nil {
			t.Fatal(err)
		}
		if err := cp.Client.Create(ctx, sampleNetworkPolicy(t), client.DryRunAll); err != nil {
			t.Errorf("the API server refused manifests/samples/eureka-networkpolicy.yaml: %v", err)
		}
	})
	// Without this the tests above would also pass if Pod Security were not
	// enforced at all.
	t.Run("a pod without the security contexts is refused", func(t *testing.T) {
		spec := *d.Spec.Template.Spec.DeepCopy()
		spec.SecurityContext = nil
		spec.Containers[0].SecurityContext = nil
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "lax", Namespace: releaseNamespace}, Spec: spec}
		err := cp.Client.Create(ctx, pod, client.DryRunAll)
		if err == nil || !strings.Contains(err.Error(), "violates PodSecurity") {
			t.Fatalf("create a pod without securityContext in %s: %v, want a PodSecurity violation", releaseNamespace, err)
		}
	})
}

// uninstallAsTheJob runs `eurekube uninstall` (cmd/eurekube, what the Job
// runs) as the Job's ServiceAccount, through impersonation, against a syncer
// in its own namespace: the Job's RBAC must let it list, delete and wait.
// With no manager running the syncer has no finalizer and goes at once.
func uninstallAsTheJob(ctx context.Context, t *testing.T, cp *harness.ControlPlane) {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shop"}}
	if err := cp.Client.Create(ctx, ns); err != nil {
		t.Fatal(err)
	}
	syncer := builders.Syncer(ns.Name, "orders")
	if err := cp.Client.Create(ctx, syncer); err != nil {
		t.Fatal(err)
	}
	imp := &eurekubev1alpha1.EurekaImport{ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "payments"}, Spec: eurekubev1alpha1.EurekaImportSpec{App: "PAYMENTS"}}
	if err := cp.Client.Create(ctx, imp); err != nil {
		t.Fatal(err)
	}

	kubeconfig, err := clientcmd.LoadFromFile(cp.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	for _, user := range kubeconfig.AuthInfos {
		// Who a ServiceAccount's token authenticates as.
		user.Impersonate = "system:serviceaccount:" + releaseNamespace + ":eurekube-uninstall"
		user.ImpersonateGroups = []string{"system:serviceaccounts", "system:serviceaccounts:" + releaseNamespace, "system:authenticated"}
	}
	asJob := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*kubeconfig, asJob); err != nil {
		t.Fatal(err)
	}
	bin, cleanup, err := harness.BuildTemp("./cmd/eurekube")
	if err != nil {
		t.Fatal(err)
	}
	defer cleanup()
	out, err := run(bin, "uninstall", "--timeout=1m", "--kubeconfig", asJob)
	if err != nil {
		t.Fatalf("eurekube uninstall as ServiceAccount %s/eurekube-uninstall: %v", releaseNamespace, err)
	}
	var left eurekubev1alpha1.EurekaSyncerList
	if err := cp.Client.List(ctx, &left); err != nil {
		t.Fatal(err)
	}
	if len(left.Items) > 0 {
		t.Errorf("eurekube uninstall left %d syncers:\n%s", len(left.Items), out)
	}
	var imports eurekubev1alpha1.EurekaImportList
	if err := cp.Client.List(ctx, &imports); err != nil {
		t.Fatal(err)
	}
	if len(imports.Items) > 0 {
		t.Errorf("eurekube uninstall left %d imports:\n%s", len(imports.Items), out)
	}
}
