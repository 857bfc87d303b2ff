package webhook

import (
	"path"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/eurekube/eurekube/sidecar"
)

// The pod's identity for Eurekube's gateway: a projected ServiceAccount
// token for the gateway's audience (Defaults.GatewayAudience, the
// manager's --gateway-audience), in a volume mounted into the registrar
// alone, which sends it as Authorization: Bearer with every request that
// carries no basic-auth credentials (sidecar.TokenFromFile). The gateway
// verifies it with a TokenReview for its audience; the token is bound to
// the pod, so it names the pod and dies with it.
//
// The kubelet asks the TokenRequest API for the token, for the pod's
// ServiceAccount (which exists: the API server admits no pod whose
// ServiceAccount does not), and writes a new one at 80 % of its lifetime.
// automountServiceAccountToken: false does not stop it: that field governs
// only the kube-api-access volume of the API server's own audience, and
// this token, for the gateway's audience alone, is refused by the API
// server, so a pod that opted out of API credentials is given none. The
// volume is a projected one, which Pod Security "restricted" allows.
const (
	// GatewayTokenVolume is the volume's name.
	GatewayTokenVolume = "eurekube-gateway-token"
	// GatewayTokenDir is where the registrar mounts it, read-only.
	GatewayTokenDir = "/var/run/secrets/eurekube.io/gateway"
	// GatewayTokenExpirationSeconds is the token's lifetime: the shortest
	// the API server issues, so a token that leaks is of use for ten
	// minutes at most; the kubelet renews it after eight.
	GatewayTokenExpirationSeconds = 600

	gatewayTokenFileName = "token"
)

// gatewayTokenFile is the token's file, the registrar's
// sidecar.EnvGatewayTokenFile.
var gatewayTokenFile = path.Join(GatewayTokenDir, gatewayTokenFileName)

// addGatewayToken adds the projected volume of the gateway token to pod
// and points s at its file; false when the manager has no gateway audience
// or s names a Eureka server the manager does not (no volume, no mount).
//
// The token goes only to the manager's own servers (--eureka-url, where
// the gateway answers): a syncer that names other servers talks to another
// Eureka directly, which could replay a pod's token to the gateway.
func addGatewayToken(pod *corev1.Pod, d Defaults, s *sidecar.Config) bool {
	if d.GatewayAudience == "" || len(s.EurekaURLs) == 0 {
		return false
	}
	own := ownHosts(d.EurekaURLs)
	for _, u := range s.EurekaURLs {
		if !own.AllowsURL(u) {
			return false
		}
	}
	pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: GatewayTokenVolume, VolumeSource: corev1.VolumeSource{
		Projected: &corev1.ProjectedVolumeSource{
			Sources: []corev1.VolumeProjection{{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{
				Audience:          d.GatewayAudience,
				ExpirationSeconds: ptr.To[int64](GatewayTokenExpirationSeconds),
				Path:              gatewayTokenFileName,
			}}},
			// As the Eureka files' (eurekaFilesMode): readable by the
			// registrar, which runs as its image's user with no fsGroup.
			// Where every container of the pod runs as one user the
			// kubelet makes the token that user's, mode 0600, instead.
			DefaultMode: ptr.To(eurekaFilesMode),
		},
	}})
	s.GatewayTokenFile = gatewayTokenFile
	return true
}

// gatewayTokenMount is the registrar's read-only view of the token.
func gatewayTokenMount() corev1.VolumeMount {
	return corev1.VolumeMount{Name: GatewayTokenVolume, MountPath: GatewayTokenDir, ReadOnly: true}
}
