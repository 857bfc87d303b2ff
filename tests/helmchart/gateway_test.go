package helmchart

import (
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"

	"github.com/eurekube/eurekube/gateway"
	"github.com/eurekube/eurekube/manager"
)

// gatewayKinds are the kinds of the gateway's objects, each named
// <fullname>-gateway (and its metrics Service <fullname>-gateway-metrics).
var gatewayKinds = []string{"Deployment", "Service", "PodDisruptionBudget", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"}

// gatewayArgs are the gateway container's arguments, with $(POD_NAMESPACE)
// expanded as the kubelet expands it.
func gatewayArgs(t *testing.T, d *appsv1.Deployment) []string {
	t.Helper()
	c := container(t, d, "gateway")
	if len(c.Args) == 0 || c.Args[0] != manager.GatewayCommand {
		t.Fatalf("Deployment %s: the gateway container's args %q do not begin with %q", d.Name, c.Args, manager.GatewayCommand)
	}
	var hasNamespace bool
	for _, e := range c.Env {
		hasNamespace = hasNamespace || e.Name == "POD_NAMESPACE" && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.namespace"
	}
	if !hasNamespace {
		t.Errorf("Deployment %s: no POD_NAMESPACE from the downward API, which $(POD_NAMESPACE) and the gateway's Secrets need", d.Name)
	}
	args := make([]string, 0, len(c.Args)-1)
	for _, a := range c.Args[1:] {
		args = append(args, strings.ReplaceAll(a, "$(POD_NAMESPACE)", d.Namespace))
	}
	return args
}

func container(t *testing.T, d *appsv1.Deployment, name string) corev1.Container {
	t.Helper()
	for _, c := range d.Spec.Template.Spec.Containers {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("Deployment %s has no container %s", d.Name, name)
	return corev1.Container{}
}

// flagValues are the values of --name=value in args, in order.
func flagValues(args []string, name string) []string {
	var out []string
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, name+"="); ok {
			out = append(out, v)
		}
	}
	return out
}

// The gateway's flags are ones it takes, and it is wired to the manager:
// the manager's ServiceAccount, the audience of the manager's projected
// token and its --gateway-audience are the gateway's, whatever the
// release and its namespace are named.
func TestValues_TheGatewayAndTheManagerAgreeOnTheAudienceAndTheManagersIdentity(t *testing.T) {
	for _, c := range []struct{ namespace, values, prefix string }{
		{releaseNamespace, "", "eurekube"},
		{"platform", "fullnameOverride: acme\n", "acme"},
	} {
		t.Run(c.prefix, func(t *testing.T) {
			objs := render(t, c.namespace, c.values)
			var gw, mgr appsv1.Deployment
			objs.typed(t, "Deployment", c.prefix+"-gateway", &gw)
			objs.typed(t, "Deployment", c.prefix+"-manager", &mgr)
			cfg, err := manager.ParseGatewayFlags(gatewayArgs(t, &gw), io.Discard)
			if err != nil {
				t.Fatalf("the chart's gateway flags: %v", err)
			}
			if want := c.namespace + "/" + mgr.Spec.Template.Spec.ServiceAccountName; cfg.ManagerServiceAccount != want {
				t.Errorf("--manager-service-account %q, want the manager's ServiceAccount %s", cfg.ManagerServiceAccount, want)
			}
			if cfg.Mode != gateway.ModeAudit || cfg.Audience != gateway.DefaultAudience {
				t.Errorf("mode %s, audience %s; want %s and %s by default", cfg.Mode, cfg.Audience, gateway.ModeAudit, gateway.DefaultAudience)
			}
			if gw.Spec.Template.Spec.ServiceAccountName != c.prefix+"-gateway" {
				t.Errorf("the gateway runs as ServiceAccount %s, want %s-gateway", gw.Spec.Template.Spec.ServiceAccountName, c.prefix)
			}
			objs.get(t, "ServiceAccount", gw.Spec.Template.Spec.ServiceAccountName)

			m := container(t, &mgr, "manager")
			if got, want := flagValues(m.Args, "--eureka-url"), []string{"http://" + c.prefix + "-gateway." + c.namespace + ".svc:8761/eureka"}; !slices.Equal(got, want) {
				t.Errorf("the manager's --eureka-url %v, want the gateway's Service %v", got, want)
			}
			if got := flagValues(m.Args, "--gateway-audience"); !slices.Equal(got, []string{cfg.Audience}) {
				t.Errorf("the manager's --gateway-audience %v, want the gateway's --audience %s", got, cfg.Audience)
			}
			tokenFile := flagValues(m.Args, "--gateway-token-file")
			if len(tokenFile) != 1 {
				t.Fatalf("the manager's --gateway-token-file %v, want one", tokenFile)
			}
			if aud := projectedTokenAudience(mgr.Spec.Template.Spec, m, tokenFile[0]); aud != cfg.Audience {
				t.Errorf("the token at %s is for audience %q, want the gateway's %s", tokenFile[0], aud, cfg.Audience)
			}

			// Whatever the chart names the gateway, its Service reaches
			// its Eureka port, and the default Eureka URLs are those of
			// manifests/gateway.
			var svc corev1.Service
			objs.typed(t, "Service", c.prefix+"-gateway", &svc)
			if len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Port != manager.DefaultGatewayPort || containerPortOf(container(t, &gw, "gateway"), svc.Spec.Ports[0].TargetPort.StrVal) != manager.DefaultGatewayPort {
				t.Errorf("Service %s ports %+v, want %d to the gateway's eureka port", svc.Name, svc.Spec.Ports, manager.DefaultGatewayPort)
			}
		})
	}
}

