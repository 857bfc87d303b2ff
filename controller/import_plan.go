package controller

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"

	"github.com/eurekube/eurekube/api/v1alpha1"
	"github.com/eurekube/eurekube/eureka"
	"github.com/eurekube/eurekube/sidecar"
)

// What an import wants, without I/O: from the app's instances, the
// selector-less Service, the EndpointSlices, and the Endpoints that lists
// them too (import_endpoints.go), as Kubernetes' EndpointSlice controller
// writes a Service's: one endpoint per address and set of ports (two
// instances on one address, a stale and a new registration, are one
// endpoint, ready if either is UP), each in a slice of its address type
// and of the Service's ports it serves (an instance without a port's
// enabled port serves the others), endpoints kept in the slice that holds
// them. The mapping of Eureka statuses to endpoint conditions:
//
//	UP                         ready, serving
//	OUT_OF_SERVICE, DOWN       not ready, not serving (taken out on purpose, or failing)
//	STARTING, UNKNOWN          not ready, not serving (not yet, or not said)
//
// None is terminating: Eureka has no such state, and an instance that
// leaves is cancelled (or evicted) and so is no longer listed at all.
//
// The instance's zone metadata is the endpoint's zone. Hints for it are
// written only when the import asks for zone routing
// (spec.service.trafficDistribution): kube-proxy routes same-zone on
// hints alone, so hints nobody asked for would turn it on.
//
// An instance is addressed by its ipAddr. One whose ipAddr is not an IP
// address (a host name registered in its place) is left out and named in
// the Synced and InstancesServed conditions: kube-proxy routes only to IP
// addresses (FQDN slices are deprecated and ignored by it), and resolving
// the name in the manager would pin one answer of a DNS record that may
// change. So is one whose address the API server refuses in a slice
// (loopback, link-local, unspecified), and one of an IP family the
// Service does not have (kube-proxy would drop it): one such VM must not
// keep the others out.

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
	// slices are every slice wanted; of them, those at the indexes
	// create are to be made, and those at update written over the slice
	// of their name. remove are the existing slices no longer wanted
	// (emptied, or of a shape no endpoint has any more).
	slices         []discoveryv1.EndpointSlice
	create, update []int
	remove         []discoveryv1.EndpointSlice
	// endpoints is the Service's Endpoints, a view of slices
	// (planEndpoints).
	endpoints corev1.Endpoints //lint:ignore SA1019 Spring Cloud Kubernetes reads Endpoints
	// ready and total count the endpoints.
	ready, total int32
	// leftOut are the instances that are no endpoint, and why.
	leftOut []leftOut
	// ports: the instance ports seen, for a condition when none fits.
	ports []string
	// splitPorts are the Service ports the Endpoints names in more than
	// one subset (instances on different port numbers, or some lacking a
	// port): Kubernetes writes them so too, but Spring Cloud Kubernetes'
	// DiscoveryClient (3.3) cannot read it.
	splitPorts []string
}

// writes is how many slices the plan writes.
func (p *importPlan) writes() int { return len(p.create) + len(p.update) + len(p.remove) }

// Why an instance is no endpoint, and the reason a condition gives when
// it is true of every instance.
type leftOutKind int

const (
	leftNoIP   leftOutKind = iota // no IP address, or one a slice cannot hold
	leftNoPort                    // none of the Service's ports enabled
	leftFamily                    // of an IP family the Service does not have
)

// reason is the kind's condition reason.
func (k leftOutKind) reason() string {
	switch k {
	case leftNoPort:
		return v1alpha1.ReasonPortMismatch
	case leftFamily:
		return v1alpha1.ReasonIPFamilyNotServed
	}
	return v1alpha1.ReasonNoIPAddress
}

// leftOut is an instance that is no endpoint: kind, and the instance
// named with what was left out.
type leftOut struct {
	kind leftOutKind
	what string
}

