package helmchart

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/eurekube/eurekube/manager"
)

func TestValues_ManagerSettingsBecomeItsFlags(t *testing.T) {
	objs := render(t, releaseNamespace, everythingOn)
	var d appsv1.Deployment
	objs.typed(t, "Deployment", "eurekube-manager", &d)
	args := d.Spec.Template.Spec.Containers[0].Args
	for _, want := range []string{
		"--eureka-url=http://eureka-0.eureka:8761/eureka",
		"--eureka-url=http://eureka-1.eureka:8761/eureka",
		"--allowed-registrar-image=registry.example.com/eurekube/*",
		"--allowed-eureka-host=*.eureka.svc:8761",
		"--allowed-eureka-host=eureka.shared.example.com",
		"--default-drain=60",
		"--cluster-id=prod-eu",
		"--resync-period=1m",
		"--eureka-timeout=3s",
		"--claim-hold=48h",
		"--max-pattern-apps=50",
		"--pod-cidr=10.244.0.0/16",
		"--pod-cidr=fd00:10:244::/56",
		"--service-cidr=10.96.0.0/12",
		"--max-eureka-server-sets=8",
		// The flag replaces the manager's default list, so kube-system is
		// named again.
		"--excluded-namespace=kube-system",
		"--excluded-namespace=monitoring",
		"--exec-sleep-fallback",
		"--log-level=debug",
		"--leader-elect",
	} {
		if !slices.Contains(args, want) {
			t.Errorf("manager args lack %s:\n%s", want, strings.Join(args, "\n"))
		}
	}
	if got := d.Spec.Template.Spec.PriorityClassName; got != "system-cluster-critical" {
		t.Errorf("priorityClassName = %q, want system-cluster-critical", got)
	}

	var mwc admissionregistrationv1.MutatingWebhookConfiguration
	objs.typed(t, "MutatingWebhookConfiguration", "eurekube", &mwc)
	if got, want := notInNamespaces(mwc.Webhooks[0]), []string{releaseNamespace, "kube-system", "monitoring"}; !slices.Equal(got, want) {
		t.Errorf("namespaceSelector NotIn %v, want %v: an excluded namespace is not even sent", got, want)
	}

	t.Run("the defaults leave the manager's own defaults", func(t *testing.T) {
		var d appsv1.Deployment
		render(t, releaseNamespace, "").typed(t, "Deployment", "eurekube-manager", &d)
		// But for its Eureka servers: the gateway's URL.
		if got, want := flagValues(d.Spec.Template.Spec.Containers[0].Args, "--eureka-url"), []string{"http://eurekube-gateway." + releaseNamespace + ".svc:8761/eureka"}; !slices.Equal(got, want) {
			t.Errorf("default --eureka-url %v, want the gateway's %v", got, want)
		}
		for _, a := range d.Spec.Template.Spec.Containers[0].Args {
			for _, flag := range []string{"--default-drain", "--cluster-id", "--resync-period", "--eureka-timeout", "--max-eureka-server-sets", "--excluded-namespace", "--exec-sleep-fallback", "--log-level"} {
				if strings.HasPrefix(a, flag) {
					t.Errorf("default values set %s", a)
				}
			}
		}
	})
}

func TestValues_ImagesAreTheAppVersionUnlessTaggedOrPinned(t *testing.T) {
	const digest = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	objs := render(t, releaseNamespace, `
manager: {image: {repository: registry.example/eurekube/manager, digest: `+digest+`, pullPolicy: Always}}
registrar: {image: {repository: registry.example/eurekube/registrar, tag: v1.2.3}}
imagePullSecrets: [regcred]
`)
	var d appsv1.Deployment
	objs.typed(t, "Deployment", "eurekube-manager", &d)
	c := d.Spec.Template.Spec.Containers[0]
	if want := "registry.example/eurekube/manager@" + digest; c.Image != want {
		t.Errorf("manager image %q, want %q", c.Image, want)
	}
	if c.ImagePullPolicy != corev1.PullAlways {
		t.Errorf("imagePullPolicy %q, want Always", c.ImagePullPolicy)
	}
	if !slices.Contains(c.Args, "--registrar-image=registry.example/eurekube/registrar:v1.2.3") {
		t.Errorf("manager args %q lack the registrar image", c.Args)
	}
	if got := d.Spec.Template.Spec.ImagePullSecrets; len(got) != 1 || got[0].Name != "regcred" {
		t.Errorf("imagePullSecrets %v, want regcred", got)
	}
}