// projectedTokenAudience is the audience of the projected
// serviceAccountToken that c mounts at file, "" when none is.
func projectedTokenAudience(spec corev1.PodSpec, c corev1.Container, file string) string {
	for _, m := range c.VolumeMounts {
		rel, ok := strings.CutPrefix(file, strings.TrimSuffix(m.MountPath, "/")+"/")
		if !ok {
			continue
		}
		for _, v := range spec.Volumes {
			if v.Name != m.Name || v.Projected == nil {
				continue
			}
			for _, s := range v.Projected.Sources {
				if s.ServiceAccountToken != nil && s.ServiceAccountToken.Path == rel {
					return s.ServiceAccountToken.Audience
				}
			}
		}
	}
	return ""
}

func containerPortOf(c corev1.Container, name string) int32 {
	for _, p := range c.Ports {
		if p.Name == name {
			return p.ContainerPort
		}
	}
	return 0
}

func TestValues_GatewaySettingsBecomeItsFlags(t *testing.T) {
	objs := render(t, releaseNamespace, `
gateway:
  mode: enforce
  replicas: 3
  eurekaURLs: [http://eureka-a.corp:8761/eureka, http://eureka-b.corp:8761/eureka]
  eurekaCredentials: {enabled: true, secretName: eureka-writer}
  readTTL: 2s
  logLevel: debug
  priorityClassName: system-cluster-critical
manager:
  eurekaURLs: [http://eurekube-gateway.eurekube-system.svc:8761/eureka]
`)
	var d appsv1.Deployment
	objs.typed(t, "Deployment", "eurekube-gateway", &d)
	args := gatewayArgs(t, &d)
	for _, want := range []string{
		"--mode=enforce",
		"--eureka-url=http://eureka-a.corp:8761/eureka,http://eureka-b.corp:8761/eureka",
		"--read-ttl=2s",
		"--log-level=debug",
		"--eureka-username-file=/etc/eurekube/eureka/username",
		"--eureka-password-file=/etc/eurekube/eureka/password",
	} {
		if !slices.Contains(args, want) {
			t.Errorf("gateway args lack %s:\n%s", want, strings.Join(args, "\n"))
		}
	}
	cfg, err := manager.ParseGatewayFlags(args, io.Discard)
	if err != nil {
		t.Fatalf("the chart's gateway flags: %v", err)
	}
	// The manager names the gateway itself: it sends its token there.
	var mgr appsv1.Deployment
	objs.typed(t, "Deployment", "eurekube-manager", &mgr)
	if got := flagValues(container(t, &mgr, "manager").Args, "--gateway-audience"); !slices.Equal(got, []string{gateway.DefaultAudience}) {
		t.Errorf("the manager names the gateway, and its --gateway-audience is %v", got)
	}
	if len(cfg.EurekaURLs) != 2 || cfg.EurekaPasswordFile == "" {
		t.Errorf("the gateway reads %v, password file %q", cfg.EurekaURLs, cfg.EurekaPasswordFile)
	}
	if *d.Spec.Replicas != 3 || d.Spec.Template.Spec.PriorityClassName != "system-cluster-critical" {
		t.Errorf("replicas %d, priorityClassName %q", *d.Spec.Replicas, d.Spec.Template.Spec.PriorityClassName)
	}
	// With the credentials on, the Secret is required: a pod without it
	// waits for it instead of failing every request to Eureka.
	var secret *corev1.SecretVolumeSource
	for _, v := range d.Spec.Template.Spec.Volumes {
		if v.Secret != nil {
			secret = v.Secret
		}
	}
	if secret == nil || secret.SecretName != "eureka-writer" || secret.Optional == nil || *secret.Optional {
		t.Errorf("the credentials volume %+v, want Secret eureka-writer, not optional", secret)
	}

	t.Run("by default the credentials Secret is mounted if it exists, and not used", func(t *testing.T) {
		var d appsv1.Deployment
		render(t, releaseNamespace, "").typed(t, "Deployment", "eurekube-gateway", &d)
		for _, a := range gatewayArgs(t, &d) {
			if strings.HasPrefix(a, "--eureka-username-file") || strings.HasPrefix(a, "--eureka-password-file") {
				t.Errorf("default values pass %s, which fails every request while the Secret does not exist", a)
			}
		}
		for _, v := range d.Spec.Template.Spec.Volumes {
			if v.Secret != nil && (v.Secret.SecretName != "eurekube-gateway-eureka" || v.Secret.Optional == nil || !*v.Secret.Optional) {
				t.Errorf("the credentials volume %+v, want Secret eurekube-gateway-eureka, optional", v.Secret)
			}
		}
	})

	t.Run("manager.eurekaURLs: the manager talks to them directly, and the gateway fronts them", func(t *testing.T) {
		objs := render(t, releaseNamespace, "manager: {eurekaURLs: [http://eureka.corp:8761/eureka]}\n")
		var d, mgr appsv1.Deployment
		objs.typed(t, "Deployment", "eurekube-gateway", &d)
		if got := flagValues(gatewayArgs(t, &d), "--eureka-url"); !slices.Equal(got, []string{"http://eureka.corp:8761/eureka"}) {
			t.Errorf("the gateway's --eureka-url %v, want manager.eurekaURLs", got)
		}
		objs.typed(t, "Deployment", "eurekube-manager", &mgr)
		m := container(t, &mgr, "manager")
		if got := flagValues(m.Args, "--eureka-url"); !slices.Equal(got, []string{"http://eureka.corp:8761/eureka"}) {
			t.Errorf("the manager's --eureka-url %v, want manager.eurekaURLs", got)
		}
		// Its token would go to Eureka itself: none.
		if a := flagValues(m.Args, "--gateway-audience"); len(a) > 0 || projectedTokenAudience(mgr.Spec.Template.Spec, m, "/var/run/secrets/eurekube.io/gateway/token") != "" {
			t.Errorf("the manager talks to Eureka directly, yet has --gateway-audience %v or a token", a)
		}
		if _, err := manager.ParseFlags(m.Args, io.Discard); err != nil && !strings.Contains(err.Error(), "POD_NAMESPACE") {
			t.Errorf("the manager's flags: %v", err)
		}
	})

	t.Run("a manager URL naming the gateway itself needs gateway.eurekaURLs", func(t *testing.T) {
		_, err := helmTemplate(t, releaseNamespace, "manager: {eurekaURLs: [http://eurekube-gateway.eurekube-system.svc:8761/eureka]}\n")
		if err == nil || !strings.Contains(err.Error(), "set gateway.eurekaURLs") {
			t.Errorf("a gateway calling itself was rendered: %v", err)
		}
	})

	t.Run("one replica has no disruption budget", func(t *testing.T) {
		if pdb := render(t, releaseNamespace, "gateway: {replicas: 1}\n").find("PodDisruptionBudget", "eurekube-gateway"); pdb != nil {
			t.Errorf("one replica with %s would block every node drain", key(pdb))
		}
	})

	t.Run("a ServiceMonitor scrapes its metrics Service", func(t *testing.T) {
		objs := render(t, releaseNamespace, "metrics: {serviceMonitor: {enabled: true}}\n")
		sm := objs.get(t, "ServiceMonitor", "eurekube-gateway")
		var svc corev1.Service
		objs.typed(t, "Service", "eurekube-gateway-metrics", &svc)
		selector, _, _ := unstructured.NestedStringMap(sm.Object, "spec", "selector", "matchLabels")
		for k, v := range selector {
			if svc.Labels[k] != v {
				t.Errorf("ServiceMonitor selects %s=%s, which Service %s (labels %v) lacks", k, v, svc.Name, svc.Labels)
			}
		}
		if svc.Spec.Ports[0].Name != "https-metrics" {
			t.Errorf("Service %s ports %+v, want https-metrics", svc.Name, svc.Spec.Ports)
		}
	})
}

