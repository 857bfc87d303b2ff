package webhook

import (
	"encoding/json"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/eurekube/eurekube/api/v1alpha1"
	"github.com/eurekube/eurekube/internal/builders"
	"github.com/eurekube/eurekube/sidecar"
)

func TestInject_PatchTurnsTheRequestIntoThePod(t *testing.T) {
	orders := syncer("orders", time.Hour)
	for name, pod := range map[string]func() *corev1.Pod{
		"spring boot":     springPod,
		"exec hook, init": withPreStop(&corev1.LifecycleHandler{Exec: &corev1.ExecAction{Command: []string{"/bin/drain"}}}),
		"own annotations": func() *corev1.Pod { p := springPod(); p.Annotations = map[string]string{"team": "shop"}; return p },
		"own grace period": func() *corev1.Pod {
			p := springPod()
			g := int64(10)
			p.Spec.TerminationGracePeriodSeconds = &g
			return p
		},
		"job pod, skipped":     func() *corev1.Pod { p := springPod(); p.Spec.RestartPolicy = corev1.RestartPolicyNever; return p },
		"already injected":     func() *corev1.Pod { return inject(t, springPod(), orders) },
		"not selected":         func() *corev1.Pod { p := springPod(); p.Labels["app"] = "billing"; return p },
		"init container, vols": twoContainersAndInit,
	} {
		t.Run(name, func(t *testing.T) {
			in := pod()
			raw, err := json.Marshal(in)
			if err != nil {
				t.Fatal(err)
			}
			r := Inject(in, enabledNamespace(), []v1alpha1.EurekaSyncer{orders}, testDefaults)
			patched := applyPatch(t, raw, r.Patch)
			var got corev1.Pod
			if err := json.Unmarshal(patched, &got); err != nil {
				t.Fatal(err)
			}
			if !equality.Semantic.DeepEqual(&got, r.Pod) {
				t.Fatalf("the patch %+v makes\n%s\nwant the pod Inject made", r.Patch, patched)
			}
		})
	}
}

