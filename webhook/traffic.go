package webhook

import (
	"path"

	corev1 "k8s.io/api/core/v1"

	"github.com/eurekube/eurekube/api/v1alpha1"
)

// Names of what carries spec.traffic to the registrar: the pod's
// eurekube.io/traffic annotation, which the reconciler keeps current, seen
// by the registrar as a file of a downward-API volume. A file, not an
// environment variable, because the kubelet refreshes a volume when the
// annotation changes, and the registrar reads it before every
// registration.
const (
	podInfoVolume    = "eurekube-podinfo"
	podInfoMountPath = "/etc/eurekube/podinfo"
	trafficFileName  = "traffic"
	// zoneFileName holds the pod's zone label, which Kubernetes copies from
	// its node when it binds the pod (the PodTopologyLabels admission
	// plugin, on by default since 1.35) and the reconciler copies where
	// that plugin is off (podZonePatch, controller/nodes.go).
	zoneFileName = "zone"
)

// trafficFile and zoneFile are where the registrar reads the pod's
// traffic annotation and its zone label.
var (
	trafficFile = path.Join(podInfoMountPath, trafficFileName)
	zoneFile    = path.Join(podInfoMountPath, zoneFileName)
)

// addPodInfo sets the pod's traffic annotation to the syncer's
// spec.traffic, so that the registrar's first registration honours it,
// and adds the downward-API volume that shows it, and the pod's zone label
// when the registrar reads it, to the registrar (registrarContainer mounts
// it).
func addPodInfo(pod *corev1.Pod, syncer *v1alpha1.EurekaSyncer, zone bool) {
	if pod.Annotations == nil {
		pod.Annotations = map[string]string{}
	}
	pod.Annotations[v1alpha1.TrafficAnnotation] = string(syncer.EffectiveTraffic())
	items := []corev1.DownwardAPIVolumeFile{{
		Path:     trafficFileName,
		FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.annotations['" + v1alpha1.TrafficAnnotation + "']"},
	}}
	if zone {
		items = append(items, corev1.DownwardAPIVolumeFile{
			Path:     zoneFileName,
			FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.labels['" + corev1.LabelTopologyZone + "']"},
		})
	}
	pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: podInfoVolume, VolumeSource: corev1.VolumeSource{
		DownwardAPI: &corev1.DownwardAPIVolumeSource{Items: items},
	}})
}

// podInfoMount is the registrar's read-only view of the traffic and zone files; no
// other container sees it.
func podInfoMount() corev1.VolumeMount {
	return corev1.VolumeMount{Name: podInfoVolume, MountPath: podInfoMountPath, ReadOnly: true}
}
