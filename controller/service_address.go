package controller

import (
	"fmt"
	"net"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/eurekube/eurekube/api/v1alpha1"
)

// Address resolution for Service mode: which host:port pairs a VM can
// reach the Service at, decided from what the API server holds and
// nothing else (no I/O), so that every rule has a unit test.

// Reasons of the ServiceReachable condition when it is False.
const (
	reasonServiceNotFound    = "ServiceNotFound"
	reasonPortNotFound       = "PortNotFound"
	reasonNoReachableAddress = "NoReachableAddress"
	reasonServiceReachable   = "Reachable"
)

// serviceAddress is one host:port a VM can reach the Service at. Host is
// an IP or a DNS name.
type serviceAddress struct {
	Host string
	Port int32
}

// String is host:port, IPv6 in brackets.
func (a serviceAddress) String() string {
	return net.JoinHostPort(a.Host, strconv.Itoa(int(a.Port)))
}

// serviceInputs is what address resolution reads: the syncer's spec, its
// Service (nil when it does not exist), the Service's EndpointSlices and
// the cluster's nodes.
type serviceInputs struct {
	target  v1alpha1.ServiceTarget
	port    intstr.IntOrString
	service *corev1.Service
	slices  []discoveryv1.EndpointSlice
	nodes   []corev1.Node
}

// serviceResolution is where VMs reach the Service, or why they cannot.
type serviceResolution struct {
	// addresses to register, sorted and without duplicates; empty when
	// reason is set.
	addresses []serviceAddress
	// source says where addresses came from, for the condition and events
	// ("load-balancer ingress", "NodePort 31234 on 3 Ready node(s)", …).
	source string
	// viaNodePort: the addresses are nodes' (a Node change may change them).
	viaNodePort bool
	// port is the Service port spec.port names.
	port corev1.ServicePort
	// readyEndpoints counts the Service's ready endpoints: instances are UP
	// only while there is one.
	readyEndpoints int
	// reason and message, when VMs cannot reach the Service: a reason of
	// the ServiceReachable condition and a message that names the fix.
	reason, message string
}

// reachable is true when there are addresses to register.
func (r serviceResolution) reachable() bool { return r.reason == "" }

// resolveService decides the addresses to register for a Service-mode
// syncer. The order of preference is the contract of spec.service:
// an explicit address (with the Service port); else by addressType, where
// Auto takes the load balancer's ingress, else the NodePort on every Ready
// node; LoadBalancer and NodePort insist on theirs; ClusterIP takes the
// cluster IP (only the user can know whether VMs route to it). Nothing VMs
// cannot reach is ever returned: a pod IP never, a headless Service's
// "None" never, a node that is not Ready never.
func resolveService(in serviceInputs) serviceResolution {
	res := serviceResolution{readyEndpoints: readyEndpoints(in.slices)}
	svc := in.service
	if svc == nil {
		res.reason = reasonServiceNotFound
		res.message = fmt.Sprintf("Service %s does not exist in this namespace: create it, or set spec.service.name to an existing Service; nothing is registered meanwhile", in.target.Name)
		return res
	}
	port, ok := servicePort(svc, in.port)
	res.port = port
	if !ok {
		res.reason = reasonPortNotFound
		res.message = fmt.Sprintf("Service %s has no TCP port %s (its ports: %s): set spec.port to one of them, by number or name; nothing is registered meanwhile",
			svc.Name, in.port.String(), describePorts(svc.Spec.Ports))
		return res
	}

	addressType := in.target.AddressType
	if addressType == "" {
		addressType = v1alpha1.AddressAuto
	}
	switch {
	case in.target.Address != "":
		res.addresses, res.source = []serviceAddress{{Host: in.target.Address, Port: port.Port}}, "spec.service.address"
	case addressType == v1alpha1.AddressClusterIP:
		ip := svc.Spec.ClusterIP
		if ip == "" || ip == corev1.ClusterIPNone {
			res.reason = reasonNoReachableAddress
			res.message = fmt.Sprintf("Service %s has no cluster IP (headless or ExternalName): set spec.service.addressType to LoadBalancer or NodePort, or give spec.service.address; nothing is registered meanwhile", svc.Name)
			return res
		}
		res.addresses, res.source = []serviceAddress{{Host: ip, Port: port.Port}}, "cluster IP"
	case addressType == v1alpha1.AddressLoadBalancer:
		if res.addresses = ingressAddresses(svc, port.Port); len(res.addresses) == 0 {
			res.reason = reasonNoReachableAddress
			res.message = fmt.Sprintf("Service %s has no load-balancer ingress (type %s): make it type LoadBalancer in a cluster with a load-balancer controller, or set spec.service.addressType to NodePort, or give spec.service.address; nothing is registered meanwhile",
				svc.Name, serviceType(svc))
			return res
		}
		res.source = "load-balancer ingress"
	case addressType == v1alpha1.AddressNodePort:
		res = nodePortAddresses(in, svc, port, res)
	default: // Auto
		if res.addresses = ingressAddresses(svc, port.Port); len(res.addresses) > 0 {
			res.source = "load-balancer ingress"
			break
		}
		if port.NodePort == 0 {
			res.reason = reasonNoReachableAddress
			res.message = fmt.Sprintf("Service %s (type %s) has no load-balancer ingress and no node port: make it type LoadBalancer or NodePort, or give spec.service.address (or addressType ClusterIP if VMs route to cluster IPs); pod IPs are never registered in Service mode; nothing is registered meanwhile",
				svc.Name, serviceType(svc))
			return res
		}
		res = nodePortAddresses(in, svc, port, res)
	}
	if res.reachable() {
		res.addresses = sortedUnique(res.addresses)
	}
	return res
}