func twoContainersAndInit() *corev1.Pod {
	p := springPod()
	p.Spec.InitContainers = []corev1.Container{{Name: "migrate", Image: "registry.example/flyway:10"}}
	p.Spec.Volumes = []corev1.Volume{{Name: "cache", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
	p.Spec.Containers[0].Lifecycle = &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/pause", Port: intstr.FromString("http")}}}
	return p
}

// The registrar reads back the settings the webhook resolved: the env
// contract has one rendering and one parser, sidecar's.
func TestInject_TheRegistrarReadsWhatTheWebhookRenders(t *testing.T) {
	s := syncer("orders", time.Hour)
	s.Spec.Eureka.CredentialsSecretRef = &corev1.LocalObjectReference{Name: "eureka-login"}
	r := Inject(springPod(), enabledNamespace(), []v1alpha1.EurekaSyncer{s}, testDefaults)
	if !r.Inject {
		t.Fatalf("not injected: %s %v", r.Reason, r.Err)
	}
	cfg := registrarConfig(t, r.Pod)
	want := sidecar.Defaults("ORDERS", 8080)
	want.PodName, want.PodNamespace, want.PodUID, want.PodIP, want.NodeName = "orders-1", "shop", "u-1", "10.0.0.7", "node-1"
	want.UsernameFile, want.PasswordFile = "/etc/eurekube/eureka/username", "/etc/eurekube/eureka/password"
	want.EurekaURLs, want.Metadata = testDefaults.EurekaURLs, map[string]string{"zone": "zone-a"}
	want.ClusterID, want.Syncer = testDefaults.ClusterID, "orders"
	want.TrafficFile = "/etc/eurekube/podinfo/traffic"
	want.Health = sidecar.HealthConfig{Type: sidecar.HealthHTTP, Scheme: "http", Path: "/actuator/health", Port: 8080,
		Period: 5 * time.Second, Timeout: time.Second, FailureThreshold: 3, SuccessThreshold: 1}
	if !equality.Semantic.DeepEqual(cfg, want) {
		t.Fatalf("the registrar reads\n%+v\nwant\n%+v", cfg, want)
	}
}

// encodePatch writes what Response.Complete would write from the same
// operations.
func TestEncodePatch_IsTheJSONOfTheOperations(t *testing.T) {
	r := Inject(twoContainersAndInit(), enabledNamespace(), []v1alpha1.EurekaSyncer{syncer("orders", time.Hour)}, testDefaults)
	got, err := encodePatch(r.Patch)
	if err != nil {
		t.Fatal(err)
	}
	want, err := json.Marshal(r.Patch)
	if err != nil {
		t.Fatal(err)
	}
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("%v: %s", err, got)
	}
	_ = json.Unmarshal(want, &w)
	if !equality.Semantic.DeepEqual(g, w) {
		t.Fatalf("encoded\n%s\nwant\n%s", got, want)
	}
}

// The syncer's credentials, CA bundle and client certificate are files of
// one read-only volume that only the registrar mounts; no variable carries
// a secret, and the registrar's settings point at the files.
func TestInject_EurekaFilesAreMountedIntoTheRegistrarAlone(t *testing.T) {
	for _, kind := range []v1alpha1.CABundleKind{v1alpha1.CABundleConfigMap, v1alpha1.CABundleSecret} {
		t.Run(string(kind), func(t *testing.T) {
			s := syncer("orders", time.Hour)
			s.Spec.Eureka.CredentialsSecretRef = &corev1.LocalObjectReference{Name: "eureka-login"}
			s.Spec.Eureka.TLS = &v1alpha1.EurekaTLS{
				CABundleRef:                &v1alpha1.CABundleRef{Kind: kind, Name: "corp-ca", Key: "root.pem"},
				ClientCertificateSecretRef: &corev1.LocalObjectReference{Name: "eureka-client"},
			}
			r := Inject(twoContainersAndInit(), enabledNamespace(), []v1alpha1.EurekaSyncer{s}, testDefaults)
			if !r.Inject {
				t.Fatalf("not injected: %s %v", r.Reason, r.Err)
			}
			pod := r.Pod
			for _, c := range append(append([]corev1.Container{}, pod.Spec.InitContainers...), pod.Spec.Containers...) {
				for _, e := range c.Env {
					if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
						t.Errorf("container %s: env %s from Secret %s: want no secret in the environment", c.Name, e.Name, e.ValueFrom.SecretKeyRef.Name)
					}
				}
				mounted := false
				for _, m := range c.VolumeMounts {
					if m.Name == eurekaFilesVolume {
						mounted = true
						if !m.ReadOnly || m.MountPath != "/etc/eurekube/eureka" {
							t.Errorf("container %s mounts %+v, want read-only at /etc/eurekube/eureka", c.Name, m)
						}
					}
				}
				if mounted != (c.Name == v1alpha1.RegistrarContainerName) {
					t.Errorf("container %s mounts the Eureka files: %v; want only the registrar to", c.Name, mounted)
				}
			}
			var vol *corev1.Volume
			for i := range pod.Spec.Volumes {
				if pod.Spec.Volumes[i].Name == eurekaFilesVolume {
					vol = &pod.Spec.Volumes[i]
				}
			}
			if vol == nil || vol.Projected == nil || *vol.Projected.DefaultMode != 0o444 {
				t.Fatalf("volume %+v, want a projected volume of mode 0444", vol)
			}
			paths := map[string]string{} // file → object/key
			for _, src := range vol.Projected.Sources {
				var name string
				var items []corev1.KeyToPath
				switch {
				case src.Secret != nil:
					name, items = "Secret/"+src.Secret.Name, src.Secret.Items
				case src.ConfigMap != nil:
					name, items = "ConfigMap/"+src.ConfigMap.Name, src.ConfigMap.Items
				}
				for _, it := range items {
					paths[it.Path] = name + "/" + it.Key
				}
			}
			want := map[string]string{
				"username": "Secret/eureka-login/username", "password": "Secret/eureka-login/password",
				"ca.crt": string(kind) + "/corp-ca/root.pem", "tls.crt": "Secret/eureka-client/tls.crt", "tls.key": "Secret/eureka-client/tls.key",
			}
			if !equality.Semantic.DeepEqual(paths, want) {
				t.Fatalf("projected files %v, want %v", paths, want)
			}
			registrar := pod.Spec.Containers[len(pod.Spec.Containers)-1]
			env := map[string]string{}
			for _, e := range registrar.Env {
				env[e.Name] = e.Value
			}
			for name, file := range map[string]string{
				sidecar.EnvEurekaUsernameFile: "username", sidecar.EnvEurekaPasswordFile: "password", sidecar.EnvEurekaCAFile: "ca.crt",
				sidecar.EnvEurekaClientCertFile: "tls.crt", sidecar.EnvEurekaClientKeyFile: "tls.key",
			} {
				if env[name] != "/etc/eurekube/eureka/"+file {
					t.Errorf("%s=%q, want /etc/eurekube/eureka/%s", name, env[name], file)
				}
			}
			if _, ok := env[sidecar.EnvEurekaPassword]; ok {
				t.Errorf("%s is set", sidecar.EnvEurekaPassword)
			}
		})
	}
}