// leftOutNames are the left-out instances' descriptions, sorted.
func (p *importPlan) leftOutNames() []string {
	out := make([]string, len(p.leftOut))
	for i, l := range p.leftOut {
		out[i] = l.what
	}
	return out
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

// ImportAppliedMetadata, on an import's Service, lists the label and
// annotation keys the import put there from spec.service (JSON): a key
// taken out of the spec is taken off the Service, and one someone else
// added is left alone.
const ImportAppliedMetadata = "eurekube.io/applied-metadata"

// appliedMetadata is ImportAppliedMetadata's value.
type appliedMetadata struct {
	Labels      []string `json:"labels,omitempty"`
	Annotations []string `json:"annotations,omitempty"`
}

// planService is the Service imp wants: selector-less, its ports, type,
// affinity and traffic distribution, its labels and annotations, and both
// IP families where the cluster has them.
func planService(imp *v1alpha1.EurekaImport) corev1.Service {
	spec := &imp.Spec.Service
	svc := corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: imp.Namespace, Name: imp.EffectiveServiceName(), Labels: map[string]string{}}}
	applied := appliedMetadata{Labels: slices.Sorted(maps.Keys(spec.Labels)), Annotations: slices.Sorted(maps.Keys(spec.Annotations))}
	for k, v := range spec.Labels {
		svc.Labels[k] = string(v)
	}
	svc.Labels[ImportLabel] = imp.Name // the import's mark wins (the CRD refuses eurekube.io keys anyway)
	if len(applied.Labels)+len(applied.Annotations) > 0 {
		svc.Annotations = map[string]string{}
		for k, v := range spec.Annotations {
			svc.Annotations[k] = string(v)
		}
		raw, _ := json.Marshal(applied) // strings only: cannot fail
		svc.Annotations[ImportAppliedMetadata] = string(raw)
	}
	for _, p := range imp.EffectivePorts() {
		port := corev1.ServicePort{Name: p.Name, Port: p.Port, Protocol: corev1.ProtocolTCP}
		if p.AppProtocol != "" {
			port.AppProtocol = ptr.To(p.AppProtocol)
		}
		svc.Spec.Ports = append(svc.Spec.Ports, port)
	}
	svc.Spec.Type = corev1.ServiceTypeClusterIP
	if spec.Type == v1alpha1.ImportHeadless {
		svc.Spec.ClusterIP = corev1.ClusterIPNone
	}
	svc.Spec.IPFamilyPolicy = ptr.To(corev1.IPFamilyPolicyPreferDualStack)
	svc.Spec.SessionAffinity = corev1.ServiceAffinityNone
	if spec.SessionAffinity == corev1.ServiceAffinityClientIP {
		svc.Spec.SessionAffinity = corev1.ServiceAffinityClientIP
		// The API server's default, written out so that what is stored
		// is what is planned.
		svc.Spec.SessionAffinityConfig = &corev1.SessionAffinityConfig{ClientIP: &corev1.ClientIPConfig{TimeoutSeconds: ptr.To(corev1.DefaultClientIPServiceAffinitySeconds)}}
		if c := spec.SessionAffinityConfig; c != nil && c.ClientIP != nil && c.ClientIP.TimeoutSeconds != nil {
			svc.Spec.SessionAffinityConfig.ClientIP.TimeoutSeconds = ptr.To(*c.ClientIP.TimeoutSeconds)
		}
	}
	if spec.TrafficDistribution != "" {
		svc.Spec.TrafficDistribution = ptr.To(spec.TrafficDistribution)
	}
	return svc
}

// A slice's shape: its address type and the ports its endpoints serve
// (a subset of the Service's, in its order: an instance that lacks a port
// serves the others, as the EndpointSlice controller does with a pod).
type sliceShape struct {
	addressType discoveryv1.AddressType
	ports       []discoveryv1.EndpointPort
}

// key tells shapes apart by address type and port names and numbers (an
// appProtocol changed is written over the slices, not a new shape).
func (s *sliceShape) key() string {
	var b strings.Builder
	b.WriteString(string(s.addressType))
	for _, p := range s.ports {
		// A port edited by hand may lack a name or number: a shape no
		// endpoint has, so its slice goes.
		fmt.Fprintf(&b, " %s=%d", ptr.Deref(p.Name, ""), ptr.Deref(p.Port, 0))
	}
	return b.String()
}

