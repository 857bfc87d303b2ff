//lint:file-ignore SA1019 an import keeps core/v1 Endpoints (for Spring Cloud Kubernetes) unless told not to, and these tests read it.

package cluster_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/eurekube/eurekube/api/v1alpha1"
	"github.com/eurekube/eurekube/eureka"
	"github.com/eurekube/eurekube/sidecar"
	"github.com/eurekube/eurekube/tests/harness"
	"github.com/eurekube/eurekube/tests/node"
)

// The helpers of importfields_test.go.

// plainVM is a "VM" as cheap as one gets: an HTTP server of the test
// process on an address of the host that pods reach (the node's, or one
// hostAddresses adds), answering GET / with its name, registered in Eureka
// by hand as any client registers an instance, with the zone metadata the
// test gives it. VMs sharing an address are one machine: they differ by
// port, each an endpoint of its own to kube-proxy.
type plainVM struct {
	vmSpec
	port       int32
	instanceID string
}

// vmSpec says which VM to start: its name, its zone ("": no zone
// metadata) and its address ("": the node's).
type vmSpec struct{ name, zone, ip string }

// startPlainVMs starts a VM of app for each spec, registers each UP, and
// stops and cancels them when the test ends. The registrations carry a
// lease longer than any test, so nothing heartbeats: the test's own
// changes are the only ones Eureka sees.
func startPlainVMs(t *testing.T, app string, specs ...vmSpec) []*plainVM {
	t.Helper()
	ec := importEurekaClient(t)
	var vms []*plainVM
	for _, spec := range specs {
		if spec.ip == "" {
			spec.ip = node.NodeIP
		}
		ln, err := net.Listen("tcp", net.JoinHostPort(spec.ip, "0"))
		if err != nil {
			t.Fatal(err)
		}
		answer := spec.name + "\n"
		srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			_, _ = w.Write([]byte(answer))
		})}
		go func() { _ = srv.Serve(ln) }()
		t.Cleanup(func() { _ = srv.Close() })
		vm := &plainVM{vmSpec: spec, port: int32(ln.Addr().(*net.TCPAddr).Port)}
		vm.instanceID = fmt.Sprintf("%s:%s:%d", spec.name, strings.ToLower(app), vm.port) // Spring's shape: host:app:port
		inst := eureka.Instance{
			App: strings.ToUpper(app), InstanceID: vm.instanceID, HostName: spec.ip, IPAddr: spec.ip,
			VIPAddress: strings.ToLower(app), Status: eureka.StatusUp, Port: int(vm.port), PortEnabled: true,
			HomePageURL: fmt.Sprintf("http://%s/", net.JoinHostPort(spec.ip, strconv.Itoa(int(vm.port)))),
			Duration:    time.Hour, RenewalInterval: 30 * time.Second,
			Metadata: map[string]string{},
		}
		if spec.zone != "" {
			inst.Metadata[sidecar.MetaZone] = spec.zone
		}
		if err := ec.Register(context.Background(), inst); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = ec.Cancel(context.Background(), app, vm.instanceID) })
		vms = append(vms, vm)
	}
	return vms
}

// hostAddresses puts each of ips (/32) on the node's port-less bridge
// beside the node's own address, as more machines of the node's network,
// and takes them off when the test ends. Pods have no route to them: they
// reach them through a Service, whose ClusterIP kube-proxy rewrites to
// them on the host. The node's teardown would take them off with the
// bridge anyway.
func hostAddresses(t *testing.T, ips ...string) {
	t.Helper()
	for _, ip := range ips {
		if out, err := exec.Command("ip", "addr", "add", ip+"/32", "dev", node.DummyName).CombinedOutput(); err != nil {
			t.Fatalf("ip addr add %s/32 dev %s: %v: %s", ip, node.DummyName, err, out)
		}
		t.Cleanup(func() {
			if out, err := exec.Command("ip", "addr", "del", ip+"/32", "dev", node.DummyName).CombinedOutput(); err != nil {
				t.Errorf("ip addr del %s/32 dev %s: %v: %s", ip, node.DummyName, err, out)
			}
		})
	}
}

// vmNames are the VMs' names.
func vmNames(vms []*plainVM) []string {
	out := make([]string, len(vms))
	for i, vm := range vms {
		out[i] = vm.name
	}
	return out
}

