//lint:file-ignore SA1019 an import keeps core/v1 Endpoints (for Spring Cloud Kubernetes) unless told not to, and the story switches it off and on.

package cluster_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/eurekube/eurekube/api/v1alpha1"
	"github.com/eurekube/eurekube/controller"
	"github.com/eurekube/eurekube/eureka"
	"github.com/eurekube/eurekube/tests/harness"
)

// Zone as data, routing as a choice (issue 42). ATLAS runs on three "VMs"
// (servers of the test process on three more addresses of the node's
// network, registered by hand with Eureka's zone metadata): two in zone-a,
// one in zone-b. The node is labelled zone-a, as a cloud labels its nodes,
// and a Go pod calls the import's Service by its ClusterIP ten times a
// second, each call on a new connection, so that kube-proxy picks an
// endpoint for each. (A machine is in one zone: the import gives the
// instances of one address the zone of the first, so the zones need
// addresses of their own.)
//
// Without an opt-in the endpoints carry their zone and no hint, and the
// calls reach both zones: an import of VMs whose zone metadata are the
// cloud's zone names routes as any Service does. With trafficDistribution
// PreferClose every endpoint is hinted for its own zone, and kube-proxy
// keeps the node's calls in zone-a; PreferSameZone, the newer name, does
// the same; taking the field out takes the hints out, and zone-b is called
// again. No call fails through the switches.
//
// kube-proxy routes by the node's zone label, which
// TestZones_SpringCallersPreferTheirOwnZone changes while it runs: the two
// stories hold the label, and never run together.
func TestImportFields_ZoneHintsOnlyWhenAsked_KubeProxyRoutesByThem(t *testing.T) {
	storyHolding(t, 40*time.Second, nodeZoneLabel)
	ctx := context.Background()
	const ns, app = "importzones", "atlas"
	if err := c.Node.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	t.Cleanup(func() { dropNamespace(t, ns) })
	record(t).Watch(ns)
	nodeName, was := nodeZone(t)
	setNodeZone(t, nodeName, "zone-a")
	t.Cleanup(func() { setNodeZone(t, nodeName, was) })

	hostAddresses(t, "198.51.100.11", "198.51.100.12", "198.51.100.13")
	vms := startPlainVMs(t, app,
		vmSpec{name: "vm-a1", zone: "zone-a", ip: "198.51.100.11"},
		vmSpec{name: "vm-a2", zone: "zone-a", ip: "198.51.100.12"},
		vmSpec{name: "vm-b1", zone: "zone-b", ip: "198.51.100.13"})
	inA := []string{"vm-a1", "vm-a2"}
	watched := watchSlices(t, ns, app)
	createImport(t, ns, app, app, v1alpha1.ImportService{})
	keepOnFailure(t, ns, app)
	created := time.Now()
	watched.waitAll(t, 3*time.Minute, "each VM's endpoint ready", allReady(vms))
	watched.waitAll(t, time.Minute, "each endpoint in its VM's zone, without hints", zonesAndHints(vms, false))
	t.Logf("the import's slices list the three VMs ready, each in its zone, none hinted, %s after the import was created", time.Since(created).Round(time.Millisecond))
	svc := waitService(t, ns, app, "the Service without trafficDistribution", trafficDistribution(""))

	caller := startCaller(t, ns, "http://"+svc.Spec.ClusterIP+"/")
	// Counted from the first answers on: a call made before kube-proxy
	// first wrote the new Service's rules goes nowhere.
	waitAnswered(t, caller, harness.SpringStats{}, vmNames(vms))
	start := caller.statsT(t)
	t.Logf("no opt-in, the node in zone-a: calls to ClusterIP %s answered by %v (both zones)", svc.Spec.ClusterIP, start.ByInstance)

	for _, td := range []string{corev1.ServiceTrafficDistributionPreferClose, corev1.ServiceTrafficDistributionPreferSameZone} {
		asked := time.Now()
		patchImportService(t, ns, app, fmt.Sprintf(`{"trafficDistribution":%q}`, td))
		waitService(t, ns, app, "the Service's trafficDistribution "+td, trafficDistribution(td))
		watched.waitAll(t, 2*time.Minute, "each endpoint hinted for its own zone", zonesAndHints(vms, true))
		run := callRun(t, caller, 100, "answered by zone-a's VMs alone", answeredOnlyBy(inA...))
		for _, vm := range inA {
			if run.ByInstance[vm] == 0 {
				t.Errorf("trafficDistribution %s: 100 calls in zone-a, none answered by %s: %v", td, vm, run.ByInstance)
			}
		}
		t.Logf("trafficDistribution %s: 100 calls in a row answered in zone-a alone (%v), the run complete %s after the patch", td, run.ByInstance, time.Since(asked).Round(time.Millisecond))
	}

	asked := time.Now()
	patchImportService(t, ns, app, `{"trafficDistribution":null}`)
	waitService(t, ns, app, "the Service without trafficDistribution again", trafficDistribution(""))
	watched.waitAll(t, 2*time.Minute, "no endpoint hinted, each still in its zone", zonesAndHints(vms, false))
	waitAnswered(t, caller, caller.statsT(t), []string{"vm-b1"})
	t.Logf("trafficDistribution taken out: zone-b called again %s after the patch", time.Since(asked).Round(time.Millisecond))

	total := caller.statsT(t).Since(start)
	if total.Failed != 0 {
		t.Errorf("%d of %d calls failed (last error: %s)", total.Failed, total.OK+total.Failed, total.LastError)
	}
	t.Logf("%d calls through the switches, %d failed; answered by %v", total.OK+total.Failed, total.Failed, total.ByInstance)
}

