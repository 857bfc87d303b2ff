package controller

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/eurekube/eurekube/api/v1alpha1"
	"github.com/eurekube/eurekube/eureka"
)

// Pure unit tests of the status computation, the pod counts and the orphan
// suspects. (They share the package's test binary, whose TestMain starts
// the real servers the acceptance tests need.)

func syncerFixture(mutate ...func(*v1alpha1.EurekaSyncer)) *v1alpha1.EurekaSyncer {
	s := &v1alpha1.EurekaSyncer{ObjectMeta: metav1.ObjectMeta{Name: "orders", Namespace: "shop", Generation: 3}}
	for _, m := range mutate {
		m(s)
	}
	return s
}

func instancesFixture(statuses ...eureka.Status) []eureka.Instance {
	out := make([]eureka.Instance, len(statuses))
	for i, st := range statuses {
		out[i] = eureka.Instance{App: "ORDERS", InstanceID: fmt.Sprintf("orders-%d:orders:8080", i), Status: st}
	}
	return out
}

func TestNextStatus(t *testing.T) {
	now := metav1.NewTime(time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC))
	earlier := metav1.NewTime(now.Add(-time.Minute))
	deleting := func(s *v1alpha1.EurekaSyncer) { s.DeletionTimestamp = &now }
	withCounts := func(s *v1alpha1.EurekaSyncer) {
		s.Status.RegisteredInstances, s.Status.UpInstances, s.Status.LastSyncTime = 7, 6, &earlier
	}
	type want struct {
		selected, injected, ready, registered, up int32
		readyCond, reachable, injectedCond        metav1.ConditionStatus
		readyReason                               string
		mentions                                  []string // in some condition message
		lastSync                                  *metav1.Time
	}
	cases := []struct {
		name   string
		syncer *v1alpha1.EurekaSyncer
		obs    observed
		want   want
	}{{
		name:   "three injected ready pods with three UP instances are Ready",
		syncer: syncerFixture(),
		obs:    observed{pods: podCounts{selected: 3, injected: 3, ready: 3}, instances: instancesFixture("UP", "UP", "UP")},
		want: want{selected: 3, injected: 3, ready: 3, registered: 3, up: 3, readyCond: "True", reachable: "True", injectedCond: "True",
			readyReason: "Registered", lastSync: &now},
	}, {
		name:   "a selected pod without the registrar is named and the syncer is not Ready",
		syncer: syncerFixture(),
		obs:    observed{pods: podCounts{selected: 2, injected: 1, ready: 2, notInjected: []string{"orders-legacy"}}, instances: instancesFixture("UP")},
		want: want{selected: 2, injected: 1, ready: 2, registered: 1, up: 1, readyCond: "False", reachable: "True", injectedCond: "False",
			readyReason: "PodsWithoutRegistrar", mentions: []string{"orders-legacy"}, lastSync: &now},
	}, {
		name:   "fewer instances UP than ready pods is not Ready",
		syncer: syncerFixture(),
		obs:    observed{pods: podCounts{selected: 2, injected: 2, ready: 2}, instances: instancesFixture("UP", "STARTING")},
		want: want{selected: 2, injected: 2, ready: 2, registered: 2, up: 1, readyCond: "False", reachable: "True", injectedCond: "True",
			readyReason: "NotAllRegistered", lastSync: &now},
	}, {
		name:   "Eureka failing keeps the last measured counts and names the URL",
		syncer: syncerFixture(withCounts),
		obs: observed{pods: podCounts{selected: 7, injected: 7, ready: 7},
			eurekaErr: errors.New("list ORDERS: GET http://127.0.0.1:9/eureka/apps/ORDERS: connection refused"), eurekaReason: reasonEurekaUnreachable},
		want: want{selected: 7, injected: 7, ready: 7, registered: 7, up: 6, readyCond: "False", reachable: "False", injectedCond: "True",
			readyReason: reasonEurekaUnreachable, mentions: []string{"http://127.0.0.1:9/eureka", "connection refused"}, lastSync: &earlier},
	}, {
		name:   "a deleted syncer is not Ready and says which pods to restart",
		syncer: syncerFixture(deleting),
		obs:    observed{registrarPods: []string{"orders-1"}, instances: instancesFixture("DOWN")},
		want: want{registered: 1, readyCond: "False", reachable: "True", injectedCond: "True",
			readyReason: "Detaching", mentions: []string{"orders-1", "restart"}, lastSync: &now},
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
			if got.AppName != "ORDERS" || got.ObservedGeneration != 3 {
				t.Errorf("appName %q observedGeneration %d", got.AppName, got.ObservedGeneration)
			}
			for typ, status := range map[string]metav1.ConditionStatus{v1alpha1.ConditionReady: w.readyCond, v1alpha1.ConditionEurekaReachable: w.reachable, v1alpha1.ConditionPodsInjected: w.injectedCond} {
				if c := meta.FindStatusCondition(got.Conditions, typ); c == nil || c.Status != status || c.ObservedGeneration != 3 {
					t.Errorf("condition %s = %+v, want %s", typ, c, status)
				}
			}
			if c := meta.FindStatusCondition(got.Conditions, v1alpha1.ConditionReady); c.Reason != w.readyReason {
				t.Errorf("Ready reason %q, want %q", c.Reason, w.readyReason)
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

func TestNextStatus_AnUnchangedSyncerIsRewrittenOnlyWhenLastSyncTimeGetsOld(t *testing.T) {
	s := syncerFixture()
	obs := observed{pods: podCounts{selected: 1, injected: 1, ready: 1}, instances: instancesFixture("UP")}
	start := metav1.NewTime(time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC))
	s.Status, _ = nextStatus(s, &obs, start)
	for _, tc := range []struct {
		after time.Duration
		write bool
	}{{time.Second, false}, {lastSyncRefresh - time.Second, false}, {lastSyncRefresh, true}} {
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

func TestCountPods_TerminatingAndFinishedPodsAreNotSelectedButKeepTheirInstances(t *testing.T) {
	now := metav1.Now()
	pod := func(name string, registrar, ready bool, mutate ...func(*corev1.Pod)) corev1.Pod {
		p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name)},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app"}}}}
		if registrar {
			p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: v1alpha1.RegistrarContainerName})
		}
		status := corev1.ConditionFalse
		if ready {
			status = corev1.ConditionTrue
		}
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: status}}
		for _, m := range mutate {
			m(&p)
		}
		return p
	}
	got := countPods([]corev1.Pod{
		pod("b-ready", true, true),
		pod("c-starting", true, false),
		pod("a-plain", false, true),
		pod("terminating", true, true, func(p *corev1.Pod) { p.DeletionTimestamp = &now }),
		pod("done", true, false, func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded }),
	})
	if got.selected != 3 || got.injected != 2 || got.ready != 2 || strings.Join(got.notInjected, ",") != "a-plain" || len(got.uids) != 5 {
		t.Errorf("countPods = %+v", got)
	}
}

func TestOrphanSuspects_OnlyInstancesNamingAnUnknownPodUID(t *testing.T) {
	inst := func(uid string) eureka.Instance {
		return eureka.Instance{InstanceID: "i-" + uid, Metadata: map[string]string{eureka.MetaPodUID: uid}}
	}
	known := map[types.UID]struct{}{"alive": {}}
	got := orphanSuspects([]eureka.Instance{inst("alive"), inst("gone"), inst(""), {InstanceID: "no-metadata"}}, known)
	if len(got) != 1 {
		t.Fatalf("suspects %v, want only gone", got)
	}
	if _, ok := got["gone"]; !ok {
		t.Fatalf("suspects %v, want gone", got)
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
