package controller_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/eurekube/eurekube/api/v1alpha1"
	"github.com/eurekube/eurekube/eureka"
	"github.com/eurekube/eurekube/internal/ownership"
	"github.com/eurekube/eurekube/tests/harness"
)

// Issue 41, item 2: an import never points into another namespace's pods.
// The measured attack: namespace evil imports ORDERS, which shop owns,
// with includeThisCluster, and its EndpointSlice listed shop's pod IPs, so
// an Ingress of evil reached shop's pods past shop's NetworkPolicies. And
// anyone may register an instance with a chosen ipAddr: another
// namespace's pod IP, a ClusterIP.

// grantApp has the platform team grant app to namespaces only.
func grantApp(t *testing.T, app string, namespaces ...string) {
	t.Helper()
	policy := &v1alpha1.EurekaAppPolicy{ObjectMeta: metav1.ObjectMeta{Name: strings.ToLower(app)},
		Spec: v1alpha1.EurekaAppPolicySpec{Apps: []string{app}, Namespaces: namespaces}}
	if err := k8s.Create(context.Background(), policy); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), policy) })
}

// claimApp makes app namespace's by an EurekaAppClaim an admin writes (no
// managed-by label: the manager leaves it as written), as a first claim
// would.
func claimApp(t *testing.T, app, namespace string) {
	t.Helper()
	claim := ownership.NewClaim(app, namespace)
	claim.Labels = nil
	if err := k8s.Create(context.Background(), claim); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), claim) })
}

// podRangeNode is a node whose spec.podCIDRs is cidr, as the controller
// manager allocates them: where the manager learns the pod range.
func podRangeNode(t *testing.T, cidr string) {
	t.Helper()
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{GenerateName: "import-node-"}, Spec: corev1.NodeSpec{PodCIDR: cidr, PodCIDRs: []string{cidr}}}
	if err := k8s.Create(context.Background(), node); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), node) })
}

// chosenAddress registers, as anyone may, an instance of app without
// Eurekube's markers whose ipAddr is ip.
func chosenAddress(t *testing.T, c *eureka.Client, app, id, ip string) {
	t.Helper()
	vm(t, c, app, id, ip, eureka.StatusUp, "")
}

// addressesAllowed waits for imp's AddressesAllowed condition to be
// status and to say each of mention.
func addressesAllowed(imp *v1alpha1.EurekaImport, status metav1.ConditionStatus, mention ...string) func() error {
	return func() error {
		cond, _, err := importCondition(imp, v1alpha1.ConditionAddressesAllowed)
		if err != nil {
			return err
		}
		if cond == nil || cond.Status != status || cond.ObservedGeneration != imp.Generation {
			return fmt.Errorf("AddressesAllowed %+v", cond)
		}
		for _, m := range mention {
			if !strings.Contains(cond.Message, m) {
				return fmt.Errorf("AddressesAllowed %q lacks %q", cond.Message, m)
			}
		}
		return nil
	}
}

func refusedGauge(ns, name string) (float64, error) {
	got, err := gaugeSeries("eurekube_import_instances_refused", func(l map[string]string) (string, bool) {
		return "refused", l["namespace"] == ns && l["import"] == name
	})
	return got["refused"], err
}