func TestInject_NoEurekaFilesNoVolume(t *testing.T) {
	pod := inject(t, springPod(), syncer("orders", time.Hour))
	if hasVolume(pod, eurekaFilesVolume) {
		t.Fatal("a syncer without credentials or TLS got the Eureka files volume")
	}
}

// A newer API server's pod holds fields this build's types lack: the
// patch, applied to the request's object, keeps every one of them,
// including in the containers Eurekube changes.
func TestInject_PatchKeepsFieldsThisBuildDoesNotKnow(t *testing.T) {
	orders := syncer("orders", time.Hour)
	raw, err := json.Marshal(springPod())
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	unknown := map[string]any{"introducedIn": "v9.99"}
	doc["metadata"].(map[string]any)["futureMeta"] = unknown
	spec := doc["spec"].(map[string]any)
	spec["futureSpec"] = unknown
	app := spec["containers"].([]any)[0].(map[string]any)
	app["futureContainerField"] = unknown
	app["readinessProbe"].(map[string]any)["futureProbeField"] = unknown
	raw, err = json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}

	pod, err := decodePod(raw)
	if err != nil {
		t.Fatal(err)
	}
	r := Inject(pod, enabledNamespace(), []v1alpha1.EurekaSyncer{orders}, testDefaults)
	if !r.Inject {
		t.Fatalf("not injected: %s %s", r.Reason, r.Denied)
	}
	var patched map[string]any
	if err := json.Unmarshal(applyPatch(t, raw, r.Patch), &patched); err != nil {
		t.Fatal(err)
	}
	patchedSpec := patched["spec"].(map[string]any)
	patchedApp := patchedSpec["containers"].([]any)[0].(map[string]any)
	for where, got := range map[string]any{
		"metadata.futureMeta":                                patched["metadata"].(map[string]any)["futureMeta"],
		"spec.futureSpec":                                    patchedSpec["futureSpec"],
		"spec.containers[0].futureContainerField":            patchedApp["futureContainerField"],
		"spec.containers[0].readinessProbe.futureProbeField": patchedApp["readinessProbe"].(map[string]any)["futureProbeField"],
	} {
		if !equality.Semantic.DeepEqual(got, unknown) {
			t.Errorf("%s = %v after the patch, want %v kept", where, got, unknown)
		}
	}
	if patchedApp["lifecycle"] == nil || len(patchedSpec["containers"].([]any)) != 2 {
		t.Fatalf("the patch did not inject: %s", opsOf(r.Patch))
	}
}

// The manager registers a Service-mode syncer's Service; no pod of its
// namespace gets a registrar, whatever the syncer's selector holds.
func TestInject_ServiceModeSyncerInjectsNoPod(t *testing.T) {
	empty := syncer("orders-svc", time.Hour, builders.ServiceMode("orders"))
	// The CRD refuses a selector in Service mode; one stored anyway
	// (validation ratcheting, an edited CRD) still injects nothing.
	selecting := syncer("orders-svc-selecting", time.Hour, builders.ServiceMode("orders"), builders.Selecting("orders"))
	for name, s := range map[string]v1alpha1.EurekaSyncer{"empty selector": empty, "a selector": selecting} {
		t.Run(name, func(t *testing.T) {
			pod := springPod()
			r := Inject(pod, enabledNamespace(), []v1alpha1.EurekaSyncer{s}, testDefaults)
			if r.Inject || r.Reason != ReasonNoMatchingSyncer || len(r.Patch) != 0 || r.Pod != pod || v1alpha1.RunsRegistrar(r.Pod) {
				t.Fatalf("inject %v, reason %s, %d patch operations: want the pod admitted as it is", r.Inject, r.Reason, len(r.Patch))
			}
		})
	}
	// Beside a Pod-mode syncer, the Pod-mode one registers the pod.
	orders := syncer("orders", time.Minute)
	if r := Inject(springPod(), enabledNamespace(), []v1alpha1.EurekaSyncer{selecting, orders}, testDefaults); !r.Inject || r.Syncer.Name != "orders" || len(r.Warnings) != 0 {
		t.Fatalf("beside a Pod-mode syncer: inject %v by %v, warnings %q", r.Inject, r.Syncer, r.Warnings)
	}
}
