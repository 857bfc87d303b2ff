package webhook

import (
	"path"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/eurekube/eurekube/api/v1alpha1"
	"github.com/eurekube/eurekube/sidecar"
)

// The syncer's Eureka credentials, CA bundle and client certificate reach
// the registrar as files of one projected volume, mounted into the
// registrar alone. Files, not environment variables: the kubelet updates a
// mounted Secret or ConfigMap when it changes (environment is read once, at
// the container's start), and the registrar reads the files again, so a
// rotation needs no restart; and no other container of the pod can read
// them, as an env var would be readable by anything that lists the pod's
// spec with its values resolved by hand.
const (
	eurekaFilesVolume    = "eurekube-eureka"
	eurekaFilesMountPath = "/etc/eurekube/eureka"

	usernameFileName   = "username"
	passwordFileName   = "password"
	caFileName         = "ca.crt"
	clientCertFileName = "tls.crt"
	clientKeyFileName  = "tls.key"
)

// eurekaFilesMode is the mode of every file of the volume: readable by
// anyone in the registrar's container, which runs as its image's user or
// the UID the platform assigns, with no fsGroup to rely on (the kubelet
// makes the files root's, group fsGroup only when the pod sets one), so
// 0440 or 0400 would leave the registrar unable to read its own
// credentials. Nothing else runs in that container
// and no other container mounts the volume: the mode exposes nothing.
const eurekaFilesMode int32 = 0o444

// addEurekaFiles adds the projected volume of what the syncer's spec.eureka
// names to pod and points s at its files; false when it names nothing (no
// volume, no mount).
func addEurekaFiles(pod *corev1.Pod, servers v1alpha1.EurekaServers, s *sidecar.Config) bool {
	var sources []corev1.VolumeProjection
	file := func(name string) string { return path.Join(eurekaFilesMountPath, name) }
	if ref := servers.CredentialsSecretRef; ref != nil && ref.Name != "" {
		sources = append(sources, corev1.VolumeProjection{Secret: &corev1.SecretProjection{
			LocalObjectReference: *ref,
			Items:                []corev1.KeyToPath{{Key: "username", Path: usernameFileName}, {Key: "password", Path: passwordFileName}},
		}})
		s.UsernameFile, s.PasswordFile = file(usernameFileName), file(passwordFileName)
		s.Username, s.Password = "", ""
	}
	if t := servers.TLS; t != nil {
		if ref := t.CABundleRef; ref != nil {
			items := []corev1.KeyToPath{{Key: ref.EffectiveKey(), Path: caFileName}}
			named := corev1.LocalObjectReference{Name: ref.Name}
			if ref.EffectiveKind() == v1alpha1.CABundleSecret {
				sources = append(sources, corev1.VolumeProjection{Secret: &corev1.SecretProjection{LocalObjectReference: named, Items: items}})
			} else {
				sources = append(sources, corev1.VolumeProjection{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: named, Items: items}})
			}
			s.CAFile = file(caFileName)
		}
		if ref := t.ClientCertificateSecretRef; ref != nil && ref.Name != "" {
			sources = append(sources, corev1.VolumeProjection{Secret: &corev1.SecretProjection{
				LocalObjectReference: *ref,
				Items:                []corev1.KeyToPath{{Key: corev1.TLSCertKey, Path: clientCertFileName}, {Key: corev1.TLSPrivateKeyKey, Path: clientKeyFileName}},
			}})
			s.ClientCertFile, s.ClientKeyFile = file(clientCertFileName), file(clientKeyFileName)
		}
	}
	if len(sources) == 0 {
		return false
	}
	pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: eurekaFilesVolume, VolumeSource: corev1.VolumeSource{
		Projected: &corev1.ProjectedVolumeSource{Sources: sources, DefaultMode: ptr.To(eurekaFilesMode)},
	}})
	return true
}

// eurekaFilesMount is the registrar's read-only view of the volume.
func eurekaFilesMount() corev1.VolumeMount {
	return corev1.VolumeMount{Name: eurekaFilesVolume, MountPath: eurekaFilesMountPath, ReadOnly: true}
}
