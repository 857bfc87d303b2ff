package webhook

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/eurekube/eurekube/api/v1alpha1"
)

var update = flag.Bool("update", false, "rewrite the golden files of testdata/")

func TestParseAnnotations_AcceptsEveryDocumentedOverride(t *testing.T) {
	o, err := ParseAnnotations(map[string]string{
		AnnotationAppName:                   "orders-v2",
		AnnotationPort:                      "8081",
		AnnotationPreStopSleep:              "20",
		AnnotationHealthPath:                "/ready",
		AnnotationSidecarCPU:                "50m",
		AnnotationSidecarMemory:             "48Mi",
		AnnotationMetadataPrefix + "zone":   "zone-b",
		AnnotationMetadataPrefix + "canary": "true",
		"unrelated.example/annotation":      "anything",
	})
	if err != nil {
		t.Fatal(err)
	}
	if o.AppName != "orders-v2" || o.PreStopSleep == nil || *o.PreStopSleep != 20 || o.Metadata["zone"] != "zone-b" || o.Metadata["canary"] != "true" {
		t.Fatalf("overrides = %+v", o)
	}
}

func TestParseAnnotations_DeniesBadValuesNamingKeyValueAndAllowed(t *testing.T) {
	for _, tc := range []struct {
		key, value, allowed string
	}{
		{AnnotationPort, "0", "1 to 65535"},
		{AnnotationPort, "Not_A_Name", "port name"},
		{AnnotationPreStopSleep, "-1", ""},
		{AnnotationPreStopSleep, "ten", ""},
		{AnnotationAppName, "-orders", "letters"},
		{AnnotationHealthPath, "ready", "/"},
		{AnnotationSidecarMemory, "lots", ""},
		{AnnotationInject, "maybe", "true"},
		{AnnotationMetadataPrefix + "bad key", "v", ""},
		{v1alpha1.AnnotationPrefix + "app-nmae", "orders", "no such annotation"},
	} {
		t.Run(tc.key+"="+tc.value, func(t *testing.T) {
			_, err := ParseAnnotations(map[string]string{tc.key: tc.value})
			if err == nil {
				t.Fatal("accepted")
			}
			msg := err.Error()
			if !strings.Contains(msg, tc.key) || !strings.Contains(msg, tc.value) || !strings.Contains(msg, tc.allowed) {
				t.Fatalf("error %q does not name the key, the value and %q", msg, tc.allowed)
			}
		})
	}
}

func TestDecide_ReasonsForEveryOutcome(t *testing.T) {
	orders := syncer("orders", time.Hour, map[string]string{"app": "orders"})
	deleting := syncer("old", 2*time.Hour, map[string]string{"app": "orders"})
	now := metav1.Now()
	deleting.DeletionTimestamp = &now
	withLabel := func(k, v string) *corev1.Pod { p := springPod(); p.Labels[k] = v; return p }
	withAnnotation := func(k, v string) *corev1.Pod {
		p := springPod()
		p.Annotations = map[string]string{k: v}
		return p
	}
	injected := springPod()
	injected.Spec.Containers = append(injected.Spec.Containers, corev1.Container{Name: v1alpha1.RegistrarContainerName})
	for _, tc := range []struct {
		name    string
		pod     *corev1.Pod
		ns      Namespace
		syncers []v1alpha1.EurekaSyncer
		want    Reason
	}{
		{"excluded namespace", springPod(), Namespace{Excluded: true, Labels: enabledNamespace().Labels}, []v1alpha1.EurekaSyncer{orders}, ReasonNamespaceExcluded},
		{"namespace not labelled", springPod(), Namespace{}, []v1alpha1.EurekaSyncer{orders}, ReasonNamespaceNotEnabled},
		{"opted out by label", withLabel(v1alpha1.InjectLabel, "false"), enabledNamespace(), []v1alpha1.EurekaSyncer{orders}, ReasonOptedOut},
		{"opted out by annotation", withAnnotation(AnnotationInject, "false"), enabledNamespace(), []v1alpha1.EurekaSyncer{orders}, ReasonOptedOut},
		{"already injected", injected, enabledNamespace(), []v1alpha1.EurekaSyncer{orders}, ReasonAlreadyInjected},
		{"no matching syncer", withLabel("app", "billing"), enabledNamespace(), []v1alpha1.EurekaSyncer{orders}, ReasonNoMatchingSyncer},
		{"only a deleting syncer", springPod(), enabledNamespace(), []v1alpha1.EurekaSyncer{deleting}, ReasonSyncerDeleting},
		{"invalid annotation", withAnnotation(AnnotationPort, "0"), enabledNamespace(), []v1alpha1.EurekaSyncer{orders}, ReasonInvalidAnnotation},
		{"matching syncer", springPod(), enabledNamespace(), []v1alpha1.EurekaSyncer{orders, deleting}, ReasonInjected},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := Decide(tc.pod, tc.ns, tc.syncers)
			if d.Reason != tc.want || d.Inject != (tc.want == ReasonInjected) {
				t.Fatalf("decision = %s (inject %v), want %s", d.Reason, d.Inject, tc.want)
			}
		})
	}
}

