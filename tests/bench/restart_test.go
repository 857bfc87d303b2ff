package bench

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/eurekube/eurekube/api/v1alpha1"
)

func TestRestartFigures_CountTheAPIServersWritesLessItsOwnLeases(t *testing.T) {
	rs := restartRun{readyz: 3 * time.Second, pass: 1500 * time.Millisecond, objects: 1000, reconciles: 1000,
		writes: apiRequests{"PATCH eurekasyncers/status": 1000}, leases: 1}
	var r Results
	addRestartFigures(&r, "reconciler.1000x20", "1,000 syncers × 20 pods", ScaleTargets{RestartSeconds: 3, RestartWrites: Max(0)}, rs)
	if len(r.Figures) != 2 {
		t.Fatalf("%d figures, want 2", len(r.Figures))
	}
	pass, writes := r.Figures[0], r.Figures[1]
	if pass.ID != "reconciler.1000x20.restart_pass" || pass.Value != 1.5 || pass.Met == nil || !*pass.Met {
		t.Errorf("pass figure: %+v", pass)
	}
	if writes.Value != 1000 || writes.Met == nil || *writes.Met || !strings.Contains(writes.Missed, "1,000 PATCH eurekasyncers/status") {
		t.Errorf("writes figure: %+v", writes)
	}
	if !strings.Contains(pass.Anchor, "Lease renewals meanwhile: 1.00") {
		t.Errorf("pass anchor %q lacks the API server's own leases", pass.Anchor)
	}
}

func TestMeasuredFloor_IsTheStartToReadyzAndTheBenchsOwnPass(t *testing.T) {
	run := scaleRun{readyz: 3 * time.Second}
	if f := run.measuredFloor(); f != nil {
		t.Errorf("floor without the bench's own pass = %v, want none", *f)
	}
	if got := run.floorParts(); got != "no floor measured" {
		t.Errorf("floorParts = %q", got)
	}
	run.bare = bareWrites{count: 3000, took: 7500 * time.Millisecond, read: 500 * time.Millisecond}
	if f := run.measuredFloor(); f == nil || *f != 10.5 {
		t.Errorf("floor = %v, want 10.5 s", f)
	}
	if got := run.floorParts(); !strings.HasPrefix(got, "the floor 10.5 s: that start → /readyz and what the pass cannot do without, done by the bench alone (7.50 s: 0.500 s the registry's full read, then 3,000 writes") {
		t.Errorf("floorParts = %q", got)
	}
}

func TestRestartChanges_NameTheStatusFieldsAndEventReasons(t *testing.T) {
	at := func(s int) *metav1.Time {
		t := metav1.NewTime(time.Date(2026, 11, 22, 12, 0, s, 0, time.UTC))
		return &t
	}
	was := v1alpha1.EurekaSyncerStatus{UpInstances: 2, LastSyncTime: at(0), Conditions: []metav1.Condition{
		{Type: "Synced", Status: metav1.ConditionTrue, Reason: "InSync", Message: "2 UP"},
		{Type: "EurekaReachable", Status: metav1.ConditionTrue, Reason: "Reachable"}}}
	now := *was.DeepCopy()
	now.LastSyncTime = at(1)
	now.Conditions[0].Message = "3 UP"
	now.Conditions = now.Conditions[:1]
	if got, want := strings.Join(statusFieldChanges(was, now), ", "), "lastSyncTime, conditions[EurekaReachable] removed, conditions[Synced].message"; got != want {
		t.Errorf("statusFieldChanges = %q, want %q", got, want)
	}
	if got := statusFieldChanges(was, *was.DeepCopy()); len(got) != 0 {
		t.Errorf("an unchanged status: %q", got)
	}
	ch := restartChanges{fields: map[string]int{"lastSyncTime": 600, "conditions[Synced].message": 2},
		events: map[string]int{"Warning SyncFailed": 3}, notes: map[string]string{"Warning SyncFailed": "EurekaSyncer ns/a: boom"}}
	if got, want := ch.String(), "syncers whose status changed, by field: 600 lastSyncTime, 2 conditions[Synced].message; new Events by type and reason: 3 Warning SyncFailed (such as EurekaSyncer ns/a: boom)"; got != want {
		t.Errorf("String = %q\nwant %q", got, want)
	}
	if got := (restartChanges{}).String(); got != "no status field and no Event changed" {
		t.Errorf("nothing changed: %q", got)
	}
}
