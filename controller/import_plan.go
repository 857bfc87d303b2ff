package controller

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/netip"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"

	"github.com/eurekube/eurekube/api/v1alpha1"
	"github.com/eurekube/eurekube/eureka"
	"github.com/eurekube/eurekube/sidecar"
)

// What an import wants, without I/O: from the app's instances, the
// selector-less Service and the EndpointSlices that hold one endpoint per
// instance, and the Endpoints that lists them too (import_endpoints.go).
// The mapping of Eureka statuses to endpoint conditions:
//
//	UP                         ready, serving
//	OUT_OF_SERVICE, DOWN       not ready, not serving (taken out on purpose, or failing)
//	STARTING, UNKNOWN          not ready, not serving (not yet, or not said)
//
// None is terminating: Eureka has no such state, and an instance that
// leaves is cancelled (or evicted) and so is no longer listed at all.
//
// An instance is addressed by its ipAddr. One whose ipAddr is not an IP
// address (a host name registered in its place) is left out and named in
// the Synced condition: kube-proxy routes only to IP addresses (FQDN
// slices are deprecated and ignored by it), and resolving the name in the
// manager would pin one answer of a DNS record that may change. So is one
// whose address the API server refuses in a slice (loopback, link-local,
// unspecified): one such VM must not keep the others out.

// Labels and values the manager sets on what an import makes.
const (
	// ImportManagedBy is the EndpointSlices' managed-by: the endpoint
	// slice controller leaves slices of another manager alone.
	ImportManagedBy = "eurekube.io"
	// ImportLabel names the import on its Service and slices.
	ImportLabel = "eurekube.io/import"
	// maxSliceEndpoints is as many endpoints as one slice holds, the
	// endpoint slice controller's default.
	maxSliceEndpoints = 100
)

// importPlan is what an import wants.
type importPlan struct {
	service corev1.Service
	slices  []discoveryv1.EndpointSlice
	// endpoints is the Service's Endpoints, a view of slices
	// (planEndpoints).
	endpoints corev1.Endpoints //lint:ignore SA1019 Spring Cloud Kubernetes reads Endpoints
	// ready and total count the endpoints.
	ready, total int32
	// unaddressable names the instances left out: no IP address, or no
	// port enabled that the Service reaches.
	unaddressable []string
	// ports: the instance ports seen, for a condition when none fits.
	ports []string
}

// endpointConditions maps a Eureka status (see above).
func endpointConditions(st eureka.Status) discoveryv1.EndpointConditions {
	up := st == eureka.StatusUp
	return discoveryv1.EndpointConditions{Ready: ptr.To(up), Serving: ptr.To(up), Terminating: ptr.To(false)}
}

// importedInstances are the instances an import takes: the app's, less
// this cluster's own unless it asks for them.
func importedInstances(imp *v1alpha1.EurekaImport, all []eureka.Instance, clusterID string) []eureka.Instance {
	taken, _ := splitThisCluster(all, clusterID, imp.Spec.IncludeThisCluster)
	return taken
}

// splitThisCluster splits all into the instances taken, and those left
// out as this cluster's own (carrying its markers) when include is false.
func splitThisCluster(all []eureka.Instance, clusterID string, include bool) (taken, own []eureka.Instance) {
	if include {
		return all, nil
	}
	for _, inst := range all {
		if inst.Metadata[eureka.MetaManagedBy] == eureka.ManagedByValue && inst.Metadata[eureka.MetaCluster] == clusterID {
			own = append(own, inst)
			continue
		}
		taken = append(taken, inst)
	}
	return taken, own
}

