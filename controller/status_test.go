package controller

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/eurekube/eurekube/api/v1alpha1"
	"github.com/eurekube/eurekube/internal/ownership"
)

// Pure unit tests of the status computation (nextStatus) and its
// messages. Those of each concern are in the file named after it
// (pods_test.go, orphans_test.go, …), their builders in fixtures_test.go.
// (They share the package's test binary, whose TestMain starts the real
// servers the suite needs, except in -short mode.)

func TestNextStatus(t *testing.T) {
	now := metav1.NewTime(time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC))
	earlier := metav1.NewTime(now.Add(-time.Minute))
	deleting := func(s *v1alpha1.EurekaSyncer) { s.DeletionTimestamp = &now }
	withCounts := func(s *v1alpha1.EurekaSyncer) {
		s.Status.RegisteredInstances, s.Status.UpInstances, s.Status.LastSyncTime = 7, 6, &earlier
	}
	type want struct {
		selected, injected, ready, registered, up int32
		readyColumn                               string
		synced, reachable, injectedCond           metav1.ConditionStatus
		syncedReason                              string
		exclusive, drained                        metav1.ConditionStatus // "" is True
		mentions                                  []string               // in some condition message
		lastSync                                  *metav1.Time
	}
	cases := []struct {
		name   string
		syncer *v1alpha1.EurekaSyncer
		obs    observed
		want   want
	}{{
		name:   "three injected ready pods with three UP instances are Synced and read 3/3",
		syncer: syncerFixture(),
		obs:    observed{pods: podCounts{selected: 3, injected: 3, ready: 3}, instances: instancesFixture("UP", "UP", "UP")},
		want: want{selected: 3, injected: 3, ready: 3, registered: 3, up: 3, readyColumn: "3/3", synced: "True", reachable: "True", injectedCond: "True",
			syncedReason: reasonInSync, lastSync: &now},
	}, {
		name:   "a selected pod without the registrar is named and the syncer is not Synced",
		syncer: syncerFixture(),
		obs:    observed{pods: podCounts{selected: 2, injected: 1, ready: 2, notInjected: []string{"orders-legacy"}}, instances: instancesFixture("UP")},
		want: want{selected: 2, injected: 1, ready: 2, registered: 1, up: 1, readyColumn: "1/2", synced: "False", reachable: "True", injectedCond: "False",
			syncedReason: "PodsWithoutRegistrar", mentions: []string{"orders-legacy"}, lastSync: &now},
	}, {
		name:   "fewer instances UP than ready pods is not Synced",
		syncer: syncerFixture(),
		obs:    observed{pods: podCounts{selected: 2, injected: 2, ready: 2}, instances: instancesFixture("UP", "STARTING")},
		want: want{selected: 2, injected: 2, ready: 2, registered: 2, up: 1, readyColumn: "1/2", synced: "False", reachable: "True", injectedCond: "True",
			syncedReason: reasonNotAllRegistered, lastSync: &now},
	}, {
		name:   "two selected pods of which none is ready and no instance UP are not Synced",
		syncer: syncerFixture(),
		obs:    observed{pods: podCounts{selected: 2, injected: 2}, instances: instancesFixture("STARTING", "DOWN")},
		want: want{selected: 2, injected: 2, registered: 2, readyColumn: "0/2", synced: "False", reachable: "True", injectedCond: "True",
			syncedReason: reasonNoInstanceUp, mentions: []string{"2 pod(s) selected, 0 ready", "no instance is UP"}, lastSync: &now},
	}, {
		name:   "more instances UP than ready pods is not Synced",
		syncer: syncerFixture(),
		obs:    observed{pods: podCounts{selected: 2, injected: 2, ready: 1}, instances: instancesFixture("UP", "UP")},
		want: want{selected: 2, injected: 2, ready: 1, registered: 2, up: 2, readyColumn: "2/2", synced: "False", reachable: "True", injectedCond: "True",
			syncedReason: reasonMoreUpThanReady, lastSync: &now},
	}, {
		name:   "nothing selected and nothing UP agree",
		syncer: syncerFixture(),
		obs:    observed{},
		want: want{readyColumn: "0/0", synced: "True", reachable: "True", injectedCond: "True",
			syncedReason: reasonNoPodSelected, lastSync: &now},
	}, {
		name:   "pods another syncer injected are not counted and the owner is named with the fix",
		syncer: syncerFixture(),
		obs: observed{pods: podCounts{ownedByOthers: map[string][]string{"orders-old": {"orders-1", "orders-2"}, "legacy": {"orders-3"}}},
			instances: nil},
		want: want{readyColumn: "0/0", synced: "True", reachable: "True", injectedCond: "True", syncedReason: reasonNoPodSelected,
			exclusive: "False", mentions: []string{"syncer legacy owns 1 (orders-3); syncer orders-old owns 2 (orders-1, orders-2)", "oldest", "narrow the selector", "belong to another syncer"}, lastSync: &now},
	}, {
		name:   "injected pods without a drain are named with the fix",
		syncer: syncerFixture(),
		obs:    observed{pods: podCounts{selected: 2, injected: 2, ready: 2, withoutDrain: []string{"orders-1", "orders-2"}}, instances: instancesFixture("UP", "UP")},
		want: want{selected: 2, injected: 2, ready: 2, registered: 2, up: 2, readyColumn: "2/2", synced: "True", reachable: "True", injectedCond: "True",
			syncedReason: reasonInSync, drained: "False", mentions: []string{"2 injected pod(s) have no drain", "orders-1, orders-2", "restart them"}, lastSync: &now},
	}, {
		name:   "Eureka failing keeps the last measured counts and names the URL",
		syncer: syncerFixture(withCounts),
		obs: observed{pods: podCounts{selected: 7, injected: 7, ready: 7},
			eurekaErr: errors.New("list ORDERS: GET http://127.0.0.1:9/eureka/apps/ORDERS: connection refused"), eurekaReason: reasonEurekaUnreachable},
		want: want{selected: 7, injected: 7, ready: 7, registered: 7, up: 6, readyColumn: "6/7", synced: "False", reachable: "False", injectedCond: "True",
			syncedReason: reasonEurekaUnreachable, mentions: []string{"http://127.0.0.1:9/eureka", "connection refused"}, lastSync: &earlier},
	}, {
		name:   "a syncer whose app another namespace owns is not Synced, even with nothing selected, and Synced names the refusal",
		syncer: syncerFixture(),
		obs:    observed{ownership: refusedBy("probe")},
		want: want{readyColumn: "0/0", synced: "False", reachable: "True", injectedCond: "True",
			syncedReason: ownership.ReasonOwnedElsewhere, mentions: []string{"see the Permitted condition", "no pod selected and no instance UP", "belongs to namespace probe"}, lastSync: &now},
	}, {
		name:   "a refused syncer whose pods were injected before is not Synced, and says what they still register",
		syncer: syncerFixture(),
		obs:    observed{ownership: refusedBy("probe"), pods: podCounts{selected: 2, injected: 2, ready: 2}, instances: instancesFixture("UP", "UP")},
		want: want{selected: 2, injected: 2, ready: 2, registered: 2, up: 2, readyColumn: "2/2", synced: "False", reachable: "True", injectedCond: "True",
			syncedReason: ownership.ReasonOwnedElsewhere, mentions: []string{"2 pod(s) selected, 2 ready, 2 instance(s) UP", "the 2 pod(s) injected before keep running"}, lastSync: &now},
	}, {
		name:   "a syncer app ownership refuses reads nothing, and Synced points to Permitted, not to Eureka",
		syncer: syncerFixture(),
		obs:    observed{ownership: refusedBy("probe"), eurekaErr: errNotContacted, eurekaReason: ownership.ReasonOwnedElsewhere},
		want: want{readyColumn: "0/0", synced: "False", reachable: "False", injectedCond: "True",
			syncedReason: ownership.ReasonOwnedElsewhere, mentions: []string{"nothing is synced, and no Eureka server is contacted: see the Permitted condition"}},
	}, {
		name:   "a deleted syncer is not Synced and says which pods are still being told to stop registering",
		syncer: syncerFixture(deleting),
		obs:    observed{detach: detachObserved{registrarPods: []string{"orders-1"}}, instances: instancesFixture("DOWN")},
		want: want{registered: 1, readyColumn: "0/0", synced: "False", reachable: "True", injectedCond: "True",
			syncedReason: reasonDetaching, mentions: []string{"orders-1", "stop registering", "DOWN"}, lastSync: &now},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, changed := nextStatus(tc.syncer, &tc.obs, now)
			if !changed {
				t.Error("changed = false, want true")
			}
			w := tc.want
			if got.SelectedPods != w.selected || got.InjectedPods != w.injected || got.ReadyPods != w.ready || got.RegisteredInstances != w.registered || got.UpInstances != w.up {
				t.Errorf("counts %+v, want %+v", got, w)
			}
			if got.Ready != w.readyColumn {
				t.Errorf("ready %q, want %q", got.Ready, w.readyColumn)
			}
			if got.AppName != "ORDERS" || got.ObservedGeneration != 3 {
				t.Errorf("appName %q observedGeneration %d", got.AppName, got.ObservedGeneration)
			}
			orTrue := func(s metav1.ConditionStatus) metav1.ConditionStatus {
				if s == "" {
					return metav1.ConditionTrue
				}
				return s
			}
			for typ, status := range map[string]metav1.ConditionStatus{
				v1alpha1.ConditionSynced: w.synced, v1alpha1.ConditionEurekaReachable: w.reachable, v1alpha1.ConditionPodsInjected: w.injectedCond,
				v1alpha1.ConditionExclusive: orTrue(w.exclusive), v1alpha1.ConditionDrained: orTrue(w.drained),
			} {
				if c := meta.FindStatusCondition(got.Conditions, typ); c == nil || c.Status != status || c.ObservedGeneration != 3 {
					t.Errorf("condition %s = %+v, want %s", typ, c, status)
				}
			}
			if c := meta.FindStatusCondition(got.Conditions, v1alpha1.ConditionSynced); c.Reason != w.syncedReason {
				t.Errorf("Synced reason %q, want %q", c.Reason, w.syncedReason)
			}
			var messages []string
			for _, c := range got.Conditions {
				messages = append(messages, c.Message)
			}
			for _, m := range w.mentions {
				if !strings.Contains(strings.Join(messages, "\n"), m) {
					t.Errorf("no condition message mentions %q: %q", m, messages)
				}
			}
			if !got.LastSyncTime.Equal(w.lastSync) {
				t.Errorf("lastSyncTime %v, want %v", got.LastSyncTime, w.lastSync)
			}
		})
	}
}

