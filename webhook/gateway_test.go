package webhook

import (
	"encoding/json"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/utils/ptr"

	"github.com/eurekube/eurekube/api/v1alpha1"
	"github.com/eurekube/eurekube/internal/allowlist"
	"github.com/eurekube/eurekube/sidecar"
)

// gatewayDefaults are the test manager's with a gateway audience.
func gatewayDefaults() Defaults {
	d := testDefaults
	d.GatewayAudience = "eurekube-gateway"
	return d
}

// With a gateway audience, the registrar alone mounts a projected token
// for it, read-only, and is told where it is; every other container and
// the rest of the pod are as without it.
func TestInject_GatewayTokenIsMountedIntoTheRegistrarAlone(t *testing.T) {
	orders := syncer("orders", time.Hour)
	for name, pod := range map[string]func() *corev1.Pod{
		"spring boot":          springPod,
		"init container, vols": twoContainersAndInit,
		"automountServiceAccountToken false": func() *corev1.Pod {
			p := springPod()
			p.Spec.AutomountServiceAccountToken = ptr.To(false)
			return p
		},
		"native sidecar": func() *corev1.Pod {
			p := springPod()
			p.Spec.InitContainers = []corev1.Container{{Name: "linkerd-proxy", Image: "registry.example/proxy:1",
				RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways)}}
			return p
		},
	} {
		t.Run(name, func(t *testing.T) {
			in := pod()
			r := Inject(in, enabledNamespace(), []v1alpha1.EurekaSyncer{orders}, gatewayDefaults())
			if !r.Inject || r.Denied != "" {
				t.Fatalf("not injected: %s %v %s", r.Reason, r.Err, r.Denied)
			}
			got := r.Pod
			var vol *corev1.Volume
			for i := range got.Spec.Volumes {
				if got.Spec.Volumes[i].Name == GatewayTokenVolume {
					vol = &got.Spec.Volumes[i]
				}
			}
			want := corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
				Sources: []corev1.VolumeProjection{{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{
					Audience: "eurekube-gateway", ExpirationSeconds: ptr.To[int64](600), Path: "token"}}},
				DefaultMode: ptr.To[int32](0o444),
			}}
			if vol == nil || !equality.Semantic.DeepEqual(vol.VolumeSource, want) {
				t.Fatalf("volume %s: %+v, want the projected token %+v", GatewayTokenVolume, vol, want)
			}
			for _, c := range append(append([]corev1.Container{}, got.Spec.InitContainers...), got.Spec.Containers...) {
				mounted := false
				for _, m := range c.VolumeMounts {
					if m.Name == GatewayTokenVolume {
						mounted = true
						if !m.ReadOnly || m.MountPath != "/var/run/secrets/eurekube.io/gateway" {
							t.Errorf("container %s mounts %+v, want read-only at /var/run/secrets/eurekube.io/gateway", c.Name, m)
						}
					}
				}
				if mounted != (c.Name == v1alpha1.RegistrarContainerName) {
					t.Errorf("container %s mounts the gateway token: %v; want only the registrar to", c.Name, mounted)
				}
			}
			if cfg := registrarConfig(t, got); cfg.GatewayTokenFile != "/var/run/secrets/eurekube.io/gateway/token" {
				t.Errorf("the registrar reads the token from %q, want /var/run/secrets/eurekube.io/gateway/token", cfg.GatewayTokenFile)
			}
			checkRestrictedVolumes(t, got)
			checkPatch(t, in, r)

			// Sent back, it is accepted unchanged.
			again := Inject(got, enabledNamespace(), []v1alpha1.EurekaSyncer{orders}, gatewayDefaults())
			if again.Denied != "" || len(again.Patch) > 0 || !equality.Semantic.DeepEqual(again.Pod, got) {
				t.Fatalf("Inject(Inject(p)) denied %q or patched %s", again.Denied, opsOf(again.Patch))
			}
			if _, err := newRegistrarImages(gatewayDefaults()).registrars(got); err != nil {
				t.Fatalf("the registrar Eurekube writes is unreadable to it: %v", err)
			}

			// Without the audience, the same pod is injected as before the
			// gateway existed.
			plain := Inject(pod(), enabledNamespace(), []v1alpha1.EurekaSyncer{orders}, testDefaults)
			if hasVolume(plain.Pod, GatewayTokenVolume) {
				t.Fatal("no gateway audience, yet the token volume")
			}
			for _, e := range plain.Pod.Spec.Containers[len(plain.Pod.Spec.Containers)-1].Env {
				if e.Name == sidecar.EnvGatewayTokenFile {
					t.Fatalf("no gateway audience, yet %s", e.Name)
				}
			}
		})
	}
}

// The token goes only to the manager's own servers, where the gateway
// answers; a syncer naming other servers talks to them directly, and is
// given no token it could hand to them.
func TestInject_GatewayTokenOnlyForTheManagersServers(t *testing.T) {
	d := gatewayDefaults()
	hosts, err := allowlist.ParseHosts([]string{"*.corp.example", "eureka:8762"})
	if err != nil {
		t.Fatal(err)
	}
	d.Allowed.EurekaHosts = hosts
	for urls, want := range map[string]bool{
		"":                                       true,
		"http://eureka:8761/eureka":              true,
		"http://eureka:8761/eureka/":             true,
		"http://eureka.corp.example/eureka":      false,
		"http://eureka:8762/eureka":              false,
		"http://eureka.corp.example:8761/eureka": false,
	} {
		s := syncer("orders", time.Hour)
		if urls != "" {
			s.Spec.Eureka.ServiceURLs = []string{urls}
		}
		r := Inject(springPod(), enabledNamespace(), []v1alpha1.EurekaSyncer{s}, d)
		if !r.Inject || r.Denied != "" {
			t.Fatalf("%q: not injected: %s %v %s", urls, r.Reason, r.Err, r.Denied)
		}
		if got := hasVolume(r.Pod, GatewayTokenVolume); got != want {
			t.Errorf("serviceURLs %q: token volume %v, want %v", urls, got, want)
		}
		if got := registrarConfig(t, r.Pod).GatewayTokenFile != ""; got != want {
			t.Errorf("serviceURLs %q: token file set %v, want %v", urls, got, want)
		}
	}
}

// checkRestrictedVolumes fails for a volume Pod Security "restricted"
// refuses: it allows configMap, csi, downwardAPI, emptyDir, ephemeral,
// persistentVolumeClaim, projected and secret volumes only.
func checkRestrictedVolumes(t *testing.T, pod *corev1.Pod) {
	t.Helper()
	for _, v := range pod.Spec.Volumes {
		s := v.VolumeSource
		raw, _ := json.Marshal(corev1.VolumeSource{ConfigMap: s.ConfigMap, CSI: s.CSI, DownwardAPI: s.DownwardAPI, EmptyDir: s.EmptyDir,
			Ephemeral: s.Ephemeral, PersistentVolumeClaim: s.PersistentVolumeClaim, Projected: s.Projected, Secret: s.Secret})
		all, _ := json.Marshal(s)
		if string(raw) != string(all) {
			t.Errorf("volume %s is of a kind Pod Security restricted refuses: %s", v.Name, all)
		}
	}
}
