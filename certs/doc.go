// Package certs makes the webhook's serving certificates where cert-manager
// does not run: local runs, tests, and the manager's self-managed
// certificate mode (which stores them in a Secret, certs/selfmanaged). It generates a CA and a serving
// certificate signed by it with cert-manager's own pki helpers, writes them
// in the layout of a cert-manager Secret (tls.crt, tls.key, ca.crt) into the
// directory the webhook server reads, and returns the CA bundle for the
// MutatingWebhookConfiguration.
//
// In clusters cert-manager issues the same files (manifests/certmanager) and
// injects the CA bundle; the manager's certificate watcher reloads a rotated
// certificate in both cases, which Rotate lets tests exercise.
package certs