// Whatever the pods and instances, Synced is never True while pods are
// selected and no instance is UP.
func TestNextStatus_NeverSyncedWhilePodsAreSelectedAndNoneIsUp(t *testing.T) {
	now := metav1.Now()
	for selected := int32(1); selected <= 3; selected++ {
		for ready := int32(0); ready <= selected; ready++ {
			for _, notInjected := range [][]string{nil, {"plain"}} {
				obs := observed{pods: podCounts{selected: selected, injected: selected - int32(len(notInjected)), ready: ready, notInjected: notInjected},
					instances: instancesFixture("DOWN", "STARTING")}
				got, _ := nextStatus(syncerFixture(), &obs, now)
				if meta.IsStatusConditionTrue(got.Conditions, v1alpha1.ConditionSynced) {
					t.Errorf("selected %d ready %d not injected %v, 0 UP: Synced True", selected, ready, notInjected)
				}
			}
		}
	}
}

func TestNextStatus_AnUnchangedSyncerIsRewrittenOncePerRefreshPeriodAtItsPhase(t *testing.T) {
	s := syncerFixture()
	obs := observed{pods: podCounts{selected: 1, injected: 1, ready: 1}, instances: instancesFixture("UP")}
	// Written just after its phase came round: the next refresh is a
	// whole period later.
	start := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC).Truncate(lastSyncRefresh).Add(lastSyncPhase(s.UID) + time.Second)
	s.Status, _ = nextStatus(s, &obs, metav1.NewTime(start))
	for _, tc := range []struct {
		after time.Duration
		write bool
	}{{time.Second, false}, {lastSyncRefresh - 2*time.Second, false}, {lastSyncRefresh, true}} {
		if _, changed := nextStatus(s, &obs, metav1.NewTime(start.Add(tc.after))); changed != tc.write {
			t.Errorf("%v later: changed = %v, want %v", tc.after, changed, tc.write)
		}
	}
	obs.orphansRemoved = 1
	next, changed := nextStatus(s, &obs, metav1.NewTime(start.Add(time.Second)))
	if !changed || next.OrphansRemoved != 1 || !next.LastSyncTime.Equal(&metav1.Time{Time: start.Add(time.Second)}) {
		t.Errorf("after an orphan: changed %v, status %+v; want a write with a fresh lastSyncTime", changed, next)
	}
}

