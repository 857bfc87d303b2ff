package eureka

import (
	"strings"
	"time"

	"github.com/hudl/fargo"
)

// Leases as the server reports them, and what a read can tell of them.
//
// What the real server (Spring Cloud Netflix 4.3 on eureka-core 2.0.5)
// reports as leaseInfo.lastRenewalTimestamp, checked by
// TestLease_TheServerReportsTheLastHeartbeatPlusTheLeasesDuration, measured
// by hand where noted, and read in eureka-core's Lease, ResponseCacheImpl
// and AbstractInstanceRegistry:
//
//   - Until the first heartbeat it is the registration's time
//     (registrationTimestamp, to the millisecond).
//   - After a heartbeat it is the heartbeat's time plus the lease's
//     duration (Lease.renew() stores now + duration, a bug Eureka keeps on
//     purpose): measured 90.013 s after a heartbeat with the default 90 s
//     lease. The server's own expiry test (Lease.isExpired: now >
//     lastUpdateTimestamp + duration) reads the same field, so a renewed
//     instance is evicted 2 × duration after its last heartbeat, a never
//     renewed one 1 × duration after its registration, each at the next
//     eviction run. Instance.LastUpdated is that field as reported, and the
//     judgment below adds one duration to it, as the server does: what it
//     reports is what would already have been evicted by a server that is
//     not in self-preservation.
//   - Heartbeats invalidate none of the server's cached answers (only a
//     registration, a cancel, an eviction or a status change do). Answers
//     to GET /apps and /apps/delta are encoded once and served until the
//     read-write cache expires them (serverCacheExpiry) plus up to one
//     refresh of the read-only cache (ServerCacheDelay): measured on a
//     server with the default settings and one instance heartbeating every
//     10 s, GET /apps and /apps/delta showed the same lease for 3.5
//     minutes, the last time 210.5 s after its renewal. A delta's
//     instances are encoded from their leases as they stand when the
//     answer is (getApplicationDeltas decorates each), not as they stood
//     at the change: a delta shows a renewal made after the registration
//     it carries.
//
// So no read's own time says how fresh its leases are; the answer itself
// does. Every moment an answer records (a registration, a cancel, a
// renewal: its lastRenewalTimestamp less the lease's duration) is no later
// than when the server encoded it, so the latest of them is a lower bound
// of that moment. The judgment below is made as of that bound, never as of
// when the read arrived nor of how long ago the last whole read was.
const (
	// defaultLeaseDuration is the lease a server grants an instance whose
	// leaseInfo.durationInSecs is ≤ 0.
	defaultLeaseDuration = 90 * time.Second
	// EvictionPeriod is how often a server evicts expired leases
	// (evictionIntervalTimerInMs, by default): an instance past its lease
	// may be listed this much longer by a server that evicts.
	EvictionPeriod = 60 * time.Second
	// serverCacheExpiry is how long the server's read-write response cache
	// keeps an answer that no change invalidated
	// (responseCacheAutoExpirationInSeconds).
	serverCacheExpiry = 180 * time.Second
	// maxAnswerAge is how old an answer to a cached registry read can be,
	// by default: encoded, kept by the read-write cache until it expires,
	// then copied to the read-only cache for one more refresh.
	maxAnswerAge = serverCacheExpiry + ServerCacheDelay
)

// leaseDuration is inst's lease as the server applies it.
func leaseDuration(inst Instance) time.Duration {
	if inst.Duration <= 0 {
		return defaultLeaseDuration
	}
	return inst.Duration
}

// encodedNoEarlierThan is the latest moment fi's lease information shows
// the server was at: its registration, its eviction or cancel, its
// service-up time, and its last renewal, lastRenewalTimestamp less the
// lease's duration (the renewal's time; before any renewal, a moment
// before the registration). Each is no later than when the server encoded
// the answer carrying fi.
func encodedNoEarlierThan(fi *fargo.Instance) time.Time {
	lease := fi.LeaseInfo
	duration := time.Duration(lease.DurationInSecs) * time.Second
	if duration <= 0 {
		duration = defaultLeaseDuration
	}
	var latest time.Time
	for _, ms := range []int64{lease.RegistrationTimestamp, lease.EvictionTimestamp, lease.ServiceUpTimestamp} {
		if ms > 0 {
			latest = later(latest, time.UnixMilli(ms))
		}
	}
	if ms := lease.LastRenewalTimestamp; ms > 0 {
		latest = later(latest, time.UnixMilli(ms).Add(-duration))
	}
	return latest
}

// leaseObservedAt is when an answer asked for at asked showed the leases
// it carries, given the latest server timestamp in it: at least that
// timestamp, and, for an answer from the server's response cache (cached),
// at least asked − maxAnswerAge, which covers an answer whose every lease
// is stale (nothing in it renewed lately). An answer read straight from the
// registry is encoded after it was asked for. Comparing asked, by this
// host's clock, with the server's timestamps assumes the two clocks agree
// (NTP), as any reading of a lease's age does.
func leaseObservedAt(latest, asked time.Time, cached bool) time.Time {
	if cached {
		return later(latest, asked.Add(-maxAnswerAge))
	}
	return later(latest, asked)
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// leaseExpired is true when, as of when its lease was last shown
// (LeaseObservedAt), the server had listed inst for longer than its own
// rule allows and an eviction run had passed since: the server's clock
// had passed LastUpdated + the lease's duration (Lease.isExpired), and
// another EvictionPeriod. Nothing is judged without both times.
func leaseExpired(inst Instance) bool {
	if inst.LastUpdated.IsZero() || inst.LeaseObservedAt.IsZero() {
		return false
	}
	return inst.LeaseObservedAt.Sub(inst.LastUpdated) > leaseDuration(inst)+EvictionPeriod
}

// ExpiredLeases lists the IDs of the instances of app (case-insensitive)
// that the server still listed when it last showed their lease although
// a server that evicts would have evicted them by then: their lease had
// run out by the server's own rule (which, from the first renewal on, is
// two lease durations after the last heartbeat) and an eviction period
// had passed. A server lists such an instance when it is in
// self-preservation, or while it evicts at most 15 % of its registry per
// run; the instance may be dead.
//
// Each instance is judged as of its LeaseObservedAt, never as of now: an
// instance a delta did not carry is judged on the last answer that showed
// its lease, so how long ago the last whole read was does not matter, and
// a heartbeating instance is never listed. An instance that stopped
// heartbeating is listed by the first read after its expiry that shows
// its lease: a whole read (a RegistryCache makes one at least every
// wholeEvery, 5 minutes) if no delta carries it; as late as that read's
// answer is old (up to maxAnswerAge, 210 s by default, on a registry where
// nothing changes).
func (r *Registry) ExpiredLeases(app string) []string {
	var out []string
	for _, inst := range r.apps[strings.ToUpper(app)] {
		if leaseExpired(inst) {
			out = append(out, inst.InstanceID)
		}
	}
	return out
}
