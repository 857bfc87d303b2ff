package controller_test

//lint:file-ignore SA1019 an import keeps core/v1 Endpoints, which Spring Cloud Kubernetes reads.

import (
	"context"
	"fmt"
	"os/exec"
	"sort"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/eurekube/eurekube/api/v1alpha1"
	"github.com/eurekube/eurekube/controller"
	"github.com/eurekube/eurekube/eureka"
	"github.com/eurekube/eurekube/tests/harness"
)

// vm registers an instance as a Spring app on a VM does: no Eurekube
// marker.
func vm(t *testing.T, c *eureka.Client, app, id, ip string, status eureka.Status, zone string) eureka.Instance {
	t.Helper()
	inst := eureka.Instance{App: app, InstanceID: id, HostName: ip, IPAddr: ip, VIPAddress: strings.ToLower(app),
		Status: status, Port: 8080, PortEnabled: true, Metadata: map[string]string{}}
	if zone != "" {
		inst.Metadata["zone"] = zone
	}
	if err := c.Register(context.Background(), inst); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Cancel(context.Background(), app, id) })
	return inst
}

func newImport(t *testing.T, ns, app string, edit func(*v1alpha1.EurekaImportSpec)) *v1alpha1.EurekaImport {
	t.Helper()
	imp := &v1alpha1.EurekaImport{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: strings.ToLower(app)},
		Spec: v1alpha1.EurekaImportSpec{App: app}}
	if edit != nil {
		edit(&imp.Spec)
	}
	if err := k8s.Create(context.Background(), imp); err != nil {
		t.Fatal(err)
	}
	return imp
}

// importedEndpoints reads the import's slices: address → ready, and the
// slices' port numbers.
func importedEndpoints(ns, service string) (map[string]bool, []int32, error) {
	var slices discoveryv1.EndpointSliceList
	if err := k8s.List(context.Background(), &slices, client.InNamespace(ns), client.MatchingLabels{discoveryv1.LabelServiceName: service}); err != nil {
		return nil, nil, err
	}
	eps, ports := map[string]bool{}, []int32{}
	for _, s := range slices.Items {
		if s.Labels[discoveryv1.LabelManagedBy] != controller.ImportManagedBy {
			return nil, nil, fmt.Errorf("slice %s managed by %q", s.Name, s.Labels[discoveryv1.LabelManagedBy])
		}
		for _, p := range s.Ports {
			ports = append(ports, *p.Port)
		}
		for _, e := range s.Endpoints {
			eps[e.Addresses[0]] = e.Conditions.Ready != nil && *e.Conditions.Ready
		}
	}
	return eps, ports, nil
}

func wantEndpoints(ns, service string, want map[string]bool) func() error {
	return func() error {
		got, _, err := importedEndpoints(ns, service)
		if err != nil {
			return err
		}
		if fmt.Sprint(sorted(got)) != fmt.Sprint(sorted(want)) {
			return fmt.Errorf("endpoints %v, want %v", sorted(got), sorted(want))
		}
		return nil
	}
}

// importedEndpointsObject reads the import's Endpoints: address → ready,
// after checking it is the import's, unmirrored, on the instances' port.
func importedEndpointsObject(ns, service string, imp *v1alpha1.EurekaImport) (map[string]bool, error) {
	var eps corev1.Endpoints
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: service}, &eps); err != nil {
		return nil, err
	}
	if eps.Labels[controller.ImportLabel] != imp.Name || eps.Labels[discoveryv1.LabelSkipMirror] != "true" {
		return nil, fmt.Errorf("Endpoints labels %v", eps.Labels)
	}
	if ref := metav1.GetControllerOf(&eps); ref == nil || ref.Kind != "EurekaImport" || ref.Name != imp.Name {
		return nil, fmt.Errorf("Endpoints controlled by %+v", ref)
	}
	got := map[string]bool{}
	for _, ss := range eps.Subsets {
		if len(ss.Ports) != 1 || ss.Ports[0].Port != 8080 || ss.Ports[0].Name != "http" {
			return nil, fmt.Errorf("subset ports %+v", ss.Ports)
		}
		for _, a := range ss.Addresses {
			got[a.IP] = true
		}
		for _, a := range ss.NotReadyAddresses {
			got[a.IP] = false
		}
	}
	return got, nil
}

func wantEndpointsObject(ns, service string, imp *v1alpha1.EurekaImport, want map[string]bool) func() error {
	return func() error {
		got, err := importedEndpointsObject(ns, service, imp)
		if err != nil {
			return err
		}
		if fmt.Sprint(sorted(got)) != fmt.Sprint(sorted(want)) {
			return fmt.Errorf("Endpoints %v, want %v", sorted(got), sorted(want))
		}
		return nil
	}
}

func sorted(m map[string]bool) []string {
	var out []string
	for k, v := range m {
		out = append(out, fmt.Sprintf("%s=%v", k, v))
	}
	sort.Strings(out)
	return out
}

