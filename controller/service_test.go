package controller_test

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/eurekube/eurekube/api/v1alpha1"
	"github.com/eurekube/eurekube/eureka"
	"github.com/eurekube/eurekube/tests/harness"
)

// Service mode against the real API server and Eureka. No
// kube-controller-manager runs, so each test plays its controllers: it
// writes the EndpointSlices and Nodes, and the load balancer's ingress as a
// cloud controller would.

// newServiceSyncer creates a Service-mode syncer registering Service svc
// on its port 80, changed by edit.
func newServiceSyncer(t *testing.T, ns, name, svc string, edit func(*v1alpha1.EurekaSyncerSpec)) *v1alpha1.EurekaSyncer {
	t.Helper()
	s := &v1alpha1.EurekaSyncer{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: v1alpha1.EurekaSyncerSpec{
			Mode: v1alpha1.ModeService, Service: &v1alpha1.ServiceTarget{Name: svc}, Port: intstr.FromInt32(80),
			Metadata: map[string]string{"zone": "k8s-1"},
		},
	}
	if edit != nil {
		edit(&s.Spec)
	}
	if err := k8s.Create(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	return s
}

// newService creates a Service with port http 80 → 8080, and sets the load
// balancer's ingress as a cloud controller would when ingress is given.
func newService(t *testing.T, ns, name string, typ corev1.ServiceType, ingress ...corev1.LoadBalancerIngress) *corev1.Service {
	t.Helper()
	ctx := context.Background()
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: corev1.ServiceSpec{Type: typ, Selector: map[string]string{"app": name},
			Ports: []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080)}}},
	}
	if err := k8s.Create(ctx, svc); err != nil {
		t.Fatal(err)
	}
	if len(ingress) > 0 {
		svc.Status.LoadBalancer.Ingress = ingress
		if err := k8s.Status().Update(ctx, svc); err != nil {
			t.Fatal(err)
		}
	}
	return svc
}

// setEndpoints writes the Service's EndpointSlice as the EndpointSlice
// controller would: one endpoint, ready or not.
func setEndpoints(t *testing.T, svc *corev1.Service, ready bool) {
	t.Helper()
	ctx := context.Background()
	es := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Name: svc.Name + "-abcde", Namespace: svc.Namespace,
		Labels: map[string]string{discoveryv1.LabelServiceName: svc.Name}}}
	err := k8s.Get(ctx, client.ObjectKeyFromObject(es), es)
	if err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	port, proto, name := int32(8080), corev1.ProtocolTCP, "http"
	es.AddressType = discoveryv1.AddressTypeIPv4
	es.Ports = []discoveryv1.EndpointPort{{Name: &name, Port: &port, Protocol: &proto}}
	es.Endpoints = []discoveryv1.Endpoint{{Addresses: []string{"10.244.0.7"}, Conditions: discoveryv1.EndpointConditions{Ready: &ready}}}
	if apierrors.IsNotFound(err) {
		err = k8s.Create(ctx, es)
	} else {
		err = k8s.Update(ctx, es)
	}
	if err != nil {
		t.Fatal(err)
	}
}

// newNode creates a node with an address, Ready or not, as a kubelet
// would register it.
func newNode(t *testing.T, addr corev1.NodeAddress, ready bool) *corev1.Node {
	t.Helper()
	ctx := context.Background()
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{GenerateName: "svc-node-"}}
	if err := k8s.Create(ctx, node); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), node) })
	node.Status.Addresses = []corev1.NodeAddress{addr}
	setNodeReady(t, node, ready)
	return node
}

func setNodeReady(t *testing.T, node *corev1.Node, ready bool) {
	t.Helper()
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	node.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: status, LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}}
	if err := k8s.Status().Update(context.Background(), node); err != nil {
		t.Fatal(err)
	}
}

// serviceRegistrations reads this cluster's Service instances of the
// syncer straight from Eureka, by host:port.
func serviceRegistrations(c *eureka.Client, s *v1alpha1.EurekaSyncer) (map[string]eureka.Instance, error) {
	all, err := c.Instances(context.Background(), s.EffectiveAppName())
	if err != nil && !strings.Contains(err.Error(), eureka.ErrNotFound.Error()) {
		return nil, err
	}
	out := map[string]eureka.Instance{}
	for _, inst := range all {
		if inst.Metadata[eureka.MetaCluster] == clusterID && inst.Metadata[eureka.MetaNamespace] == s.Namespace && inst.Metadata[eureka.MetaService] != "" {
			out[inst.HostName+":"+strconv.Itoa(inst.Port)] = inst
		}
	}
	return out, nil
}