func TestValues_GatewayDisabledLeavesItOutAndTheManagerWithoutItsToken(t *testing.T) {
	objs := render(t, releaseNamespace, "gateway: {enabled: false}\nmetrics: {serviceMonitor: {enabled: true}}\n")
	for _, u := range objs {
		if strings.HasPrefix(u.GetName(), "eurekube-gateway") {
			t.Errorf("gateway.enabled=false rendered %s", key(u))
		}
	}
	var mgr appsv1.Deployment
	objs.typed(t, "Deployment", "eurekube-manager", &mgr)
	for _, a := range container(t, &mgr, "manager").Args {
		if strings.HasPrefix(a, "--gateway-") {
			t.Errorf("the manager is given %s without a gateway", a)
		}
	}
	for _, v := range mgr.Spec.Template.Spec.Volumes {
		if v.Projected != nil {
			t.Errorf("the manager mounts a projected token %s without a gateway", v.Name)
		}
	}
	// Self-managed certificates and no gateway: no volume at all.
	objs = render(t, releaseNamespace, "gateway: {enabled: false}\ncertificates: {mode: self-managed}\n")
	objs.typed(t, "Deployment", "eurekube-manager", &mgr)
	if len(mgr.Spec.Template.Spec.Volumes) != 0 || len(mgr.Spec.Template.Spec.Containers[0].VolumeMounts) != 0 {
		t.Errorf("volumes %+v, mounts %+v, want none", mgr.Spec.Template.Spec.Volumes, mgr.Spec.Template.Spec.Containers[0].VolumeMounts)
	}
}

