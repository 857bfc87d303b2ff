package manager

import "github.com/eurekube/eurekube/webhook"

// WebhookDefaults is what the manager configured with cfg gives the webhook
// for every registrar, for tools that inject outside the manager (eurekube
// inject): the same settings, from the same flags, so that an offline
// injection equals the webhook's.
func WebhookDefaults(cfg Config, clusterID string) webhook.Defaults {
	return webhookDefaults(cfg, clusterID)
}