// wantRegistered waits until Eureka holds exactly the addresses, each with
// the status, and the syncer's status agrees.
func wantRegistered(t *testing.T, c *eureka.Client, s *v1alpha1.EurekaSyncer, status eureka.Status, addrs ...string) map[string]eureka.Instance {
	t.Helper()
	sort.Strings(addrs)
	var got map[string]eureka.Instance
	harness.Eventually(t, patience, fmt.Sprintf("Eureka holds %v %s and the status says so", addrs, status), func() error {
		var err error
		if got, err = serviceRegistrations(c, s); err != nil {
			return err
		}
		var have []string
		for addr, inst := range got {
			if inst.Status != status {
				return fmt.Errorf("%s is %s", addr, inst.Status)
			}
			have = append(have, addr)
		}
		sort.Strings(have)
		if !slices.Equal(have, addrs) {
			return fmt.Errorf("Eureka holds %v", have)
		}
		st, err := getSyncer(s)
		if err != nil {
			return err
		}
		if !slices.Equal(st.Status.ServiceAddresses, addrs) {
			return fmt.Errorf("status.serviceAddresses %v", st.Status.ServiceAddresses)
		}
		if len(addrs) > 0 {
			if c := meta.FindStatusCondition(st.Status.Conditions, v1alpha1.ConditionServiceReachable); c == nil || c.Status != metav1.ConditionTrue {
				return fmt.Errorf("ServiceReachable %+v", c)
			}
		}
		return nil
	})
	return got
}

// wantUnreachable waits for ServiceReachable False with the reason, and
// nothing of the syncer's Service in Eureka.
func wantUnreachable(t *testing.T, c *eureka.Client, s *v1alpha1.EurekaSyncer, reason string) {
	t.Helper()
	harness.Eventually(t, patience, "ServiceReachable False/"+reason+", nothing registered", func() error {
		st, err := getSyncer(s)
		if err != nil {
			return err
		}
		cond := meta.FindStatusCondition(st.Status.Conditions, v1alpha1.ConditionServiceReachable)
		if cond == nil || cond.Status != metav1.ConditionFalse || cond.Reason != reason || cond.ObservedGeneration != st.Generation {
			return fmt.Errorf("ServiceReachable %+v", cond)
		}
		if !strings.Contains(cond.Message, s.Spec.Service.Name) {
			return fmt.Errorf("the message does not name the Service: %q", cond.Message)
		}
		if len(st.Status.ServiceAddresses) != 0 || st.Status.Ready != "0/0" {
			return fmt.Errorf("status says %v registered, READY %s", st.Status.ServiceAddresses, st.Status.Ready)
		}
		got, err := serviceRegistrations(c, s)
		if err != nil {
			return err
		}
		if len(got) != 0 {
			return fmt.Errorf("Eureka holds %v", got)
		}
		return nil
	})
}

// otherClusterService registers what another cluster's Eurekube registers
// for the same app and Service: it must never be touched.
func otherClusterService(t *testing.T, c *eureka.Client, s *v1alpha1.EurekaSyncer, host string) {
	t.Helper()
	inst := eureka.Instance{App: s.EffectiveAppName(), InstanceID: host + ":" + strings.ToLower(s.EffectiveAppName()) + ":80:" + s.Spec.Service.Name + "." + s.Namespace + ".another",
		HostName: host, IPAddr: host, Status: eureka.StatusUp, Port: 80, PortEnabled: true,
		Metadata: map[string]string{eureka.MetaManagedBy: eureka.ManagedByValue, eureka.MetaCluster: "another-cluster",
			eureka.MetaNamespace: s.Namespace, eureka.MetaSyncer: s.Name, eureka.MetaService: s.Spec.Service.Name}}
	if err := c.Register(context.Background(), inst); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		got, err := c.Instance(context.Background(), inst.App, inst.InstanceID)
		if err != nil || got.Status != eureka.StatusUp {
			t.Errorf("another cluster's Service instance was touched: %+v %v", got, err)
		}
		_ = c.Cancel(context.Background(), inst.App, inst.InstanceID)
	})
}

