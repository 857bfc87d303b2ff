package controller

import (
	"fmt"
	"math/rand/v2"
	"net"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/eurekube/eurekube/api/v1alpha1"
	"github.com/eurekube/eurekube/eureka"
	"github.com/eurekube/eurekube/sidecar"
)

// The import plan's properties, over random apps: every status, IPv4,
// IPv6, mapped and host-name addresses (and those the API server refuses),
// ports enabled or not, zones valid and not, this cluster's instances and
// others'. Fixed seeds: a failure names its seed and replays.

const planTestCluster = "cluster-here"

// randomImport is an import of a random Service shape.
func randomImport(r *rand.Rand) *v1alpha1.EurekaImport {
	imp := &v1alpha1.EurekaImport{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "imp-" + randomLabel(r, 20)}}
	imp.Spec.App = "PAYMENTS"
	imp.Spec.IncludeThisCluster = r.IntN(2) == 0
	if r.IntN(3) > 0 {
		imp.Spec.Service.Name = randomLabel(r, 63)
	}
	if r.IntN(2) == 0 {
		imp.Spec.Service.Type = v1alpha1.ImportHeadless
	}
	for i := range r.IntN(3) { // none: the default port
		p := v1alpha1.ImportPort{Name: fmt.Sprintf("p%d-%s", i, randomLabel(r, 8)), Port: int32(80 + i)}
		if r.IntN(3) == 0 {
			p.InstancePort = v1alpha1.InstancePortSecure
		} else if r.IntN(2) == 0 {
			p.InstancePort = v1alpha1.InstancePortPlain
		}
		imp.Spec.Service.Ports = append(imp.Spec.Service.Ports, p)
	}
	return imp
}

// randomLabel is a DNS label of 1 to max characters, a letter first, as
// the CRD allows for names.
func randomLabel(r *rand.Rand, max int) string {
	const letters, rest = "abcdefghijklmnopqrstuvwxyz", "abcdefghijklmnopqrstuvwxyz0123456789-"
	b := []byte{letters[r.IntN(len(letters))]}
	for n := r.IntN(max); len(b) < n; {
		b = append(b, rest[r.IntN(len(rest))])
	}
	return strings.TrimRight(string(b), "-")
}

var (
	planStatuses = []eureka.Status{eureka.StatusUp, eureka.StatusDown, eureka.StatusOutOfService, eureka.StatusStarting, eureka.StatusUnknown}
	// Addresses the API server refuses in a slice, or that are no IP.
	planBadAddrs = []string{"vm-7.example.com", "", "127.0.0.1", "::1", "0.0.0.0", "::", "169.254.3.4", "fe80::1", "fe80::1%eth0", "224.0.0.5", "10.0.0.256"}
	planZones    = []string{"", "zone-a", "zone-b", "eu-west-1a", "not a label!", strings.Repeat("z", 64)}
)

// randomInstances are n instances of one app with unique IDs. Addresses
// come from a small pool, so that some instances share one.
func randomInstances(r *rand.Rand, n int) []eureka.Instance {
	out := make([]eureka.Instance, n)
	for i := range out {
		inst := eureka.Instance{App: "PAYMENTS", InstanceID: fmt.Sprintf("vm-%04d:payments:%d", i, r.IntN(3)), Status: planStatuses[r.IntN(len(planStatuses))]}
		switch k := r.IntN(10); {
		case k < 5:
			inst.IPAddr = fmt.Sprintf("10.%d.%d.%d", r.IntN(2), r.IntN(4), r.IntN(256))
		case k < 7:
			inst.IPAddr = fmt.Sprintf("2001:db8::%x", r.IntN(512))
		case k < 8:
			inst.IPAddr = fmt.Sprintf("::ffff:192.168.0.%d", r.IntN(256))
		default:
			inst.IPAddr = planBadAddrs[r.IntN(len(planBadAddrs))]
		}
		ports := []int{8080, 8443, 9000, 0, 70000}
		inst.Port, inst.PortEnabled = ports[r.IntN(len(ports))], r.IntN(5) > 0
		inst.SecurePort, inst.SecurePortEnabled = ports[r.IntN(len(ports))], r.IntN(3) == 0
		inst.Metadata = map[string]string{}
		if zone := planZones[r.IntN(len(planZones))]; zone != "" {
			inst.Metadata[sidecar.MetaZone] = zone
		}
		switch r.IntN(4) {
		case 0: // this cluster's pod
			inst.Metadata[eureka.MetaManagedBy], inst.Metadata[eureka.MetaCluster] = eureka.ManagedByValue, planTestCluster
		case 1: // another cluster's pod
			inst.Metadata[eureka.MetaManagedBy], inst.Metadata[eureka.MetaCluster] = eureka.ManagedByValue, "cluster-there"
		case 2: // this cluster's name, but not registered by Eurekube
			inst.Metadata[eureka.MetaCluster] = planTestCluster
		}
		out[i] = inst
	}
	return out
}

