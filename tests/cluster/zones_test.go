package cluster_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/eurekube/eurekube/eureka"
	"github.com/eurekube/eurekube/sidecar"
	"github.com/eurekube/eurekube/tests/cluster"
	"github.com/eurekube/eurekube/tests/harness"
)

// Two zones on the one node: the node is labelled zone-a while the first
// Deployment's pods are scheduled, zone-b for the second's (Kubernetes
// copies the node's zone onto each pod as it binds it, and the registrar
// reads it through the downward API). A Spring client in zone-b with Spring
// Cloud LoadBalancer's zone preference calls only the zone-b pod while it
// exists, and the zone-a pods once it is gone, with no failed call.
func TestZones_SpringCallersPreferTheirOwnZone(t *testing.T) {
	// The other tests' pods pick up whichever zone the node has when they
	// are scheduled; only the import's zone hints story looks at zones.
	storyHolding(t, 40*time.Second, nodeZoneLabel)
	ctx := context.Background()
	var nodes corev1.NodeList
	if err := c.Node.Client.List(ctx, &nodes); err != nil || len(nodes.Items) != 1 {
		t.Fatalf("want the one node: %v %v", len(nodes.Items), err)
	}
	nodeName := nodes.Items[0].Name
	setZone := func(zone string) {
		t.Helper()
		value := "null"
		if zone != "" {
			value = fmt.Sprintf("%q", zone)
		}
		patch := fmt.Sprintf(`{"metadata":{"labels":{%q:%s}}}`, corev1.LabelTopologyZone, value)
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: nodeName}}
		if err := c.Node.Client.Patch(ctx, n, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { setZone("") })

	app := cluster.App{Namespace: "zones", Name: "shipping", Replicas: 2, DrainSeconds: ptr.To[int32](drainSeconds)}
	group := func(g string) func(*appsv1.Deployment) {
		return func(d *appsv1.Deployment) {
			d.Spec.Selector.MatchLabels["group"] = g
			d.Spec.Template.Labels["group"] = g
		}
	}
	setZone("zone-a")
	deploy(t, app, group("a"))
	settle(t, app, 3*time.Minute)

	setZone("zone-b")
	var b appsv1.Deployment
	if err := c.Node.Client.Get(ctx, client.ObjectKey{Namespace: app.Namespace, Name: app.Name}, &b); err != nil {
		t.Fatal(err)
	}
	b = appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: app.Name + "-b", Namespace: app.Namespace, Labels: b.Labels}, Spec: *b.Spec.DeepCopy()}
	b.Spec.Replicas = ptr.To[int32](1)
	group("b")(&b)
	if err := c.Node.Client.Create(ctx, &b); err != nil {
		t.Fatal(err)
	}
	app.Replicas = 3
	settle(t, app, 3*time.Minute)

	zoneOf := map[string]string{}
	instances, err := c.Eureka.SpringRead(strings.ToUpper(app.Name))
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range instances {
		zoneOf[in.Metadata[eureka.MetaPod]] = in.Metadata[sidecar.MetaZone]
	}
	var inA, inB []string
	for pod, zone := range zoneOf {
		switch {
		case zone == "zone-a" && !strings.HasPrefix(pod, app.Name+"-b-"):
			inA = append(inA, pod)
		case zone == "zone-b" && strings.HasPrefix(pod, app.Name+"-b-"):
			inB = append(inB, pod)
		default:
			t.Errorf("pod %s registered in zone %q", pod, zone)
		}
	}
	if len(inA) != 2 || len(inB) != 1 {
		t.Fatalf("zone-a %v, zone-b %v: want the first Deployment's two pods and the second's one", inA, inB)
	}

	sc, err := harness.StartSpringClient(ctx, harness.SpringClientOptions{
		EurekaURL: c.Peers.DefaultZone(), Service: app.Name, CacheSeconds: clientCacheSeconds, LogDir: t.TempDir(),
		Args: []string{"--spring.cloud.loadbalancer.zone=zone-b", "--spring.cloud.loadbalancer.configurations=zone-preference"},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sc.Stop() })
	keepProcessLog(t, "spring-client-zone-b", sc.Process)
	own := callsAnsweredBy(t, sc, harness.SpringStats{}, 200, inB)
	t.Logf("zone-b caller while zone-b has a pod: %d calls, answered by %v, %d failed", own.OK, own.ByInstance, own.Failed)

	scaleDeployment(t, app.Namespace, b.Name, 0)
	harness.Eventually(t, 2*time.Minute, "the zone-b caller reaches zone-a", func() error {
		s, err := sc.Stats(ctx)
		if err != nil {
			return err
		}
		for _, p := range inA {
			if s.Since(own).ByInstance[p] > 0 {
				return nil
			}
		}
		return fmt.Errorf("no call reached zone-a yet")
	})
	before := sc.StatsT(t)
	other := callsAnsweredBy(t, sc, before, 200, inA)
	all := sc.StatsT(t)
	t.Logf("zone-b caller once zone-b has none: %d calls, answered by %v; in all %d calls, %d failed", other.OK, other.ByInstance, all.OK, all.Failed)
	if all.Failed > 0 {
		t.Errorf("%d calls failed (last: %s)", all.Failed, all.LastError)
	}
}

// callsAnsweredBy waits for n more successful calls since the reading
// since and fails unless every one was answered by one of pods.
func callsAnsweredBy(t *testing.T, sc *harness.SpringClient, since harness.SpringStats, n int64, pods []string) harness.SpringStats {
	t.Helper()
	var d harness.SpringStats
	harness.Eventually(t, 2*time.Minute, fmt.Sprintf("%d calls", n), func() error {
		s, err := sc.Stats(context.Background())
		if err != nil {
			return err
		}
		if d = s.Since(since); d.OK < n {
			return fmt.Errorf("%d calls so far", d.OK)
		}
		return nil
	})
	for p, calls := range d.ByInstance {
		if !slices.Contains(pods, p) {
			t.Errorf("%d calls answered by %s, want only %v (all: %v)", calls, p, pods, d.ByInstance)
		}
	}
	return d
}