// zonesAndHints is the condition that each VM's endpoint carries its zone,
// and a hint for that zone alone when hinted, else none.
func zonesAndHints(vms []*plainVM, hinted bool) func([]discoveryv1.EndpointSlice) error {
	return func(all []discoveryv1.EndpointSlice) error {
		eps, err := endpointsOf(all, vms)
		if err != nil {
			return err
		}
		for _, vm := range vms {
			ep := eps[vm.name]
			if got := ptr.Deref(ep.Zone, ""); got != vm.zone {
				return fmt.Errorf("%s's endpoint is in zone %q, want %q (its zone metadata)", vm.name, got, vm.zone)
			}
			switch {
			case hinted && (ep.Hints == nil || !slices.Equal(ep.Hints.ForZones, []discoveryv1.ForZone{{Name: vm.zone}})):
				return fmt.Errorf("%s's endpoint has hints %+v, want forZones [%s]", vm.name, ep.Hints, vm.zone)
			case !hinted && ep.Hints != nil:
				return fmt.Errorf("%s's endpoint has hints %+v without trafficDistribution: kube-proxy would route by them", vm.name, *ep.Hints)
			}
		}
		return nil
	}
}

// trafficDistribution is the check that the Service's
// spec.trafficDistribution is want ("": unset).
func trafficDistribution(want string) func(*corev1.Service) error {
	return func(svc *corev1.Service) error {
		if got := ptr.Deref(svc.Spec.TrafficDistribution, ""); got != want {
			return fmt.Errorf("trafficDistribution %q, want %q", got, want)
		}
		return nil
	}
}