// wantEndpoint is what an instance must become, computed apart from the
// plan: the API server's own rules for slice addresses
// (ValidateEndpointIP), and the ports the Service reaches. ok is false for
// an instance that must be left out.
func wantEndpoint(imp *v1alpha1.EurekaImport, inst *eureka.Instance) (key string, ok bool) {
	ip := net.ParseIP(inst.IPAddr) // no zones, no host names
	if ip == nil || ip.IsUnspecified() || ip.IsLoopback() || ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast() {
		return "", false
	}
	addrType := discoveryv1.AddressTypeIPv6
	if ip.To4() != nil {
		addrType, ip = discoveryv1.AddressTypeIPv4, ip.To4()
	}
	var ports []string
	for _, p := range imp.EffectivePorts() {
		port, enabled := inst.Port, inst.PortEnabled
		if p.InstancePort == v1alpha1.InstancePortSecure {
			port, enabled = inst.SecurePort, inst.SecurePortEnabled
		}
		if !enabled || port < 1 || port > 65535 {
			return "", false
		}
		ports = append(ports, fmt.Sprintf("%s=%d", p.Name, port))
	}
	zone := inst.Metadata[sidecar.MetaZone]
	if len(validation.IsValidLabelValue(zone)) > 0 {
		zone = ""
	}
	return endpointKey(addrType, ip.String(), ports, inst.Status == eureka.StatusUp, zone), true
}

func endpointKey(addrType discoveryv1.AddressType, addr string, ports []string, ready bool, zone string) string {
	return fmt.Sprintf("%s %s %v ready=%t zone=%q", addrType, addr, ports, ready, zone)
}

// gotEndpoints are the plan's endpoints as keys like wantEndpoint's, after
// checking each endpoint and slice is one the API server takes.
func gotEndpoints(t *testing.T, seed uint64, imp *v1alpha1.EurekaImport, plan *importPlan) []string {
	t.Helper()
	var keys []string
	names := map[string]bool{}
	for _, s := range plan.slices {
		fail := func(format string, args ...any) {
			t.Helper()
			t.Fatalf("seed %d, slice %s: %s", seed, s.Name, fmt.Sprintf(format, args...))
		}
		if errs := validation.IsDNS1123Subdomain(s.Name); len(errs) > 0 {
			fail("not a valid name: %v", errs)
		}
		if names[s.Name] {
			fail("name taken by another slice of the plan")
		}
		names[s.Name] = true
		if n := len(s.Endpoints); n == 0 || n > maxSliceEndpoints {
			fail("%d endpoints, want 1 to %d", n, maxSliceEndpoints)
		}
		if s.Namespace != imp.Namespace || s.Labels[ImportLabel] != imp.Name || s.Labels[discoveryv1.LabelManagedBy] != ImportManagedBy ||
			s.Labels[discoveryv1.LabelServiceName] != plan.service.Name {
			fail("namespace %q, labels %v: not the import's", s.Namespace, s.Labels)
		}
		var portNames []string
		var ports []string
		for _, p := range s.Ports {
			portNames = append(portNames, *p.Name)
			ports = append(ports, fmt.Sprintf("%s=%d", *p.Name, *p.Port))
			if *p.Protocol != corev1.ProtocolTCP {
				fail("port %s protocol %s", *p.Name, *p.Protocol)
			}
		}
		var svcPortNames []string
		for _, p := range plan.service.Spec.Ports {
			svcPortNames = append(svcPortNames, p.Name)
		}
		if !slices.Equal(portNames, svcPortNames) {
			fail("port names %v, the Service's %v", portNames, svcPortNames)
		}
		for _, ep := range s.Endpoints {
			if len(ep.Addresses) != 1 {
				fail("endpoint with addresses %v, want one", ep.Addresses)
			}
			ip := net.ParseIP(ep.Addresses[0])
			if ip == nil || (ip.To4() != nil) != (s.AddressType == discoveryv1.AddressTypeIPv4) || ip.String() != ep.Addresses[0] {
				fail("address %q in a slice of %s", ep.Addresses[0], s.AddressType)
			}
			c := ep.Conditions
			if c.Ready == nil || c.Serving == nil || *c.Ready != *c.Serving || c.Terminating == nil || *c.Terminating {
				fail("endpoint %s conditions %+v: want ready = serving, not terminating", ep.Addresses[0], c)
			}
			zone := ""
			if ep.Zone != nil {
				zone = *ep.Zone
				if ep.Hints == nil || len(ep.Hints.ForZones) != 1 || ep.Hints.ForZones[0].Name != zone || len(validation.IsValidLabelValue(zone)) > 0 {
					fail("endpoint %s zone %q hints %+v", ep.Addresses[0], zone, ep.Hints)
				}
			} else if ep.Hints != nil {
				fail("endpoint %s hints without a zone", ep.Addresses[0])
			}
			keys = append(keys, endpointKey(s.AddressType, ep.Addresses[0], ports, *c.Ready, zone))
		}
	}
	return keys
}