func TestServiceMode_LoadBalancerRegistersItsIngressUpWhileAnEndpointIsReady(t *testing.T) {
	ns := newNamespace(t)
	c := directClient(t, server.URL())
	svc := newService(t, ns, "orders", corev1.ServiceTypeLoadBalancer, corev1.LoadBalancerIngress{IP: "198.51.100.7"})
	setEndpoints(t, svc, true)
	s := newServiceSyncer(t, ns, "orders", "orders", nil)
	foreign(t, c, s)
	otherClusterService(t, c, s, "198.51.100.7")

	got := wantRegistered(t, c, s, eureka.StatusUp, "198.51.100.7:80")
	inst := got["198.51.100.7:80"]
	want := map[string]string{"zone": "k8s-1", eureka.MetaManagedBy: eureka.ManagedByValue, eureka.MetaCluster: clusterID,
		eureka.MetaNamespace: ns, eureka.MetaSyncer: "orders", eureka.MetaService: "orders"}
	if !inst.HasMetadata(want) || inst.Metadata[eureka.MetaPodUID] != "" || inst.IPAddr != "198.51.100.7" || inst.VIPAddress != "orders" ||
		!strings.HasPrefix(inst.InstanceID, "198.51.100.7:orders:80:orders."+ns+".") {
		t.Fatalf("instance %+v", inst)
	}
	// As Spring Boot Admin and the dashboard follow them, read back from Eureka.
	if inst.HomePageURL != "http://198.51.100.7:80/" || inst.StatusPageURL != "http://198.51.100.7:80/actuator/info" || inst.HealthCheckURL != "http://198.51.100.7:80/actuator/health" {
		t.Errorf("URLs %q %q %q, want the address's root and the actuator's info and health", inst.HomePageURL, inst.StatusPageURL, inst.HealthCheckURL)
	}
	harness.Eventually(t, patience, "READY 1/1, Synced, no pod counted", func() error {
		st, err := getSyncer(s)
		if err != nil {
			return err
		}
		if st.Status.Ready != "1/1" || st.Status.SelectedPods != 0 || st.Status.ReadyPods != 0 || !meta.IsStatusConditionTrue(st.Status.Conditions, v1alpha1.ConditionSynced) {
			return fmt.Errorf("status %+v", st.Status)
		}
		return nil
	})

	setEndpoints(t, svc, false)
	wantRegistered(t, c, s, eureka.StatusDown, "198.51.100.7:80")
	harness.Eventually(t, patience, "READY 0/1, Synced False/NoReadyEndpoint", func() error {
		st, err := getSyncer(s)
		if err != nil {
			return err
		}
		cond := meta.FindStatusCondition(st.Status.Conditions, v1alpha1.ConditionSynced)
		if st.Status.Ready != "0/1" || cond == nil || cond.Reason != "NoReadyEndpoint" {
			return fmt.Errorf("READY %s, Synced %+v", st.Status.Ready, cond)
		}
		return nil
	})

	setEndpoints(t, svc, true)
	wantRegistered(t, c, s, eureka.StatusUp, "198.51.100.7:80")

	// The Service goes: its instance is cancelled.
	if err := k8s.Delete(context.Background(), svc); err != nil {
		t.Fatal(err)
	}
	wantUnreachable(t, c, s, "ServiceNotFound")
}

