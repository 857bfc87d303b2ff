// Package sidecar is the registrar's logic: it builds its pod's Eureka
// instance from a Config, registers it STARTING, gates UP and DOWN on the
// app's health, heartbeats with jitter, re-registers when Eureka forgets
// it, backs off while Eureka is unreachable, and cancels the registration
// the moment its context ends (SIGTERM). It imports nothing from
// Kubernetes or the Prometheus client library (it writes the text format
// itself), so the registrar binary stays small; cmd/registrar parses the
// environment the webhook injects and wires signals.
package sidecar
