package webhook

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/eurekube/eurekube/api/v1alpha1"
)

func TestMutate_TrafficAnnotationIsTheSyncersAndOnlyTheRegistrarReadsIt(t *testing.T) {
	for _, tc := range []struct {
		name    string
		traffic v1alpha1.Traffic
		podHas  string // the pod's own eurekube.io/traffic, "" for none
		want    string
	}{
		{"unset is Serve", "", "", "Serve"},
		{"Serve", v1alpha1.TrafficServe, "", "Serve"},
		{"Standby", v1alpha1.TrafficStandby, "", "Standby"},
		// The webhook writes it: a copied pod's value gives way to the syncer's.
		{"the syncer's replaces the pod's", v1alpha1.TrafficStandby, "Serve", "Standby"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := syncer("orders", time.Hour)
			s.Spec.Traffic = tc.traffic
			pod := springPod()
			if tc.podHas != "" {
				pod.Annotations = map[string]string{v1alpha1.TrafficAnnotation: tc.podHas}
			}
			r := Inject(pod, enabledNamespace(), []v1alpha1.EurekaSyncer{s}, testDefaults)
			if !r.Inject {
				t.Fatalf("not injected: %s %v", r.Reason, r.Err)
			}
			if got := r.Pod.Annotations[v1alpha1.TrafficAnnotation]; got != tc.want {
				t.Fatalf("annotation %s = %q, want %q", v1alpha1.TrafficAnnotation, got, tc.want)
			}
			var volume *corev1.Volume
			for i := range r.Pod.Spec.Volumes {
				if v := &r.Pod.Spec.Volumes[i]; v.Name == podInfoVolume {
					volume = v
				}
			}
			if volume == nil || volume.DownwardAPI == nil || len(volume.DownwardAPI.Items) != 1 ||
				volume.DownwardAPI.Items[0].Path != "traffic" ||
				volume.DownwardAPI.Items[0].FieldRef.FieldPath != "metadata.annotations['eurekube.io/traffic']" {
				t.Fatalf("volume %s = %+v, want a downward-API volume with the traffic annotation as file traffic", podInfoVolume, volume)
			}
			for _, c := range r.Pod.Spec.Containers {
				mounted := false
				for _, m := range c.VolumeMounts {
					if m.Name == podInfoVolume {
						mounted = m.ReadOnly && m.MountPath == "/etc/eurekube/podinfo"
					}
				}
				if mounted != (c.Name == v1alpha1.RegistrarContainerName) {
					t.Errorf("container %s: traffic volume mounted read-only at /etc/eurekube/podinfo = %v, want it for the registrar only", c.Name, mounted)
				}
			}
		})
	}
}

// Serve and Standby from the syncer, Detached from the reconciler once the
// syncer is gone: every value Eurekube writes is accepted back.
func TestParseAnnotations_TrafficIsWhatEurekubeWrites(t *testing.T) {
	for _, v := range []string{"Serve", "Standby", "Detached"} {
		if _, err := ParseAnnotations(map[string]string{v1alpha1.TrafficAnnotation: v}); err != nil {
			t.Errorf("%s=%s: %v", v1alpha1.TrafficAnnotation, v, err)
		}
	}
	for _, v := range []string{"standby", "Off", ""} {
		_, err := ParseAnnotations(map[string]string{v1alpha1.TrafficAnnotation: v})
		if err == nil || !strings.Contains(err.Error(), v1alpha1.TrafficAnnotation) || !strings.Contains(err.Error(), `"Serve", "Standby" or "Detached"`) {
			t.Errorf("%s=%q: %v, want a denial naming the annotation and what is allowed", v1alpha1.TrafficAnnotation, v, err)
		}
	}
}