func TestServiceMode_NodePortRegistersEveryReadyNodesAddress(t *testing.T) {
	ns := newNamespace(t)
	c := directClient(t, server.URL())
	newNode(t, corev1.NodeAddress{Type: corev1.NodeExternalIP, Address: "203.0.113.21"}, true)
	later := newNode(t, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: "192.168.77.22"}, false)
	svc := newService(t, ns, "payments", corev1.ServiceTypeNodePort)
	setEndpoints(t, svc, true)
	nodePort := strconv.Itoa(int(svc.Spec.Ports[0].NodePort))
	s := newServiceSyncer(t, ns, "payments", "payments", func(spec *v1alpha1.EurekaSyncerSpec) { spec.Port = intstr.FromString("http") })

	// Other tests' nodes may be Ready too: every Ready node with an
	// address counts, the one that is not Ready never.
	readyAddresses := func() []string {
		var nodes corev1.NodeList
		if err := k8s.List(context.Background(), &nodes); err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, n := range nodes.Items {
			ready := slices.ContainsFunc(n.Status.Conditions, func(c corev1.NodeCondition) bool {
				return c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue
			})
			if ready && n.DeletionTimestamp == nil && len(n.Status.Addresses) > 0 {
				out = append(out, n.Status.Addresses[0].Address+":"+nodePort)
			}
		}
		return out
	}
	got := wantRegistered(t, c, s, eureka.StatusUp, readyAddresses()...)
	if _, ok := got["203.0.113.21:"+nodePort]; !ok {
		t.Fatalf("the Ready node is not registered: %v", got)
	}
	if _, ok := got["192.168.77.22:"+nodePort]; ok {
		t.Fatal("a node that is not Ready is registered")
	}

	setNodeReady(t, later, true) // a Node event reaches the syncer
	got = wantRegistered(t, c, s, eureka.StatusUp, readyAddresses()...)
	if _, ok := got["192.168.77.22:"+nodePort]; !ok {
		t.Fatalf("the node that became Ready is not registered: %v", got)
	}
}

func TestServiceMode_AnExplicitAddressWinsAndItsChangeCancelsTheOldOne(t *testing.T) {
	ns := newNamespace(t)
	c := directClient(t, server.URL())
	svc := newService(t, ns, "billing", corev1.ServiceTypeLoadBalancer, corev1.LoadBalancerIngress{IP: "198.51.100.9"})
	setEndpoints(t, svc, true)
	s := newServiceSyncer(t, ns, "billing", "billing", func(spec *v1alpha1.EurekaSyncerSpec) { spec.Service.Address = "billing.example.com" })
	got := wantRegistered(t, c, s, eureka.StatusUp, "billing.example.com:80")
	if inst := got["billing.example.com:80"]; inst.IPAddr != "billing.example.com" {
		t.Fatalf("a DNS name's ipAddr %q, want the name", inst.IPAddr)
	}

	current, err := getSyncer(s)
	if err != nil {
		t.Fatal(err)
	}
	current.Spec.Service.Address = "billing-2.example.com"
	if err := k8s.Update(context.Background(), current); err != nil {
		t.Fatal(err)
	}
	wantRegistered(t, c, s, eureka.StatusUp, "billing-2.example.com:80")
}

func TestServiceMode_AMissingServiceRegistersNothing(t *testing.T) {
	ns := newNamespace(t)
	c := directClient(t, server.URL())
	s := newServiceSyncer(t, ns, "stock", "stock", nil)
	wantUnreachable(t, c, s, "ServiceNotFound")
	harness.Eventually(t, patience, "a Warning event ServiceNotFound", func() error {
		var list corev1.EventList
		if err := k8s.List(context.Background(), &list, &clientInNamespace{ns}); err != nil {
			return err
		}
		for _, e := range list.Items {
			if e.InvolvedObject.Name == s.Name && e.Reason == "ServiceNotFound" && e.Type == corev1.EventTypeWarning {
				return nil
			}
		}
		return fmt.Errorf("no such event among %d", len(list.Items))
	})

	// The Service comes: a Service event reaches the syncer.
	svc := newService(t, ns, "stock", corev1.ServiceTypeLoadBalancer, corev1.LoadBalancerIngress{Hostname: "stock.lb.example.com"})
	setEndpoints(t, svc, true)
	wantRegistered(t, c, s, eureka.StatusUp, "stock.lb.example.com:80")
}

func TestServiceMode_AServiceWithoutAReachableAddressRegistersNothing(t *testing.T) {
	ns := newNamespace(t)
	c := directClient(t, server.URL())
	svc := newService(t, ns, "ledger", corev1.ServiceTypeClusterIP)
	setEndpoints(t, svc, true)
	s := newServiceSyncer(t, ns, "ledger", "ledger", nil)
	wantUnreachable(t, c, s, "NoReachableAddress")

	// A port the Service does not have.
	current, err := getSyncer(s)
	if err != nil {
		t.Fatal(err)
	}
	current.Spec.Port = intstr.FromString("grpc")
	if err := k8s.Update(context.Background(), current); err != nil {
		t.Fatal(err)
	}
	wantUnreachable(t, c, s, "PortNotFound")
}

