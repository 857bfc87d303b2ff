package webhook

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/eurekube/eurekube/api/v1alpha1"
)

func TestDecide_ReasonsForEveryOutcome(t *testing.T) {
	orders := syncer("orders", time.Hour)
	deleting := syncer("old", 2*time.Hour)
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
		{"opted out by annotation", withAnnotation(v1alpha1.AnnotationInject, "false"), enabledNamespace(), []v1alpha1.EurekaSyncer{orders}, ReasonOptedOut},
		{"already injected", injected, enabledNamespace(), []v1alpha1.EurekaSyncer{orders}, ReasonAlreadyInjected},
		{"no matching syncer", withLabel("app", "billing"), enabledNamespace(), []v1alpha1.EurekaSyncer{orders}, ReasonNoMatchingSyncer},
		{"only a deleting syncer", springPod(), enabledNamespace(), []v1alpha1.EurekaSyncer{deleting}, ReasonSyncerDeleting},
		{"invalid annotation", withAnnotation(v1alpha1.AnnotationPort, "0"), enabledNamespace(), []v1alpha1.EurekaSyncer{orders}, ReasonInvalidAnnotation},
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
	young := syncer("young", time.Minute)
	old := syncer("old", time.Hour)
	d := Decide(springPod(), enabledNamespace(), []v1alpha1.EurekaSyncer{young, old})
	if !d.Inject || d.Syncer.Name != "old" {
		t.Fatalf("winner = %v", d.Syncer)
	}
	if len(d.Warnings) != 1 || !strings.Contains(d.Warnings[0], "young") {
		t.Fatalf("warnings = %q, want one naming the ignored syncer", d.Warnings)
	}
}

func TestDecide_PodsMeantToFinishAreSkippedNamingTheSyncer(t *testing.T) {
	orders := syncer("orders", time.Hour)
	for _, policy := range []corev1.RestartPolicy{corev1.RestartPolicyNever, corev1.RestartPolicyOnFailure} {
		pod := springPod()
		pod.Spec.RestartPolicy = policy
		d := Decide(pod, enabledNamespace(), []v1alpha1.EurekaSyncer{orders})
		if d.Inject || d.Reason != ReasonMeantToFinish || d.Syncer == nil || d.Syncer.Name != "orders" || d.Skipped == nil || d.Skipped.Reason != v1alpha1.AdaptationMeantToFinish {
			t.Fatalf("%s: decision = %s (inject %v)", policy, d.Reason, d.Inject)
		}
		if len(d.Warnings) != 1 || !strings.Contains(d.Warnings[0], string(policy)) {
			t.Errorf("%s: warnings = %q", policy, d.Warnings)
		}
	}
}

// A Windows pod is skipped and says why: the registrar and the drain are
// Linux containers.
func TestDecide_WindowsPodsAreSkippedSayingWhy(t *testing.T) {
	pod := springPod()
	pod.Spec.OS = &corev1.PodOS{Name: corev1.Windows}
	r := Inject(pod, enabledNamespace(), []v1alpha1.EurekaSyncer{syncer("orders", time.Hour)}, testDefaults)
	if r.Inject || r.Denied != "" || r.Reason != ReasonUnsupportedOS {
		t.Fatalf("reason %s, denied %q, want skipped as %s", r.Reason, r.Denied, ReasonUnsupportedOS)
	}
	if got := r.Pod.Annotations[v1alpha1.StatusAnnotation]; got != v1alpha1.StatusSkipped {
		t.Fatalf("status %q, want %q", got, v1alpha1.StatusSkipped)
	}
	if !strings.Contains(r.Pod.Annotations[v1alpha1.AdaptationsAnnotation], string(v1alpha1.AdaptationUnsupportedOS)) {
		t.Fatalf("adaptations %s do not say why", r.Pod.Annotations[v1alpha1.AdaptationsAnnotation])
	}
}
