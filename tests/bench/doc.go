// Package bench measures Eurekube side by side with what it is compared
// with, in one run on one machine: pod creation through the real API server
// with and without the webhook, the webhook handler's throughput, the
// registrar's latency, footprint and Eureka traffic beside a Spring Cloud
// Eureka client, the reconciler at scale, and the Eureka gateway beside
// Eureka reached directly. Run writes the figures to
// results.json and REPORT.md; cmd/benchrun is the program `make bench` runs.
package bench