func importCondition(imp *v1alpha1.EurekaImport, typ string) (*metav1.Condition, *v1alpha1.EurekaImport, error) {
	var got v1alpha1.EurekaImport
	if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(imp), &got); err != nil {
		return nil, nil, err
	}
	return meta.FindStatusCondition(got.Status.Conditions, typ), &got, nil
}

func TestImport_AVMOnlyAppBecomesAServiceWithOneEndpointPerInstance(t *testing.T) {
	ns := newNamespace(t)
	c := directClient(t, server.URL())
	app := "PAYMENTS-" + strings.ToUpper(ns[len(ns)-5:])
	vm(t, c, app, "vm-1:payments:8080", "10.20.0.1", eureka.StatusUp, "zone-a")
	vm(t, c, app, "vm-2:payments:8080", "10.20.0.2", eureka.StatusOutOfService, "")
	// This cluster's own pod is not imported by default: it has a Service.
	s := newSyncer(t, ns, "payments", "http://"+proxy.Addr()+"/eureka")
	s.Spec.AppName = app
	own := register(t, c, s, newPod(t, ns, "payments", "payments-1", true, "10.0.30.1"))
	t.Cleanup(func() { _ = c.Cancel(context.Background(), own.App, own.InstanceID) })

	imp := newImport(t, ns, app, nil)
	service := strings.ToLower(app)
	harness.Eventually(t, patience, "the VMs as endpoints, ready as UP", wantEndpoints(ns, service, map[string]bool{"10.20.0.1": true, "10.20.0.2": false}))
	// The Endpoints too, for clients that read only those (Spring Cloud
	// Kubernetes' DiscoveryClient).
	harness.Eventually(t, patience, "the Endpoints: vm-1 ready, vm-2 not", wantEndpointsObject(ns, service, imp, map[string]bool{"10.20.0.1": true, "10.20.0.2": false}))
	var svc corev1.Service
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: service}, &svc); err != nil {
		t.Fatal(err)
	}
	if len(svc.Spec.Selector) != 0 || svc.Spec.ClusterIP == corev1.ClusterIPNone || len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Port != 80 || !metav1.IsControlledBy(&svc, imp) {
		t.Errorf("Service %+v, want selector-less ClusterIP on 80, owned by the import", svc.Spec)
	}
	if _, ports, _ := importedEndpoints(ns, service); len(ports) != 1 || ports[0] != 8080 {
		t.Errorf("slice ports %v, want the instances' 8080", ports)
	}
	harness.Eventually(t, patience, "kubectl get eimp: APP SERVICE ENDPOINTS", func() error {
		out, err := exec.Command("kubectl", "--kubeconfig", cp.Kubeconfig, "get", "eimp", imp.Name, "-n", ns, "--no-headers").CombinedOutput()
		if err != nil {
			return fmt.Errorf("%v: %s", err, out)
		}
		if got, want := strings.Join(strings.Fields(string(out)), " "), fmt.Sprintf("%s %s %s 1/2 ", imp.Name, app, service); !strings.HasPrefix(got, want) {
			return fmt.Errorf("%q, want prefix %q", got, want)
		}
		return nil
	})

	// A status change in Eureka reaches the slice.
	if err := c.SetStatusOverride(context.Background(), app, "vm-2:payments:8080", eureka.StatusUp); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, patience, "vm-2 ready once UP", wantEndpoints(ns, service, map[string]bool{"10.20.0.1": true, "10.20.0.2": true}))
	harness.Eventually(t, patience, "vm-2 ready in the Endpoints once UP", wantEndpointsObject(ns, service, imp, map[string]bool{"10.20.0.1": true, "10.20.0.2": true}))
	// What an operator sees of it: the gauge, and a Normal Event per write.
	harness.Eventually(t, patience, "the gauge and an Event say 2 of 2 ready", func() error {
		if got, err := importGauge(ns, imp.Name); err != nil || fmt.Sprint(got) != "map[ready:2 total:2]" {
			return fmt.Errorf("eurekube_import_endpoints %v (%v)", got, err)
		}
		var events corev1.EventList
		if err := k8s.List(context.Background(), &events, client.InNamespace(ns)); err != nil {
			return err
		}
		for _, e := range events.Items {
			if e.InvolvedObject.Kind == "EurekaImport" && e.InvolvedObject.Name == imp.Name && e.Type == corev1.EventTypeNormal &&
				e.Reason == "EndpointsChanged" && strings.Contains(e.Message, "Service "+service+": 2 of 2 endpoint(s) ready") {
				return nil
			}
		}
		return fmt.Errorf("no EndpointsChanged Event saying 2 of 2 ready among %d", len(events.Items))
	})

	// Deleting the import removes exactly what it made.
	if err := k8s.Delete(context.Background(), imp); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, patience, "the Service, Endpoints and slices gone", func() error {
		if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: service}, &svc); !apierrors.IsNotFound(err) {
			return fmt.Errorf("Service: %v", err)
		}
		var eps corev1.Endpoints
		if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: service}, &eps); !apierrors.IsNotFound(err) {
			return fmt.Errorf("Endpoints: %v", err)
		}
		if eps, _, err := importedEndpoints(ns, service); err != nil || len(eps) > 0 {
			return fmt.Errorf("slices left: %v %v", eps, err)
		}
		if got, err := importGauge(ns, imp.Name); err != nil || len(got) > 0 {
			return fmt.Errorf("eurekube_import_endpoints series left: %v (%v)", got, err)
		}
		return nil
	})
}

