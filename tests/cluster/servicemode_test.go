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

	"github.com/eurekube/eurekube/api/v1alpha1"
	"github.com/eurekube/eurekube/tests/cluster"
	"github.com/eurekube/eurekube/tests/harness"
)

// loadBalancerIP is the ingress address the test's "cloud controller"
// gives the Service, in node.LoadBalancerCIDR: routed by kube-proxy's
// rules on this host to the pods, so no packet leaves the machine.
const loadBalancerIP = "10.97.0.10"

// Service mode, for networks where VMs cannot reach pod IPs: the manager
// registers the Service's load-balancer address, which kube-proxy routes to
// the pods. A real Spring client calls GATEWAY by name through a rollout of
// its pods, during which the manager's leader is killed: no call fails, and
// the registration lives on (the new leader heartbeats it).
//
// Not parallel: it kills the manager's leader, as the rollout test does.
func TestServiceMode_CalledByNameThroughARolloutAndALeaderKill(t *testing.T) {
	ctx := context.Background()
	app := cluster.App{Namespace: "edge", Name: "gateway", Replicas: 2, LoadBalancerIP: loadBalancerIP,
		// What a Service's pods need for a rollout without failed calls
		// whatever the registry: serve until kube-proxy has dropped them.
		PreStop: &corev1.LifecycleHandler{Sleep: &corev1.SleepAction{Seconds: 5}}}
	deploy(t, app, nil)
	address := fmt.Sprintf("%s:%d", loadBalancerIP, cluster.ServicePort)
	waitView(t, app, "the Service's load-balancer address registered UP", func(st v1alpha1.EurekaSyncerStatus) error {
		if !slices.Equal(st.ServiceAddresses, []string{address}) || st.UpInstances != 1 || st.Ready != "1/1" {
			return fmt.Errorf("addresses %v, UP %d, READY %q", st.ServiceAddresses, st.UpInstances, st.Ready)
		}
		if !meta.IsStatusConditionTrue(st.Conditions, v1alpha1.ConditionServiceReachable) {
			return fmt.Errorf("ServiceReachable: %+v", meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionServiceReachable))
		}
		return nil
	})
	for _, p := range podsOf(t, app) {
		if v1alpha1.RunsRegistrar(&p) {
			t.Fatalf("pod %s of a Service-mode syncer runs the registrar", p.Name)
		}
	}
	listed := serviceInstance(t, app)
	registered, err := c.Eureka.ReadInstance(strings.ToUpper(app.Name), listed.InstanceID)
	if err != nil {
		t.Fatal(err)
	}
	if registered.HostName != loadBalancerIP {
		t.Fatalf("Eureka lists hostName %s, want the load balancer's %s", registered.HostName, loadBalancerIP)
	}

	// The client reaches the pods through the load balancer's address:
	// kube-proxy picks a pod per connection, and a kept-alive connection
	// stays on its pod, so one pod may answer every call until its
	// connection closes (at the latest when the rollout ends it).
	sc := startClient(t, app.Name)
	waitAnsweredByOneOf(t, sc, harness.SpringStats{}, func() []string { return readyPods(t, app) })
	before := sc.StatsT(t)
	began := time.Now()

	// The registration as the first peer holds it (the one the manager
	// talks to; each peer stamps a registration, replicated ones too, with
	// its own time), just before the kill.
	origin := c.Peers.Servers[0]
	registered, err = origin.ReadInstance(strings.ToUpper(app.Name), listed.InstanceID)
	if err != nil {
		t.Fatal(err)
	}
	holder, lead := leader(t)
	killed, _, err := containerID(lead, "manager")
	if err != nil {
		t.Fatal(err)
	}
	rollout(t, app)
	if err := c.Node.Signal(ctx, killed, "SIGKILL"); err != nil {
		t.Fatal(err)
	}
	killedAt := time.Now()
	t.Logf("rolling %s out; killed the leader %s (container %s)", app.Name, holder, killed)
	var pods []string
	harness.Eventually(t, 4*time.Minute, "every pod of the new template and ready, the old ones gone", func() error {
		v, err := c.Look(ctx, app)
		if err != nil {
			return err
		}
		for _, p := range v.Pods {
			if p.Annotations[rolledKey] == "" {
				return fmt.Errorf("pod %s is of the old template", p.Name)
			}
		}
		if len(v.ReadyPods) != int(app.Replicas) || len(v.Pods) != int(app.Replicas) {
			return fmt.Errorf("%d pods, %d ready", len(v.Pods), len(v.ReadyPods))
		}
		pods = v.ReadyPods
		return nil
	})
	waitAnsweredByOneOf(t, sc, before, func() []string { return pods })
	// The new leader heartbeats the registration: its lease was renewed
	// after the kill, and it was never registered again (it never lapsed).
	harness.Eventually(t, 2*time.Minute, "the registration renewed after the leader's kill", func() error {
		now, err := origin.ReadInstance(strings.ToUpper(app.Name), registered.InstanceID)
		if err != nil {
			return err
		}
		if now.Status != "UP" || !now.LastRenewed().After(killedAt) {
			return fmt.Errorf("status %s, last renewed %s (the leader was killed at %s)", now.Status, now.LastRenewed().Format(time.TimeOnly), killedAt.Format(time.TimeOnly))
		}
		if !now.RegisteredAt().Equal(registered.RegisteredAt()) {
			return fmt.Errorf("registered again at %s (first at %s): the lease lapsed", now.RegisteredAt(), registered.RegisteredAt())
		}
		return nil
	})
	d := sc.StatsT(t).Since(before)
	t.Logf("%d calls by name through the rollout and the leader's kill (%s), answered by %v", d.OK, time.Since(began).Round(time.Second), d.ByInstance)
	if d.Failed != 0 {
		t.Fatalf("%d of %d calls failed (last error: %s); the rollout began and the leader was killed at %s", d.Failed, d.OK+d.Failed, d.LastError, killedAt.UTC().Format(time.RFC3339Nano))
	}
	waitManagerReady(t)
}

