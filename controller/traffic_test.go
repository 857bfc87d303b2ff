package controller

import (
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/eurekube/eurekube/api/v1alpha1"
)

func TestTrafficPatchNeeded_NotForAPodFromBeforeTheAnnotationUnderServe(t *testing.T) {
	with := func(annotations map[string]string) *corev1.Pod {
		p := &corev1.Pod{}
		p.Annotations = annotations
		return p
	}
	serve, standby := string(v1alpha1.TrafficServe), string(v1alpha1.TrafficStandby)
	for _, c := range []struct {
		name    string
		pod     *corev1.Pod
		traffic string
		want    bool
	}{
		{"no annotation, Serve: its registrar reads an empty file as Serve", with(nil), serve, false},
		{"no annotation, Standby", with(nil), standby, true},
		{"no annotation, Detached", with(nil), string(v1alpha1.TrafficDetached), true},
		{"Serve, Serve", with(map[string]string{v1alpha1.TrafficAnnotation: serve}), serve, false},
		{"Serve, Standby", with(map[string]string{v1alpha1.TrafficAnnotation: serve}), standby, true},
		{"Standby, Serve", with(map[string]string{v1alpha1.TrafficAnnotation: standby}), serve, true},
		{"empty, Serve", with(map[string]string{v1alpha1.TrafficAnnotation: ""}), serve, true},
	} {
		if got := trafficPatchNeeded(c.pod, c.traffic); got != c.want {
			t.Errorf("%s: trafficPatchNeeded = %v, want %v", c.name, got, c.want)
		}
	}
}
