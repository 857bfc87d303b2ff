// Package manager is the Eurekube manager: one controller-runtime Manager that
// serves the pod injection webhook on every replica, runs the reconcilers on
// the elected leader, and serves health probes and metrics. cmd/manager only
// parses flags and handles signals; tests start the same manager in-process
// with Run.
//
// Decisions written down here:
//   - In cert-manager mode (the default) the webhook server reads its
//     certificate from a directory through controller-runtime's
//     certificate watcher (fsnotify plus a 10 s poll), so a certificate
//     renewed by cert-manager, or rotated by package certs, is served
//     without a restart. The manager starts that watcher itself (the
//     webhook server skips its own when TLSOpts set GetCertificate) to
//     export the served certificate's expiry as
//     eurekube_webhook_certificate_expiry_timestamp_seconds.
//   - In self-managed mode (--certificate-mode=self-managed) package
//     selfmanaged issues and rotates the certificates in a Secret and
//     keeps the caBundle current from the leader; every replica serves the
//     Secret's key pair from a watch of that one Secret. Its package doc
//     has the decisions, CA rotation among them.
//   - /readyz passes once the webhook server answers TLS and the informers
//     the webhook reads (syncers, namespaces) have synced: a replica never
//     receives admission traffic it would answer from an empty cache.
//   - The cache strips managedFields (the largest part of a pod object) and
//     never holds Secrets: the manager reads a Secret straight from the API
//     when it needs it, so RBAC grants only get on secrets (self-managed
//     mode watches its one certificate Secret by name, outside the cache).
//   - The cluster id defaults to the UID of kube-system, read once at
//     start-up without the cache.
package manager