func TestNames_ListsFiveThenCountsTheRest(t *testing.T) {
	for _, tc := range []struct {
		in   []string
		want string
	}{
		{[]string{"a"}, "a"},
		{[]string{"a", "b", "c", "d", "e"}, "a, b, c, d, e"},
		{[]string{"a", "b", "c", "d", "e", "f", "g"}, "a, b, c, d, e and 2 more"},
	} {
		if got := names(tc.in); got != tc.want {
			t.Errorf("names(%v) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// refusedBy is app ownership's verdict on ORDERS when namespace owner
// claimed it first.
func refusedBy(owner string) *ownership.Verdict {
	return &ownership.Verdict{App: "ORDERS", Reason: ownership.ReasonOwnedElsewhere, Owner: owner,
		Message: "Eureka app ORDERS belongs to namespace " + owner + ", the first of this cluster to register it"}
}

// Whatever Synced measured, it is never True while Permitted is False; it
// then names Permitted's reason and keeps what it measured; a second pass
// changes nothing; and Synced is left alone while Permitted is True or
// absent, and while the syncer detaches.
func TestNotSyncedWhileRefused_SyncedIsNeverTrueWhilePermittedIsFalse(t *testing.T) {
	then := metav1.NewTime(time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC))
	statuses := []metav1.ConditionStatus{"", metav1.ConditionTrue, metav1.ConditionFalse, metav1.ConditionUnknown}
	syncedReasons := []string{reasonInSync, reasonNoPodSelected, reasonNoInstanceUp, reasonEurekaUnreachable, reasonDetaching, ownership.ReasonOwnedElsewhere}
	for _, permitted := range statuses {
		for _, synced := range statuses {
			for _, reason := range syncedReasons {
				var conds []metav1.Condition
				if permitted != "" {
					conds = append(conds, metav1.Condition{Type: v1alpha1.ConditionPermitted, Status: permitted, Reason: ownership.ReasonOwnedElsewhere,
						Message: "Eureka app ORDERS belongs to namespace probe", LastTransitionTime: then})
				}
				if synced != "" {
					conds = append(conds, metav1.Condition{Type: v1alpha1.ConditionSynced, Status: synced, Reason: reason,
						Message: "as measured", ObservedGeneration: 4, LastTransitionTime: then})
				}
				before := append([]metav1.Condition(nil), conds...)
				notSyncedWhileRefused(&conds)
				name := fmt.Sprintf("Permitted %q, Synced %q %s", permitted, synced, reason)
				got := meta.FindStatusCondition(conds, v1alpha1.ConditionSynced)
				was := meta.FindStatusCondition(before, v1alpha1.ConditionSynced)
				switch {
				case got == nil:
					if was != nil {
						t.Errorf("%s: Synced removed", name)
					}
				case permitted != metav1.ConditionFalse || reason == reasonDetaching:
					if *got != *was {
						t.Errorf("%s: Synced changed to %+v", name, got)
					}
				default:
					if got.Status != metav1.ConditionFalse || got.Reason != ownership.ReasonOwnedElsewhere || got.ObservedGeneration != 4 {
						t.Errorf("%s: Synced %+v, want False %s of generation 4", name, got, ownership.ReasonOwnedElsewhere)
					}
					if *got != *was && (!strings.Contains(got.Message, "see the Permitted condition") || !strings.Contains(got.Message, "as measured")) {
						t.Errorf("%s: Synced message %q names neither Permitted nor what was measured", name, got.Message)
					}
				}
				again := append([]metav1.Condition(nil), conds...)
				notSyncedWhileRefused(&again)
				if fmt.Sprint(again) != fmt.Sprint(conds) {
					t.Errorf("%s: a second pass changed %+v to %+v", name, conds, again)
				}
			}
		}
	}
}
