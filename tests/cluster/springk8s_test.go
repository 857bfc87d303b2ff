package cluster_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/eurekube/eurekube/api/v1alpha1"
	"github.com/eurekube/eurekube/internal/builders"
	"github.com/eurekube/eurekube/tests/cluster"
	"github.com/eurekube/eurekube/tests/harness"
	"github.com/eurekube/eurekube/tests/images"
	"github.com/eurekube/eurekube/tests/node"
)

// A Spring Cloud Kubernetes app calls a service that runs on VMs by its
// Kubernetes name. TARIFFS runs on a "VM" (a Spring Boot app on the host,
// registered by Spring Cloud's own Eureka client); an EurekaImport makes it
// the Service tariffs of namespace springk8s (Pod Security "restricted"
// enforced). A Spring Boot app on Spring Cloud Kubernetes (the official
// Kubernetes Java client flavour, tests/spring-k8s-client) runs in a pod
// of that namespace with nothing but its service account, allowed by a
// Role to get, list and watch services, endpoints and endpointslices
// there, as docs/operations.md tells users to grant. Its @LoadBalanced
// RestClient calls http://tariffs/ ten times a second, each call on a new
// connection: Spring Cloud LoadBalancer asks Spring Cloud Kubernetes for
// the service id tariffs, which finds the Service by name through the API
// server; the cluster's DNS and kube-proxy route each call to an endpoint
// of the import's slices. A second VM joins and answers too. No call
// fails.
//
// The app's DiscoveryClient lists the Service by name as well; the
// instances it reports for it are logged, not asserted: Spring Cloud
// Kubernetes' DiscoveryClient reads a service's instances from Endpoints
// objects, which an import does not write (only EndpointSlices), so a
// load balancer in its POD mode would find none (docs/operations.md).
func TestSpringK8s_ADiscoveryClientInAPodCallsAnImportedVMServiceByName(t *testing.T) {
	story(t, 120*time.Second)
	ctx := context.Background()
	const ns, app = "springk8s", "tariffs"
	nsObj := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: map[string]string{
		"pod-security.kubernetes.io/enforce": "restricted"}}}
	if err := c.Node.Client.Create(ctx, nsObj); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	t.Cleanup(func() { dropNamespace(t, ns) })

	// The image first: cached, it costs an import into containerd.
	began := time.Now()
	ref := springK8sImage(t)
	t.Logf("image %s built or found and imported in %s", ref, time.Since(began).Round(time.Millisecond))

	vm1 := startImportedVM(t, app, "vm-1")
	watched := watchSlices(t, ns, app)
	imp := &v1alpha1.EurekaImport{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: app},
		Spec: v1alpha1.EurekaImportSpec{App: app, Eureka: v1alpha1.EurekaServers{ServiceURLs: c.Peers.URLs()}}}
	if err := c.Node.Client.Create(ctx, imp); err != nil {
		t.Fatal(err)
	}
	watched.wait(t, 3*time.Minute, "vm-1's endpoint ready", ready(vm1.port))
	waitImport(t, ns, app, "the import Synced, 1/1 endpoints", func(st v1alpha1.EurekaImportStatus) error {
		if cond := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionSynced); cond == nil || cond.Status != metav1.ConditionTrue {
			return fmt.Errorf("Synced is %+v", cond)
		}
		if st.Endpoints != "1/1" || st.ServiceName != app {
			return fmt.Errorf("service %q, endpoints %q", st.ServiceName, st.Endpoints)
		}
		return nil
	})

	started := time.Now()
	caller := startSpringK8sClient(t, ns, ref, app)
	t.Logf("the Spring Cloud Kubernetes pod ready (its JVM started) %s after it was created", time.Since(started).Round(time.Millisecond))
	waitAnswered(t, caller, harness.SpringStats{}, []string{"vm-1"})

	seen := caller.discovery(t)
	if !slices.Contains(seen.Services, app) {
		t.Fatalf("the DiscoveryClient (%s) lists services %v, not %s", seen.Client, seen.Services, app)
	}
	t.Logf("the DiscoveryClient (%s) lists services %v; it reports %d instances of %s %v (it reads Endpoints, which the import does not write)",
		seen.Client, seen.Services, len(seen.Instances), app, seen.Instances)

	// A second VM: ready in the slice, then answering the app's calls.
	vm2 := startImportedVM(t, app, "vm-2")
	watched.wait(t, 3*time.Minute, "vm-2's endpoint ready", ready(vm2.port))
	waitAnswered(t, caller, caller.statsT(t), []string{"vm-2"})
	afterCalls(t, caller, 100)

	total := caller.statsT(t)
	if total.Failed != 0 {
		t.Fatalf("%d of %d calls of http://%s/ failed (last error: %s)", total.Failed, total.OK+total.Failed, app, total.LastError)
	}
	for _, vm := range []string{"vm-1", "vm-2"} {
		if total.ByInstance[vm] == 0 {
			t.Fatalf("no call reached %s: %v", vm, total.ByInstance)
		}
	}
	t.Logf("%d calls of http://%s/ through Spring Cloud Kubernetes, 0 failed; answered by %v", total.OK, app, total.ByInstance)
}

