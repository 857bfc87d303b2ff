package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/eurekube/eurekube/api/v1alpha1"
	"github.com/eurekube/eurekube/tests/harness"
	"github.com/eurekube/eurekube/tests/sandbox"
)

func TestScale_EurekaListsExactlyTheReadyPods(t *testing.T) {
	app := sandbox.App{Namespace: "catalog", Name: "catalog", Replicas: 3, DrainSeconds: ptr.To[int32](2)}
	deploy(t, app)
	t.Logf("3 pods: Eureka listed exactly the ready pods after %s", settle(t, app, 3, 90*time.Second).Round(time.Millisecond))
	for _, n := range []int32{5, 2} {
		scale(t, app, n)
		t.Logf("scaled to %d: Eureka listed exactly the ready pods after %s", n, settle(t, app, int(n), 15*time.Second).Round(time.Millisecond))
	}
}

// A rolling update while a Spring client calls the service by name: no call
// fails. Then another rollout during which the leading manager replica is
// killed: pods keep being created, each with the registrar (through the
// surviving replica), the other replica takes the reconciler over, and
// still no call fails.
func TestRollingUpdate_NoCallFails(t *testing.T) {
	app := sandbox.App{Namespace: "shop", Name: "orders", Replicas: 3, DrainSeconds: ptr.To[int32](drainSeconds)}
	deploy(t, app)
	settle(t, app, 3, 90*time.Second)
	v, err := sb.Look(context.Background(), app)
	if err != nil {
		t.Fatal(err)
	}
	c := startClient(t, app.Name)
	waitAnswered(t, c, harness.SpringStats{}, v.ReadyPods)

	before := stats(t, c)
	start := time.Now()
	rollout(t, app, "2")
	pods := waitRolledOut(t, app, "2", 90*time.Second)
	waitAnswered(t, c, before, pods)
	d := stats(t, c).Since(before)
	t.Logf("rollout to version 2 in %s: %d calls by name, %d failed, answered by %v", time.Since(start).Round(time.Second), d.OK+d.Failed, d.Failed, d.ByInstance)
	if d.Failed != 0 {
		t.Errorf("%d of %d calls failed during the rollout with a %d s drain; last error: %s", d.Failed, d.OK+d.Failed, drainSeconds, d.LastError)
	}

	t.Run("ManagerReplicaKilled", func(t *testing.T) {
		lead := leader(t)
		before := stats(t, c)
		rollout(t, app, "3")
		harness.Eventually(t, 30*time.Second, "the first pod of version 3 exists", func() error {
			v, err := sb.Look(context.Background(), app)
			if err != nil {
				return err
			}
			for _, p := range v.Pods {
				if p.Annotations[versionKey] == "3" {
					return nil
				}
			}
			return fmt.Errorf("no pod of version 3 yet")
		})
		sb.Eurekube.Managers[lead].Kill()
		t.Logf("killed manager replica %d (the leader) with SIGKILL", lead)

		pods := waitRolledOut(t, app, "3", 120*time.Second)
		var all corev1.PodList
		if err := sb.ControlPlane.Client.List(context.Background(), &all, client.InNamespace(app.Namespace)); err != nil {
			t.Fatal(err)
		}
		for _, p := range all.Items {
			if !slices.ContainsFunc(p.Spec.Containers, func(c corev1.Container) bool { return c.Name == v1alpha1.RegistrarContainerName }) {
				t.Errorf("pod %s runs without the registrar", p.Name)
			}
		}
		if survivor := leader(t); survivor == lead {
			t.Errorf("the killed replica %d still leads", lead)
		}
		harness.Eventually(t, 60*time.Second, "the surviving replica writes the syncer's status", func() error {
			var s v1alpha1.EurekaSyncer
			if err := sb.ControlPlane.Client.Get(context.Background(), types.NamespacedName{Namespace: app.Namespace, Name: app.Name}, &s); err != nil {
				return err
			}
			st := s.Status
			if st.ReadyPods != 3 || st.RegisteredInstances != 3 || st.InjectedPods != 3 {
				return fmt.Errorf("status ready %d registered %d injected %d, want 3 each", st.ReadyPods, st.RegisteredInstances, st.InjectedPods)
			}
			return nil
		})
		waitAnswered(t, c, before, pods)
		d := stats(t, c).Since(before)
		t.Logf("rollout to version 3 with the leader killed: %d calls by name, %d failed", d.OK+d.Failed, d.Failed)
		if d.Failed != 0 {
			t.Errorf("%d of %d calls failed; last error: %s", d.Failed, d.OK+d.Failed, d.LastError)
		}
	})
}