// servicePort finds the TCP port spec.port names, by number or by name.
func servicePort(svc *corev1.Service, want intstr.IntOrString) (corev1.ServicePort, bool) {
	for _, p := range svc.Spec.Ports {
		if p.Protocol != "" && p.Protocol != corev1.ProtocolTCP {
			continue // Eureka clients call HTTP over TCP
		}
		if (want.Type == intstr.Int && p.Port == want.IntVal) || (want.Type == intstr.String && p.Name == want.StrVal) {
			return p, true
		}
	}
	return corev1.ServicePort{}, false
}

func describePorts(ports []corev1.ServicePort) string {
	if len(ports) == 0 {
		return "none"
	}
	parts := make([]string, 0, len(ports))
	for _, p := range ports {
		proto := p.Protocol
		if proto == "" {
			proto = corev1.ProtocolTCP
		}
		s := fmt.Sprintf("%d/%s", p.Port, proto)
		if p.Name != "" {
			s = p.Name + " " + s
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, ", ")
}

func serviceType(svc *corev1.Service) corev1.ServiceType {
	if svc.Spec.Type == "" {
		return corev1.ServiceTypeClusterIP
	}
	return svc.Spec.Type
}

// ingressAddresses are the load balancer's ingress points (IP, else
// hostname) with the Service port.
func ingressAddresses(svc *corev1.Service, port int32) []serviceAddress {
	var out []serviceAddress
	for _, ing := range svc.Status.LoadBalancer.Ingress {
		host := ing.IP
		if host == "" {
			host = ing.Hostname
		}
		if host != "" {
			out = append(out, serviceAddress{Host: host, Port: port})
		}
	}
	return out
}

// nodePortAddresses are the port's nodePort on every Ready node (its
// ExternalIP, else its InternalIP). With externalTrafficPolicy Local a node
// without a ready endpoint drops the connection, so only the nodes that
// hold one are taken, unless none does (then the instances are DOWN
// anyway, and the Service stays registered at every node).
func nodePortAddresses(in serviceInputs, svc *corev1.Service, port corev1.ServicePort, res serviceResolution) serviceResolution {
	res.viaNodePort = true
	if port.NodePort == 0 {
		res.reason = reasonNoReachableAddress
		res.message = fmt.Sprintf("Service %s (type %s) has no node port for port %d: make it type NodePort or LoadBalancer, or set spec.service.addressType to another type; nothing is registered meanwhile",
			svc.Name, serviceType(svc), port.Port)
		return res
	}
	local := svc.Spec.ExternalTrafficPolicy == corev1.ServiceExternalTrafficPolicyLocal
	withEndpoint := readyEndpointNodes(in.slices)
	var ready int
	for i := range in.nodes {
		n := &in.nodes[i]
		if !nodeReady(n) || !n.DeletionTimestamp.IsZero() {
			continue
		}
		host := nodeAddress(n)
		if host == "" {
			continue
		}
		if local && len(withEndpoint) > 0 && !withEndpoint[n.Name] {
			continue
		}
		ready++
		res.addresses = append(res.addresses, serviceAddress{Host: host, Port: port.NodePort})
	}
	if len(res.addresses) == 0 {
		res.reason = reasonNoReachableAddress
		res.message = fmt.Sprintf("Service %s has node port %d but no node is Ready with an address: wait for a node to be Ready, or set spec.service.address; nothing is registered meanwhile",
			svc.Name, port.NodePort)
		return res
	}
	res.source = fmt.Sprintf("node port %d on %d Ready node(s)", port.NodePort, ready)
	if local {
		res.source += " holding a ready endpoint (externalTrafficPolicy Local)"
	}
	return res
}

// nodeAddress is the address VMs reach a node at: its ExternalIP, else its
// InternalIP.
func nodeAddress(n *corev1.Node) string {
	for _, want := range []corev1.NodeAddressType{corev1.NodeExternalIP, corev1.NodeInternalIP} {
		for _, a := range n.Status.Addresses {
			if a.Type == want && a.Address != "" {
				return a.Address
			}
		}
	}
	return ""
}

// endpointReady: a nil ready condition means ready, as the EndpointSlice API
// defines it.
func endpointReady(e *discoveryv1.Endpoint) bool {
	return e.Conditions.Ready == nil || *e.Conditions.Ready
}

// readyEndpoints counts the ready endpoints of the slices, each address
// once (a dual-stack Service lists an endpoint in two slices).
func readyEndpoints(slices []discoveryv1.EndpointSlice) int {
	seen := map[string]bool{}
	for i := range slices {
		for j := range slices[i].Endpoints {
			e := &slices[i].Endpoints[j]
			if !endpointReady(e) || len(e.Addresses) == 0 {
				continue
			}
			key := e.Addresses[0]
			if e.TargetRef != nil && e.TargetRef.UID != "" {
				key = string(e.TargetRef.UID)
			}
			seen[key] = true
		}
	}
	return len(seen)
}

// readyEndpointNodes names the nodes that hold a ready endpoint.
func readyEndpointNodes(slices []discoveryv1.EndpointSlice) map[string]bool {
	out := map[string]bool{}
	for i := range slices {
		for j := range slices[i].Endpoints {
			e := &slices[i].Endpoints[j]
			if endpointReady(e) && e.NodeName != nil {
				out[*e.NodeName] = true
			}
		}
	}
	return out
}

func sortedUnique(addrs []serviceAddress) []serviceAddress {
	sort.Slice(addrs, func(i, j int) bool { return addrs[i].String() < addrs[j].String() })
	var out []serviceAddress
	for _, a := range addrs {
		if len(out) == 0 || a != out[len(out)-1] {
			out = append(out, a)
		}
	}
	return out
}
