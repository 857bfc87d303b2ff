package controller

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/eurekube/eurekube/api/v1alpha1"
	"github.com/eurekube/eurekube/eureka"
	"github.com/eurekube/eurekube/sidecar"
)

// svcShape builds the Service of a test case.
type svcShape struct {
	typ       corev1.ServiceType
	clusterIP string
	ports     []corev1.ServicePort
	ingress   []corev1.LoadBalancerIngress
	local     bool
}

func (s svcShape) build() *corev1.Service {
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "orders", Namespace: "shop"}}
	svc.Spec.Type, svc.Spec.ClusterIP, svc.Spec.Ports = s.typ, s.clusterIP, s.ports
	if svc.Spec.ClusterIP == "" {
		svc.Spec.ClusterIP = "10.96.0.10"
	}
	if svc.Spec.Ports == nil {
		svc.Spec.Ports = []corev1.ServicePort{{Name: "http", Port: 80, NodePort: 31080}}
	}
	if s.local {
		svc.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
	}
	svc.Status.LoadBalancer.Ingress = s.ingress
	return svc
}

func testNode(name string, ready bool, addrs ...corev1.NodeAddress) corev1.Node {
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	return corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name},
		Status: corev1.NodeStatus{Addresses: addrs, Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: status}}}}
}

func internal(ip string) corev1.NodeAddress {
	return corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: ip}
}

func external(ip string) corev1.NodeAddress {
	return corev1.NodeAddress{Type: corev1.NodeExternalIP, Address: ip}
}

// slice is an EndpointSlice with one endpoint per entry: node → ready.
func slice(endpoints ...endpointShape) discoveryv1.EndpointSlice {
	s := discoveryv1.EndpointSlice{AddressType: discoveryv1.AddressTypeIPv4}
	for _, e := range endpoints {
		node, ready := e.node, e.ready
		s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{Addresses: []string{e.ip}, NodeName: &node, Conditions: discoveryv1.EndpointConditions{Ready: &ready}})
	}
	return s
}

type endpointShape struct {
	ip, node string
	ready    bool
}