// Spring teams often give the app a preStop of their own (a few seconds of
// sleep for kube-proxy). The webhook composes it with the drain: the pod
// keeps serving for the drain, then for its own hook, and no call fails.
// The pod records the composition and the syncer reports it as one Event.
// (exec and httpGet hooks run through the drain helper, an init container
// and an exec, which only a real kubelet runs: they are proven on the real
// node.)
func TestRollingUpdate_OwnSleepHookComposedNoCallFails(t *testing.T) {
	app := sandbox.App{Namespace: "hooks", Name: "billing", Replicas: 2, DrainSeconds: ptr.To[int32](drainSeconds),
		PreStop: &corev1.LifecycleHandler{Sleep: &corev1.SleepAction{Seconds: 2}}}
	deploy(t, app)
	settle(t, app, 2, 90*time.Second)
	v, err := sb.Look(context.Background(), app)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range v.Pods {
		if ps := p.Spec.Containers[0].Lifecycle.PreStop; ps.Sleep == nil || ps.Sleep.Seconds != drainSeconds+2 {
			t.Fatalf("pod %s preStop = %+v, want a sleep of the %d s drain + the app's own 2 s", p.Name, ps, drainSeconds)
		}
		t.Logf("pod %s %s: %s", p.Name, v1alpha1.AdaptationsAnnotation, p.Annotations[v1alpha1.AdaptationsAnnotation])
	}
	c := startClient(t, app.Name)
	waitAnswered(t, c, harness.SpringStats{}, v.ReadyPods)

	before := stats(t, c)
	rollout(t, app, "2")
	pods := waitRolledOut(t, app, "2", 90*time.Second)
	waitAnswered(t, c, before, pods)
	d := stats(t, c).Since(before)
	t.Logf("rollout with the app's own 2 s sleep hook: %d calls by name, %d failed", d.OK+d.Failed, d.Failed)
	if d.Failed != 0 {
		t.Errorf("%d of %d calls failed during the rollout; last error: %s", d.Failed, d.OK+d.Failed, d.LastError)
	}
	harness.Eventually(t, 60*time.Second, "one PreStopComposed event on the syncer", func() error {
		var events eventsv1.EventList
		if err := sb.ControlPlane.Client.List(context.Background(), &events, client.InNamespace(app.Namespace)); err != nil {
			return err
		}
		for _, e := range events.Items {
			if e.Reason == string(v1alpha1.AdaptationPreStopComposed) && e.Regarding.Name == app.Name {
				t.Logf("event %s %s: %s", e.Type, e.Reason, e.Note)
				return nil
			}
		}
		return fmt.Errorf("none among %d events", len(events.Items))
	})
}

// The control: the same rollout and the same client with no drain. The
// registrar still leaves Eureka at once, but the app stops while callers'
// caches still hold it, so calls fail — it is the drain that protects them.
func TestRollingUpdate_WithoutDrainCallsFail(t *testing.T) {
	app := sandbox.App{Namespace: "pay", Name: "payments", Replicas: 3, DrainSeconds: ptr.To[int32](0)}
	deploy(t, app)
	settle(t, app, 3, 90*time.Second)
	v, err := sb.Look(context.Background(), app)
	if err != nil {
		t.Fatal(err)
	}
	c := startClient(t, app.Name)
	waitAnswered(t, c, harness.SpringStats{}, v.ReadyPods)

	before := stats(t, c)
	rollout(t, app, "2")
	pods := waitRolledOut(t, app, "2", 90*time.Second)
	waitAnswered(t, c, before, pods)
	d := stats(t, c).Since(before)
	t.Logf("rollout without drain: %d calls by name, %d failed; last error: %s", d.OK+d.Failed, d.Failed, d.LastError)
	if d.Failed == 0 {
		t.Errorf("no call failed during a rollout without drain: the suite cannot show that the drain protects callers")
	}
}

// A pod whose registrar is killed with SIGKILL (here with its whole pod, as
// when a node dies) never cancels its instance; once the pod is gone, the
// reconciler removes the orphan well before Eureka's lease would expire.
func TestOrphan_RegistrarKilledIsCollected(t *testing.T) {
	app := sandbox.App{Namespace: "stock", Name: "inventory", Replicas: 2, DrainSeconds: ptr.To[int32](2)}
	deploy(t, app)
	settle(t, app, 2, 90*time.Second)
	v, err := sb.Look(context.Background(), app)
	if err != nil {
		t.Fatal(err)
	}
	victim := v.ReadyPods[0]
	key := types.NamespacedName{Namespace: app.Namespace, Name: victim}
	if err := sb.Runner.Crash(key); err != nil {
		t.Fatal(err)
	}
	// The node is gone: an operator (or the pod GC) force-deletes the pod.
	pod := &corev1.Pod{}
	pod.Name, pod.Namespace = victim, app.Namespace
	if err := sb.ControlPlane.Client.Delete(context.Background(), pod, client.GracePeriodSeconds(0)); err != nil {
		t.Fatal(err)
	}
	listed := func() (bool, error) {
		v, err := sb.Look(context.Background(), app)
		return slices.Contains(v.UP, victim), err
	}
	if up, err := listed(); err != nil || !up {
		t.Fatalf("right after the crash Eureka should still list %s UP (nothing cancelled it): listed %v, err %v", victim, up, err)
	}
	start := time.Now()
	// The lease lasts 90 s; within 30 s only the reconciler can remove it.
	harness.Eventually(t, 30*time.Second, "the orphan of "+victim+" removed from Eureka", func() error {
		up, err := listed()
		if err == nil && up {
			err = fmt.Errorf("Eureka still lists %s", victim)
		}
		return err
	})
	t.Logf("orphan of %s removed %s after its pod was deleted", victim, time.Since(start).Round(time.Millisecond))
	settle(t, app, 2, 30*time.Second)

	var s v1alpha1.EurekaSyncer
	if err := sb.ControlPlane.Client.Get(context.Background(), types.NamespacedName{Namespace: app.Namespace, Name: app.Name}, &s); err != nil {
		t.Fatal(err)
	}
	if s.Status.OrphansRemoved < 1 {
		t.Errorf("status.orphansRemoved = %d, want at least 1", s.Status.OrphansRemoved)
	}
	harness.Eventually(t, 10*time.Second, "an OrphansRemoved event on the syncer", func() error {
		var events eventsv1.EventList
		if err := sb.ControlPlane.Client.List(context.Background(), &events, client.InNamespace(app.Namespace)); err != nil {
			return err
		}
		for _, e := range events.Items {
			if e.Reason == "OrphansRemoved" && e.Regarding.Name == app.Name && strings.Contains(e.Note, victim) {
				return nil
			}
		}
		return fmt.Errorf("none among %d events", len(events.Items))
	})
}