// planImport builds the Service and slices imp wants for instances, given
// the Service's IP families (nil: any) and the slices the import has. As
// Kubernetes' EndpointSlice controller, it keeps each endpoint in the
// slice that holds it, and writes only the slices that change: an
// endpoint gone or changed is taken out or written over in its slice, a
// new one goes first into a slice written anyway, then into one with
// room, then into new slices; a slice left empty goes.
func planImport(imp *v1alpha1.EurekaImport, instances []eureka.Instance, families []corev1.IPFamily, existing []discoveryv1.EndpointSlice) importPlan {
	plan := importPlan{service: planService(imp)}
	name := plan.service.Name
	ports := imp.EffectivePorts()
	hints := imp.WantsZoneHints()

	appProtocols := map[string]string{}
	for _, p := range ports {
		appProtocols[p.Name] = p.AppProtocol
	}
	// Instances in ID order: the plan does not depend on the order Eureka
	// lists them in.
	instances = slices.Clone(instances)
	slices.SortFunc(instances, func(a, b eureka.Instance) int { return strings.Compare(a.InstanceID, b.InstanceID) })
	// What each address serves: a port (Service port name and instance
	// port number) is ready if any instance on the address that has it is
	// UP. The first UP instance's zone is the address's, else the first's.
	type served struct {
		addressType discoveryv1.AddressType
		ready       map[namedPort]bool
		ups, downs  [][]discoveryv1.EndpointPort // each instance's ports
		zone        string
		zoneUp      bool
	}
	byAddr := map[string]*served{}
	seenPorts := map[string]bool{}
	for _, inst := range instances {
		seenPorts[instancePorts(&inst)] = true
		addr, why := endpointAddress(inst.IPAddr)
		if why != "" {
			plan.leftOut = append(plan.leftOut, leftOut{leftNoIP, fmt.Sprintf("%s (ipAddr %q %s)", inst.InstanceID, inst.IPAddr, why)})
			continue
		}
		addressType, family := discoveryv1.AddressTypeIPv4, corev1.IPv4Protocol
		if addr.Is6() {
			addressType, family = discoveryv1.AddressTypeIPv6, corev1.IPv6Protocol
		}
		if families != nil && !slices.Contains(families, family) {
			plan.leftOut = append(plan.leftOut, leftOut{leftFamily, fmt.Sprintf("%s (%s address %s: the Service has only %s)", inst.InstanceID, family, addr, joinFamilies(families))})
			continue
		}
		var own []discoveryv1.EndpointPort
		for _, p := range ports {
			port, enabled := inst.Port, inst.PortEnabled
			if p.InstancePort == v1alpha1.InstancePortSecure {
				port, enabled = inst.SecurePort, inst.SecurePortEnabled
			}
			if enabled && port > 0 && port <= 65535 {
				own = append(own, discoveryv1.EndpointPort{Name: ptr.To(p.Name), Port: ptr.To(int32(port))})
			}
		}
		if len(own) == 0 {
			plan.leftOut = append(plan.leftOut, leftOut{leftNoPort, fmt.Sprintf("%s (no enabled port for the Service's ports: %s)", inst.InstanceID, instancePorts(&inst))})
			continue
		}
		up := inst.Status == eureka.StatusUp
		a := byAddr[addr.String()]
		if a == nil {
			a = &served{addressType: addressType, ready: map[namedPort]bool{}}
			byAddr[addr.String()] = a
		}
		for _, p := range own {
			k := portKey(p)
			a.ready[k] = a.ready[k] || up
		}
		first := len(a.ups)+len(a.downs) == 0
		if up {
			a.ups = append(a.ups, own)
		} else {
			a.downs = append(a.downs, own)
		}
		// A zone the API would refuse is left out, not the instance.
		if zone := inst.Metadata[sidecar.MetaZone]; len(validation.IsValidLabelValue(zone)) == 0 && (first || up && !a.zoneUp) {
			a.zone, a.zoneUp = zone, up
		}
	}
	// One endpoint per address and set of ports: an instance's ports, less
	// those an earlier instance's endpoint of the address holds, split by
	// readiness where they differ (a stale registration beside a live one
	// on other ports); so every address and port is in one endpoint only,
	// and kube-proxy, which keeps one of two endpoints of an address and
	// port, has no choice to make.
	shapes := map[string]*sliceShape{}
	type wanted struct {
		ep discoveryv1.Endpoint
		up bool
	}
	byShape := map[string]map[string]*wanted{} // shape → address → endpoint
	for _, addr := range slices.Sorted(maps.Keys(byAddr)) {
		a := byAddr[addr]
		placed := map[namedPort]bool{}
		for _, own := range append(a.ups, a.downs...) {
			for _, up := range []bool{true, false} {
				shape := sliceShape{addressType: a.addressType}
				for _, p := range own {
					if k := portKey(p); a.ready[k] == up && !placed[k] {
						placed[k] = true
						ep := discoveryv1.EndpointPort{Name: p.Name, Port: p.Port, Protocol: ptr.To(corev1.ProtocolTCP)}
						if proto := appProtocols[*p.Name]; proto != "" {
							ep.AppProtocol = ptr.To(proto)
						}
						shape.ports = append(shape.ports, ep)
					}
				}
				if len(shape.ports) == 0 {
					continue
				}
				key := shape.key()
				if shapes[key] == nil {
					shapes[key], byShape[key] = &shape, map[string]*wanted{}
				}
				st := eureka.StatusDown
				if up {
					st = eureka.StatusUp
				}
				ep := discoveryv1.Endpoint{Addresses: []string{addr}, Conditions: endpointConditions(st)}
				if a.zone != "" {
					ep.Zone = ptr.To(a.zone)
					if hints {
						ep.Hints = &discoveryv1.EndpointHints{ForZones: []discoveryv1.ForZone{{Name: a.zone}}}
					}
				}
				byShape[key][addr] = &wanted{ep: ep, up: up}
			}
		}
	}
	for p := range seenPorts {
		plan.ports = append(plan.ports, p)
	}
	sort.Strings(plan.ports)
	slices.SortFunc(plan.leftOut, func(a, b leftOut) int { return strings.Compare(a.what, b.what) })

	// The existing slices by shape, in name order; one of a shape no
	// endpoint has goes.
	have := map[string][]discoveryv1.EndpointSlice{}
	sorted := slices.Clone(existing)
	slices.SortFunc(sorted, func(a, b discoveryv1.EndpointSlice) int { return strings.Compare(a.Name, b.Name) })
	taken := map[string]bool{}
	for _, s := range sorted {
		taken[s.Name] = true
		key := (&sliceShape{addressType: s.AddressType, ports: s.Ports}).key()
		if shapes[key] == nil {
			plan.remove = append(plan.remove, s)
			continue
		}
		have[key] = append(have[key], s)
	}
	meta := func() metav1.ObjectMeta {
		return metav1.ObjectMeta{Namespace: imp.Namespace, Labels: map[string]string{
			ImportLabel: imp.Name, discoveryv1.LabelServiceName: name, discoveryv1.LabelManagedBy: ImportManagedBy}}
	}
	// Slices given endpoints are written before those that only lose
	// some: an endpoint moving between shapes (a VM that enabled its
	// secure port) is never in none.
	var gaining []int
	for _, key := range slices.Sorted(maps.Keys(shapes)) {
		shape, want := shapes[key], byShape[key]
		for _, w := range want {
			plan.total++
			if w.up {
				plan.ready++
			}
		}
		type kept struct {
			slice        discoveryv1.EndpointSlice
			dirty, gains bool // written; given endpoints it did not hold
		}
		var keep []*kept
		placed := map[string]bool{}
		for _, s := range have[key] {
			k := &kept{slice: *s.DeepCopy()}
			k.slice.Endpoints = nil
			for _, ep := range s.Endpoints {
				w := want[firstAddress(ep)]
				if w == nil || placed[firstAddress(ep)] {
					k.dirty = true // gone, or listed twice
					continue
				}
				placed[firstAddress(ep)] = true
				if !equality.Semantic.DeepEqual(ep, w.ep) {
					k.dirty = true
				}
				k.slice.Endpoints = append(k.slice.Endpoints, w.ep)
			}
			if !equality.Semantic.DeepEqual(s.Ports, shape.ports) || s.Labels[discoveryv1.LabelServiceName] != name || s.Labels[discoveryv1.LabelManagedBy] != ImportManagedBy {
				k.dirty = true
				k.slice.Ports = shape.ports
				k.slice.Labels = maps.Clone(s.Labels)
				if k.slice.Labels == nil {
					k.slice.Labels = map[string]string{}
				}
				maps.Copy(k.slice.Labels, meta().Labels)
			}
			keep = append(keep, k)
		}
		var fresh []discoveryv1.Endpoint
		for _, addr := range slices.Sorted(maps.Keys(want)) {
			if !placed[addr] {
				fresh = append(fresh, want[addr].ep)
			}
		}
		// New endpoints go first into slices written anyway, then, if
		// they all fit, into the fullest slice with room for them, else
		// into new slices.
		fill := func(k *kept, n int) {
			n = min(n, maxSliceEndpoints-len(k.slice.Endpoints), len(fresh))
			if n > 0 {
				k.slice.Endpoints = append(k.slice.Endpoints, fresh[:n]...)
				fresh = fresh[n:]
				k.dirty, k.gains = true, true
			}
		}
		for _, k := range keep {
			if k.dirty {
				fill(k, len(fresh))
			}
		}
		if len(fresh) > 0 {
			var best *kept
			for _, k := range keep {
				if room := maxSliceEndpoints - len(k.slice.Endpoints); room >= len(fresh) && (best == nil || room < maxSliceEndpoints-len(best.slice.Endpoints)) {
					best = k
				}
			}
			if best != nil {
				fill(best, len(fresh))
			}
		}
		for _, k := range keep {
			switch {
			case len(k.slice.Endpoints) == 0:
				plan.remove = append(plan.remove, k.slice)
			case k.dirty && k.gains:
				gaining = append(gaining, len(plan.slices))
				plan.slices = append(plan.slices, k.slice)
			case k.dirty:
				plan.update = append(plan.update, len(plan.slices))
				plan.slices = append(plan.slices, k.slice)
			default:
				plan.slices = append(plan.slices, k.slice)
			}
		}
		sum := sha256.Sum256([]byte(key))
		n := 0
		for len(fresh) > 0 {
			slice := discoveryv1.EndpointSlice{ObjectMeta: meta(), AddressType: shape.addressType, Ports: shape.ports}
			for ; ; n++ {
				slice.Name = fmt.Sprintf("%s-eurekube-%s-%d", truncateName(name, 200), hex.EncodeToString(sum[:4]), n)
				if !taken[slice.Name] {
					break
				}
			}
			taken[slice.Name] = true
			take := min(len(fresh), maxSliceEndpoints)
			slice.Endpoints, fresh = slices.Clone(fresh[:take]), fresh[take:]
			plan.create = append(plan.create, len(plan.slices))
			plan.slices = append(plan.slices, slice)
		}
	}
	plan.update = append(gaining, plan.update...)
	plan.endpoints = planEndpoints(&plan.service, families, plan.slices)
	subsets := map[string]int{}
	for _, ss := range plan.endpoints.Subsets {
		for _, p := range ss.Ports {
			if subsets[p.Name]++; subsets[p.Name] == 2 {
				plan.splitPorts = append(plan.splitPorts, p.Name)
			}
		}
	}
	sort.Strings(plan.splitPorts)
	return plan
}

// namedPort is a Service port's name and an instance's port number.
type namedPort struct {
	name string
	port int32
}

// portKey is p's name and number.
func portKey(p discoveryv1.EndpointPort) namedPort { return namedPort{*p.Name, *p.Port} }

// firstAddress is an endpoint's address (the import's have one each).
func firstAddress(ep discoveryv1.Endpoint) string {
	if len(ep.Addresses) == 0 {
		return ""
	}
	return ep.Addresses[0]
}

// joinFamilies says which IP families a Service has.
func joinFamilies(families []corev1.IPFamily) string {
	if len(families) == 0 {
		return "no IP family"
	}
	out := make([]string, len(families))
	for i, f := range families {
		out[i] = string(f)
	}
	return strings.Join(out, " and ")
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
