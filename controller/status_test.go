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

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/eurekube/eurekube/api/v1alpha1"
	"github.com/eurekube/eurekube/eureka"
	"github.com/eurekube/eurekube/webhook"
)

// Pure unit tests of the status computation, the pod counts and the orphan
// suspects. (They share the package's test binary, whose TestMain starts
// the real servers the acceptance tests need, except in -short mode.)

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

// podFixture builds a pod; annotations come as key, value pairs.
func podFixture(name string, registrar, ready bool, annotations ...string) corev1.Pod {
	p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name), Annotations: map[string]string{}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app"}}}}
	if registrar {
		p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: v1alpha1.RegistrarContainerName})
	}
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: status}}
	for i := 0; i+1 < len(annotations); i += 2 {
		p.Annotations[annotations[i]] = annotations[i+1]
	}
	return p
}

// injectedBy are the annotations the webhook puts on a pod it injected.
func injectedBy(syncer string, drain string, adaptations ...v1alpha1.Adaptation) []string {
	a := []string{v1alpha1.SyncerAnnotation, syncer, v1alpha1.StatusAnnotation, v1alpha1.StatusInjected, v1alpha1.DrainAnnotation, drain}
	if len(adaptations) > 0 {
		a = append(a, v1alpha1.AdaptationsAnnotation, v1alpha1.EncodeAdaptations(adaptations))
	}
	return a
}

// count classifies pods for the syncer orders, the webhook injecting
// registrarImage.
func count(pods []corev1.Pod, registrarImage string) podCounts {
	return countPods(pods, syncerFixture(), webhook.Defaults{RegistrarImage: registrarImage}, nil, time.Now())
}

func TestCountPods_TerminatingPodsKeepTheirInstancesFinishedOnesDoNot(t *testing.T) {
	now := metav1.Now()
	terminating := podFixture("terminating", true, true, injectedBy("orders", "100")...)
	terminating.DeletionTimestamp = &now
	done := podFixture("done", true, false, injectedBy("orders", "100")...)
	done.Status.Phase = corev1.PodSucceeded
	evicted := podFixture("evicted", true, false, injectedBy("orders", "100")...)
	evicted.Status.Phase, evicted.Status.Reason = corev1.PodFailed, "Evicted"
	got := count([]corev1.Pod{
		podFixture("b-ready", true, true, injectedBy("orders", "100")...),
		podFixture("c-starting", true, false, injectedBy("orders", "100")...),
		podFixture("a-plain", false, true),
		terminating, done, evicted,
	}, "")
	if got.selected != 3 || got.injected != 2 || got.ready != 2 || strings.Join(got.notInjected, ",") != "a-plain" {
		t.Errorf("countPods = %+v", got)
	}
	for _, pod := range []string{"a-plain", "b-ready", "c-starting", "terminating"} {
		if _, ok := got.uids[types.UID("uid-"+pod)]; !ok {
			t.Errorf("the instance of %s would count as an orphan", pod)
		}
	}
	for _, pod := range []string{"done", "evicted"} {
		if _, ok := got.uids[types.UID("uid-"+pod)]; ok {
			t.Errorf("the instance of finished pod %s would not count as an orphan", pod)
		}
	}
}