// createImport creates the import name of app in ns, reading the node's
// Eureka peers, with service as its spec.service, and deletes it when the
// test ends.
func createImport(t *testing.T, ns, name, app string, service v1alpha1.ImportService) *v1alpha1.EurekaImport {
	t.Helper()
	imp := &v1alpha1.EurekaImport{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: v1alpha1.EurekaImportSpec{App: app, Eureka: v1alpha1.EurekaServers{ServiceURLs: c.Peers.URLs()}, Service: service}}
	if err := c.Node.Client.Create(context.Background(), imp); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.IgnoreNotFound(c.Node.Client.Delete(context.Background(), imp)) })
	return imp
}

// patchImportService merge-patches the import's spec.service with
// service (JSON; null removes a field), as kubectl patch --type merge
// does, and waits until its status describes the new generation.
func patchImportService(t *testing.T, ns, name, service string) {
	t.Helper()
	imp := &v1alpha1.EurekaImport{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	patch := `{"spec":{"service":` + service + `}}`
	if err := c.Node.Client.Patch(context.Background(), imp, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
		t.Fatalf("kubectl patch eimp %s --type merge -p '%s': %v", name, patch, err)
	}
	waitImport(t, ns, name, "the import's status of its new spec "+service, synced)
}

// synced is the check that the import is Synced.
func synced(st v1alpha1.EurekaImportStatus) error {
	if cond := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionSynced); cond == nil || cond.Status != metav1.ConditionTrue {
		return fmt.Errorf("Synced is %+v", cond)
	}
	return nil
}

// waitService waits until the Service passes check, and returns it.
func waitService(t *testing.T, ns, name, what string, check func(*corev1.Service) error) *corev1.Service {
	t.Helper()
	var svc corev1.Service
	harness.Eventually(t, 2*time.Minute, what, func() error {
		if err := c.Node.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &svc); err != nil {
			return err
		}
		return check(&svc)
	})
	return &svc
}

