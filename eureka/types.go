package eureka

import (
	"errors"
	"time"
)

// Status is the status of an instance as Eureka knows it.
type Status string

// Instance statuses understood by Eureka and its Spring Cloud clients.
const (
	StatusUp           Status = "UP"
	StatusDown         Status = "DOWN"
	StatusStarting     Status = "STARTING"
	StatusOutOfService Status = "OUT_OF_SERVICE"
	StatusUnknown      Status = "UNKNOWN"
)

// Metadata keys with which Eurekube marks the instances it owns. The
// reconciler only ever deletes instances that carry MetaManagedBy with the
// value ManagedByValue and its own cluster id in MetaCluster.
const (
	MetaManagedBy  = "eurekube.io/managed-by"
	ManagedByValue = "eurekube"
	MetaCluster    = "eurekube.io/cluster"
	MetaNamespace  = "eurekube.io/namespace"
	MetaPod        = "eurekube.io/pod"
	MetaPodUID     = "eurekube.io/pod-uid"
	MetaSyncer     = "eurekube.io/syncer"
	// MetaService names the Service of an instance the manager registers
	// for a Service-mode syncer (such an instance has no pod).
	MetaService = "eurekube.io/service"
)

// Instance is one registration in Eureka, in the shape the project owns.
// Register always sends every field; fields the server adds are filled on
// read.
type Instance struct {
	App              string // upper-cased by Eureka
	InstanceID       string
	HostName         string
	IPAddr           string
	VIPAddress       string
	SecureVIPAddress string
	Status           Status
	// OverriddenStatus is Eureka's sticky status override (PUT …/status),
	// UNKNOWN or empty when there is none. Sent on registration when set:
	// the server then applies it from the first moment, as if set by PUT.
	// An override never hides a client-reported DOWN or STARTING.
	OverriddenStatus Status

	Port              int
	PortEnabled       bool
	SecurePort        int
	SecurePortEnabled bool

	HomePageURL    string
	StatusPageURL  string
	HealthCheckURL string

	// RenewalInterval and Duration are the lease the client promises and
	// the server grants; zero means Eureka's defaults (30 s and 90 s).
	RenewalInterval time.Duration
	Duration        time.Duration

	Metadata map[string]string

	// LastDirtyTimestamp is when this version of the instance came to be,
	// by the client's clock (millisecond precision), as Eureka's own client
	// stamps it. It is sent on registration: the server keeps the copy it
	// has when that copy is newer, so a registration delayed in the network
	// cannot undo a later one. Zero: the server stamps the registration on
	// arrival. Not read back (the server's answers are decoded by fargo,
	// which drops it).
	LastDirtyTimestamp time.Time

	// LastUpdated is read-only, set by the server: its
	// leaseInfo.lastRenewalTimestamp, which is the registration's time
	// until the first heartbeat and then the last heartbeat's time plus
	// the lease's duration (see lease.go).
	LastUpdated time.Time
	// LeaseObservedAt is read-only, set by reads: the latest moment the
	// server's answer that carried LastUpdated is known to describe (it may
	// come from the server's response cache, minutes old), the moment
	// Registry.ExpiredLeases judges the lease as of. A Registry's instances
	// keep it from the last answer that carried them: a whole read, or a
	// delta that named them.
	LeaseObservedAt time.Time
}

// Errors returned by the client, matched with errors.Is through any
// wrapping.
var (
	// ErrNotFound: the server does not know the app or instance. On a
	// heartbeat it means "register again".
	ErrNotFound = errors.New("eureka: not found")
	// ErrUnavailable: no server URL answered (network error, timeout or
	// 5xx on every URL).
	ErrUnavailable = errors.New("eureka: unavailable")
	// ErrRejected: a server refused the request (4xx other than 404): as
	// malformed, or as not allowed. A 403 to a read is one only when every
	// URL answered 403: a server that is starting answers 403 to registry
	// reads, and the next URL is tried.
	ErrRejected = errors.New("eureka: request rejected")
	// ErrInvalid: the caller's input is wrong (empty app, bad URL, ...);
	// nothing was sent.
	ErrInvalid = errors.New("eureka: invalid input")
)

// Outcome names a request's result for metric labels: "ok", "not_found"
// or "error".
func Outcome(err error) string {
	switch {
	case err == nil:
		return "ok"
	case errors.Is(err, ErrNotFound):
		return "not_found"
	default:
		return "error"
	}
}

// HasMetadata is true when the instance carries every key of match with
// its value.
func (inst Instance) HasMetadata(match map[string]string) bool {
	for k, v := range match {
		if got, ok := inst.Metadata[k]; !ok || got != v {
			return false
		}
	}
	return true
}