// importGauge is eurekube_import_endpoints of one import, by condition.
func importGauge(ns, name string) (map[string]float64, error) {
	return gaugeSeries("eurekube_import_endpoints", func(l map[string]string) (string, bool) {
		return l["condition"], l["namespace"] == ns && l["import"] == name
	})
}

func TestImport_IncludesThisClustersInstancesWhenAsked(t *testing.T) {
	ns := newNamespace(t)
	c := directClient(t, server.URL())
	app := "LEDGER-" + strings.ToUpper(ns[len(ns)-5:])
	vm(t, c, app, "vm-1:ledger:8080", "10.21.0.1", eureka.StatusUp, "")
	s := newSyncer(t, ns, "ledger", "http://"+proxy.Addr()+"/eureka")
	s.Spec.AppName = app
	own := register(t, c, s, newPod(t, ns, "ledger", "ledger-1", true, "10.0.31.1"))
	t.Cleanup(func() { _ = c.Cancel(context.Background(), own.App, own.InstanceID) })
	newImport(t, ns, app, func(spec *v1alpha1.EurekaImportSpec) {
		spec.IncludeThisCluster = true
		spec.Service = v1alpha1.ImportService{Name: "ledger-all", Type: v1alpha1.ImportHeadless}
	})
	harness.Eventually(t, patience, "the VM and the pod", wantEndpoints(ns, "ledger-all", map[string]bool{"10.21.0.1": true, "10.0.31.1": true}))
}

func TestImport_NeverTakesOverAServiceItDidNotMake(t *testing.T) {
	ns := newNamespace(t)
	app := "BILLING-" + strings.ToUpper(ns[len(ns)-5:])
	vm(t, directClient(t, server.URL()), app, "vm-1:billing:8080", "10.22.0.1", eureka.StatusUp, "")
	theirs := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "billing", Labels: map[string]string{"app.kubernetes.io/managed-by": "Helm"}},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "billing"}, Ports: []corev1.ServicePort{{Name: "web", Port: 8081}}}}
	if err := k8s.Create(context.Background(), theirs); err != nil {
		t.Fatal(err)
	}
	imp := newImport(t, ns, app, func(spec *v1alpha1.EurekaImportSpec) { spec.Service.Name = "billing" })
	harness.Eventually(t, patience, "ServiceOwned False naming the owner", func() error {
		c, _, err := importCondition(imp, "ServiceOwned")
		if err != nil {
			return err
		}
		if c == nil || c.Status != metav1.ConditionFalse || !strings.Contains(c.Message, "Helm") {
			return fmt.Errorf("ServiceOwned %+v", c)
		}
		return nil
	})
	var svc corev1.Service
	if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(theirs), &svc); err != nil {
		t.Fatal(err)
	}
	if len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Port != 8081 || svc.Spec.Selector["app"] != "billing" || len(svc.OwnerReferences) > 0 {
		t.Errorf("their Service changed: %+v", svc)
	}
	if eps, _, _ := importedEndpoints(ns, "billing"); len(eps) > 0 {
		t.Errorf("slices written for a Service that is not the import's: %v", eps)
	}
	// Deleting the import leaves their Service alone.
	deleteImport(t, imp)
	if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(theirs), &svc); err != nil {
		t.Errorf("their Service is gone with the import: %v", err)
	}
}

// The name handed to Kubernetes (docs/operations.md, "From VMs to the day
// Eureka retires"): the Service's marks are taken off and it gets a
// selector, and Kubernetes' endpoints controller then writes the Endpoints
// of the name, relabelled as the Service, the import's owner reference
// left on. Deleting the import leaves that Endpoints alone: it lacks the
// import's marks, and import-write-policy would refuse its deletion.
func TestImport_DeletingLeavesAnEndpointsKubernetesTookOverAlone(t *testing.T) {
	ns := newNamespace(t)
	app := "HANDED-" + strings.ToUpper(ns[len(ns)-5:])
	vm(t, directClient(t, server.URL()), app, "vm-1:handed:8080", "10.25.0.1", eureka.StatusUp, "")
	imp := newImport(t, ns, app, nil)
	service := strings.ToLower(app)
	harness.Eventually(t, patience, "the import's Endpoints", wantEndpointsObject(ns, service, imp, map[string]bool{"10.25.0.1": true}))
	key := client.ObjectKey{Namespace: ns, Name: service}
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var svc corev1.Service
		if err := k8s.Get(context.Background(), key, &svc); err != nil {
			return err
		}
		svc.OwnerReferences = nil
		delete(svc.Labels, controller.ImportLabel)
		return k8s.Update(context.Background(), &svc)
	}); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, patience, "the import says ServiceNotOwned", func() error {
		if c, _, err := importCondition(imp, "ServiceOwned"); err != nil || c == nil || c.Reason != "ServiceNotOwned" {
			return fmt.Errorf("ServiceOwned %+v (%v)", c, err)
		}
		return nil
	})
	// As the endpoints controller writes it: the Service's labels.
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var eps corev1.Endpoints
		if err := k8s.Get(context.Background(), key, &eps); err != nil {
			return err
		}
		eps.Labels = map[string]string{"app": service}
		return k8s.Update(context.Background(), &eps)
	}); err != nil {
		t.Fatal(err)
	}
	deleteImport(t, imp)
	var eps corev1.Endpoints
	if err := k8s.Get(context.Background(), key, &eps); err != nil {
		t.Fatalf("the Endpoints Kubernetes took over was deleted: %v", err)
	}
	if eps.Labels["app"] != service || len(eps.Subsets) != 1 {
		t.Errorf("the Endpoints Kubernetes took over changed: %+v", eps)
	}
}