func TestImportPlan_EveryAddressableInstanceIsOneEndpointReadyWhenUp(t *testing.T) {
	for seed := range uint64(300) {
		r := rand.New(rand.NewPCG(seed, 29))
		imp := randomImport(r)
		n := r.IntN(40)
		if seed%10 == 0 {
			n = 150 + r.IntN(300) // past a slice's 100
		}
		all := randomInstances(r, n)
		taken := importedInstances(imp, all, planTestCluster)
		plan := planImport(imp, taken)

		var want []string
		var ready int32
		for i := range taken {
			if key, ok := wantEndpoint(imp, &taken[i]); ok {
				want = append(want, key)
				if taken[i].Status == eureka.StatusUp {
					ready++
				}
			}
		}
		got := gotEndpoints(t, seed, imp, &plan)
		sort.Strings(want)
		sort.Strings(got)
		if !slices.Equal(got, want) {
			t.Fatalf("seed %d: endpoints\n%s\nwant\n%s", seed, strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
		if plan.total != int32(len(got)) || plan.ready != ready {
			t.Fatalf("seed %d: counts %d/%d, the slices hold %d/%d", seed, plan.ready, plan.total, ready, len(got))
		}
		if left := len(taken) - len(want); len(plan.unaddressable) != left {
			t.Fatalf("seed %d: %d instance(s) named as left out, %d left out: %v", seed, len(plan.unaddressable), left, plan.unaddressable)
		}
	}
}

func TestImportPlan_SlicesAreAsFewAsTheirShapesAllow(t *testing.T) {
	for seed := range uint64(100) {
		r := rand.New(rand.NewPCG(seed, 2900))
		imp := randomImport(r)
		plan := planImport(imp, randomInstances(r, r.IntN(500)))
		// One shape: an address type and the ports; a slice holds one.
		perShape := map[string]int{}
		for _, s := range plan.slices {
			var ports []int32
			for _, p := range s.Ports {
				ports = append(ports, *p.Port)
			}
			perShape[fmt.Sprint(s.AddressType, ports)] += len(s.Endpoints)
		}
		want := 0
		for _, n := range perShape {
			want += (n + maxSliceEndpoints - 1) / maxSliceEndpoints
		}
		if len(plan.slices) != want {
			t.Fatalf("seed %d: %d slices for %v endpoints by shape, want %d", seed, len(plan.slices), perShape, want)
		}
	}
}

func TestImportPlan_TheOrderEurekaListsInstancesInChangesNothing(t *testing.T) {
	for seed := range uint64(200) {
		r := rand.New(rand.NewPCG(seed, 290))
		imp := randomImport(r)
		all := randomInstances(r, r.IntN(300))
		first := planImport(imp, all)
		shuffled := slices.Clone(all)
		r.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
		again := planImport(imp, shuffled)
		if !reflect.DeepEqual(first, again) {
			t.Fatalf("seed %d: the plan changed with the instances' order:\n%s\nthen\n%s", seed, describePlan(&first), describePlan(&again))
		}
	}
}

func TestImportPlan_TheServiceIsSelectorlessWithTheImportsPorts(t *testing.T) {
	for seed := range uint64(200) {
		r := rand.New(rand.NewPCG(seed, 2901))
		imp := randomImport(r)
		svc := planImport(imp, randomInstances(r, r.IntN(20))).service
		if svc.Spec.Selector != nil {
			t.Fatalf("seed %d: the Service has a selector %v", seed, svc.Spec.Selector)
		}
		if svc.Name != imp.EffectiveServiceName() || svc.Namespace != imp.Namespace || svc.Labels[ImportLabel] != imp.Name {
			t.Fatalf("seed %d: Service %s/%s labels %v, want %s/%s of import %s", seed, svc.Namespace, svc.Name, svc.Labels, imp.Namespace, imp.EffectiveServiceName(), imp.Name)
		}
		if headless := svc.Spec.ClusterIP == corev1.ClusterIPNone; headless != (imp.Spec.Service.Type == v1alpha1.ImportHeadless) || svc.Spec.Type != corev1.ServiceTypeClusterIP {
			t.Fatalf("seed %d: Service type %s clusterIP %q for an import of type %q", seed, svc.Spec.Type, svc.Spec.ClusterIP, imp.Spec.Service.Type)
		}
		var got, want []string
		for _, p := range svc.Spec.Ports {
			got = append(got, fmt.Sprintf("%s:%d/%s", p.Name, p.Port, p.Protocol))
		}
		for _, p := range imp.EffectivePorts() {
			want = append(want, fmt.Sprintf("%s:%d/TCP", p.Name, p.Port))
		}
		if !slices.Equal(got, want) {
			t.Fatalf("seed %d: Service ports %v, want %v", seed, got, want)
		}
	}
}

func TestImportPlan_ThisClustersOwnPodsAreLeftOutUnlessAskedFor(t *testing.T) {
	for seed := range uint64(200) {
		r := rand.New(rand.NewPCG(seed, 2902))
		imp := randomImport(r)
		all := randomInstances(r, r.IntN(60))
		ids := func(insts []eureka.Instance) []string {
			var out []string
			for _, inst := range insts {
				out = append(out, inst.InstanceID)
			}
			return out
		}
		var elsewhere []eureka.Instance
		for _, inst := range all {
			if !(inst.Metadata[eureka.MetaManagedBy] == eureka.ManagedByValue && inst.Metadata[eureka.MetaCluster] == planTestCluster) {
				elsewhere = append(elsewhere, inst)
			}
		}
		imp.Spec.IncludeThisCluster = false
		if got := ids(importedInstances(imp, all, planTestCluster)); !slices.Equal(got, ids(elsewhere)) {
			t.Fatalf("seed %d: imported %v, want exactly those elsewhere %v", seed, got, ids(elsewhere))
		}
		imp.Spec.IncludeThisCluster = true
		if got := ids(importedInstances(imp, all, planTestCluster)); !slices.Equal(got, ids(all)) {
			t.Fatalf("seed %d: imported %v with includeThisCluster, want all %v", seed, got, ids(all))
		}
	}
}

// describePlan is a plan's slices and endpoints, one line each, for a
// failure message.
func describePlan(p *importPlan) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d/%d, left out %v\n", p.ready, p.total, p.unaddressable)
	for _, s := range p.slices {
		fmt.Fprintf(&b, "%s (%s):", s.Name, s.AddressType)
		for _, ep := range s.Endpoints {
			fmt.Fprintf(&b, " %s ready=%t", ep.Addresses[0], *ep.Conditions.Ready)
		}
		b.WriteString("\n")
	}
	return b.String()
}

// sliceAddresses are the plan's slices as the Endpoints must list them:
// by the slices' port numbers, address → ready (an address two endpoints
// share is ready if either is).
func sliceAddresses(plan *importPlan) map[string]map[string]bool {
	out := map[string]map[string]bool{}
	for _, s := range plan.slices {
		var ports []int32
		for _, p := range s.Ports {
			ports = append(ports, *p.Port)
		}
		key := fmt.Sprint(ports)
		if out[key] == nil {
			out[key] = map[string]bool{}
		}
		for _, ep := range s.Endpoints {
			out[key][ep.Addresses[0]] = out[key][ep.Addresses[0]] || *ep.Conditions.Ready
		}
	}
	return out
}

// checkEndpointsShape checks what every plan's Endpoints must be, and
// returns its addresses as sliceAddresses does.
func checkEndpointsShape(t *testing.T, seed uint64, imp *v1alpha1.EurekaImport, plan *importPlan) (map[string]map[string]bool, int) {
	t.Helper()
	eps := &plan.endpoints
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("seed %d, Endpoints %s: %s", seed, eps.Name, fmt.Sprintf(format, args...))
	}
	if eps.Name != plan.service.Name || eps.Namespace != imp.Namespace || eps.Labels[ImportLabel] != imp.Name ||
		eps.Labels[discoveryv1.LabelSkipMirror] != "true" {
		fail("namespace %q, labels %v: not the import's Service's, or mirrored", eps.Namespace, eps.Labels)
	}
	var svcPortNames []string
	for _, p := range plan.service.Spec.Ports {
		svcPortNames = append(svcPortNames, p.Name)
	}
	got := map[string]map[string]bool{}
	n := 0
	for _, ss := range eps.Subsets {
		var names []string
		var ports []int32
		for _, p := range ss.Ports {
			names = append(names, p.Name)
			ports = append(ports, p.Port)
			if p.Protocol != corev1.ProtocolTCP || p.Port < 1 || p.Port > 65535 {
				fail("port %+v", p)
			}
		}
		if !slices.Equal(names, svcPortNames) {
			fail("port names %v, the Service's %v", names, svcPortNames)
		}
		key := fmt.Sprint(ports)
		if got[key] != nil {
			fail("two subsets on ports %s", key)
		}
		got[key] = map[string]bool{}
		if len(ss.Addresses)+len(ss.NotReadyAddresses) == 0 {
			fail("an empty subset on ports %s", key)
		}
		var ready, notReady []string
		for _, a := range ss.Addresses {
			ready = append(ready, a.IP)
		}
		for _, a := range ss.NotReadyAddresses {
			notReady = append(notReady, a.IP)
		}
		for i, list := range [][]string{ready, notReady} {
			for _, ip := range list {
				if _, twice := got[key][ip]; twice {
					fail("address %s twice on ports %s", ip, key)
				}
				if a := net.ParseIP(ip); a == nil || a.String() != ip {
					fail("address %q", ip)
				}
				got[key][ip] = i == 0
				n++
			}
		}
	}
	if n > maxEndpointsAddresses {
		fail("%d addresses, more than %d", n, maxEndpointsAddresses)
	}
	return got, n
}