// springK8sImage builds (or finds cached) the Spring Cloud Kubernetes
// app's image, a jlinked Java runtime and the app's jar, and imports it
// into the node's containerd.
func springK8sImage(t *testing.T) string {
	t.Helper()
	jar, err := harness.BuildArtifact("EUREKUBE_SPRING_K8S_CLIENT_JAR", "tests/spring-k8s-client/build.sh")
	if err != nil {
		t.Fatal(err)
	}
	cache := os.Getenv("EUREKUBE_CACHE")
	if cache == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			t.Fatal(err)
		}
		cache = filepath.Join(home, ".cache", "eurekube")
	}
	a, err := images.JVMArchive(images.JVMApp{
		Name: "spring-k8s-client", Jar: jar, Ports: []int{int(builders.PortNumber)},
		Description: "A Spring Cloud Kubernetes app calling a service by its Kubernetes name (tests/spring-k8s-client)",
	}, "test", filepath.Join(cache, "images"))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Node.ImportImage(context.Background(), a.Path); err != nil {
		t.Fatal(err)
	}
	return a.Ref
}

// springK8sClient is the Spring Cloud Kubernetes app in its pod.
type springK8sClient struct{ podCaller }

// startSpringK8sClient runs the app in a pod of ns under a service account
// allowed to read services, endpoints and endpointslices there, calling
// http://<service>/ every 100 ms, and deletes the pod when the test ends.
func startSpringK8sClient(t *testing.T, ns, image, service string) *springK8sClient {
	t.Helper()
	ctx := context.Background()
	const name = "spring-k8s-client"
	read := []string{"get", "list", "watch"}
	objs := []client.Object{
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}},
		&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "spring-cloud-kubernetes-discovery"}, Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"services", "endpoints"}, Verbs: read},
			{APIGroups: []string{discoveryv1.GroupName}, Resources: []string{"endpointslices"}, Verbs: read},
		}},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "spring-cloud-kubernetes-discovery"},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "spring-cloud-kubernetes-discovery"},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: name}}},
	}
	for _, o := range objs {
		if err := c.Node.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	pod := builders.Pod(ns, name, builders.Named(name), builders.Image(image), builders.Restricted(),
		func(p *corev1.Pod) {
			p.Spec.ServiceAccountName = name
			p.Spec.TerminationGracePeriodSeconds = ptr.To[int64](1)
			ct := &p.Spec.Containers[0]
			ct.ImagePullPolicy = corev1.PullNever
			ct.Args = []string{"--eurekube.client.service=" + service, "--eurekube.client.interval-ms=100",
				"--spring.cloud.kubernetes.loadbalancer.cluster-domain=" + node.ClusterDomain}
			// The JVM flags of the suite's other Spring apps: a quick start
			// on two busy cores. And a new connection for each call, as the
			// import story's caller makes: kube-proxy balances connections,
			// and a kept-alive one (the VMs' Tomcat closes it after 100
			// requests) would leave a second VM uncalled for a while. Only
			// the app's RestClient uses the JDK's HttpURLConnection; the
			// Kubernetes client keeps its connections.
			ct.Env = []corev1.EnvVar{{Name: "JAVA_TOOL_OPTIONS", Value: "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC -Xss512k -Xmx256m -Dhttp.keepAlive=false"}}
			ct.ReadinessProbe = &corev1.Probe{PeriodSeconds: 1, ProbeHandler: corev1.ProbeHandler{
				HTTPGet: &corev1.HTTPGetAction{Path: "/stats", Port: intstr.FromString(builders.PortName)}}}
		})
	if err := c.Node.Client.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.Node.Client.Delete(context.Background(), pod, client.GracePeriodSeconds(0))
	})
	// A JVM starting Spring on two cores shared with the other stories.
	harness.Eventually(t, 5*time.Minute, "the Spring Cloud Kubernetes pod ready", func() error {
		if err := c.Node.Client.Get(ctx, client.ObjectKeyFromObject(pod), pod); err != nil {
			return err
		}
		if pod.Status.PodIP == "" || !cluster.PodReady(pod) {
			return fmt.Errorf("phase %s, IP %q, containers %+v", pod.Status.Phase, pod.Status.PodIP, pod.Status.ContainerStatuses)
		}
		return nil
	})
	base := "http://" + net.JoinHostPort(pod.Status.PodIP, strconv.Itoa(int(builders.PortNumber)))
	return &springK8sClient{podCaller{statsURL: base + "/stats"}}
}

// discoverySeen is what the app's DiscoveryClient reports (GET /discovery).
type discoverySeen struct {
	Client    string           `json:"client"`
	Services  []string         `json:"services"`
	Instances []map[string]any `json:"instances"`
}

func (s *springK8sClient) discovery(t *testing.T) discoverySeen {
	t.Helper()
	u := s.statsURL[:len(s.statsURL)-len("/stats")] + "/discovery"
	var seen discoverySeen
	harness.Eventually(t, time.Minute, "the app's DiscoveryClient answers", func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
		if err != nil {
			return err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("GET %s: %s", u, resp.Status)
		}
		return json.NewDecoder(resp.Body).Decode(&seen)
	})
	return seen
}
