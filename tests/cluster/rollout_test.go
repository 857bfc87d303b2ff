package cluster_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/eurekube/eurekube/api/v1alpha1"
	"github.com/eurekube/eurekube/tests/cluster"
	"github.com/eurekube/eurekube/tests/harness"
)

// The leading manager pod's container is killed with SIGKILL mid-rollout,
// as the OOM killer or a crash ends it: it neither finishes its requests
// nor releases its Lease. Pods keep being created, each with the registrar
// (through the other replica behind the webhook's Service; with
// failurePolicy Fail a create may fail while the Service still routes to
// the dead one, and the ReplicaSet retries), another process takes the
// Lease and the reconciler over, and still no call by name fails.
func TestRollingUpdate_ManagerLeaderKilledNoCallFails(t *testing.T) {
	ctx := context.Background()
	app := cluster.App{Namespace: "shop", Name: "orders", Replicas: 3, DrainSeconds: ptr.To[int32](drainSeconds)}
	deploy(t, app, nil)
	v := settle(t, app, 3*time.Minute)
	sc := startClient(t, app.Name)
	waitAnswered(t, sc, harness.SpringStats{}, v.ReadyPods)

	holder, lead := leader(t)
	killed, restarts, err := containerID(lead, "manager")
	if err != nil {
		t.Fatal(err)
	}
	before := sc.StatsT(t)
	began := time.Now()
	rollout(t, app)
	waitFirstRolled(t, app)
	resourceVersion := syncer(t, app).ResourceVersion
	if err := c.Node.Signal(ctx, killed, "SIGKILL"); err != nil {
		t.Fatal(err)
	}
	killedAt := time.Now()
	t.Logf("killed the leader %s (container %s) with SIGKILL %s after the rollout began", holder, killed, killedAt.Sub(began).Round(time.Millisecond))
	harness.Eventually(t, time.Minute, "the kubelet saw the manager container of "+lead.Name+" die", func() error {
		var p corev1.Pod
		if err := c.Node.Client.Get(ctx, client.ObjectKeyFromObject(lead), &p); err != nil {
			return err
		}
		for _, s := range p.Status.ContainerStatuses {
			if s.Name == "manager" && s.RestartCount > restarts {
				if term := s.LastTerminationState.Terminated; term != nil {
					t.Logf("manager container of %s ended with exit code %d (%s), restarted by the kubelet", p.Name, term.ExitCode, term.Reason)
				}
				return nil
			}
		}
		return fmt.Errorf("its restart count is still %d", restarts)
	})

	pods := waitRolledOut(t, app, 4*time.Minute)
	t.Logf("rolled out %s after the rollout began", time.Since(began).Round(time.Second))
	var all corev1.PodList
	if err := c.Node.Client.List(ctx, &all, client.InNamespace(app.Namespace)); err != nil {
		t.Fatal(err)
	}
	for _, p := range all.Items {
		if !v1alpha1.RunsRegistrar(&p) {
			t.Errorf("pod %s runs without the registrar", p.Name)
		}
	}
	var events eventsv1.EventList
	if err := c.Node.Client.List(ctx, &events, client.InNamespace(app.Namespace)); err != nil {
		t.Fatal(err)
	}
	failedCreates := 0
	for _, e := range events.Items {
		if e.Reason != "FailedCreate" {
			continue
		}
		if cluster.EventTime(e).Before(killedAt.Truncate(time.Second)) {
			t.Logf("before the kill, a create failed and its ReplicaSet retried: %s", e.Note)
			continue
		}
		failedCreates++
		t.Logf("a create failed and its ReplicaSet retried: %s", e.Note)
	}
	t.Logf("%d pods, each with the registrar; %d FailedCreate events since the kill", len(all.Items), failedCreates)

	harness.Eventually(t, time.Minute, "another process holds the Lease", func() error {
		l, err := managerLease(ctx)
		if err != nil {
			return err
		}
		if h := ptr.Deref(l.Spec.HolderIdentity, ""); h == "" || h == holder {
			return fmt.Errorf("held by %q", h)
		}
		who := "the other replica"
		if strings.HasPrefix(*l.Spec.HolderIdentity, lead.Name+"_") {
			who = "the killed pod's restarted container"
		}
		t.Logf("the Lease is held by %s, %s (killed: %s), %d transitions", *l.Spec.HolderIdentity, who, holder, ptr.Deref(l.Spec.LeaseTransitions, 0))
		return nil
	})
	harness.Eventually(t, 2*time.Minute, "the new leader writes the syncer's status: READY 3/3, Synced", func() error {
		s := syncer(t, app)
		switch {
		case s.ResourceVersion == resourceVersion:
			return fmt.Errorf("the syncer is unchanged since the kill")
		case s.Status.Ready != "3/3" || s.Status.InjectedPods != 3:
			return fmt.Errorf("READY %q, injected %d", s.Status.Ready, s.Status.InjectedPods)
		case !meta.IsStatusConditionTrue(s.Status.Conditions, v1alpha1.ConditionSynced):
			return fmt.Errorf("not Synced: %v", s.Status.Conditions)
		}
		return nil
	})

	waitAnswered(t, sc, before, pods)
	d := sc.StatsT(t).Since(before)
	t.Logf("rollout with the leader killed: %d calls by name, %d failed, answered by %v", d.OK+d.Failed, d.Failed, d.ByInstance)
	if d.Failed != 0 {
		t.Errorf("%d of %d calls failed; last error: %s", d.Failed, d.OK+d.Failed, d.LastError)
	}

	waitManagerReady(t)
}

// The control: the same rollout and the same client with no drain. The
// registrar still leaves Eureka at once, but the app stops while callers'
// caches still hold it, so calls fail — it is the drain that protects them.
func TestRollingUpdate_WithoutDrainCallsFail(t *testing.T) {
	story(t, 45*time.Second)
	app := cluster.App{Namespace: "pay", Name: "payments", Replicas: 3, DrainSeconds: ptr.To[int32](0)}
	deploy(t, app, nil)
	v := settle(t, app, 3*time.Minute)
	for _, p := range v.Pods {
		if p.Spec.Containers[0].Lifecycle != nil {
			t.Fatalf("pod %s: a drain of 0 still gave the app a lifecycle: %+v", p.Name, p.Spec.Containers[0].Lifecycle)
		}
	}
	sc := startClient(t, app.Name)
	waitAnswered(t, sc, harness.SpringStats{}, v.ReadyPods)

	d, began := rolloutCalled(t, app, sc)
	t.Logf("rollout without drain in %s: %d calls by name, %d failed; last error: %s",
		time.Since(began).Round(time.Second), d.OK+d.Failed, d.Failed, strings.TrimSpace(d.LastError))
	if d.Failed == 0 {
		t.Errorf("no call failed during a rollout without drain: the suite cannot show that the drain protects callers")
	}
}
