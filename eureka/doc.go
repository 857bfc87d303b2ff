// Package eureka is Eurekube's only Eureka client: a thin, safe layer over
// github.com/hudl/fargo. It owns the authoritative copy of every instance it
// writes, fails over across server URLs, bounds every request with a timeout
// through an http.Client of its own, and maps server answers to typed errors
// that survive wrapping. A RegistryCache shares one read of a server's
// whole registry (or of its changes) among any number of readers. Nothing
// else in the project imports fargo.
package eureka