func TestImportPlan_TheEndpointsListsTheSlicesAddressesReadyOrNot(t *testing.T) {
	for seed := range uint64(300) {
		r := rand.New(rand.NewPCG(seed, 2903))
		imp := randomImport(r)
		plan := planImport(imp, importedInstances(imp, randomInstances(r, r.IntN(200)), planTestCluster))
		got, _ := checkEndpointsShape(t, seed, imp, &plan)
		want := sliceAddresses(&plan)
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("seed %d: the Endpoints holds\n%v\nthe slices\n%v", seed, got, want)
		}
		if _, over := plan.endpoints.Annotations[corev1.EndpointsOverCapacity]; over {
			t.Fatalf("seed %d: marked over capacity under %d addresses", seed, maxEndpointsAddresses)
		}
	}
}

func TestImportPlan_TheEndpointsIsCappedAtAThousandReadyFirst(t *testing.T) {
	for seed := range uint64(20) {
		r := rand.New(rand.NewPCG(seed, 2904))
		imp := randomImport(r)
		all := randomInstances(r, 1500+r.IntN(2500))
		if seed%2 == 0 { // more ready addresses than the cap
			for i := range all {
				all[i].Status = eureka.StatusUp
			}
		}
		plan := planImport(imp, all)
		got, n := checkEndpointsShape(t, seed, imp, &plan)
		want := sliceAddresses(&plan)
		distinct, ready := 0, 0
		for _, addrs := range want {
			for _, up := range addrs {
				distinct++
				if up {
					ready++
				}
			}
		}
		over := plan.endpoints.Annotations[corev1.EndpointsOverCapacity]
		if (distinct > maxEndpointsAddresses) != (over == "truncated") {
			t.Fatalf("seed %d: %d addresses, over-capacity annotation %q", seed, distinct, over)
		}
		if n != min(distinct, maxEndpointsAddresses) {
			t.Fatalf("seed %d: %d addresses kept of %d", seed, n, distinct)
		}
		keptReady := 0
		for key, addrs := range got {
			for ip, up := range addrs {
				if w, ok := want[key][ip]; !ok || w != up {
					t.Fatalf("seed %d: %s on ports %s ready=%t, the slices say %t (listed %t)", seed, ip, key, up, w, ok)
				}
				if up {
					keptReady++
				}
			}
		}
		if keptReady != min(ready, maxEndpointsAddresses) {
			t.Fatalf("seed %d: %d ready addresses kept of %d: ready ones go first", seed, keptReady, ready)
		}
	}
}
