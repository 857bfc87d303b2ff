package controller

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/eurekube/eurekube/api/v1alpha1"
)

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