func TestResolveService_PicksTheAddressVMsReach(t *testing.T) {
	nodes := []corev1.Node{
		testNode("n1", true, internal("192.168.0.1"), external("203.0.113.1")),
		testNode("n2", true, internal("192.168.0.2")),
		testNode("n3", false, internal("192.168.0.3")),
		testNode("n4", true), // no address yet
	}
	oneReady := []discoveryv1.EndpointSlice{slice(endpointShape{"10.244.1.5", "n2", true}, endpointShape{"10.244.1.6", "n1", false})}
	byNumber, byName := intstr.FromInt32(80), intstr.FromString("http")
	auto := v1alpha1.ServiceTarget{Name: "orders", AddressType: v1alpha1.AddressAuto}
	withType := func(t v1alpha1.ServiceAddressType) v1alpha1.ServiceTarget {
		return v1alpha1.ServiceTarget{Name: "orders", AddressType: t}
	}
	tests := []struct {
		name    string
		target  v1alpha1.ServiceTarget
		port    intstr.IntOrString
		svc     *svcShape
		slices  []discoveryv1.EndpointSlice
		want    []string // host:port, or the reason when it starts with "!"
		ready   int
		viaNode bool
	}{
		{name: "no Service", target: auto, port: byNumber, want: []string{"!" + reasonServiceNotFound}},
		{name: "port number absent", target: auto, port: intstr.FromInt32(8080), svc: &svcShape{typ: corev1.ServiceTypeNodePort}, want: []string{"!" + reasonPortNotFound}},
		{name: "port name absent", target: auto, port: intstr.FromString("grpc"), svc: &svcShape{typ: corev1.ServiceTypeNodePort}, want: []string{"!" + reasonPortNotFound}},
		{name: "a UDP port is not an HTTP port", target: auto, port: byNumber,
			svc: &svcShape{typ: corev1.ServiceTypeNodePort, ports: []corev1.ServicePort{{Port: 80, Protocol: corev1.ProtocolUDP, NodePort: 31080}}}, want: []string{"!" + reasonPortNotFound}},
		{name: "explicit address wins over the ingress, with the Service port", target: v1alpha1.ServiceTarget{Name: "orders", Address: "orders.example.com"}, port: byName,
			svc: &svcShape{typ: corev1.ServiceTypeLoadBalancer, ingress: []corev1.LoadBalancerIngress{{IP: "198.51.100.7"}}}, slices: oneReady,
			want: []string{"orders.example.com:80"}, ready: 1},
		{name: "Auto: load-balancer IP", target: auto, port: byNumber,
			svc: &svcShape{typ: corev1.ServiceTypeLoadBalancer, ingress: []corev1.LoadBalancerIngress{{IP: "198.51.100.7"}}}, want: []string{"198.51.100.7:80"}},
		{name: "Auto: load-balancer hostname", target: auto, port: byName,
			svc: &svcShape{typ: corev1.ServiceTypeLoadBalancer, ingress: []corev1.LoadBalancerIngress{{Hostname: "lb-1.elb.example.com"}}}, want: []string{"lb-1.elb.example.com:80"}},
		{name: "Auto: LoadBalancer without ingress falls back to its node port on Ready nodes, ExternalIP first", target: auto, port: byNumber,
			svc: &svcShape{typ: corev1.ServiceTypeLoadBalancer}, want: []string{"192.168.0.2:31080", "203.0.113.1:31080"}, viaNode: true},
		{name: "Auto: NodePort", target: auto, port: byName, svc: &svcShape{typ: corev1.ServiceTypeNodePort}, slices: oneReady,
			want: []string{"192.168.0.2:31080", "203.0.113.1:31080"}, ready: 1, viaNode: true},
		{name: "Auto: NodePort with externalTrafficPolicy Local takes the nodes holding a ready endpoint", target: auto, port: byName,
			svc: &svcShape{typ: corev1.ServiceTypeNodePort, local: true}, slices: oneReady, want: []string{"192.168.0.2:31080"}, ready: 1, viaNode: true},
		{name: "Auto: ClusterIP Service is not reachable (pod and cluster IPs never by default)", target: auto, port: byNumber,
			svc: &svcShape{typ: corev1.ServiceTypeClusterIP, ports: []corev1.ServicePort{{Port: 80}}}, want: []string{"!" + reasonNoReachableAddress}},
		{name: "LoadBalancer forced, no ingress", target: withType(v1alpha1.AddressLoadBalancer), port: byNumber,
			svc: &svcShape{typ: corev1.ServiceTypeLoadBalancer}, want: []string{"!" + reasonNoReachableAddress}},
		{name: "NodePort forced over an ingress", target: withType(v1alpha1.AddressNodePort), port: byNumber,
			svc:  &svcShape{typ: corev1.ServiceTypeLoadBalancer, ingress: []corev1.LoadBalancerIngress{{IP: "198.51.100.7"}}},
			want: []string{"192.168.0.2:31080", "203.0.113.1:31080"}, viaNode: true},
		{name: "NodePort forced, ClusterIP Service", target: withType(v1alpha1.AddressNodePort), port: byNumber,
			svc: &svcShape{typ: corev1.ServiceTypeClusterIP, ports: []corev1.ServicePort{{Port: 80}}}, want: []string{"!" + reasonNoReachableAddress}, viaNode: true},
		{name: "ClusterIP forced", target: withType(v1alpha1.AddressClusterIP), port: byNumber,
			svc: &svcShape{typ: corev1.ServiceTypeClusterIP}, want: []string{"10.96.0.10:80"}},
		{name: "ClusterIP forced, headless", target: withType(v1alpha1.AddressClusterIP), port: byNumber,
			svc: &svcShape{typ: corev1.ServiceTypeClusterIP, clusterIP: corev1.ClusterIPNone}, want: []string{"!" + reasonNoReachableAddress}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in := serviceInputs{target: tc.target, port: tc.port, slices: tc.slices, nodes: nodes}
			if tc.svc != nil {
				in.service = tc.svc.build()
			}
			res := resolveService(in)
			if strings.HasPrefix(tc.want[0], "!") {
				if res.reason != tc.want[0][1:] || len(res.addresses) != 0 {
					t.Fatalf("reason %q, addresses %v; want reason %s and none", res.reason, res.addresses, tc.want[0][1:])
				}
				if !strings.Contains(res.message, "orders") || !strings.Contains(res.message, "nothing is registered") {
					t.Fatalf("message %q names neither the Service nor what happens meanwhile", res.message)
				}
				return
			}
			var got []string
			for _, a := range res.addresses {
				got = append(got, a.String())
			}
			if res.reason != "" || strings.Join(got, " ") != strings.Join(tc.want, " ") {
				t.Fatalf("addresses %v (reason %q %s), want %v", got, res.reason, res.message, tc.want)
			}
			if res.readyEndpoints != tc.ready || res.viaNodePort != tc.viaNode || res.source == "" {
				t.Fatalf("ready endpoints %d, via node port %v, source %q; want %d, %v and a source", res.readyEndpoints, res.viaNodePort, res.source, tc.ready, tc.viaNode)
			}
		})
	}
}

