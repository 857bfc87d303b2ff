package controller

import (
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/eurekube/eurekube/api/v1alpha1"
)

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
		{Reason: v1alpha1.AdaptationsUnreadable, Pods: 1, ExamplePods: []string{"orders-9"}},
		{Reason: v1alpha1.AdaptationPortNotDeclared, Pods: 1, Message: noPort.Message, ExamplePods: []string{"orders-8"}},
		{Reason: v1alpha1.AdaptationPreStopComposed, Pods: 8, Message: composed.Message, ExamplePods: []string{"orders-1", "orders-2", "orders-3", "orders-4", "orders-5"}},
		{Reason: v1alpha1.AdaptationUnknown, Pods: 1, ExamplePods: []string{"orders-10"}},
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