func TestImportAttack_AnImportOfAnotherNamespacesAppNeverListsItsPods(t *testing.T) {
	shop, evil := newNamespace(t), newNamespace(t)
	ctx := context.Background()
	harness.SuspendSharedApps(ctx, t, k8s)
	c := directClient(t, server.URL())
	app := "ORDERS-" + strings.ToUpper(shop[len(shop)-5:])
	// shop owns ORDERS by its claim, as measured; no policy names it, so
	// it is anyone's to call.
	claimApp(t, app, shop)
	podRangeNode(t, "10.0.41.0/24")

	// shop's pods, registered by their registrars with this cluster's
	// markers.
	s := newSyncer(t, shop, "orders", "http://"+proxy.Addr()+"/eureka")
	s.Spec.AppName = app
	for _, p := range []struct{ name, ip string }{{"orders-1", "10.0.41.4"}, {"orders-2", "10.0.41.5"}} {
		inst := register(t, c, s, newPod(t, shop, "orders", p.name, true, p.ip))
		t.Cleanup(func() { _ = c.Cancel(context.Background(), inst.App, inst.InstanceID) })
	}
	orders3 := newPod(t, shop, "orders", "orders-3", false, "10.0.41.6")
	// What anyone can register with a chosen ipAddr: shop's third pod
	// (unmarked, as by hand), a ClusterIP (Service default/kubernetes'),
	// a pod-range address no pod has; and a real VM.
	var kubernetes corev1.Service
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: "default", Name: "kubernetes"}, &kubernetes); err != nil {
		t.Fatal(err)
	}
	chosenAddress(t, c, app, "by-hand:orders-3:8080", orders3.Status.PodIP)
	chosenAddress(t, c, app, "by-hand:clusterip:8080", kubernetes.Spec.ClusterIP)
	chosenAddress(t, c, app, "by-hand:free-pod-ip:8080", "10.0.41.77")
	vm(t, c, app, "vm-1:orders:8080", "10.27.0.1", eureka.StatusUp, "")

	// The attack: evil imports shop's app, asking for this cluster's
	// instances. An app is anyone's to call: the import is permitted, and
	// gets the VM only.
	attack := newImport(t, evil, app, func(spec *v1alpha1.EurekaImportSpec) { spec.IncludeThisCluster = true })
	service := strings.ToLower(app)
	harness.Eventually(t, patience, "evil's slices list the VM and no address of the cluster", wantEndpoints(evil, service, map[string]bool{"10.27.0.1": true}))
	harness.Eventually(t, patience, "evil's Endpoints too", wantEndpointsObject(evil, service, attack, map[string]bool{"10.27.0.1": true}))
	harness.Eventually(t, patience, "the condition names what was left out, and why", addressesAllowed(attack, metav1.ConditionFalse,
		"5 instance(s) of "+app+" left out", "by-hand:clusterip:8080 at "+kubernetes.Spec.ClusterIP+" (in the Service range",
		"by-hand:free-pod-ip:8080 at 10.0.41.77 (in the pod range 10.0.41.0/24 (node import-node-", "and no running pod has it",
		"and 2 more", "--pod-cidr and --service-cidr"))
	cond, got, err := importCondition(attack, v1alpha1.ConditionAddressesAllowed)
	if err != nil {
		t.Fatal(err)
	}
	if cond.Reason != v1alpha1.ReasonInClusterAddress {
		t.Errorf("AddressesAllowed reason %s, want %s", cond.Reason, v1alpha1.ReasonInClusterAddress)
	}
	if permitted := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionPermitted); permitted == nil || permitted.Status != metav1.ConditionTrue {
		t.Errorf("Permitted %+v: calling an app is not owning it", permitted)
	}
	harness.Eventually(t, patience, "the metric counts them", func() error {
		if n, err := refusedGauge(evil, attack.Name); err != nil || n != 5 {
			return fmt.Errorf("eurekube_import_instances_refused %v (%v), want 5", n, err)
		}
		return nil
	})

	// shop's own import takes its pods, the one registered by hand
	// included: they are shop's. The ClusterIP and the address no pod has
	// stay out.
	own := &v1alpha1.EurekaImport{ObjectMeta: metav1.ObjectMeta{Namespace: shop, Name: "orders-all"},
		Spec: v1alpha1.EurekaImportSpec{App: app, IncludeThisCluster: true, Service: v1alpha1.ImportService{Name: "orders-all"}}}
	if err := k8s.Create(ctx, own); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, patience, "shop's import lists shop's pods and the VM", wantEndpoints(shop, "orders-all",
		map[string]bool{"10.0.41.4": true, "10.0.41.5": true, "10.0.41.6": true, "10.27.0.1": true}))
	harness.Eventually(t, patience, "shop's import names the two it left out", addressesAllowed(own, metav1.ConditionFalse,
		"2 instance(s) of "+app+" left out", "by-hand:clusterip:8080", "by-hand:free-pod-ip:8080"))

	// A pod that stops running gives its address up: an instance left at
	// it goes from shop's slices too.
	stopped := orders3.DeepCopy()
	stopped.Status.Phase = corev1.PodSucceeded
	if err := k8s.Status().Patch(ctx, stopped, client.MergeFrom(orders3)); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, patience, "a finished pod's address leaves", wantEndpoints(shop, "orders-all",
		map[string]bool{"10.0.41.4": true, "10.0.41.5": true, "10.27.0.1": true}))
}