func TestResolveService_NoReadyNodeIsNoReachableAddress(t *testing.T) {
	res := resolveService(serviceInputs{
		target: v1alpha1.ServiceTarget{Name: "orders"}, port: intstr.FromInt32(80), service: svcShape{typ: corev1.ServiceTypeNodePort}.build(),
		nodes: []corev1.Node{testNode("n1", false, internal("192.168.0.1"))},
	})
	if res.reason != reasonNoReachableAddress || !strings.Contains(res.message, "31080") {
		t.Fatalf("reason %q message %q, want %s naming the node port", res.reason, res.message, reasonNoReachableAddress)
	}
}

func TestServiceInstanceID_IsUniquePerNamespaceAndClusterAndHasNoSlash(t *testing.T) {
	addr := serviceAddress{Host: "203.0.113.7", Port: 80}
	id := serviceInstanceID(addr, "ORDERS", "orders", "shop", "prod-eu-1")
	if !strings.HasPrefix(id, "203.0.113.7:orders:80:orders.shop.") || len(id) != len("203.0.113.7:orders:80:orders.shop.")+8 {
		t.Fatalf("id %q, want 203.0.113.7:orders:80:orders.shop.<8 hex digits>", id)
	}
	// Cluster ids that share a prefix still differ.
	if serviceInstanceID(addr, "ORDERS", "orders", "shop-2", "prod-eu-1") == id || serviceInstanceID(addr, "ORDERS", "orders", "shop", "prod-eu-2") == id {
		t.Fatal("the id does not tell namespaces or clusters apart")
	}
	if got := serviceInstanceID(addr, "ORDERS", "orders", "shop", "a/b"); strings.Contains(got, "/") {
		t.Fatalf("id %q has a '/'", got)
	}
}

func TestServiceInstances_CarryTheMarkersAndTheStatusOfTheEndpoints(t *testing.T) {
	s := &v1alpha1.EurekaSyncer{ObjectMeta: metav1.ObjectMeta{Name: "orders", Namespace: "shop"}, Spec: v1alpha1.EurekaSyncerSpec{
		Mode: v1alpha1.ModeService, Service: &v1alpha1.ServiceTarget{Name: "orders-svc"}, Port: intstr.FromInt32(80),
		Metadata: map[string]string{"zone": "eu-1", eureka.MetaCluster: "forged"}, Lease: v1alpha1.Lease{RenewalIntervalSeconds: 5, DurationSeconds: 15},
	}}
	res := serviceResolution{addresses: []serviceAddress{{Host: "lb.example.com", Port: 80}}, readyEndpoints: 0}
	insts := serviceInstances(s, res, "cluster-1")
	if len(insts) != 1 {
		t.Fatalf("%d instances", len(insts))
	}
	inst := insts[0]
	if inst.App != "ORDERS" || inst.HostName != "lb.example.com" || inst.IPAddr != "lb.example.com" || inst.Port != 80 || !inst.PortEnabled ||
		inst.VIPAddress != "orders" || inst.SecureVIPAddress != "orders" || inst.Status != eureka.StatusDown || inst.OverriddenStatus != "" ||
		inst.RenewalInterval != 5*time.Second || inst.Duration != 15*time.Second {
		t.Fatalf("instance %+v", inst)
	}
	want := map[string]string{"zone": "eu-1", eureka.MetaManagedBy: eureka.ManagedByValue, eureka.MetaCluster: "cluster-1",
		eureka.MetaNamespace: "shop", eureka.MetaSyncer: "orders", eureka.MetaService: "orders-svc"}
	if len(inst.Metadata) != len(want) || !inst.HasMetadata(want) {
		t.Fatalf("metadata %v, want %v (no pod uid: orphan collection must skip it)", inst.Metadata, want)
	}

	s.Spec.Traffic, s.Spec.VIPAddress = v1alpha1.TrafficStandby, "orders-vip"
	res.readyEndpoints = 2
	inst = serviceInstances(s, res, "cluster-1")[0]
	if inst.Status != eureka.StatusUp || inst.OverriddenStatus != eureka.StatusOutOfService || inst.VIPAddress != "orders-vip" {
		t.Fatalf("Standby with ready endpoints: %+v", inst)
	}
	if len(serviceInstances(s, serviceResolution{reason: reasonNoReachableAddress}, "cluster-1")) != 0 {
		t.Fatal("an unreachable Service is registered")
	}
}

