package webhook

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/eurekube/eurekube/internal/allowlist"
	"github.com/eurekube/eurekube/sidecar"
)

func TestExpand_FollowsKubernetesRules(t *testing.T) {
	vars := map[string]string{"A": "ORDERS", "EMPTY": ""}
	lookup := func(n string) (string, bool) { v, ok := vars[n]; return v, ok }
	for in, want := range map[string]string{
		"plain":          "plain",
		"$(A)":           "ORDERS",
		"x-$(A)-y":       "x-ORDERS-y",
		"$$(A)":          "$(A)",
		"$$$(A)":         "$ORDERS",
		"$(UNKNOWN)":     "$(UNKNOWN)",
		"$(EMPTY)z":      "z",
		"$(A":            "$(A",
		"$A":             "$A",
		"a$":             "a$",
		"$()":            "$()",
		"$(A)$(A)":       "ORDERSORDERS",
		"$(A)$$":         "ORDERS$",
		"$(A)$($(A))":    "ORDERS$($(A))",
		"(A)$(A)$$(A)$)": "(A)ORDERS$(A)$)",
	} {
		if got := expand(in, lookup); got != want {
			t.Errorf("expand(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestImageRepository_OneRepositoryWhateverTheSpelling(t *testing.T) {
	for _, image := range []string{
		"eurekube/registrar", "eurekube/registrar:v1", "docker.io/eurekube/registrar:v2",
		"index.docker.io/eurekube/registrar", "eurekube/registrar@sha256:" + strings.Repeat("a", 64),
		"DOCKER.IO/eurekube/registrar:x", "registry-1.docker.io/eurekube/registrar:v3",
	} {
		if got := imageRepository(image); got != "docker.io/eurekube/registrar" {
			t.Errorf("imageRepository(%q) = %q", image, got)
		}
	}
	for image, want := range map[string]string{
		"busybox":                           "docker.io/library/busybox",
		"localhost:5000/eurekube/registrar": "localhost:5000/eurekube/registrar",
		"GHCR.IO/eurekube/registrar:v1":     "ghcr.io/eurekube/registrar",
		"registry.example.com/r:1@sha256:" + strings.Repeat("b", 64): "registry.example.com/r",
	} {
		if got := imageRepository(image); got != want {
			t.Errorf("imageRepository(%q) = %q, want %q", image, got, want)
		}
	}
}

func TestRegistrarImages_KnowsTheManagersAndTheAllowlistsImages(t *testing.T) {
	allowed, err := allowlist.ParseImages([]string{"registry.example.com/team/*", "mirror.example.com/eurekube/registrar:*", "*"})
	if err != nil {
		t.Fatal(err)
	}
	d := testDefaults
	d.Allowed.RegistrarImages = allowed
	ri := newRegistrarImages(d)
	for image, want := range map[string]bool{
		"eurekube/registrar:evil":      true,
		"docker.io/eurekube/registrar": true,
		"mirror.example.com/eurekube/registrar@sha256:" + strings.Repeat("c", 64): true,
		"registry.example.com/team/anything:1":                                    false, // sets no registrar variable
		"registry.example.com/other/registrar":                                    false,
		"busybox":                                                                 false,
		"eurekube/registrar-evil":                                                 false,
	} {
		if got := ri.runs(image, nil); got != want {
			t.Errorf("runs(%q) = %v, want %v", image, got, want)
		}
	}
	// Under a prefix, an image runs the registrar when the container sets
	// a registrar variable: the prefix may cover the apps' images too.
	if ri.runs("registry.example.com/team/app:1", []corev1.EnvVar{{Name: "JAVA_OPTS"}}) {
		t.Error("an app's image under an allowlist prefix is taken for the registrar")
	}
	if !ri.runs("registry.example.com/team/app:1", []corev1.EnvVar{{Name: sidecar.EnvAppName}}) {
		t.Error("an image under an allowlist prefix setting EUREKUBE_APP_NAME is not taken for the registrar")
	}
}

// handWritten is a registrar written by hand: Eurekube's own identity and
// literal settings, then env.
func handWritten(env ...corev1.EnvVar) corev1.Container {
	base := registrarEnv([]sidecar.EnvVar{
		{Name: sidecar.EnvAppName, Value: "MINE"}, {Name: sidecar.EnvPort, Value: "8080"},
		{Name: sidecar.EnvEurekaURLs, Value: "http://eureka:8761/eureka"},
	})
	return corev1.Container{Name: "sidekick", Image: "docker.io/eurekube/registrar:other", Env: append(base, env...)}
}

func literal(name, value string) corev1.EnvVar { return corev1.EnvVar{Name: name, Value: value} }

func TestRegistrars_DeniesWhatTheWebhookCannotReadAsTheKubeletRunsIt(t *testing.T) {
	configMap := &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "cm"}, Key: "app"}}
	for name, tc := range map[string]struct {
		pod      func(*corev1.Pod)
		variable string // in the denial; "" when admitted
		wantApp  string
	}{
		"a literal registrar of its own app": {pod: func(p *corev1.Pod) { p.Spec.Containers = append(p.Spec.Containers, handWritten()) }, wantApp: "MINE"},
		"a duplicate app name: the last wins": {pod: func(p *corev1.Pod) {
			p.Spec.Containers = append(p.Spec.Containers, handWritten(literal(sidecar.EnvAppName, "ORDERS")))
		}, wantApp: "ORDERS"},
		"$(VAR) expanded from an earlier literal": {pod: func(p *corev1.Pod) {
			p.Spec.Containers = append(p.Spec.Containers, handWritten(literal("X", "ORD"), literal(sidecar.EnvAppName, "$(X)ERS")))
		}, wantApp: "ORDERS"},
		"the app from a ConfigMap": {pod: func(p *corev1.Pod) {
			p.Spec.Containers = append(p.Spec.Containers, handWritten(corev1.EnvVar{Name: sidecar.EnvAppName, ValueFrom: configMap}))
		}, variable: sidecar.EnvAppName},
		"$(VAR) of a ConfigMap's variable": {pod: func(p *corev1.Pod) {
			p.Spec.Containers = append(p.Spec.Containers, handWritten(corev1.EnvVar{Name: "X", ValueFrom: configMap}, literal(sidecar.EnvAppName, "$(X)")))
		}, variable: sidecar.EnvAppName},
		"$(VAR) defined only after it": {pod: func(p *corev1.Pod) {
			p.Spec.Containers = append(p.Spec.Containers, handWritten(literal(sidecar.EnvAppName, "$(LATER)"), literal("LATER", "ORDERS")))
		}, variable: sidecar.EnvAppName},
		"envFrom": {pod: func(p *corev1.Pod) {
			c := handWritten()
			c.EnvFrom = []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "cm"}}}}
			p.Spec.Containers = append(p.Spec.Containers, c)
		}, variable: "envFrom"},
		"a victim's pod name": {pod: func(p *corev1.Pod) {
			p.Spec.Containers = append(p.Spec.Containers, handWritten(literal(sidecar.EnvPodName, "orders-1")))
		}, variable: sidecar.EnvPodName},
		"a victim's UID through another field": {pod: func(p *corev1.Pod) {
			p.Spec.Containers = append(p.Spec.Containers, handWritten(corev1.EnvVar{Name: sidecar.EnvPodUID,
				ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.annotations['uid']"}}}))
		}, variable: sidecar.EnvPodUID},
		"flags": {pod: func(p *corev1.Pod) {
			c := handWritten()
			c.Args = []string{"-app-name=ORDERS"}
			p.Spec.Containers = append(p.Spec.Containers, c)
		}, variable: "command and args"},
		"a native sidecar": {pod: func(p *corev1.Pod) {
			c := handWritten(literal(sidecar.EnvPodNamespace, "shop"))
			c.RestartPolicy = ptr.To(corev1.ContainerRestartPolicyAlways)
			p.Spec.InitContainers = append(p.Spec.InitContainers, c)
		}, variable: sidecar.EnvPodNamespace},
		"a plain init container": {pod: func(p *corev1.Pod) {
			p.Spec.InitContainers = append(p.Spec.InitContainers, handWritten(corev1.EnvVar{Name: sidecar.EnvEurekaURLs, ValueFrom: configMap}))
		}, variable: sidecar.EnvEurekaURLs},
		"another image named eurekube-registrar": {pod: func(p *corev1.Pod) {
			c := handWritten(literal(sidecar.EnvPodIP, "10.0.0.1"))
			c.Name, c.Image = "eurekube-registrar", "busybox"
			p.Spec.Containers = append(p.Spec.Containers, c)
		}, variable: sidecar.EnvPodIP},
		"the drain installer written by hand": {pod: func(p *corev1.Pod) {
			p.Spec.InitContainers = append(p.Spec.InitContainers, corev1.Container{Name: "x", Image: "eurekube/registrar:1",
				Args: []string{sidecar.InstallDrainCommand, "/eurekube/drain"}})
		}},
	} {
		t.Run(name, func(t *testing.T) {
			pod := springPod()
			tc.pod(pod)
			regs, err := newRegistrarImages(testDefaults).registrars(pod)
			switch {
			case tc.variable == "" && err != nil:
				t.Fatalf("denied: %v", err)
			case tc.variable != "" && err == nil:
				t.Fatalf("admitted %+v, want denied naming %s", regs, tc.variable)
			case tc.variable != "" && !strings.Contains(err.Error(), ": "+tc.variable+": "):
				t.Fatalf("denied %q, want it to name %s", err, tc.variable)
			case tc.wantApp != "" && (len(regs) != 1 || regs[0].Settings.AppName != tc.wantApp):
				t.Fatalf("registrars %+v, want one of app %s", regs, tc.wantApp)
			}
		})
	}
}

func TestRegistrars_EurekubesOwnOutputIsReadable(t *testing.T) {
	s := syncer("orders", time.Hour)
	injected := inject(t, withPreStop(&corev1.LifecycleHandler{Exec: &corev1.ExecAction{Command: []string{"/stop"}}})(), s)
	regs, err := newRegistrarImages(testDefaults).registrars(injected)
	if err != nil {
		t.Fatal(err)
	}
	if len(regs) != 1 || regs[0].Settings.AppName != s.EffectiveAppName() {
		t.Fatalf("registrars %+v, want the injected one of %s", regs, s.EffectiveAppName())
	}
}

// A syncer's free text may hold $: Eurekube escapes it, so its own output
// is still readable, and the registrar is given exactly the spec's values
// (the kubelet expands $(VAR) and $$ in env values).
func TestRegistrars_ADollarInTheSyncersValuesReachesTheRegistrarAsWritten(t *testing.T) {
	s := syncer("orders", time.Hour)
	s.Spec.Metadata = map[string]string{"note": "costs $(PRICE) or $$5, $"}
	injected := inject(t, withPreStop(nil)(), s)
	regs, err := newRegistrarImages(testDefaults).registrars(injected)
	if err != nil {
		t.Fatalf("Eurekube refuses its own output: %v", err)
	}
	if len(regs) != 1 || regs[0].Settings.Metadata["note"] != "costs $(PRICE) or $$5, $" {
		t.Fatalf("registrars %+v, want the metadata as the syncer wrote it", regs)
	}
	given, ok := InjectedSettings(injected)
	if !ok || given.Metadata["note"] != "costs $(PRICE) or $$5, $" {
		t.Errorf("InjectedSettings %+v (%v), want the metadata as the syncer wrote it", given.Metadata, ok)
	}
}
