package manager

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/eurekube/eurekube/sidecar"
	"github.com/eurekube/eurekube/webhook"
)

// registrarResources are the registrar's requests and limits when a syncer
// sets none: it is idle between heartbeats and its RSS is a few MiB.
var registrarResources = corev1.ResourceRequirements{
	Requests: corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("5m"),
		corev1.ResourceMemory: resource.MustParse("16Mi"),
	},
	Limits: corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("100m"),
		corev1.ResourceMemory: resource.MustParse("32Mi"),
	},
}

// webhookDefaults turns the flags into the webhook's registrar defaults.
// The allowlists of a Config that does not validate are empty.
func webhookDefaults(cfg Config, clusterID string) webhook.Defaults {
	allowed, _ := cfg.allowlists()
	return webhook.Defaults{
		RegistrarImage:      cfg.RegistrarImage,
		EurekaURLs:          cfg.EurekaURLs,
		PreStopSleepSeconds: cfg.DefaultDrainSeconds,
		ClusterID:           clusterID,
		ExecSleepFallback:   cfg.ExecSleepFallback,
		RegistrarResources:  *registrarResources.DeepCopy(),
		RegistrarPort:       sidecar.DefaultListenPort,
		RegistrarLogLevel:   cfg.LogLevel,
		GatewayAudience:     cfg.GatewayAudience,
		Allowed:             allowed,
	}
}