func TestImport_NeverTakesOverEndpointsItDidNotMake(t *testing.T) {
	ns := newNamespace(t)
	app := "INVOICES-" + strings.ToUpper(ns[len(ns)-5:])
	vm(t, directClient(t, server.URL()), app, "vm-1:invoices:8080", "10.22.1.1", eureka.StatusUp, "")
	// Endpoints made by hand for the name, with no Service yet: the
	// classic way to point at VMs.
	theirs := &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "invoices", Labels: map[string]string{"app.kubernetes.io/managed-by": "Helm"}},
		Subsets: []corev1.EndpointSubset{{Addresses: []corev1.EndpointAddress{{IP: "10.99.0.1"}}, Ports: []corev1.EndpointPort{{Name: "web", Port: 9090}}}}}
	if err := k8s.Create(context.Background(), theirs); err != nil {
		t.Fatal(err)
	}
	imp := newImport(t, ns, app, func(spec *v1alpha1.EurekaImportSpec) { spec.Service.Name = "invoices" })
	harness.Eventually(t, patience, "ServiceOwned False naming the Endpoints' owner", func() error {
		c, got, err := importCondition(imp, "ServiceOwned")
		if err != nil {
			return err
		}
		if c == nil || c.Status != metav1.ConditionFalse || c.Reason != "EndpointsNotOwned" || !strings.Contains(c.Message, "Endpoints invoices") || !strings.Contains(c.Message, "Helm") {
			return fmt.Errorf("ServiceOwned %+v", c)
		}
		if s := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionSynced); s == nil || s.Status != metav1.ConditionFalse {
			return fmt.Errorf("Synced %+v", s)
		}
		return nil
	})
	// Nothing written: no Service (their Endpoints would be its
	// endpoints), no slices, their Endpoints as they were.
	if err := serviceGone(ns, "invoices")(); err != nil {
		t.Errorf("a Service was made over their Endpoints: %v", err)
	}
	if eps, _, _ := importedEndpoints(ns, "invoices"); len(eps) > 0 {
		t.Errorf("slices written: %v", eps)
	}
	check := func() {
		t.Helper()
		var got corev1.Endpoints
		if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(theirs), &got); err != nil {
			t.Fatalf("their Endpoints: %v", err)
		}
		if got.ResourceVersion != theirs.ResourceVersion || len(got.OwnerReferences) > 0 {
			t.Errorf("their Endpoints changed: %+v", got)
		}
	}
	check()
	deleteImport(t, imp)
	check()
}

// wantImportCondition is nil once imp's condition typ is there and ok
// says it is as wanted.
func wantImportCondition(imp *v1alpha1.EurekaImport, typ string, ok func(*metav1.Condition) bool) func() error {
	return func() error {
		cond, _, err := importCondition(imp, typ)
		if err != nil {
			return err
		}
		if cond == nil || !ok(cond) {
			return fmt.Errorf("%s %+v", typ, cond)
		}
		return nil
	}
}

func TestImport_AnAppNotYetInEurekaWaitsAndEurekaDownKeepsTheEndpoints(t *testing.T) {
	ns := newNamespace(t)
	c := directClient(t, server.URL())
	app := "STOCK-" + strings.ToUpper(ns[len(ns)-5:])
	imp := newImport(t, ns, app, nil)
	harness.Eventually(t, patience, "Synced False NoInstances", func() error {
		cond, _, err := importCondition(imp, v1alpha1.ConditionSynced)
		if err != nil {
			return err
		}
		if cond == nil || cond.Reason != "NoInstances" {
			return fmt.Errorf("Synced %+v", cond)
		}
		return nil
	})
	vm(t, c, app, "vm-1:stock:8080", "10.23.0.1", eureka.StatusUp, "")
	service := strings.ToLower(app)
	harness.Eventually(t, patience, "the VM once registered", wantEndpoints(ns, service, map[string]bool{"10.23.0.1": true}))

	proxy.Block()
	defer proxy.Unblock()
	harness.Eventually(t, patience, "EurekaReachable False, the endpoints kept", func() error {
		cond, _, err := importCondition(imp, v1alpha1.ConditionSynced)
		if err != nil {
			return err
		}
		if cond == nil || cond.Status != metav1.ConditionFalse || !strings.Contains(cond.Message, "kept as last read") {
			return fmt.Errorf("Synced %+v", cond)
		}
		if err := wantEndpointsObject(ns, service, imp, map[string]bool{"10.23.0.1": true})(); err != nil {
			return err
		}
		return wantEndpoints(ns, service, map[string]bool{"10.23.0.1": true})()
	})
	proxy.Unblock()
	harness.Eventually(t, patience, "Synced again", func() error {
		cond, _, err := importCondition(imp, v1alpha1.ConditionSynced)
		if err != nil {
			return err
		}
		if cond == nil || cond.Status != metav1.ConditionTrue {
			return fmt.Errorf("Synced %+v", cond)
		}
		return nil
	})
}