func TestDecide_OldestSyncerWinsAndTheOthersAreNamed(t *testing.T) {
	young := syncer("young", time.Minute, map[string]string{"app": "orders"})
	old := syncer("old", time.Hour, map[string]string{"app": "orders"})
	d := Decide(springPod(), enabledNamespace(), []v1alpha1.EurekaSyncer{young, old})
	if !d.Inject || d.Syncer.Name != "old" {
		t.Fatalf("winner = %v", d.Syncer)
	}
	if len(d.Warnings) != 1 || !strings.Contains(d.Warnings[0], "young") {
		t.Fatalf("warnings = %q, want one naming the ignored syncer", d.Warnings)
	}
}

func TestMutate_ExistingPreStopIsKeptWithAWarning(t *testing.T) {
	pod := springPod()
	pod.Spec.Containers[0].Lifecycle = &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Exec: &corev1.ExecAction{Command: []string{"/bin/drain"}}}}
	s := syncer("orders", time.Hour, map[string]string{"app": "orders"})
	out, warnings, err := Mutate(pod, Config{Syncer: &s, Defaults: testDefaults})
	if err != nil {
		t.Fatal(err)
	}
	if got := out.Spec.Containers[0].Lifecycle.PreStop.Exec; got == nil || got.Command[0] != "/bin/drain" {
		t.Fatalf("preStop = %+v, want the pod's own", out.Spec.Containers[0].Lifecycle.PreStop)
	}
	if len(warnings) == 0 || !strings.Contains(strings.Join(warnings, " "), "preStop") {
		t.Fatalf("warnings = %q, want one about the kept preStop", warnings)
	}
}

func TestMutate_UnknownPortNameIsAnError(t *testing.T) {
	s := syncer("orders", time.Hour, map[string]string{"app": "orders"})
	pod := springPod()
	pod.Spec.Containers[0].Ports[0].Name = "web"
	if _, _, err := Mutate(pod, Config{Syncer: &s, Defaults: testDefaults}); err == nil || !strings.Contains(err.Error(), "http") {
		t.Fatalf("err = %v, want one naming the missing port http", err)
	}
}

// inject runs what the handler runs, without I/O: the decision, then the
// mutation when the pod is injected; otherwise the pod comes back as is.
func inject(t *testing.T, pod *corev1.Pod, syncers ...v1alpha1.EurekaSyncer) *corev1.Pod {
	t.Helper()
	d := Decide(pod, enabledNamespace(), syncers)
	if !d.Inject {
		return pod
	}
	out, _, err := Mutate(pod, Config{Syncer: d.Syncer, Overrides: d.Overrides, Defaults: testDefaults})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestMutate_GoldenPods(t *testing.T) {
	orders := syncer("orders", time.Hour, map[string]string{"app": "orders"})
	for _, tc := range []struct {
		name string
		pod  func() *corev1.Pod
	}{
		{"spring-boot-readiness-probe", springPod},
		{"two-containers-and-init", func() *corev1.Pod {
			p := springPod()
			p.Spec.InitContainers = []corev1.Container{{Name: "migrate", Image: "registry.example/flyway:10"}}
			p.Spec.Containers = append([]corev1.Container{{Name: "log-shipper", Image: "registry.example/fluent-bit:3"}}, p.Spec.Containers...)
			return p
		}},
		{"existing-prestop", func() *corev1.Pod {
			p := springPod()
			p.Spec.Containers[0].Lifecycle = &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Exec: &corev1.ExecAction{Command: []string{"/bin/drain", "--wait=20"}}}}
			return p
		}},
		{"generate-name-no-name", func() *corev1.Pod {
			p := springPod()
			p.Name, p.GenerateName = "", "orders-7d9f8-"
			return p
		}},
		{"host-network", func() *corev1.Pod {
			p := springPod()
			p.Spec.HostNetwork = true
			return p
		}},
		{"already-injected-unchanged", func() *corev1.Pod {
			return inject(t, springPod(), orders)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := inject(t, tc.pod(), orders)
			got, err := yaml.Marshal(out)
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join("testdata", tc.name+".golden.yaml")
			if *update {
				if err := os.WriteFile(path, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run go test ./webhook -update to create it)", err)
			}
			if string(got) != string(want) {
				t.Fatalf("mutated pod differs from %s (run go test ./webhook -update and review the diff):\n%s", path, got)
			}
		})
	}
}