// The fields users expect of a Service, each where it is read (issue 42).
// ALMANAC runs on three "VMs" (servers of the test process on the node's
// address, registered by hand); one import, with labels, annotations and
// an appProtocol from the start, serves every part:
//
//   - appProtocol is on the Service's port and on every slice's port, and
//     taken off both when taken out of the spec;
//   - the labels and annotations are on the Service, where Spring Cloud
//     Kubernetes' DiscoveryClient reads them (as each instance's metadata),
//     and follow the spec when it changes;
//   - sessionAffinity ClientIP: a Go pod calling the ClusterIP, whose calls
//     spread over the VMs, has them all answered by one VM, until the
//     affinity is taken out;
//   - legacyEndpoints false: the Endpoints goes and is not made again at the
//     next registry read, while kube-proxy, which reads only the slices,
//     still routes, and follows a VM taken OUT_OF_SERVICE; true brings the
//     Endpoints back, as a view of the slices.
//
// No call fails throughout.
func TestImportFields_ServiceFieldsAsKubeProxyAndCallersReadThem(t *testing.T) {
	story(t, 70*time.Second)
	ctx := context.Background()
	const ns, app = "importfields", "almanac"
	if err := c.Node.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	t.Cleanup(func() { dropNamespace(t, ns) })
	record(t).Watch(ns)
	vms := startPlainVMs(t, app, vmSpec{name: "vm-1"}, vmSpec{name: "vm-2"}, vmSpec{name: "vm-3"}) // one machine, the node's address
	watched := watchSlices(t, ns, app)
	labels := map[string]string{"app.example.com/team": "almanac", "tier": "backend"}
	annotations := map[string]string{"example.com/runbook": "https://runbooks.example.com/almanac", "example.com/owner": "team-almanac"}
	spec := v1alpha1.ImportService{
		Ports:  []v1alpha1.ImportPort{{Name: "http", Port: 80, InstancePort: v1alpha1.InstancePortPlain, AppProtocol: "http"}},
		Labels: map[string]v1alpha1.LabelValue{}, Annotations: map[string]v1alpha1.AnnotationValue{},
	}
	for k, v := range labels {
		spec.Labels[k] = v1alpha1.LabelValue(v)
	}
	for k, v := range annotations {
		spec.Annotations[k] = v1alpha1.AnnotationValue(v)
	}
	imp := createImport(t, ns, app, app, spec)
	keepOnFailure(t, ns, app)
	watched.waitAll(t, 3*time.Minute, "each VM's endpoint ready", allReady(vms))
	waitImport(t, ns, app, "the import Synced, 3/3 endpoints", func(st v1alpha1.EurekaImportStatus) error {
		if st.Endpoints != "3/3" {
			return fmt.Errorf("endpoints %q", st.Endpoints)
		}
		return synced(st)
	})
	svc := waitService(t, ns, app, "the Service", func(*corev1.Service) error { return nil })
	if p := svc.Spec.IPFamilyPolicy; p == nil || *p != corev1.IPFamilyPolicyPreferDualStack {
		t.Errorf("the Service's ipFamilyPolicy is %v, want PreferDualStack", ptr.Deref(p, "unset"))
	}
	caller := startCaller(t, ns, "http://"+svc.Spec.ClusterIP+"/")
	// Counted from the first answers on: a call made before kube-proxy
	// first wrote the new Service's rules goes nowhere.
	waitAnswered(t, caller, harness.SpringStats{}, vmNames(vms))
	start := caller.statsT(t)

	t.Run("appProtocol on the Service's port and the slices' ports", func(t *testing.T) {
		waitService(t, ns, app, "the Service's port http with appProtocol http", portAppProtocol("http"))
		watched.waitAll(t, time.Minute, "every slice's port http with appProtocol http", slicesAppProtocol("http"))
		patchImportService(t, ns, app, `{"ports":[{"name":"http","port":80}]}`)
		waitService(t, ns, app, "the Service's port http without appProtocol", portAppProtocol(""))
		watched.waitAll(t, time.Minute, "every slice's port http without appProtocol", slicesAppProtocol(""))
	})

	// Spring Cloud Kubernetes (3.3, tests/spring-k8s-client) adds a
	// Service's labels and annotations to each instance's metadata by
	// default (spring.cloud.kubernetes.discovery.metadata.add-labels and
	// add-annotations, no prefix). The test app's /discovery reports no
	// metadata yet, so the Service is read here.
	t.Run("labels and annotations on the Service", func(t *testing.T) {
		waitService(t, ns, app, "the Service's labels and annotations", serviceMetadata(labels, annotations, nil))
		patchImportService(t, ns, app, `{"labels":{"app.example.com/team":null,"tier":"core"},"annotations":{"example.com/owner":null,"example.com/oncall":"almanac-oncall"}}`)
		waitService(t, ns, app, "the Service's labels and annotations as changed", serviceMetadata(
			map[string]string{"tier": "core"},
			map[string]string{"example.com/runbook": annotations["example.com/runbook"], "example.com/oncall": "almanac-oncall"},
			[]string{"app.example.com/team", "example.com/owner"}))
	})

	t.Run("sessionAffinity ClientIP: one caller, one VM", func(t *testing.T) {
		waitAnswered(t, caller, caller.statsT(t), vmNames(vms))
		asked := time.Now()
		patchImportService(t, ns, app, `{"sessionAffinity":"ClientIP","sessionAffinityConfig":{"clientIP":{"timeoutSeconds":600}}}`)
		waitService(t, ns, app, "the Service's sessionAffinity ClientIP for 600 s", affinity(corev1.ServiceAffinityClientIP, 600))
		run := callRun(t, caller, 100, "answered by one VM alone", answeredByOne)
		who := slices.Collect(maps.Keys(run.ByInstance))[0] // 100 calls, one VM
		t.Logf("sessionAffinity ClientIP: 100 calls in a row answered by %s alone, the run complete %s after the patch", who, time.Since(asked).Round(time.Millisecond))
		before := caller.statsT(t)
		afterCalls(t, caller, 100)
		if more := caller.statsT(t).Since(before); !maps.Equal(more.ByInstance, map[string]int64{who: more.OK}) || more.Failed != 0 {
			t.Errorf("sessionAffinity ClientIP: the next %d calls answered by %v (%d failed), want %s alone", more.OK+more.Failed, more.ByInstance, more.Failed, who)
		}
		patchImportService(t, ns, app, `{"sessionAffinity":"None","sessionAffinityConfig":null}`)
		waitService(t, ns, app, "the Service's sessionAffinity None", affinity(corev1.ServiceAffinityNone, 0))
		waitAnswered(t, caller, caller.statsT(t), vmNames(vms))
	})

	t.Run("legacyEndpoints false: no Endpoints, kube-proxy still routes", func(t *testing.T) {
		if err := c.Node.Client.Get(ctx, client.ObjectKeyFromObject(imp), imp); err != nil {
			t.Fatal(err)
		}
		all := map[int32]bool{}
		for _, vm := range vms {
			all[vm.port] = true
		}
		waitEndpoints(t, ns, app, imp, "the import's Endpoints lists the three VMs ready (legacyEndpoints defaults to true)", all)
		asked := time.Now()
		patchImportService(t, ns, app, `{"legacyEndpoints":false}`)
		var gone *metav1.ListMeta
		harness.Eventually(t, 2*time.Minute, "the Endpoints gone", func() error {
			list, err := c.Clientset.CoreV1().Endpoints(ns).List(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + app})
			if err != nil {
				return err
			}
			if len(list.Items) > 0 {
				return fmt.Errorf("Endpoints %s still there", app)
			}
			gone = &list.ListMeta
			return nil
		})
		t.Logf("legacyEndpoints false: the Endpoints gone %s after the patch", time.Since(asked).Round(time.Millisecond))
		// From its deletion on, every event of an Endpoints of the name.
		events, err := c.Clientset.CoreV1().Endpoints(ns).Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + app, ResourceVersion: gone.ResourceVersion})
		if err != nil {
			t.Fatal(err)
		}
		defer events.Stop()

		// A change at the next registry read: kube-proxy follows the
		// slices, and the pass that wrote them makes no Endpoints.
		out := vms[2]
		if err := importEurekaClient(t).SetStatusOverride(ctx, app, out.instanceID, eureka.StatusOutOfService); err != nil {
			t.Fatal(err)
		}
		watched.wait(t, 2*time.Minute, out.name+"'s endpoint not ready", func(eps map[int32]bool) error {
			if isReady, listed := eps[out.port]; !listed || isReady {
				return fmt.Errorf("%s's endpoint (port %d): listed %t, ready %t", out.name, out.port, listed, isReady)
			}
			return nil
		})
		moved := callsWithout(t, caller, out.name, 100)
		t.Logf("legacyEndpoints false, %s OUT_OF_SERVICE: %d calls, answered by %v", out.name, moved.OK, moved.ByInstance)
	drain:
		for {
			select {
			case ev, open := <-events.ResultChan():
				if !open {
					break drain
				}
				if ev.Type == watch.Added || ev.Type == watch.Modified {
					t.Errorf("legacyEndpoints false: Endpoints %s made again (%s) after it went", app, ev.Type)
				}
			default:
				break drain
			}
		}
		if eps, err := importEndpoints(ctx, ns, app); err != nil || eps != nil {
			t.Errorf("legacyEndpoints false: Endpoints %s there again after the registry read (%v)", app, err)
		}

		asked = time.Now()
		patchImportService(t, ns, app, `{"legacyEndpoints":true}`)
		all[out.port] = false
		waitEndpoints(t, ns, app, imp, "the Endpoints back: two VMs ready, the one OUT_OF_SERVICE not", all)
		t.Logf("legacyEndpoints true: the Endpoints back %s after the patch", time.Since(asked).Round(time.Millisecond))
	})

	total := caller.statsT(t).Since(start)
	if total.Failed != 0 {
		t.Errorf("%d of %d calls failed (last error: %s)", total.Failed, total.OK+total.Failed, total.LastError)
	}
	t.Logf("%d calls to the ClusterIP through every change, %d failed; answered by %v", total.OK+total.Failed, total.Failed, total.ByInstance)
}

