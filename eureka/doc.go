// Package eureka is Eurekube's only Eureka client: a thin, safe layer over
// github.com/hudl/fargo. It owns the authoritative copy of every instance it
// writes, fails over across server URLs, bounds every request with a timeout
// through an http.Client of its own, and maps server answers to typed errors
// that survive wrapping. A RegistryCache shares one read of a server's
// whole registry (or of its changes) among any number of readers; each
// instance in it carries when the server's answer showed its lease, and
// Registry.ExpiredLeases judges leases as of that moment (lease.go says
// what the server reports, and why no read's own time will do).
// CheckServerURL is the one rule of a server's base URL, and ServerSet its
// one canonical spelling: every spelling of a server sends the same
// requests and shares one cache. Nothing else in the project imports fargo.
//
// # Status overrides
//
// Eureka's status override, as the real server (Spring Cloud Netflix's, on
// Netflix eureka-core 2.0.5) applies it; the package's tests check each
// point against it:
//
//   - An override lives in a map of the server beside the registry, keyed by
//     instance id. At a registration, the listed status is the first that
//     applies of: the client's status when it is DOWN or STARTING (an
//     override never hides it); the override; the status of the lease being
//     replaced when that is UP or OUT_OF_SERVICE; the client's status. A
//     heartbeat applies the same rules to the listed status (it carries
//     none). So an override OUT_OF_SERVICE hides only UP, and survives
//     re-registration and heartbeats.
//   - A registration may carry one (Instance.OverriddenStatus): the server
//     adds it only when the instance has none (put-if-absent), so it never
//     replaces one set by PUT, and a registration without one never removes
//     one.
//   - The override is dropped when the instance is cancelled (or evicted):
//     a later registration starts without one.
//   - PUT and DELETE …/status bypass the rules: PUT lists its value at once,
//     so PUT OUT_OF_SERVICE on an instance listed DOWN or STARTING lists it
//     OUT_OF_SERVICE until its client registers again; DELETE with a value
//     lists that value whatever the client reported, and DELETE without one
//     lists UNKNOWN (see Client.RemoveStatusOverride).
package eureka