// planImport builds the Service and slices imp wants for instances.
func planImport(imp *v1alpha1.EurekaImport, instances []eureka.Instance) importPlan {
	name := imp.EffectiveServiceName()
	ports := imp.EffectivePorts()
	meta := func() metav1.ObjectMeta {
		return metav1.ObjectMeta{Namespace: imp.Namespace, Labels: map[string]string{ImportLabel: imp.Name}}
	}
	plan := importPlan{service: corev1.Service{ObjectMeta: meta()}}
	plan.service.Name = name
	for _, p := range ports {
		plan.service.Spec.Ports = append(plan.service.Spec.Ports, corev1.ServicePort{Name: p.Name, Port: p.Port, Protocol: corev1.ProtocolTCP})
	}
	plan.service.Spec.Type = corev1.ServiceTypeClusterIP
	if imp.Spec.Service.Type == v1alpha1.ImportHeadless {
		plan.service.Spec.ClusterIP = corev1.ClusterIPNone
	}

	type group struct {
		addressType discoveryv1.AddressType
		ports       []int32
	}
	// The instance ID orders endpoints of one address (one VM's two
	// instances on one port, a stale and a new registration): the slices
	// do not depend on the order Eureka lists instances in.
	type instanceEndpoint struct {
		id string
		ep discoveryv1.Endpoint
	}
	byGroup := map[string][]instanceEndpoint{}
	groups := map[string]group{}
	seenPorts := map[string]bool{}
	for _, inst := range instances {
		seenPorts[instancePorts(&inst)] = true
		addr, why := endpointAddress(inst.IPAddr)
		if why != "" {
			plan.unaddressable = append(plan.unaddressable, fmt.Sprintf("%s (ipAddr %q %s)", inst.InstanceID, inst.IPAddr, why))
			continue
		}
		g := group{addressType: discoveryv1.AddressTypeIPv4}
		if addr.Is6() {
			g.addressType = discoveryv1.AddressTypeIPv6
		}
		ok := true
		for _, p := range ports {
			port, enabled := inst.Port, inst.PortEnabled
			if p.InstancePort == v1alpha1.InstancePortSecure {
				port, enabled = inst.SecurePort, inst.SecurePortEnabled
			}
			if !enabled || port <= 0 || port > 65535 {
				ok = false
				break
			}
			g.ports = append(g.ports, int32(port))
		}
		if !ok {
			plan.unaddressable = append(plan.unaddressable, fmt.Sprintf("%s (no enabled port for the Service's ports: %s)", inst.InstanceID, instancePorts(&inst)))
			continue
		}
		ep := discoveryv1.Endpoint{Addresses: []string{addr.String()}, Conditions: endpointConditions(inst.Status)}
		// A zone the API would refuse as a hint is left out, not the
		// instance.
		if zone := inst.Metadata[sidecar.MetaZone]; zone != "" && len(validation.IsValidLabelValue(zone)) == 0 {
			ep.Zone = ptr.To(zone)
			ep.Hints = &discoveryv1.EndpointHints{ForZones: []discoveryv1.ForZone{{Name: zone}}}
		}
		key := fmt.Sprint(g.addressType, g.ports)
		groups[key] = g
		byGroup[key] = append(byGroup[key], instanceEndpoint{id: inst.InstanceID, ep: ep})
		plan.total++
		if inst.Status == eureka.StatusUp {
			plan.ready++
		}
	}
	for p := range seenPorts {
		plan.ports = append(plan.ports, p)
	}
	sort.Strings(plan.ports)
	sort.Strings(plan.unaddressable)

	keys := make([]string, 0, len(groups))
	for k := range groups {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, key := range keys {
		g, ieps := groups[key], byGroup[key]
		sort.Slice(ieps, func(i, j int) bool {
			a, b := ieps[i].ep.Addresses[0], ieps[j].ep.Addresses[0]
			return a < b || a == b && ieps[i].id < ieps[j].id
		})
		eps := make([]discoveryv1.Endpoint, len(ieps))
		for i := range ieps {
			eps[i] = ieps[i].ep
		}
		sum := sha256.Sum256([]byte(key))
		for n := 0; n*maxSliceEndpoints < len(eps); n++ {
			chunk := eps[n*maxSliceEndpoints : min(len(eps), (n+1)*maxSliceEndpoints)]
			slice := discoveryv1.EndpointSlice{ObjectMeta: meta(), AddressType: g.addressType, Endpoints: slices.Clone(chunk)}
			slice.Name = fmt.Sprintf("%s-eurekube-%s-%d", truncateName(name, 200), hex.EncodeToString(sum[:4]), n)
			slice.Labels[discoveryv1.LabelServiceName] = name
			slice.Labels[discoveryv1.LabelManagedBy] = ImportManagedBy
			for i, p := range ports {
				slice.Ports = append(slice.Ports, discoveryv1.EndpointPort{Name: ptr.To(p.Name), Port: ptr.To(g.ports[i]), Protocol: ptr.To(corev1.ProtocolTCP)})
			}
			plan.slices = append(plan.slices, slice)
		}
	}
	plan.endpoints = planEndpoints(&plan.service, plan.slices)
	return plan
}

// endpointAddress is ipAddr as an endpoint's address, or why it cannot be
// one: not an IP address, or one the API server refuses in an
// EndpointSlice (unspecified, loopback, link-local, or with an IPv6 zone).
// An IPv4-mapped IPv6 address is its IPv4 address.
func endpointAddress(ipAddr string) (netip.Addr, string) {
	addr, err := netip.ParseAddr(ipAddr)
	switch {
	case err != nil:
		return addr, "is not an IP address"
	case addr.Zone() != "":
		return addr, "has an IPv6 zone"
	}
	addr = addr.Unmap()
	switch {
	case addr.IsUnspecified():
		return addr, "is unspecified"
	case addr.IsLoopback():
		return addr, "is a loopback address"
	case addr.IsLinkLocalUnicast(), addr.IsLinkLocalMulticast():
		return addr, "is a link-local address"
	}
	return addr, ""
}

// instancePorts says which ports an instance has enabled.
func instancePorts(inst *eureka.Instance) string {
	var parts []string
	if inst.PortEnabled {
		parts = append(parts, fmt.Sprintf("port %d", inst.Port))
	}
	if inst.SecurePortEnabled {
		parts = append(parts, fmt.Sprintf("securePort %d", inst.SecurePort))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

func truncateName(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.TrimRight(s[:n], "-.")
}