// portAppProtocol is the check that the Service has one port, http, of
// appProtocol want ("": none).
func portAppProtocol(want string) func(*corev1.Service) error {
	return func(svc *corev1.Service) error {
		if len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Name != "http" {
			return fmt.Errorf("ports %+v, want the one port http", svc.Spec.Ports)
		}
		if got := ptr.Deref(svc.Spec.Ports[0].AppProtocol, ""); got != want {
			return fmt.Errorf("port http's appProtocol %q, want %q", got, want)
		}
		return nil
	}
}

// slicesAppProtocol is the condition that every slice's port http is of
// appProtocol want ("": none).
func slicesAppProtocol(want string) func([]discoveryv1.EndpointSlice) error {
	return func(all []discoveryv1.EndpointSlice) error {
		if len(all) == 0 {
			return fmt.Errorf("no slices")
		}
		for _, s := range all {
			if len(s.Ports) != 1 || ptr.Deref(s.Ports[0].Name, "") != "http" {
				return fmt.Errorf("slice %s: ports %+v, want the one port http", s.Name, s.Ports)
			}
			if got := ptr.Deref(s.Ports[0].AppProtocol, ""); got != want {
				return fmt.Errorf("slice %s: port http's appProtocol %q, want %q", s.Name, got, want)
			}
		}
		return nil
	}
}