func TestImport_PutsBackItsServiceChangedByHand(t *testing.T) {
	ns := newNamespace(t)
	c := directClient(t, server.URL())
	app := "LEDGER-" + strings.ToUpper(ns[len(ns)-5:])
	vm(t, c, app, "vm-1:ledger:8080", "10.20.1.1", eureka.StatusUp, "")
	newImport(t, ns, app, nil)
	service := strings.ToLower(app)
	harness.Eventually(t, patience, "the VM as endpoint", wantEndpoints(ns, service, map[string]bool{"10.20.1.1": true}))

	// A selector and another port, by hand: the selector would make
	// Kubernetes' endpoint slice controller add slices of its own.
	var svc corev1.Service
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: service}, &svc); err != nil {
		t.Fatal(err)
	}
	svc.Spec.Selector = map[string]string{"app": "ledger"}
	svc.Spec.Ports[0].Port = 81
	if err := k8s.Update(context.Background(), &svc); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, patience, "the Service put back: no selector, port 80", func() error {
		if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: service}, &svc); err != nil {
			return err
		}
		if len(svc.Spec.Selector) != 0 || svc.Spec.Ports[0].Port != 80 {
			return fmt.Errorf("selector %v, port %d", svc.Spec.Selector, svc.Spec.Ports[0].Port)
		}
		return nil
	})
}

// newPatternImport makes a pattern import: one import per matching app.
func newPatternImport(t *testing.T, ns, name, pattern string) *v1alpha1.EurekaImport {
	t.Helper()
	imp := &v1alpha1.EurekaImport{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: v1alpha1.EurekaImportSpec{App: pattern}}
	if err := k8s.Create(context.Background(), imp); err != nil {
		t.Fatal(err)
	}
	return imp
}

// patternImports are the names of the imports of ns that parent controls.
func patternImports(ns string, parent *v1alpha1.EurekaImport) ([]string, error) {
	var list v1alpha1.EurekaImportList
	if err := k8s.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
		return nil, err
	}
	var out []string
	for i := range list.Items {
		if metav1.IsControlledBy(&list.Items[i], parent) {
			out = append(out, list.Items[i].Name)
		}
	}
	sort.Strings(out)
	return out, nil
}

func wantPatternImports(ns string, parent *v1alpha1.EurekaImport, want ...string) func() error {
	return func() error {
		got, err := patternImports(ns, parent)
		if err != nil {
			return err
		}
		sort.Strings(want)
		if fmt.Sprint(got) != fmt.Sprint(want) {
			return fmt.Errorf("imports %v, want %v", got, want)
		}
		return nil
	}
}

// deleteImport deletes imp and waits until it is gone.
func deleteImport(t *testing.T, imp *v1alpha1.EurekaImport) {
	t.Helper()
	if err := k8s.Delete(context.Background(), imp); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, patience, "the import gone", func() error {
		if _, _, err := importCondition(imp, "Synced"); !apierrors.IsNotFound(err) {
			return fmt.Errorf("import still there: %v", err)
		}
		return nil
	})
}

// serviceGone is nil once ns has no Service of the name.
func serviceGone(ns, name string) func() error { return goneOf(&corev1.Service{}, ns, name) }

// endpointsObjectGone is nil once ns has no Endpoints of the name.
func endpointsObjectGone(ns, name string) func() error { return goneOf(&corev1.Endpoints{}, ns, name) }

// goneOf is nil once ns has no object of obj's kind and the name.
func goneOf(obj client.Object, ns, name string) func() error {
	return func() error {
		if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, obj); !apierrors.IsNotFound(err) {
			return fmt.Errorf("%T %s: still there (%v)", obj, name, err)
		}
		return nil
	}
}

