package controller

import (
	"hash/fnv"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// status.lastSyncTime says the manager still reads Eureka for an object.
// Rewritten on its own with the age alone as the rule, the refreshes of a
// cluster fall together: every object written by one pass is five minutes
// old in the same resync, and a new leader finds them all old at once and
// rewrites a thousand statuses in its first pass. So each object has a
// phase of its own in the refresh period, taken from its UID, and its
// lastSyncTime alone is rewritten once per period, in the first reconcile
// after its phase comes round: the refreshes of a cluster are spread over
// the period, and it is still never older than the period and a resync
// while a leader runs. A new leader rewrites none on its own in its first
// lastSyncGrace: its first pass writes what changed, nothing else; those
// that came due while no leader ran are refreshed at their phases after it.

const (
	// lastSyncRefresh: status.lastSyncTime alone is rewritten once in this
	// period, so an unchanged object costs no API write per resync.
	lastSyncRefresh = 5 * time.Minute
	// lastSyncGrace: a new leader refreshes no lastSyncTime on its own in
	// this time after its first reconcile.
	lastSyncGrace = time.Minute
)

// lastSyncDue says whether an object of uid whose status changes in
// nothing but lastSyncTime, last written at last (nil: never), has it
// rewritten at now: a phase of its own has come round since last, and
// since the end of its leader's grace (leading: its first reconcile; zero:
// no grace).
func lastSyncDue(last *metav1.Time, now, leading time.Time, uid types.UID) bool {
	if last == nil {
		return true
	}
	from := last.Time
	if !leading.IsZero() && leading.Add(lastSyncGrace).After(from) {
		from = leading.Add(lastSyncGrace)
	}
	phase := lastSyncPhase(uid)
	return refreshPeriods(now, phase) > refreshPeriods(from, phase)
}

// lastSyncPhase is uid's offset in the refresh period.
func lastSyncPhase(uid types.UID) time.Duration {
	h := fnv.New64a()
	_, _ = h.Write([]byte(uid))
	return time.Duration(h.Sum64() % uint64(lastSyncRefresh))
}

// refreshPeriods counts the refresh periods, shifted by phase, to t.
func refreshPeriods(t time.Time, phase time.Duration) int64 {
	return (t.UnixNano() - int64(phase)) / int64(lastSyncRefresh)
}

// leaderClock is when a reconciler first reconciled: when its manager
// began to lead, since controllers start with the Lease.
type leaderClock struct {
	once  sync.Once
	first time.Time
}

// since returns the time of the first call.
func (c *leaderClock) since() time.Time {
	c.once.Do(func() { c.first = time.Now() })
	return c.first
}