// manifests/default and manifests/self-managed install the gateway, in
// audit mode, its terminationGracePeriodSeconds covers its shutdown, and
// its pods spread over nodes and are kept through drains.
func TestManifests_InstallTheGatewayInAuditModeAndSpreadIt(t *testing.T) {
	for _, dir := range []string{"default", "self-managed"} {
		t.Run(dir, func(t *testing.T) {
			objs := kustomize(t, dir)
			for _, kind := range gatewayKinds {
				objs.get(t, kind, "eurekube-gateway")
			}
			var d appsv1.Deployment
			objs.typed(t, "Deployment", "eurekube-gateway", &d)
			cfg, err := manager.ParseGatewayFlags(gatewayArgs(t, &d), io.Discard)
			if err != nil {
				t.Fatalf("manifests/%s: the gateway's flags: %v", dir, err)
			}
			if cfg.Mode != gateway.ModeAudit {
				t.Errorf("mode %s, want %s by default", cfg.Mode, gateway.ModeAudit)
			}
			spec := d.Spec.Template.Spec
			if grace := spec.TerminationGracePeriodSeconds; grace == nil || int64(cfg.ShutdownDelay.Seconds())+30 > *grace {
				t.Errorf("terminationGracePeriodSeconds %v < --shutdown-delay %s + 30 s of requests under way", grace, cfg.ShutdownDelay)
			}
			if *d.Spec.Replicas < 2 || spec.Affinity == nil || spec.Affinity.PodAntiAffinity == nil ||
				len(spec.Affinity.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution) == 0 {
				t.Errorf("replicas %d, affinity %+v: want two, spread over nodes", *d.Spec.Replicas, spec.Affinity)
			}
			var mgr appsv1.Deployment
			objs.typed(t, "Deployment", "eurekube-manager", &mgr)
			m := container(t, &mgr, "manager")
			if got := flagValues(m.Args, "--gateway-audience"); !slices.Equal(got, []string{cfg.Audience}) {
				t.Errorf("the manager's --gateway-audience %v, want the gateway's --audience %s", got, cfg.Audience)
			}
			if tf := flagValues(m.Args, "--gateway-token-file"); len(tf) != 1 || projectedTokenAudience(mgr.Spec.Template.Spec, m, tf[0]) != cfg.Audience {
				t.Errorf("the manager's --gateway-token-file %v is not a projected token for %s", tf, cfg.Audience)
			}
		})
	}
}