func TestImport_APatternImportsEachMatchingAppAsItsOwnService(t *testing.T) {
	ns := newNamespace(t)
	c := directClient(t, server.URL())
	sfx := strings.ToUpper(ns[len(ns)-5:])
	billing, ledger, stock, other := "PAT"+sfx+"-BILLING", "PAT"+sfx+"-LEDGER", "PAT"+sfx+"-STOCK", "OTHER"+sfx+"-PAYMENTS"
	vm(t, c, billing, "vm-1:billing:8080", "10.24.0.1", eureka.StatusUp, "")
	vm(t, c, billing, "vm-2:billing:8080", "10.24.0.2", eureka.StatusDown, "")
	vm(t, c, ledger, "vm-1:ledger:8080", "10.24.1.1", eureka.StatusUp, "")
	vm(t, c, other, "vm-1:payments:8080", "10.24.2.1", eureka.StatusUp, "")
	// An app only this cluster's pods register is not imported: they have
	// a Service.
	own := "PAT" + sfx + "-OWN"
	s := newSyncer(t, ns, "own", "http://"+proxy.Addr()+"/eureka")
	s.Spec.AppName = own
	mine := register(t, c, s, newPod(t, ns, "own", "own-1", true, "10.0.32.1"))
	t.Cleanup(func() { _ = c.Cancel(context.Background(), mine.App, mine.InstanceID) })

	parent := newPatternImport(t, ns, "pat", "pat"+strings.ToLower(sfx)+"-*")
	billingSvc, ledgerSvc, stockSvc := strings.ToLower(billing), strings.ToLower(ledger), strings.ToLower(stock)
	harness.Eventually(t, patience, "one import per matching app, none for the others", wantPatternImports(ns, parent, billingSvc, ledgerSvc))
	harness.Eventually(t, patience, "billing's instances as endpoints", wantEndpoints(ns, billingSvc, map[string]bool{"10.24.0.1": true, "10.24.0.2": false}))
	harness.Eventually(t, patience, "ledger's instance as endpoint", wantEndpoints(ns, ledgerSvc, map[string]bool{"10.24.1.1": true}))
	for _, name := range []string{strings.ToLower(other), strings.ToLower(own)} {
		if err := serviceGone(ns, name)(); err != nil {
			t.Errorf("an app the pattern does not import has a Service: %v", err)
		}
	}
	var child v1alpha1.EurekaImport
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: billingSvc}, &child); err != nil {
		t.Fatal(err)
	}
	if child.Spec.App != billing || child.Spec.Service.Name != "" || child.Labels[v1alpha1.ImportPatternLabel] != parent.Name {
		t.Errorf("billing's import: app %q, service %q, labels %v", child.Spec.App, child.Spec.Service.Name, child.Labels)
	}
	// Each app's import keeps its Endpoints too, as a single import does.
	harness.Eventually(t, patience, "billing's Endpoints, its import's", wantEndpointsObject(ns, billingSvc, &child, map[string]bool{"10.24.0.1": true, "10.24.0.2": false}))
	harness.Eventually(t, patience, "the pattern's status sums up its imports", func() error {
		cond, got, err := importCondition(parent, v1alpha1.ConditionSynced)
		if err != nil {
			return err
		}
		if cond == nil || cond.Status != metav1.ConditionTrue || !strings.Contains(cond.Message, "2 apps imported: "+billing+", "+ledger) {
			return fmt.Errorf("Synced %+v", cond)
		}
		if p := got.Status.Pattern; p == nil || fmt.Sprint(p.Apps) != fmt.Sprint([]string{billing, ledger}) || len(p.Skipped) > 0 {
			return fmt.Errorf("status.pattern %+v", p)
		}
		if got.Status.ServiceName != "2 Services" || got.Status.Endpoints != "2/3" {
			return fmt.Errorf("serviceName %q, endpoints %q", got.Status.ServiceName, got.Status.Endpoints)
		}
		return nil
	})
	harness.Eventually(t, patience, "kubectl get eimp: the pattern as APP, the Services counted", func() error {
		out, err := exec.Command("kubectl", "--kubeconfig", cp.Kubeconfig, "get", "eimp", parent.Name, "-n", ns, "--no-headers").CombinedOutput()
		if err != nil {
			return fmt.Errorf("%v: %s", err, out)
		}
		if got, want := strings.Join(strings.Fields(string(out)), " "), fmt.Sprintf("pat PAT%s-* 2 Services 2/3 ", sfx); !strings.HasPrefix(got, want) {
			return fmt.Errorf("%q, want prefix %q", got, want)
		}
		return nil
	})

	// An app registered later is imported within a read.
	vm(t, c, stock, "vm-1:stock:8080", "10.24.3.1", eureka.StatusUp, "")
	harness.Eventually(t, patience, "the new app's import", wantPatternImports(ns, parent, billingSvc, ledgerSvc, stockSvc))
	harness.Eventually(t, patience, "the new app's endpoint", wantEndpoints(ns, stockSvc, map[string]bool{"10.24.3.1": true}))

	// An app that leaves Eureka loses its import, and so its Service, once
	// it has been gone for the grace (a server restarted empty is refilled
	// within it); the pattern says so meanwhile.
	if err := c.Cancel(context.Background(), ledger, "vm-1:ledger:8080"); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, patience, "an AppLeaving Event naming ledger's import", func() error {
		var list corev1.EventList
		if err := k8s.List(context.Background(), &list, &clientInNamespace{ns}); err != nil {
			return err
		}
		for _, e := range list.Items {
			if e.Reason == "AppLeaving" && e.InvolvedObject.Name == parent.Name && strings.Contains(e.Message, ledgerSvc) {
				return nil
			}
		}
		return fmt.Errorf("none among %d Events", len(list.Items))
	})
	harness.Eventually(t, patience, "ledger's import gone", wantPatternImports(ns, parent, billingSvc, stockSvc))
	harness.Eventually(t, patience, "ledger's Service gone", serviceGone(ns, ledgerSvc))
	harness.Eventually(t, patience, "ledger's Endpoints gone", endpointsObjectGone(ns, ledgerSvc))

	// Deleting the pattern removes every app's import and Service.
	if err := k8s.Delete(context.Background(), parent); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, patience, "the pattern, its imports and their Services gone", func() error {
		if _, _, err := importCondition(parent, v1alpha1.ConditionSynced); !apierrors.IsNotFound(err) {
			return fmt.Errorf("pattern import still there: %v", err)
		}
		if err := wantPatternImports(ns, parent)(); err != nil {
			return err
		}
		for _, name := range []string{billingSvc, stockSvc} {
			if err := serviceGone(ns, name)(); err != nil {
				return err
			}
			if err := endpointsObjectGone(ns, name)(); err != nil {
				return err
			}
			if eps, _, err := importedEndpoints(ns, name); err != nil || len(eps) > 0 {
				return fmt.Errorf("slices of %s left: %v %v", name, eps, err)
			}
		}
		return nil
	})
}

