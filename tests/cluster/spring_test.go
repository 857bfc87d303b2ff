package cluster_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/eurekube/eurekube/eureka"
	"github.com/eurekube/eurekube/sidecar"
	"github.com/eurekube/eurekube/tests/cluster"
	"github.com/eurekube/eurekube/tests/harness"
)

// A Spring Boot app's pods, its actuator on a management port of its own
// and its readiness probe on the actuator's readiness group, as Spring
// Boot's Kubernetes probes are set up: a real Spring Boot Admin server,
// discovering through Eureka, lists every pod UP with its health details,
// because each instance's health check URL is the actuator's health on
// that port and its metadata says where the actuator is.
func TestSpringBootAdmin_ListsEveryPodUpWithItsHealthDetails(t *testing.T) {
	t.Parallel() // see TestMain
	app := cluster.App{Namespace: "admin", Name: "pricing", Replicas: 2, DrainSeconds: ptr.To[int32](2)}
	deploy(t, app, func(d *appsv1.Deployment) {
		c := &d.Spec.Template.Spec.Containers[0]
		c.Env = append(c.Env, corev1.EnvVar{Name: "MANAGEMENT_ADDR", Value: ":8081"})
		c.Ports = append(c.Ports, corev1.ContainerPort{Name: "management", ContainerPort: 8081})
		c.ReadinessProbe.HTTPGet = &corev1.HTTPGetAction{Path: "/actuator/health/readiness", Port: intstr.FromString("management")}
	})
	view := settle(t, app, 3*time.Minute)

	instances, err := c.Eureka.SpringRead(strings.ToUpper(app.Name))
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range instances {
		wantHealth := fmt.Sprintf("http://%s:8081/actuator/health", in.IPAddr)
		if in.HealthCheckURL != wantHealth || in.StatusPageURL != fmt.Sprintf("http://%s:8081/actuator/info", in.IPAddr) ||
			in.Metadata[sidecar.MetaManagementPort] != "8081" || in.Metadata[sidecar.MetaManagementContextPath] != "/actuator" {
			t.Errorf("instance %s: health check %s, status page %s, metadata %v; want the actuator on 8081 (%s) and management.port 8081",
				in.InstanceID, in.HealthCheckURL, in.StatusPageURL, in.Metadata, wantHealth)
		}
	}

	admin, err := harness.StartSpringBootAdmin(context.Background(), harness.SpringBootAdminOptions{
		EurekaURL: c.Peers.DefaultZone(), CacheSeconds: clientCacheSeconds, StatusInterval: 2 * time.Second, LogDir: t.TempDir(),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = admin.Stop() })
	var listed []harness.AdminInstance
	harness.Eventually(t, 3*time.Minute, "Spring Boot Admin lists every pod UP with its health details", func() error {
		all, err := admin.Instances(context.Background())
		if err != nil {
			return err
		}
		listed = listed[:0]
		var pods []string
		for _, in := range all {
			if !strings.EqualFold(in.Name, app.Name) {
				continue
			}
			listed = append(listed, in)
			pod, _ := in.Details["pod"].(map[string]any)
			details, _ := pod["details"].(map[string]any)
			name, _ := details["name"].(string)
			if in.Status != "UP" || name == "" {
				return fmt.Errorf("%s is %s with details %v", in.HealthURL, in.Status, in.Details)
			}
			pods = append(pods, name)
		}
		slices.Sort(pods)
		if !slices.Equal(pods, view.ReadyPods) {
			return fmt.Errorf("lists the pods %v, want %v", pods, view.ReadyPods)
		}
		return nil
	})
	out, _ := json.MarshalIndent(listed, "", "  ")
	t.Logf("Spring Boot Admin's GET /instances for %s:\n%s", strings.ToUpper(app.Name), out)
}

// Two zones on the one node: the node is labelled zone-a while the first
// Deployment's pods are scheduled, zone-b for the second's (Kubernetes
// copies the node's zone onto each pod as it binds it, and the registrar
// reads it through the downward API). A Spring client in zone-b with Spring
// Cloud LoadBalancer's zone preference calls only the zone-b pod while it
// exists, and the zone-a pods once it is gone, with no failed call.
func TestZones_SpringCallersPreferTheirOwnZone(t *testing.T) {
	// The other tests' pods pick up whichever zone the node has when they
	// are scheduled; none of them looks at zones.
	t.Parallel() // see TestMain
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

// An app that speaks no HTTP (a gRPC server, say) on its only port: it
// registers without URLs and is UP only once its port accepts
// connections; until then its instance is listed, but not UP.
func TestNonHTTP_ATCPOnlyPodRegistersAndGatesOnItsPort(t *testing.T) {
	t.Parallel() // see TestMain
	app := cluster.App{Namespace: "grpc", Name: "quotes", Replicas: 1, DrainSeconds: ptr.To[int32](2), Port: "grpc"}
	deploy(t, app, func(d *appsv1.Deployment) {
		c := &d.Spec.Template.Spec.Containers[0]
		c.Env = append(c.Env, corev1.EnvVar{Name: "LISTEN_PROTOCOL", Value: "tcp"}, corev1.EnvVar{Name: "LISTEN_ADDR", Value: ":9090"},
			corev1.EnvVar{Name: "LISTEN_AFTER", Value: "20s"})
		c.Ports = []corev1.ContainerPort{{Name: "grpc", ContainerPort: 9090}}
		c.ReadinessProbe.HTTPGet = nil
		c.ReadinessProbe.TCPSocket = &corev1.TCPSocketAction{Port: intstr.FromString("grpc")}
	})
	var seen []string
	harness.Eventually(t, 3*time.Minute, "the instance UP once its port accepts connections", func() error {
		instances, err := c.Eureka.SpringRead(strings.ToUpper(app.Name))
		if err != nil || len(instances) == 0 {
			return fmt.Errorf("not registered yet (%v)", err)
		}
		in := instances[0]
		if len(seen) == 0 || seen[len(seen)-1] != in.Status {
			seen = append(seen, in.Status)
		}
		if in.HomePageURL != "" || in.StatusPageURL != "" || in.HealthCheckURL != "" {
			t.Fatalf("a TCP instance registered with URLs: %q %q %q", in.HomePageURL, in.StatusPageURL, in.HealthCheckURL)
		}
		if in.Status != "UP" {
			return fmt.Errorf("%s", in.Status)
		}
		return nil
	})
	if len(seen) < 2 {
		t.Errorf("statuses seen %v: want the instance listed, not UP, before its port opened", seen)
	}
	t.Logf("statuses seen, each once: %v", seen)
	settle(t, app, time.Minute)
}
