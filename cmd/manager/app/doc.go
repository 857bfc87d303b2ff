// Package app is the Eurekube manager: one controller-runtime Manager that
// serves the pod injection webhook on every replica, runs the reconcilers on
// the elected leader, and serves health probes and metrics. cmd/manager only
// parses flags and handles signals; tests start the same manager in-process
// with Run.
//
// Decisions written down here:
//   - The webhook server reads its certificate from a directory through
//     controller-runtime's certificate watcher (fsnotify plus a 10 s poll),
//     so a certificate renewed by cert-manager, or rotated by package certs,
//     is served without a restart.
//   - /readyz passes once the webhook server answers TLS and the informers
//     the webhook reads (syncers, namespaces) have synced: a replica never
//     receives admission traffic it would answer from an empty cache.
//   - The cache strips managedFields (the largest part of a pod object) and
//     never holds Secrets: the manager reads a Secret straight from the API
//     when it needs it, so RBAC grants only get on secrets.
//   - The cluster id defaults to the UID of kube-system, read once at
//     start-up without the cache.
package app