// Without includeThisCluster, an instance registered by hand at another
// namespace's pod IP is no VM: it stays out of the import of any
// namespace, even one the app is granted to.
func TestImportAttack_AChosenIPAddrOfAnotherNamespacesPodIsLeftOut(t *testing.T) {
	victim, evil := newNamespace(t), newNamespace(t)
	harness.SuspendSharedApps(context.Background(), t, k8s)
	app := "PROXY-" + strings.ToUpper(evil[len(evil)-5:])
	// evil may register app itself, and imports it.
	grantApp(t, app, evil)
	wantTheVMOnly(t, victim, evil, app, "proxy", "10.0.42.9", "10.27.1.1", "of pod "+victim+"/db-1, whose namespace may not register the app")
}

// The same with an app nobody owns: a free name is free to claim, but
// owning it is what an address inside the cluster takes. evil registers a
// new app at the victim's pod IP and imports it, with and without
// includeThisCluster: only the VM is written.
func TestImportAttack_AFreeAppNameAtAnotherNamespacesPodIsLeftOut(t *testing.T) {
	victim, evil := newNamespace(t), newNamespace(t)
	harness.SuspendSharedApps(context.Background(), t, k8s)
	wantTheVMOnly(t, victim, evil, "FREE-"+strings.ToUpper(evil[len(evil)-5:]), "free", "10.0.43.9", "10.27.1.2", "of pod "+victim+"/db-1")
}

// wantTheVMOnly registers, by hand, an instance of app at the IP of a pod
// of victim's (podIP) and a VM (vmIP); evil imports app, without and with
// includeThisCluster: each import lists the VM only and names the pod's
// instance, mentioning why.
func wantTheVMOnly(t *testing.T, victim, evil, app, name, podIP, vmIP, why string) {
	t.Helper()
	ctx := context.Background()
	c := directClient(t, server.URL())
	pod := newPod(t, victim, "db", "db-1", false, podIP)
	chosenAddress(t, c, app, "by-hand:db-1:8080", pod.Status.PodIP)
	vm(t, c, app, "vm-1:"+name+":8080", vmIP, eureka.StatusUp, "")
	for _, include := range []bool{false, true} {
		name := fmt.Sprintf("%s-%v", name, include)
		imp := &v1alpha1.EurekaImport{ObjectMeta: metav1.ObjectMeta{Namespace: evil, Name: name},
			Spec: v1alpha1.EurekaImportSpec{App: app, IncludeThisCluster: include, Service: v1alpha1.ImportService{Name: name}}}
		if err := k8s.Create(ctx, imp); err != nil {
			t.Fatal(err)
		}
		harness.Eventually(t, patience, name+": the VM only", wantEndpoints(evil, name, map[string]bool{vmIP: true}))
		harness.Eventually(t, patience, name+": the victim's pod named", addressesAllowed(imp, metav1.ConditionFalse,
			"by-hand:db-1:8080 at "+podIP+" (", why))
	}
}