func TestImport_APatternLeavesAnImportItDoesNotControlAlone(t *testing.T) {
	ns := newNamespace(t)
	c := directClient(t, server.URL())
	sfx := strings.ToUpper(ns[len(ns)-5:])
	billing, ledger, batch := "PAT"+sfx+"-BILLING", "PAT"+sfx+"-LEDGER", "PAT"+sfx+"_BATCH"
	vm(t, c, billing, "vm-1:billing:8080", "10.25.0.1", eureka.StatusUp, "")
	vm(t, c, ledger, "vm-1:ledger:8080", "10.25.1.1", eureka.StatusUp, "")
	// An app whose name is no Service name: skipped, and named.
	vm(t, c, batch, "vm-1:batch:8080", "10.25.2.1", eureka.StatusUp, "")
	// A team's own import of billing, under the name the pattern would use.
	theirs := newImport(t, ns, billing, func(spec *v1alpha1.EurekaImportSpec) { spec.Service.Name = "billing-mine" })
	harness.Eventually(t, patience, "their import's Service", wantEndpoints(ns, "billing-mine", map[string]bool{"10.25.0.1": true}))

	parent := newPatternImport(t, ns, "pat", "PAT"+sfx+"*")
	harness.Eventually(t, patience, "ledger imported; billing's name taken and batch's invalid, both named", func() error {
		cond, got, err := importCondition(parent, v1alpha1.ConditionSynced)
		if err != nil {
			return err
		}
		if cond == nil || cond.Status != metav1.ConditionFalse || cond.Reason != "PartlyImported" ||
			!strings.Contains(cond.Message, "1 app imported: "+ledger) || !strings.Contains(cond.Message, billing) || !strings.Contains(cond.Message, batch) {
			return fmt.Errorf("Synced %+v", cond)
		}
		p := got.Status.Pattern
		if p == nil || fmt.Sprint(p.Imports) != fmt.Sprint([]string{strings.ToLower(ledger)}) || len(p.Skipped) != 2 {
			return fmt.Errorf("status.pattern %+v", p)
		}
		reasons := map[string]string{}
		for _, s := range p.Skipped {
			reasons[s.App] = s.Reason + ": " + s.Message
		}
		if !strings.HasPrefix(reasons[billing], v1alpha1.ReasonImportNotOwned+": EurekaImport "+theirs.Name) ||
			!strings.HasPrefix(reasons[batch], v1alpha1.ReasonInvalidName) {
			return fmt.Errorf("skipped %v", reasons)
		}
		return nil
	})
	harness.Eventually(t, patience, "ledger's endpoint", wantEndpoints(ns, strings.ToLower(ledger), map[string]bool{"10.25.1.1": true}))

	check := func() {
		t.Helper()
		var got v1alpha1.EurekaImport
		if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(theirs), &got); err != nil {
			t.Fatalf("their import: %v", err)
		}
		if len(got.OwnerReferences) > 0 || len(got.Labels) > 0 || got.Spec.Service.Name != "billing-mine" || !got.DeletionTimestamp.IsZero() {
			t.Errorf("their import changed: %+v", got.ObjectMeta)
		}
	}
	check()
	// A change of the pattern's spec reaches its apps' imports, and only
	// theirs.
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(parent), parent); err != nil {
			return err
		}
		parent.Spec.Service.Ports = []v1alpha1.ImportPort{{Name: "web", Port: 8081}}
		return k8s.Update(context.Background(), parent)
	}); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, patience, "ledger's Service on the new port", func() error {
		var svc corev1.Service
		if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: strings.ToLower(ledger)}, &svc); err != nil {
			return err
		}
		if len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Name != "web" || svc.Spec.Ports[0].Port != 8081 {
			return fmt.Errorf("ports %+v", svc.Spec.Ports)
		}
		return nil
	})
	check()
	if err := k8s.Delete(context.Background(), parent); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, patience, "the pattern and ledger's Service gone", func() error {
		if _, _, err := importCondition(parent, v1alpha1.ConditionSynced); !apierrors.IsNotFound(err) {
			return fmt.Errorf("pattern import still there: %v", err)
		}
		return serviceGone(ns, strings.ToLower(ledger))()
	})
	check()
	if err := wantEndpoints(ns, "billing-mine", map[string]bool{"10.25.0.1": true})(); err != nil {
		t.Errorf("their Service: %v", err)
	}
}

