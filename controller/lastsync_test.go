package controller

import (
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func TestLastSyncDue_OncePerPeriodAtTheObjectsPhaseAndNoneInANewLeadersGrace(t *testing.T) {
	uid := types.UID("6f1c1a7e-0000-4000-8000-000000000001")
	phase := lastSyncPhase(uid)
	// A moment just after uid's phase came round.
	turn := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC).Truncate(lastSyncRefresh).Add(phase)
	at := func(d time.Duration) *metav1.Time { t := metav1.NewTime(turn.Add(d)); return &t }
	for _, tc := range []struct {
		name    string
		last    *metav1.Time
		now     time.Time
		leading time.Time
		due     bool
	}{
		{"never written", nil, turn, time.Time{}, true},
		{"written after its phase, just before it comes round again", at(time.Second), turn.Add(lastSyncRefresh - time.Second), time.Time{}, false},
		{"written after its phase, a period later", at(time.Second), turn.Add(lastSyncRefresh + time.Second), time.Time{}, true},
		{"written before its phase, a second after it", at(-time.Second), turn.Add(time.Second), time.Time{}, true},
		{"an hour old, in a new leader's grace", at(-time.Hour), turn.Add(time.Second), turn.Add(-lastSyncGrace / 2), false},
		{"an hour old, after the grace but before its phase", at(-time.Hour), turn.Add(-time.Second), turn.Add(-lastSyncGrace - 2*time.Second), false},
		{"an hour old, at its phase after the grace", at(-time.Hour), turn.Add(time.Second), turn.Add(-lastSyncGrace - 2*time.Second), true},
	} {
		if got := lastSyncDue(tc.last, tc.now, tc.leading, uid); got != tc.due {
			t.Errorf("%s: due = %v, want %v", tc.name, got, tc.due)
		}
	}
}

func TestLastSyncPhase_SpreadsObjectsOverThePeriod(t *testing.T) {
	const n = 1000
	var quarters [4]int
	for i := range n {
		quarters[lastSyncPhase(types.UID(fmt.Sprintf("uid-%d", i)))*4/lastSyncRefresh]++
	}
	for q, c := range quarters {
		if c < n/4-n/10 || c > n/4+n/10 {
			t.Errorf("quarter %d of the period holds %d of %d phases: %v", q, c, n, quarters)
		}
	}
}

func TestLastSyncDue_ANewLeaderOverStatusesAllOldRefreshesThemSpread(t *testing.T) {
	// A thousand statuses written together an hour ago; a leader starts.
	leading := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	last := metav1.NewTime(leading.Add(-time.Hour))
	dueBy := func(now time.Time) int {
		n := 0
		for i := range 1000 {
			if lastSyncDue(&last, now, leading, types.UID(fmt.Sprintf("uid-%d", i))) {
				n++
			}
		}
		return n
	}
	if n := dueBy(leading.Add(lastSyncGrace - time.Second)); n != 0 {
		t.Errorf("%d due in the grace, want 0", n)
	}
	if n := dueBy(leading.Add(lastSyncGrace + lastSyncRefresh/2)); n < 350 || n > 650 {
		t.Errorf("%d due half a period after the grace, want about half", n)
	}
	if n := dueBy(leading.Add(lastSyncGrace + lastSyncRefresh + time.Second)); n != 1000 {
		t.Errorf("%d due a period after the grace, want all", n)
	}
}