func TestCountPods_CountsOnlyThePodsThisSyncerOwns(t *testing.T) {
	skipped := []string{v1alpha1.SyncerAnnotation, "orders", v1alpha1.StatusAnnotation, v1alpha1.StatusSkipped,
		v1alpha1.AdaptationsAnnotation, v1alpha1.EncodeAdaptations([]v1alpha1.Adaptation{{Reason: v1alpha1.AdaptationMeantToFinish, Message: "restartPolicy Never"}})}
	cases := []struct {
		name                      string
		pods                      []corev1.Pod
		selected, injected, ready int32
		skipped, ownedByOthers    int32
		notInjected, withoutDrain string
		owners                    map[string]string // owner → pods
	}{{
		name:     "pods this syncer injected are counted",
		pods:     []corev1.Pod{podFixture("orders-1", true, true, injectedBy("orders", "100")...), podFixture("orders-2", true, false, injectedBy("orders", "100")...)},
		selected: 2, injected: 2, ready: 1,
	}, {
		name: "pods another syncer injected are counted as its own and by owner",
		pods: []corev1.Pod{
			podFixture("orders-1", true, true, injectedBy("orders-old", "100")...),
			podFixture("orders-2", true, true, injectedBy("orders-old", "100")...),
			podFixture("orders-3", true, true, injectedBy("legacy", "0")...),
		},
		ownedByOthers: 3, owners: map[string]string{"orders-old": "orders-1,orders-2", "legacy": "orders-3"},
	}, {
		name:     "a pod skipped on purpose is neither selected nor without the registrar",
		pods:     []corev1.Pod{podFixture("migrate-x7", false, true, skipped...), podFixture("orders-1", true, true, injectedBy("orders", "100")...)},
		selected: 1, injected: 1, ready: 1, skipped: 1,
	}, {
		name:     "a pod no syncer injected is selected and named without the registrar",
		pods:     []corev1.Pod{podFixture("orders-before-label", false, true)},
		selected: 1, ready: 1, notInjected: "orders-before-label",
	}, {
		name: "injected pods whose drain is absent, 0 or unreadable are without drain",
		pods: []corev1.Pod{
			podFixture("orders-1", true, true, injectedBy("orders", "100")...),
			podFixture("orders-2", true, true, injectedBy("orders", "0")...),
			podFixture("orders-3", true, true, v1alpha1.SyncerAnnotation, "orders", v1alpha1.StatusAnnotation, v1alpha1.StatusInjected),
			podFixture("orders-4", true, true, injectedBy("orders", "many")...),
		},
		selected: 4, injected: 4, ready: 4, withoutDrain: "orders-2,orders-3,orders-4",
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := count(tc.pods, "")
			if got.selected != tc.selected || got.injected != tc.injected || got.ready != tc.ready || got.skipped != tc.skipped || got.ownedByOthersCount() != tc.ownedByOthers {
				t.Errorf("selected %d injected %d ready %d skipped %d owned by others %d, want %d %d %d %d %d",
					got.selected, got.injected, got.ready, got.skipped, got.ownedByOthersCount(), tc.selected, tc.injected, tc.ready, tc.skipped, tc.ownedByOthers)
			}
			if n := strings.Join(got.notInjected, ","); n != tc.notInjected {
				t.Errorf("not injected %q, want %q", n, tc.notInjected)
			}
			if n := strings.Join(got.withoutDrain, ","); n != tc.withoutDrain {
				t.Errorf("without drain %q, want %q", n, tc.withoutDrain)
			}
			if len(got.ownedByOthers) != len(tc.owners) {
				t.Errorf("owners %v, want %v", got.ownedByOthers, tc.owners)
			}
			for owner, pods := range tc.owners {
				if n := strings.Join(got.ownedByOthers[owner], ","); n != pods {
					t.Errorf("owned by %s: %q, want %q", owner, n, pods)
				}
			}
		})
	}
}

func TestCountPods_NamesThePodsOnAnOlderRegistrar(t *testing.T) {
	onImage := func(name, syncer, image string) corev1.Pod {
		return podFixture(name, true, true, append(injectedBy(syncer, "100"), v1alpha1.RegistrarImageAnnotation, image)...)
	}
	beforeImagesWereRecorded := podFixture("orders-4", true, true, injectedBy("orders", "100")...)
	beforeImagesWereRecorded.Spec.Containers[1].Image = "eurekube/registrar:1.0"
	rewrittenToADigest := onImage("orders-5", "orders", "eurekube/registrar:2.0")
	rewrittenToADigest.Spec.Containers[1].Image = "eurekube/registrar@sha256:0123"
	pods := []corev1.Pod{
		onImage("orders-2", "orders", "eurekube/registrar:1.0"),
		onImage("orders-1", "orders", "eurekube/registrar:1.0"),
		onImage("orders-3", "orders", "eurekube/registrar:2.0"),
		beforeImagesWereRecorded,
		rewrittenToADigest,
		onImage("payments-1", "payments", "eurekube/registrar:1.0"), // another syncer's
	}
	if got := strings.Join(count(pods, "eurekube/registrar:2.0").outdated, ","); got != "orders-1,orders-2,orders-4" {
		t.Errorf("outdated = %q, want orders-1,orders-2,orders-4 (the image the webhook recorded counts, else the container's)", got)
	}
	if got := count(pods, "").outdated; len(got) != 0 {
		t.Errorf("outdated = %q with no current image known, want none", got)
	}
	s := &v1alpha1.EurekaSyncer{ObjectMeta: metav1.ObjectMeta{Name: "orders"}}
	c := registrarCurrent(s, &observed{pods: count(pods, "eurekube/registrar:2.0")})
	if c.Status != metav1.ConditionFalse || !strings.Contains(c.Message, "orders-1, orders-2, orders-4") || !strings.Contains(c.Message, "rollout restart") {
		t.Errorf("RegistrarCurrent = %s %q, want False naming the pods and the fix", c.Status, c.Message)
	}
}