// serviceMetadata is the check that the Service carries labels and
// annotations, its import's label, and none of the keys gone.
func serviceMetadata(labels, annotations map[string]string, gone []string) func(*corev1.Service) error {
	return func(svc *corev1.Service) error {
		for k, v := range labels {
			if got, ok := svc.Labels[k]; !ok || got != v {
				return fmt.Errorf("label %s is %q (set: %t), want %q; labels %v", k, got, ok, v, svc.Labels)
			}
		}
		for k, v := range annotations {
			if got, ok := svc.Annotations[k]; !ok || got != v {
				return fmt.Errorf("annotation %s is %q (set: %t), want %q; annotations %v", k, got, ok, v, svc.Annotations)
			}
		}
		for _, k := range gone {
			if _, ok := svc.Labels[k]; ok {
				return fmt.Errorf("label %s still there, taken out of the spec; labels %v", k, svc.Labels)
			}
			if _, ok := svc.Annotations[k]; ok {
				return fmt.Errorf("annotation %s still there, taken out of the spec; annotations %v", k, svc.Annotations)
			}
		}
		if svc.Labels[controller.ImportLabel] == "" {
			return fmt.Errorf("the import's label %s is gone: labels %v", controller.ImportLabel, svc.Labels)
		}
		return nil
	}
}

// affinity is the check that the Service's sessionAffinity is want, with
// a ClientIP timeout of seconds (none for None).
func affinity(want corev1.ServiceAffinity, seconds int32) func(*corev1.Service) error {
	return func(svc *corev1.Service) error {
		if svc.Spec.SessionAffinity != want {
			return fmt.Errorf("sessionAffinity %q, want %q", svc.Spec.SessionAffinity, want)
		}
		cfg := svc.Spec.SessionAffinityConfig
		switch {
		case want == corev1.ServiceAffinityNone && cfg != nil:
			return fmt.Errorf("sessionAffinity None with sessionAffinityConfig %+v", *cfg)
		case want == corev1.ServiceAffinityClientIP && (cfg == nil || cfg.ClientIP == nil || ptr.Deref(cfg.ClientIP.TimeoutSeconds, 0) != seconds):
			return fmt.Errorf("sessionAffinityConfig %+v, want clientIP.timeoutSeconds %d", cfg, seconds)
		}
		return nil
	}
}

// waitEndpoints waits until the import's Endpoints exists, is the
// import's, and lists the VMs ready by port as want says.
func waitEndpoints(t *testing.T, ns, name string, imp *v1alpha1.EurekaImport, what string, want map[int32]bool) {
	t.Helper()
	harness.Eventually(t, 2*time.Minute, what, func() error {
		eps, err := importEndpoints(context.Background(), ns, name)
		if err != nil {
			return err
		}
		if eps == nil {
			return fmt.Errorf("no Endpoints %s", name)
		}
		if !metav1.IsControlledBy(eps, imp) || eps.Labels[controller.ImportLabel] != imp.Name {
			return fmt.Errorf("Endpoints %s is not the import's: owners %+v, labels %v", name, eps.OwnerReferences, eps.Labels)
		}
		if got := endpointsReady(eps); !maps.Equal(got, want) {
			return fmt.Errorf("Endpoints %s lists ready by port %v, want %v", name, got, want)
		}
		return nil
	})
}
