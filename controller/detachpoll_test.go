package controller

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/eurekube/eurekube/tests/harness"
)

// A deleted syncer waiting for its registrars is read again soon, never
// later than a resync, and less often as the wait goes on: a thousand
// syncers deleted at once read Eureka about ten times each over their
// first half minute, not every 2 s.
func TestDetachPoll_SoonAtFirstNeverPastAResyncAndSparserWithAge(t *testing.T) {
	harness.OnlyComputes(t)
	for i := 0; i < 10000; i++ {
		resync := time.Duration(1 + rand.Int64N(int64(10*time.Minute)))
		age := time.Duration(rand.Int64N(int64(time.Hour)))
		later := age + time.Duration(rand.Int64N(int64(time.Hour)))
		got := detachPoll(age, resync)
		if got > resync || got < min(2*time.Second, resync) {
			t.Fatalf("detachPoll(%s, %s) = %s: want between min(2s, resync) and the resync", age, resync, got)
		}
		if next := detachPoll(later, resync); next < got {
			t.Fatalf("detachPoll(%s, %s) = %s, shorter than at %s (%s)", later, resync, next, age, got)
		}
	}
	if got := detachPoll(0, 30*time.Second); got != 2*time.Second {
		t.Errorf("a syncer just deleted is read again after %s, want 2s", got)
	}
	reads := 0
	for age := time.Duration(0); age < 30*time.Second; age += detachPoll(age, 30*time.Second) {
		reads++
	}
	if reads > 12 {
		t.Errorf("%d reads in the first 30 s of a detach, want about ten", reads)
	}
}