func TestCountPods_AggregatesAdaptationsPerReason(t *testing.T) {
	composed := v1alpha1.Adaptation{Reason: v1alpha1.AdaptationPreStopComposed, Message: "container app: its exec preStop runs, then the 100 s drain"}
	noPort := v1alpha1.Adaptation{Reason: v1alpha1.AdaptationPortNotDeclared, Message: "no container declares port 8080"}
	var pods []corev1.Pod
	for i := 7; i >= 1; i-- { // out of order: examples come sorted
		pods = append(pods, podFixture(fmt.Sprintf("orders-%d", i), true, true, injectedBy("orders", "100", composed)...))
	}
	pods = append(pods,
		podFixture("orders-8", true, true, injectedBy("orders", "100", composed, noPort)...),
		podFixture("orders-9", true, true, v1alpha1.SyncerAnnotation, "orders", v1alpha1.StatusAnnotation, v1alpha1.StatusInjected,
			v1alpha1.DrainAnnotation, "100", v1alpha1.AdaptationsAnnotation, "{not json"),
		podFixture("orders-10", true, true, injectedBy("orders", "100", v1alpha1.Adaptation{Reason: "bad reason!", Message: "x"})...),
		podFixture("theirs-1", true, true, injectedBy("payments", "100", noPort)...), // another syncer's: not ours to report
		podFixture("orders-11", true, true, injectedBy("orders", "100")...),          // nothing adapted
	)
	got := count(pods, "").adaptations
	want := []v1alpha1.PodAdaptations{
		{Reason: v1alpha1.AdaptationsUnreadable, Pods: 2, ExamplePods: []string{"orders-10", "orders-9"}},
		{Reason: v1alpha1.AdaptationPortNotDeclared, Pods: 1, Message: noPort.Message, ExamplePods: []string{"orders-8"}},
		{Reason: v1alpha1.AdaptationPreStopComposed, Pods: 8, Message: composed.Message, ExamplePods: []string{"orders-1", "orders-2", "orders-3", "orders-4", "orders-5"}},
	}
	if len(got) != len(want) {
		t.Fatalf("adaptations %+v, want %+v", got, want)
	}
	for i := range want {
		g, w := got[i], want[i]
		if g.Reason != w.Reason || g.Pods != w.Pods || strings.Join(g.ExamplePods, ",") != strings.Join(w.ExamplePods, ",") {
			t.Errorf("adaptations[%d] = %+v, want %+v", i, g, w)
		}
		if w.Message != "" && g.Message != w.Message {
			t.Errorf("adaptations[%d].message = %q, want %q", i, g.Message, w.Message)
		}
	}
	if !strings.Contains(got[0].Message, v1alpha1.AdaptationsAnnotation) {
		t.Errorf("unreadable message %q does not name the annotation", got[0].Message)
	}
}

