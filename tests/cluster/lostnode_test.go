package cluster_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/eurekube/eurekube/api/v1alpha1"
	"github.com/eurekube/eurekube/tests/cluster"
	"github.com/eurekube/eurekube/tests/harness"
	"github.com/eurekube/eurekube/tests/node"
)

// lostNodeDeadline is the promise: a lost node's instances are out
// of traffic within 60 s of the node going NotReady. Eureka alone would
// list them UP until their leases ran out (2 × 90 s here, longer under
// self-preservation) while callers fail.
const lostNodeDeadline = 60 * time.Second

// The node dies: its kubelet stops reporting and the pods' processes
// (registrars included) are frozen, so nothing heartbeats or answers, yet
// Eureka still lists the instances UP. Once the node is NotReady the
// manager (whose own process keeps running, as a replica on a surviving
// node would) holds them OUT_OF_SERVICE; when the node comes back they
// are UP again.
//
// Not parallel: the node is the one every test runs on.
func TestLostNode_InstancesOutOfTrafficUntilItReturns(t *testing.T) {
	ctx := context.Background()
	app := cluster.App{Namespace: "lost", Name: "ledger", Replicas: 2, DrainSeconds: ptr.To[int32](drainSeconds)}
	deploy(t, app, nil)
	before := settle(t, app, 3*time.Minute) // its ReadyPods are every pod, sorted
	pods := podsOf(t, app)

	restore := func() error {
		for _, p := range pods {
			if err := node.ThawPod(p.UID); err != nil {
				return err
			}
		}
		sctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
		defer cancel()
		return c.Node.StartKubelet(sctx)
	}
	t.Cleanup(func() {
		if err := restore(); err != nil {
			t.Error(err)
		}
	})
	for _, p := range pods {
		if err := node.FreezePod(p.UID); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Node.StopKubelet(); err != nil {
		t.Fatal(err)
	}
	lost := time.Now()
	t.Logf("froze the pods %v and stopped the kubelet", before.ReadyPods)

	var notReady time.Time
	harness.Eventually(t, 3*time.Minute, "the node NotReady", func() error {
		var n corev1.Node
		if err := c.Node.Client.Get(ctx, client.ObjectKey{Name: node.NodeName}, &n); err != nil {
			return err
		}
		for _, cond := range n.Status.Conditions {
			if cond.Type == corev1.NodeReady && cond.Status != corev1.ConditionTrue {
				notReady = cond.LastTransitionTime.Time
				return nil
			}
		}
		return fmt.Errorf("still Ready")
	})
	t.Logf("the node went NotReady %s after the kubelet stopped", notReady.Sub(lost).Round(time.Second))

	harness.Eventually(t, lostNodeDeadline, "Eureka lists both instances OUT_OF_SERVICE", func() error {
		v, err := c.Look(ctx, app)
		if err != nil {
			return err
		}
		if len(v.UP) > 0 || len(v.Other) != int(app.Replicas) {
			return fmt.Errorf("UP %v, other %v", v.UP, v.Other)
		}
		for _, o := range v.Other {
			if !strings.HasSuffix(o, " OUT_OF_SERVICE") {
				return fmt.Errorf("listed %s", o)
			}
		}
		return nil
	})
	t.Logf("out of traffic %s after the node went NotReady (%s after it was lost)", time.Since(notReady).Round(time.Second), time.Since(lost).Round(time.Second))
	waitView(t, app, "TrafficApplied False/NodeNotReady", func(st v1alpha1.EurekaSyncerStatus) error {
		cond := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionTrafficApplied)
		if cond == nil || cond.Reason != "NodeNotReady" {
			return fmt.Errorf("TrafficApplied is %+v", cond)
		}
		return nil
	})

	if err := restore(); err != nil {
		t.Fatal(err)
	}
	back := time.Now()
	harness.Eventually(t, 3*time.Minute, "the same pods UP again", func() error {
		v, err := c.Look(ctx, app)
		if err != nil {
			return err
		}
		if err := v.Settled(int(app.Replicas)); err != nil {
			return err
		}
		if !slices.Equal(v.UP, before.ReadyPods) {
			return fmt.Errorf("UP %v, want the pods that were lost, %v", v.UP, before.ReadyPods)
		}
		return nil
	})
	t.Logf("UP again %s after the node came back", time.Since(back).Round(time.Second))
	waitView(t, app, "TrafficApplied True/Serving", func(st v1alpha1.EurekaSyncerStatus) error {
		return trafficApplied(st, "Serving")
	})
	waitManagerReady(t) // the node's NotReady made its pods unready too
}