// The sample NetworkPolicy for in-cluster Eureka servers lets in the pods
// of the gateway and of the manager as manifests/default labels them, in
// their namespace, and nothing else of Eurekube's namespace.
func TestManifests_TheEurekaNetworkPolicyLetsInTheGatewayAndTheManager(t *testing.T) {
	policy := sampleNetworkPolicy(t)
	objs := kustomize(t, "default")
	var ns corev1.Namespace
	objs.typed(t, "Namespace", releaseNamespace, &ns)
	admitted := func(podLabels map[string]string) bool {
		for _, rule := range policy.Spec.Ingress {
			for _, peer := range rule.From {
				if peer.NamespaceSelector == nil || peer.PodSelector == nil {
					continue
				}
				nsSel, err1 := metav1.LabelSelectorAsSelector(peer.NamespaceSelector)
				podSel, err2 := metav1.LabelSelectorAsSelector(peer.PodSelector)
				if err1 != nil || err2 != nil {
					t.Fatal(err1, err2)
				}
				// The API server labels every namespace with its name.
				nsLabels := labels.Set{"kubernetes.io/metadata.name": ns.Name}
				if nsSel.Matches(nsLabels) && podSel.Matches(labels.Set(podLabels)) {
					return true
				}
			}
		}
		return false
	}
	for _, name := range []string{"eurekube-gateway", "eurekube-manager"} {
		var d appsv1.Deployment
		objs.typed(t, "Deployment", name, &d)
		if !admitted(d.Spec.Template.Labels) {
			t.Errorf("the NetworkPolicy does not let in %s's pods (labels %v)", name, d.Spec.Template.Labels)
		}
	}
	if admitted(map[string]string{"app.kubernetes.io/name": "eurekube", "app.kubernetes.io/component": "uninstall"}) {
		t.Error("the NetworkPolicy lets in any pod of Eurekube's namespace")
	}
	if len(policy.Spec.Ingress) != 1 || len(policy.Spec.Ingress[0].Ports) != 1 || policy.Spec.Ingress[0].Ports[0].Port.IntValue() != manager.DefaultGatewayPort {
		t.Errorf("ingress %+v, want port %d alone", policy.Spec.Ingress, manager.DefaultGatewayPort)
	}
}

func sampleNetworkPolicy(t *testing.T) *networkingv1.NetworkPolicy {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(tools.root, "manifests", "samples", "eureka-networkpolicy.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var p networkingv1.NetworkPolicy
	if err := yaml.UnmarshalStrict(raw, &p); err != nil {
		t.Fatalf("manifests/samples/eureka-networkpolicy.yaml: %v", err)
	}
	return &p
}