func TestServiceInstances_AreSpringShapedAtTheServiceAddress(t *testing.T) {
	syncer := func(mutate func(*v1alpha1.EurekaSyncerSpec)) *v1alpha1.EurekaSyncer {
		s := &v1alpha1.EurekaSyncer{ObjectMeta: metav1.ObjectMeta{Name: "orders", Namespace: "shop"}, Spec: v1alpha1.EurekaSyncerSpec{
			Mode: v1alpha1.ModeService, Service: &v1alpha1.ServiceTarget{Name: "orders"}, Port: intstr.FromString("http"),
		}}
		if mutate != nil {
			mutate(&s.Spec)
		}
		return s
	}
	res := func(port corev1.ServicePort) serviceResolution {
		return serviceResolution{addresses: []serviceAddress{{Host: "lb.example.com", Port: 8080}}, port: port, readyEndpoints: 1}
	}
	for name, tc := range map[string]struct {
		syncer                    *v1alpha1.EurekaSyncer
		port                      corev1.ServicePort
		home, status, health, ctx string
	}{
		"an HTTP port: the actuator's info and health on it": {
			syncer: syncer(nil), port: corev1.ServicePort{Name: "http", Port: 8080},
			home: "http://lb.example.com:8080/", status: "http://lb.example.com:8080/actuator/info", health: "http://lb.example.com:8080/actuator/health",
		},
		"a base path of its own, in the metadata too": {
			syncer: syncer(func(s *v1alpha1.EurekaSyncerSpec) { s.Management = &v1alpha1.Management{BasePath: "/manage"} }),
			port:   corev1.ServicePort{Name: "http", Port: 8080},
			home:   "http://lb.example.com:8080/", status: "http://lb.example.com:8080/manage/info", health: "http://lb.example.com:8080/manage/health", ctx: "/manage",
		},
		"a gRPC port by name: no URLs": {syncer: syncer(nil), port: corev1.ServicePort{Name: "grpc-api", Port: 8080}},
		"a port whose appProtocol says tls: no URLs": {
			syncer: syncer(nil), port: corev1.ServicePort{Name: "web", Port: 8080, AppProtocol: ptr.To("tls")},
		},
		"spec.protocol TCP wins over an http name": {
			syncer: syncer(func(s *v1alpha1.EurekaSyncerSpec) { s.Protocol = v1alpha1.ProtocolTCP }), port: corev1.ServicePort{Name: "http", Port: 8080},
		},
	} {
		inst := serviceInstances(tc.syncer, res(tc.port), "cluster-1")[0]
		if inst.HomePageURL != tc.home || inst.StatusPageURL != tc.status || inst.HealthCheckURL != tc.health {
			t.Errorf("%s: URLs %q %q %q, want %q %q %q", name, inst.HomePageURL, inst.StatusPageURL, inst.HealthCheckURL, tc.home, tc.status, tc.health)
		}
		if got := inst.Metadata[sidecar.MetaManagementContextPath]; got != tc.ctx {
			t.Errorf("%s: metadata %s = %q, want %q", name, sidecar.MetaManagementContextPath, got, tc.ctx)
		}
		if _, ok := inst.Metadata[sidecar.MetaManagementPort]; ok {
			t.Errorf("%s: metadata names a management port: the actuator answers on the registered one", name)
		}
	}
}