func TestValues_OneReplicaHasNoDisruptionBudgetButKeepsLeaderElection(t *testing.T) {
	objs := render(t, releaseNamespace, "manager: {replicas: 1}\n")
	if pdb := objs.find("PodDisruptionBudget", "eurekube-manager"); pdb != nil {
		t.Errorf("one replica with %s would block every node drain", key(pdb))
	}
	var d appsv1.Deployment
	objs.typed(t, "Deployment", "eurekube-manager", &d)
	// A roll-out runs the old and the new pod together (maxSurge 1).
	if !slices.Contains(d.Spec.Template.Spec.Containers[0].Args, "--leader-elect") {
		t.Error("one replica runs without --leader-elect: a roll-out would run two reconcilers")
	}
}

func TestValues_WebhookPolicyAndSelector(t *testing.T) {
	objs := render(t, releaseNamespace, `
webhook:
  failurePolicy: Ignore
  timeoutSeconds: 10
  namespaceSelector:
    matchLabels: {eurekube.io/injection: null, team: payments}
    matchExpressions: [{key: tier, operator: In, values: [prod]}]
`)
	var mwc admissionregistrationv1.MutatingWebhookConfiguration
	objs.typed(t, "MutatingWebhookConfiguration", "eurekube", &mwc)
	wh := mwc.Webhooks[0]
	if *wh.FailurePolicy != admissionregistrationv1.Ignore || *wh.TimeoutSeconds != 10 {
		t.Errorf("failurePolicy %s, timeoutSeconds %d, want Ignore and 10", *wh.FailurePolicy, *wh.TimeoutSeconds)
	}
	sel := wh.NamespaceSelector
	if sel.MatchLabels["team"] != "payments" || len(sel.MatchLabels) != 1 {
		t.Errorf("matchLabels %v, want team=payments only (null removes the default label)", sel.MatchLabels)
	}
	if len(sel.MatchExpressions) != 2 || sel.MatchExpressions[0].Key != "tier" {
		t.Errorf("matchExpressions %v, want tier In [prod], then the excluded namespaces", sel.MatchExpressions)
	}
	if got := notInNamespaces(wh); !slices.Contains(got, releaseNamespace) {
		t.Errorf("a custom namespaceSelector lost the release namespace's exclusion: NotIn %v", got)
	}
}

// The README's "Eureka credentials" grant, one per namespace.
func TestValues_CredentialsNamespacesLetTheManagerReadSecretsThereOnly(t *testing.T) {
	objs := render(t, releaseNamespace, "credentialsNamespaces: [shop, billing]\n")
	bindings := objs.ofKind("RoleBinding")
	var granted []string
	for _, u := range bindings {
		if u.GetName() != "eurekube-eureka-credentials" {
			continue
		}
		granted = append(granted, u.GetNamespace())
		var b rbacv1.RoleBinding
		if err := fromUnstructured(u, &b); err != nil {
			t.Fatal(err)
		}
		if b.RoleRef.Kind != "ClusterRole" || b.RoleRef.Name != "eurekube-eureka-credentials" ||
			len(b.Subjects) != 1 || b.Subjects[0].Name != "eurekube-manager" || b.Subjects[0].Namespace != releaseNamespace {
			t.Errorf("%s = %s, want ClusterRole eurekube-eureka-credentials bound to %s/eurekube-manager", key(u), toYAML(b), releaseNamespace)
		}
	}
	slices.Sort(granted)
	if want := []string{"billing", "shop"}; !slices.Equal(granted, want) {
		t.Errorf("credentials RoleBindings in %v, want %v", granted, want)
	}
	var cr rbacv1.ClusterRole
	objs.typed(t, "ClusterRole", "eurekube-eureka-credentials", &cr)
	if !allows(cr.Rules, "", "secrets", "get", "orders-eureka") || allows(cr.Rules, "", "secrets", "list", "") {
		t.Errorf("ClusterRole eurekube-eureka-credentials = %+v, want get on secrets only", cr.Rules)
	}
}