// serviceInstance waits until the peer tests read through lists the app's
// one instance: an address registered before the load balancer's (the
// NodePort, while the Service had no ingress) is cancelled on the first
// peer and reaches the others by replication.
func serviceInstance(t *testing.T, app cluster.App) harness.SpringInstance {
	t.Helper()
	var inst harness.SpringInstance
	harness.Eventually(t, time.Minute, "Eureka lists the Service's one instance", func() error {
		var err error
		inst, err = serviceInstanceE(app)
		return err
	})
	return inst
}

// serviceInstanceE is the app's one instance, as a Spring client reads it.
func serviceInstanceE(app cluster.App) (harness.SpringInstance, error) {
	insts, err := c.Eureka.SpringRead(strings.ToUpper(app.Name))
	if err != nil {
		return harness.SpringInstance{}, err
	}
	if len(insts) != 1 {
		var ids []string
		for _, in := range insts {
			ids = append(ids, in.InstanceID+" "+in.Status)
		}
		return harness.SpringInstance{}, fmt.Errorf("Eureka lists %d instances of %s, want the Service's one: %v", len(insts), app.Name, ids)
	}
	return insts[0], nil
}

// waitAnsweredByOneOf waits until one of the pods that pods names, asked
// at each poll, has answered a call of the client since since. Asked
// again, not once: a pod that turns ready after the question may be the one
// the client's kept-alive connection reaches, and then the only one that
// answers (seen: the second replica turned ready 0.25 s after the list was
// read, and answered all 3,432 calls of the next 2 minutes).
func waitAnsweredByOneOf(t *testing.T, sc *harness.SpringClient, since harness.SpringStats, pods func() []string) {
	t.Helper()
	harness.Eventually(t, 2*time.Minute, "the Spring client called one of the app's pods by name", func() error {
		s, err := sc.Stats(context.Background())
		if err != nil {
			return err
		}
		d := s.Since(since)
		want := pods()
		for _, p := range want {
			if d.ByInstance[p] > 0 {
				return nil
			}
		}
		return fmt.Errorf("none of %v answered yet (answered: %v, failed %d)", want, d.ByInstance, d.Failed)
	})
}
