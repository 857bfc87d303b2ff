// Package allowlist matches what an EurekaSyncer names against the
// patterns a platform team gives the manager: registrar images
// (--allowed-registrar-image) and Eureka hosts (--allowed-eureka-host).
//
// Writing a syncer would otherwise be code execution and network reach:
// spec.sidecar.image runs in every pod the syncer selects (the drain helper
// inside the app container itself), and spec.eureka.serviceURLs makes the
// manager and the registrars call any host. The webhook, the reconciler and
// the CLI ask this one package, so they never disagree on what a pattern
// means. It is pure: no I/O, no DNS (a host name is compared as written).
//
// Image patterns: an exact reference (registry.example.com/eurekube/registrar:v1.2.0,
// or with @sha256:…) is compared as written, without normalisation
// (eurekube/registrar is not docker.io/library/…); a pattern ending in
// "*" right after "/", ":" or "@" allows every well-formed reference that
// starts with what precedes it (registry.example.com/eurekube/* any
// repository under eurekube, …/registrar:* any tag, …/registrar@* any
// digest); "*" alone allows every image. A "*" anywhere else is refused, so
// that registry.example.com/team* cannot also allow registry.example.com/team-evil.
//
// Host patterns: host or host:port, case-insensitive; "*.example.com"
// allows every name below example.com (at any depth, not example.com
// itself); "*" allows every host. Without a port every port is allowed;
// with one, the URL's port (explicit, or 80 for http and 443 for https)
// must be it. IPv6 addresses are written in brackets: [fd00::1]:8761.
package allowlist