// Whatever the release is named, the grant the manager and eurekube check
// print (from the manager's flags and ServiceAccount) is the RoleBinding
// credentialsNamespaces creates.
func TestValues_TheManagersGrantHintIsTheChartsRoleBinding(t *testing.T) {
	objs := render(t, releaseNamespace, "fullnameOverride: acme\ncredentialsNamespaces: [shop]\n")
	var d appsv1.Deployment
	objs.typed(t, "Deployment", "acme-manager", &d)
	// What the downward API gives the manager.
	t.Setenv("POD_NAMESPACE", releaseNamespace)
	t.Setenv("POD_SERVICE_ACCOUNT", d.Spec.Template.Spec.ServiceAccountName)
	cfg, err := manager.ParseFlags(d.Spec.Template.Spec.Containers[0].Args, io.Discard)
	if err != nil {
		t.Fatalf("the chart's manager flags: %v", err)
	}
	var b rbacv1.RoleBinding
	objs.typed(t, "RoleBinding", "acme-eureka-credentials", &b)
	if len(b.Subjects) != 1 {
		t.Fatalf("RoleBinding acme-eureka-credentials subjects %v, want the manager's ServiceAccount", b.Subjects)
	}
	want := fmt.Sprintf("kubectl -n shop create rolebinding %[1]s --clusterrole=%[1]s --serviceaccount=%s:%s", b.RoleRef.Name, b.Subjects[0].Namespace, b.Subjects[0].Name)
	if got := cfg.Grant().Command("shop"); got != want {
		t.Errorf("the manager's grant hint is\n  %s\nthe chart's RoleBinding is\n  %s", got, want)
	}
	objs.get(t, "ClusterRole", b.RoleRef.Name)
	var env []string
	for _, e := range d.Spec.Template.Spec.Containers[0].Env {
		if e.ValueFrom != nil && e.ValueFrom.FieldRef != nil {
			env = append(env, e.Name+"="+e.ValueFrom.FieldRef.FieldPath)
		}
	}
	if !slices.Contains(env, "POD_SERVICE_ACCOUNT=spec.serviceAccountName") {
		t.Errorf("manager env from the downward API %v lacks POD_SERVICE_ACCOUNT=spec.serviceAccountName", env)
	}
}

func TestValues_ServiceMonitorScrapesTheMetricsService(t *testing.T) {
	objs := render(t, releaseNamespace, "metrics: {serviceMonitor: {enabled: true, labels: {release: prom}}}\n")
	sm := objs.get(t, "ServiceMonitor", "eurekube-manager")
	if sm.GetLabels()["release"] != "prom" {
		t.Errorf("ServiceMonitor labels %v lack release=prom", sm.GetLabels())
	}
	var svc corev1.Service
	objs.typed(t, "Service", "eurekube-metrics", &svc)
	selector, _, _ := unstructured.NestedStringMap(sm.Object, "spec", "selector", "matchLabels")
	for k, v := range selector {
		if svc.Labels[k] != v {
			t.Errorf("ServiceMonitor selects %s=%s, which Service eurekube-metrics (labels %v) lacks", k, v, svc.Labels)
		}
	}
	endpoints, _, _ := unstructured.NestedSlice(sm.Object, "spec", "endpoints")
	if len(endpoints) != 1 {
		t.Fatalf("ServiceMonitor endpoints %v, want one", endpoints)
	}
	ep := endpoints[0].(map[string]any)
	if ep["port"] != svc.Spec.Ports[0].Name || ep["scheme"] != "https" {
		t.Errorf("ServiceMonitor scrapes port %v over %v, want %s over https", ep["port"], ep["scheme"], svc.Spec.Ports[0].Name)
	}
	if r := render(t, releaseNamespace, "").find("ServiceMonitor", "eurekube-manager"); r != nil {
		t.Errorf("the ServiceMonitor is off by default, yet the chart renders %s", key(r))
	}
}