func TestAdaptationEvents_OnePerReasonWhoseSetChanged(t *testing.T) {
	composed := func(pods int32, examples ...string) v1alpha1.PodAdaptations {
		return v1alpha1.PodAdaptations{Reason: v1alpha1.AdaptationPreStopComposed, Pods: pods, Message: "composed", ExamplePods: examples}
	}
	disabled := v1alpha1.PodAdaptations{Reason: v1alpha1.AdaptationDrainDisabled, Pods: 1, Message: "drain 0", ExamplePods: []string{"orders-1"}}
	cases := []struct {
		name       string
		prev, next []v1alpha1.PodAdaptations
		want       []string // type/reason
	}{
		{"nothing before, nothing now", nil, nil, nil},
		{"new reasons are reported once each, with their type", nil, []v1alpha1.PodAdaptations{disabled, composed(3, "a", "b", "c")},
			[]string{"Warning/DrainDisabled", "Normal/PreStopComposed"}},
		{"the same set is not reported again", []v1alpha1.PodAdaptations{composed(3, "a", "b", "c")}, []v1alpha1.PodAdaptations{composed(3, "a", "b", "c")}, nil},
		{"a changed count is reported", []v1alpha1.PodAdaptations{composed(3, "a", "b", "c")}, []v1alpha1.PodAdaptations{composed(2, "a", "b")},
			[]string{"Normal/PreStopComposed"}},
		{"a replaced pod is reported", []v1alpha1.PodAdaptations{composed(2, "a", "b")}, []v1alpha1.PodAdaptations{composed(2, "a", "c")},
			[]string{"Normal/PreStopComposed"}},
		{"a reason gone is reported as Normal", []v1alpha1.PodAdaptations{disabled, composed(1, "a")}, []v1alpha1.PodAdaptations{composed(1, "a")},
			[]string{"Normal/DrainDisabled"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, e := range adaptationEvents(tc.prev, tc.next) {
				got = append(got, e.eventType+"/"+string(e.reason))
				if e.note == "" {
					t.Errorf("event %s has no note", e.reason)
				}
			}
			if strings.Join(got, " ") != strings.Join(tc.want, " ") {
				t.Errorf("events %v, want %v", got, tc.want)
			}
		})
	}
}

func TestAdaptationNote_SaysHowManyWhichAndWhat(t *testing.T) {
	got := adaptationNote(v1alpha1.PodAdaptations{Reason: v1alpha1.AdaptationPreStopComposed, Pods: 7, Message: "its exec preStop runs, then the drain",
		ExamplePods: []string{"a", "b", "c", "d", "e"}})
	want := "7 running pod(s) of this syncer (a, b, c, d, e and 2 more); a: its exec preStop runs, then the drain"
	if got != want {
		t.Errorf("note %q, want %q", got, want)
	}
}

func TestEventTypes_WarningForWhatCanCostCalls(t *testing.T) {
	for reason, want := range map[v1alpha1.AdaptationReason]string{
		v1alpha1.AdaptationDrainDisabled: "Warning", v1alpha1.AdaptationPortNotDeclared: "Warning", v1alpha1.AdaptationPreStopDropped: "Warning",
		v1alpha1.AdaptationMeantToFinish: "Warning", v1alpha1.AdaptationsUnreadable: "Warning", "SomethingNew": "Warning",
		v1alpha1.AdaptationPreStopComposed: "Normal", v1alpha1.AdaptationRegistrarPortMoved: "Normal", v1alpha1.AdaptationHostNetwork: "Normal",
	} {
		if got := adaptationEventType(reason); got != want {
			t.Errorf("%s: %s, want %s", reason, got, want)
		}
	}
}

func TestSetAdaptationGauges_ASeriesGoesWithItsReasonAndItsSyncer(t *testing.T) {
	s := syncerFixture(func(s *v1alpha1.EurekaSyncer) { s.Namespace = "gauge-test" })
	count := func() int {
		ch := make(chan prometheus.Metric, 100)
		adaptationsGauge.Collect(ch)
		close(ch)
		return len(ch)
	}
	value := func(reason string) float64 {
		var m dto.Metric
		if err := adaptationsGauge.WithLabelValues("gauge-test", "orders", reason).Write(&m); err != nil {
			t.Fatal(err)
		}
		return m.GetGauge().GetValue()
	}
	base := count()
	setAdaptationGauges(s, []v1alpha1.PodAdaptations{{Reason: v1alpha1.AdaptationDrainDisabled, Pods: 2}, {Reason: v1alpha1.AdaptationPreStopComposed, Pods: 3}})
	if got := value("PreStopComposed"); got != 3 || count() != base+2 {
		t.Fatalf("PreStopComposed %v, %d series; want 3, %d", got, count(), base+2)
	}
	setAdaptationGauges(s, []v1alpha1.PodAdaptations{{Reason: v1alpha1.AdaptationPreStopComposed, Pods: 1}})
	if count() != base+1 {
		t.Fatalf("%d series after DrainDisabled went, want %d", count(), base+1)
	}
	forgetMetrics(s.Namespace, s.Name)
	if count() != base {
		t.Fatalf("%d series after the syncer went, want %d", count(), base)
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