// A refused import reads nothing from Eureka: its servers never see a
// request of it.
func TestImportAttack_ARefusedImportReadsNothing(t *testing.T) {
	ns := newNamespace(t)
	ctx := context.Background()
	harness.SuspendSharedApps(ctx, t, k8s)
	var requests atomic.Int32
	counting := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		http.Error(w, "not a Eureka server", http.StatusServiceUnavailable)
	}))
	t.Cleanup(counting.Close)
	app := "TREASURY-" + strings.ToUpper(ns[len(ns)-5:])
	grantApp(t, app, "finance")
	imp := newImport(t, ns, app, func(spec *v1alpha1.EurekaImportSpec) {
		spec.Eureka.ServiceURLs = []string{counting.URL + "/eureka"}
	})
	harness.Eventually(t, patience, "refused by the policy", func() error {
		cond, got, err := importCondition(imp, v1alpha1.ConditionPermitted)
		if err != nil {
			return err
		}
		if cond == nil || cond.Status != metav1.ConditionFalse || !strings.Contains(cond.Message, strings.ToLower(app)) {
			return fmt.Errorf("Permitted %+v", cond)
		}
		if synced := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionSynced); synced == nil || !strings.Contains(synced.Message, "nothing is read from Eureka") {
			return fmt.Errorf("Synced %+v", synced)
		}
		return nil
	})
	if n := requests.Load(); n != 0 {
		t.Errorf("a refused import made %d request(s) to its Eureka server", n)
	}
}

// Pattern imports are capped (the suite's manager: maxPatternApps): the
// apps imported already keep their place, then the first by name; the
// condition names the cap, the count and what was left out.
func TestImportAttack_APatternImportsAtMostTheCap(t *testing.T) {
	ns := newNamespace(t)
	c := directClient(t, server.URL())
	sfx := strings.ToUpper(ns[len(ns)-5:])
	var apps []string
	for i, name := range []string{"C", "D", "E", "F", "G"} {
		app := "CAP" + sfx + "-" + name
		apps = append(apps, app)
		vm(t, c, app, "vm-1:"+strings.ToLower(name)+":8080", fmt.Sprintf("10.28.%d.1", i), eureka.StatusUp, "")
	}
	parent := newPatternImport(t, ns, "cap", "CAP"+sfx+"-*")
	lower := func(apps ...string) []string {
		var out []string
		for _, a := range apps {
			out = append(out, strings.ToLower(a))
		}
		return out
	}
	harness.Eventually(t, patience, "the first three by name", wantPatternImports(ns, parent, lower(apps[:maxPatternApps]...)...))
	within := func(mention ...string) func() error {
		return func() error {
			cond, _, err := importCondition(parent, v1alpha1.ConditionAppsWithinCap)
			if err != nil {
				return err
			}
			if cond == nil || cond.Status != metav1.ConditionFalse || cond.Reason != v1alpha1.ReasonPatternCapReached {
				return fmt.Errorf("AppsWithinCap %+v", cond)
			}
			for _, m := range mention {
				if !strings.Contains(cond.Message, m) {
					return fmt.Errorf("AppsWithinCap %q lacks %q", cond.Message, m)
				}
			}
			return nil
		}
	}
	harness.Eventually(t, patience, "the condition names the cap, the count and the rest", within(
		fmt.Sprintf("matches 5 apps, more than the cap of %d (the manager's --max-pattern-apps)", maxPatternApps), "left out: "+apps[3]+", "+apps[4]))

	// An app registered later never takes a serving app's place, whatever
	// its name.
	first := "CAP" + sfx + "-A"
	vm(t, c, first, "vm-1:a:8080", "10.28.9.1", eureka.StatusUp, "")
	harness.Eventually(t, patience, "the newcomer is left out", within("matches 6 apps", "left out: "+first+", "+apps[3]))
	if err := wantPatternImports(ns, parent, lower(apps[:maxPatternApps]...)...)(); err != nil {
		t.Error(err)
	}
}