// all is every slice the watch holds now, in name order.
func (w *sliceWatch) all() []discoveryv1.EndpointSlice {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]discoveryv1.EndpointSlice, 0, len(w.slices))
	for _, s := range w.slices {
		out = append(out, *s.DeepCopy())
	}
	slices.SortFunc(out, func(a, b discoveryv1.EndpointSlice) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// waitAll waits until the slices pass cond, and returns them.
func (w *sliceWatch) waitAll(t *testing.T, timeout time.Duration, what string, cond func([]discoveryv1.EndpointSlice) error) []discoveryv1.EndpointSlice {
	t.Helper()
	var got []discoveryv1.EndpointSlice
	w.wait(t, timeout, what, func(map[int32]bool) error {
		got = w.all()
		return cond(got)
	})
	return got
}

// endpointsOf finds each VM's endpoint in the slices (its address, in the
// slice of its port): an error names a VM missing or listed twice.
func endpointsOf(all []discoveryv1.EndpointSlice, vms []*plainVM) (map[string]discoveryv1.Endpoint, error) {
	type at struct {
		ip   string
		port int32
	}
	found := map[at][]discoveryv1.Endpoint{}
	for _, s := range all {
		for _, p := range s.Ports {
			if p.Port == nil {
				continue
			}
			for _, e := range s.Endpoints {
				for _, a := range e.Addresses {
					found[at{a, *p.Port}] = append(found[at{a, *p.Port}], e)
				}
			}
		}
	}
	out := map[string]discoveryv1.Endpoint{}
	var errs []error
	for _, vm := range vms {
		switch eps := found[at{vm.ip, vm.port}]; len(eps) {
		case 0:
			errs = append(errs, fmt.Errorf("%s (%s:%d) is in no slice", vm.name, vm.ip, vm.port))
		case 1:
			out[vm.name] = eps[0]
		default:
			errs = append(errs, fmt.Errorf("%s (%s:%d) is %d endpoints", vm.name, vm.ip, vm.port, len(eps)))
		}
	}
	return out, errors.Join(errs...)
}

// allReady is the condition that every VM has one endpoint, ready.
func allReady(vms []*plainVM) func([]discoveryv1.EndpointSlice) error {
	return func(all []discoveryv1.EndpointSlice) error {
		eps, err := endpointsOf(all, vms)
		if err != nil {
			return err
		}
		for _, vm := range vms {
			if r := eps[vm.name].Conditions.Ready; r == nil || !*r {
				return fmt.Errorf("%s's endpoint is not ready", vm.name)
			}
		}
		return nil
	}
}

// callRun waits for a run of n successful calls of which every reading
// passes ok, and returns it: a call that fails, or a reading that does
// not pass (kube-proxy not yet reprogrammed), starts the run again.
func callRun(t *testing.T, caller statsReader, n int64, what string, ok func(run harness.SpringStats) error) harness.SpringStats {
	t.Helper()
	from, err := caller.Stats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var run harness.SpringStats
	harness.Eventually(t, 2*time.Minute, fmt.Sprintf("a run of %d calls %s", n, what), func() error {
		now, err := caller.Stats(context.Background())
		if err != nil {
			return err
		}
		run = now.Since(from)
		if run.Failed > 0 {
			from = now
			return fmt.Errorf("a call failed: %s", run.LastError)
		}
		if err := ok(run); err != nil {
			from = now
			return err
		}
		if run.OK < n {
			return fmt.Errorf("%d calls so far", run.OK)
		}
		return nil
	})
	return run
}

// answeredOnlyBy passes a run answered by none but names.
func answeredOnlyBy(names ...string) func(harness.SpringStats) error {
	return func(run harness.SpringStats) error {
		for who, n := range run.ByInstance {
			if !slices.Contains(names, who) {
				return fmt.Errorf("%d call(s) answered by %s (the run: %v)", n, who, run.ByInstance)
			}
		}
		return nil
	}
}

// answeredByOne passes a run answered by one VM alone.
func answeredByOne(run harness.SpringStats) error {
	if len(run.ByInstance) > 1 {
		return fmt.Errorf("answered by %d VMs: %v", len(run.ByInstance), run.ByInstance)
	}
	return nil
}

// nodeZone is the one node's name and its zone label ("" when it has
// none).
func nodeZone(t *testing.T) (string, string) {
	t.Helper()
	var nodes corev1.NodeList
	if err := c.Node.Client.List(context.Background(), &nodes); err != nil || len(nodes.Items) != 1 {
		t.Fatalf("want the one node: %d nodes, %v", len(nodes.Items), err)
	}
	return nodes.Items[0].Name, nodes.Items[0].Labels[corev1.LabelTopologyZone]
}

// setNodeZone labels the node topology.kubernetes.io/zone=zone ("" takes
// the label off), as a cloud's node controller labels its nodes.
func setNodeZone(t *testing.T, name, zone string) {
	t.Helper()
	value := "null"
	if zone != "" {
		value = strconv.Quote(zone)
	}
	patch := fmt.Sprintf(`{"metadata":{"labels":{%q:%s}}}`, corev1.LabelTopologyZone, value)
	if err := c.Node.Client.Patch(context.Background(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
		t.Fatal(err)
	}
}

// importEndpoints reads the import's core/v1 Endpoints (nil when there is
// none).
func importEndpoints(ctx context.Context, ns, name string) (*corev1.Endpoints, error) {
	var eps corev1.Endpoints
	err := c.Node.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &eps)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return &eps, nil
}

// endpointsReady is what an Endpoints lists on the node's address: ready
// by port.
func endpointsReady(eps *corev1.Endpoints) map[int32]bool {
	out := map[int32]bool{}
	for _, sub := range eps.Subsets {
		for _, p := range sub.Ports {
			for _, a := range sub.Addresses {
				if a.IP == node.NodeIP {
					out[p.Port] = true
				}
			}
			for _, a := range sub.NotReadyAddresses {
				if a.IP == node.NodeIP {
					out[p.Port] = false
				}
			}
		}
	}
	return out
}

// keepOnFailure keeps, when the test has failed, the import, its Service,
// Endpoints and slices, the node, and kube-proxy's nat rules in the test's
// artifacts (record). Registered after the import is created, it runs
// before the import is deleted.
func keepOnFailure(t *testing.T, ns, name string) {
	record(t).Artifacts().OnFailure(func(a *harness.Artifacts) {
		ctx := context.Background()
		var imp v1alpha1.EurekaImport
		var svc corev1.Service
		var eps corev1.Endpoints
		var sl discoveryv1.EndpointSliceList
		var nodes corev1.NodeList
		objects := map[string]any{"import.yaml": &imp, "service.yaml": &svc, "endpoints.yaml": &eps, "slices.yaml": &sl, "node.yaml": &nodes}
		_ = c.Node.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &imp)
		_ = c.Node.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: imp.Status.ServiceName}, &svc)
		_ = c.Node.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: imp.Status.ServiceName}, &eps)
		_ = c.Node.Client.List(ctx, &sl, client.InNamespace(ns))
		_ = c.Node.Client.List(ctx, &nodes)
		for file, obj := range objects {
			out, err := yaml.Marshal(obj)
			if err != nil {
				out = []byte(err.Error())
			}
			a.Write(filepath.Join(ns, "import", file), out)
		}
		rules, err := exec.Command("iptables-save", "-t", "nat").CombinedOutput()
		if err != nil {
			rules = append(rules, []byte("\niptables-save: "+err.Error())...)
		}
		a.Write("iptables-nat.txt", rules)
	})
}