func TestServiceMode_DeletingTheSyncerCancelsAndReleasesTheFinalizer(t *testing.T) {
	ns := newNamespace(t)
	c := directClient(t, server.URL())
	svc := newService(t, ns, "search", corev1.ServiceTypeLoadBalancer, corev1.LoadBalancerIngress{IP: "198.51.100.11"})
	setEndpoints(t, svc, true)
	s := newServiceSyncer(t, ns, "search", "search", nil)
	otherClusterService(t, c, s, "198.51.100.11")
	wantRegistered(t, c, s, eureka.StatusUp, "198.51.100.11:80")

	if err := k8s.Delete(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, patience, "the syncer gone, its instance cancelled", func() error {
		if _, err := getSyncer(s); !apierrors.IsNotFound(err) {
			return fmt.Errorf("syncer still there: %v", err)
		}
		got, err := serviceRegistrations(c, s)
		if err != nil {
			return err
		}
		if len(got) != 0 {
			return fmt.Errorf("Eureka holds %v", got)
		}
		return nil
	})
}

func TestServiceMode_StandbyRegistersOutOfService(t *testing.T) {
	ns := newNamespace(t)
	c := directClient(t, server.URL())
	svc := newService(t, ns, "profile", corev1.ServiceTypeLoadBalancer, corev1.LoadBalancerIngress{IP: "198.51.100.13"})
	setEndpoints(t, svc, true)
	s := newServiceSyncer(t, ns, "profile", "profile", func(spec *v1alpha1.EurekaSyncerSpec) { spec.Traffic = v1alpha1.TrafficStandby })
	got := wantRegistered(t, c, s, eureka.StatusOutOfService, "198.51.100.13:80")
	if inst := got["198.51.100.13:80"]; inst.OverriddenStatus != eureka.StatusOutOfService {
		t.Fatalf("override %q, want OUT_OF_SERVICE", inst.OverriddenStatus)
	}
	harness.Eventually(t, patience, "READY 0/1, Synced (held on purpose)", func() error {
		st, err := getSyncer(s)
		if err != nil {
			return err
		}
		if st.Status.Ready != "0/1" || !meta.IsStatusConditionTrue(st.Status.Conditions, v1alpha1.ConditionSynced) {
			return fmt.Errorf("READY %s, conditions %+v", st.Status.Ready, st.Status.Conditions)
		}
		return nil
	})

	// Serve lets it in (the override removed, traffic.go).
	current, err := getSyncer(s)
	if err != nil {
		t.Fatal(err)
	}
	current.Spec.Traffic = v1alpha1.TrafficServe
	if err := k8s.Update(context.Background(), current); err != nil {
		t.Fatal(err)
	}
	wantRegistered(t, c, s, eureka.StatusUp, "198.51.100.13:80")
}

func TestServiceMode_AHeartbeatAnsweredNotFoundRegistersAgain(t *testing.T) {
	ns := newNamespace(t)
	c := directClient(t, server.URL())
	svc := newService(t, ns, "mail", corev1.ServiceTypeLoadBalancer, corev1.LoadBalancerIngress{IP: "198.51.100.15"})
	setEndpoints(t, svc, true)
	s := newServiceSyncer(t, ns, "mail", "mail", func(spec *v1alpha1.EurekaSyncerSpec) {
		spec.Lease = v1alpha1.Lease{RenewalIntervalSeconds: 1, DurationSeconds: 30}
	})
	got := wantRegistered(t, c, s, eureka.StatusUp, "198.51.100.15:80")
	inst := got["198.51.100.15:80"]
	if err := c.Cancel(context.Background(), inst.App, inst.InstanceID); err != nil {
		t.Fatal(err)
	}
	wantRegistered(t, c, s, eureka.StatusUp, "198.51.100.15:80")

	// A 1 s renewal against the server's expected 30 s is registered as
	// asked, and explained.
	harness.Eventually(t, patience, "LeaseSafe False, explained", func() error {
		st, err := getSyncer(s)
		if err != nil {
			return err
		}
		cond := meta.FindStatusCondition(st.Status.Conditions, v1alpha1.ConditionLeaseSafe)
		if cond == nil || cond.Status != metav1.ConditionFalse || cond.Reason != "RenewsMoreOftenThanExpected" || !strings.Contains(cond.Message, "counts as 30 clients") {
			return fmt.Errorf("LeaseSafe %+v", cond)
		}
		return nil
	})
}