func TestImport_TheCRDTakesPatternsWithoutAServiceName(t *testing.T) {
	ns := newNamespace(t)
	create := func(name, app, service string) error {
		return k8s.Create(context.Background(), &v1alpha1.EurekaImport{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: v1alpha1.EurekaImportSpec{App: app, Service: v1alpha1.ImportService{Name: service}}})
	}
	// Patterns no app of the suite's Eureka matches.
	for n, app := range []string{"*-NOMATCH", "NOMATCH_*", "*.nomatch", "nomatch-*-eu"} {
		if err := create(fmt.Sprintf("ok-%d", n), app, ""); err != nil {
			t.Errorf("pattern %s refused: %v", app, err)
		}
	}
	if err := create("named", "PAY*", "payments"); err == nil || !strings.Contains(err.Error(), "leave service.name unset") {
		t.Errorf("a pattern with service.name: %v", err)
	}
	// The single import's rules stand.
	if err := create("odd", "PAY_OLD", ""); err == nil || !strings.Contains(err.Error(), "not a valid Service name") {
		t.Errorf("an app without a Service name: %v", err)
	}
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var imp v1alpha1.EurekaImport
		if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "ok-1"}, &imp); err != nil {
			return err
		}
		imp.Spec.App = "PAY*"
		return k8s.Update(context.Background(), &imp)
	})
	if err == nil || !strings.Contains(err.Error(), "app cannot change") {
		t.Errorf("a pattern changed: %v", err)
	}
}

func TestImport_APatternCountsTheAppsThePolicyRefuses(t *testing.T) {
	ns := newNamespace(t)
	ctx := context.Background()
	harness.SuspendSharedApps(ctx, t, k8s)
	c := directClient(t, server.URL())
	sfx := strings.ToUpper(ns[len(ns)-5:])
	billing, treasury := "PAT"+sfx+"-BILLING", "PAT"+sfx+"-TREASURY"
	vm(t, c, billing, "vm-1:billing:8080", "10.26.0.1", eureka.StatusUp, "")
	vm(t, c, treasury, "vm-1:treasury:8080", "10.26.1.1", eureka.StatusUp, "")
	// The platform grants treasury to another namespace only.
	policy := &v1alpha1.EurekaAppPolicy{ObjectMeta: metav1.ObjectMeta{Name: "treasury-" + strings.ToLower(sfx)},
		Spec: v1alpha1.EurekaAppPolicySpec{Apps: []string{treasury}, Namespaces: []string{"finance"}}}
	if err := k8s.Create(ctx, policy); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), policy) })

	parent := newPatternImport(t, ns, "pat", "PAT"+sfx+"-*")
	treasuryImport := &v1alpha1.EurekaImport{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: strings.ToLower(treasury)}}
	harness.Eventually(t, patience, "treasury's own import refused by name", func() error {
		cond, _, err := importCondition(treasuryImport, v1alpha1.ConditionPermitted)
		if err != nil {
			return err
		}
		if cond == nil || cond.Status != metav1.ConditionFalse || !strings.Contains(cond.Message, policy.Name) {
			return fmt.Errorf("Permitted %+v", cond)
		}
		return nil
	})
	harness.Eventually(t, patience, "billing imported", wantEndpoints(ns, strings.ToLower(billing), map[string]bool{"10.26.0.1": true}))
	if err := serviceGone(ns, strings.ToLower(treasury))(); err != nil {
		t.Errorf("a refused app has a Service: %v", err)
	}
	harness.Eventually(t, patience, "the pattern counts the refused app", func() error {
		permitted, got, err := importCondition(parent, v1alpha1.ConditionPermitted)
		if err != nil {
			return err
		}
		synced := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionSynced)
		if permitted == nil || permitted.Status != metav1.ConditionFalse || !strings.Contains(permitted.Message, treasury) {
			return fmt.Errorf("Permitted %+v", permitted)
		}
		if synced == nil || synced.Status != metav1.ConditionFalse ||
			!strings.Contains(synced.Message, "1 app imported: "+billing+"; 1 refused by the policy: "+treasury) {
			return fmt.Errorf("Synced %+v", synced)
		}
		return nil
	})
}
