package controller

import (
	"fmt"
	"math/rand/v2"
	"net"
	"reflect"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"

	"github.com/eurekube/eurekube/api/v1alpha1"
	"github.com/eurekube/eurekube/eureka"
	"github.com/eurekube/eurekube/sidecar"
	"github.com/eurekube/eurekube/tests/harness"
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
	if r.IntN(3) == 0 {
		imp.Spec.Service.TrafficDistribution = "PreferClose"
	}
	for i := range r.IntN(3) { // none: the default port
		p := v1alpha1.ImportPort{Name: fmt.Sprintf("p%d-%s", i, randomLabel(r, 8)), Port: int32(80 + i)}
		if r.IntN(2) == 0 {
			p.AppProtocol = []string{"http", "https", "kubernetes.io/h2c", "example.com/grpc"}[r.IntN(4)]
		}
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

// proxyView is what kube-proxy routes to for each Service port name:
// address:port → ready. It fails the test when two endpoints give one
// address and port of one Service port, as kube-proxy then keeps either at
// random.
type proxyView map[string]map[string]bool

// kubeProxyView reads the plan's slices as kube-proxy does, after checking
// each slice and endpoint against Kubernetes' rules for EndpointSlices
// (and the controller's: at most 100 endpoints, none empty).
func kubeProxyView(t *testing.T, seed uint64, imp *v1alpha1.EurekaImport, plan *importPlan) proxyView {
	t.Helper()
	view := proxyView{}
	names := map[string]bool{}
	var svcPortNames []string
	appProtocol := map[string]string{}
	for _, p := range imp.EffectivePorts() {
		svcPortNames = append(svcPortNames, p.Name)
		appProtocol[p.Name] = p.AppProtocol
	}
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
		if s.AddressType != discoveryv1.AddressTypeIPv4 && s.AddressType != discoveryv1.AddressTypeIPv6 {
			fail("address type %s", s.AddressType)
		}
		var portNames []string
		for _, p := range s.Ports {
			portNames = append(portNames, *p.Name)
			if *p.Protocol != corev1.ProtocolTCP || *p.Port < 1 || *p.Port > 65535 {
				fail("port %s %d/%s", *p.Name, *p.Port, *p.Protocol)
			}
			if got := ptr.Deref(p.AppProtocol, ""); got != appProtocol[*p.Name] {
				fail("port %s appProtocol %q, the import's %q", *p.Name, got, appProtocol[*p.Name])
			}
		}
		// The Service's port names, some left out, in its order.
		if i := 0; len(portNames) == 0 || !slices.ContainsFunc([][]string{portNames}, func(ns []string) bool {
			for _, n := range svcPortNames {
				if i < len(ns) && ns[i] == n {
					i++
				}
			}
			return i == len(ns)
		}) {
			fail("port names %v are not the Service's %v, some left out", portNames, svcPortNames)
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
			zone := ptr.Deref(ep.Zone, "")
			if ep.Zone != nil && (zone == "" || len(validation.IsValidLabelValue(zone)) > 0) {
				fail("endpoint %s zone %q", ep.Addresses[0], zone)
			}
			switch {
			case !imp.WantsZoneHints() || ep.Zone == nil:
				if ep.Hints != nil {
					fail("endpoint %s hints %+v, not asked for (or no zone)", ep.Addresses[0], ep.Hints)
				}
			case ep.Hints == nil || len(ep.Hints.ForZones) != 1 || ep.Hints.ForZones[0].Name != zone:
				fail("endpoint %s zone %q hints %+v", ep.Addresses[0], zone, ep.Hints)
			}
			for _, p := range s.Ports {
				if view[*p.Name] == nil {
					view[*p.Name] = map[string]bool{}
				}
				hp := net.JoinHostPort(ep.Addresses[0], fmt.Sprint(*p.Port))
				if _, twice := view[*p.Name][hp]; twice {
					fail("%s is in two endpoints of port %s: kube-proxy keeps either", hp, *p.Name)
				}
				view[*p.Name][hp] = *c.Ready
			}
		}
	}
	return view
}

// modelView is what kube-proxy must route to, computed from the instances
// apart from the plan: the API server's rules for slice addresses
// (ValidateEndpointIP), the Service's families (nil: any), and for each
// Service port each instance's enabled port, ready if any instance
// serving that address and port is UP. It returns how many instances
// serve nothing.
func modelView(imp *v1alpha1.EurekaImport, insts []eureka.Instance, families []corev1.IPFamily) (proxyView, int) {
	view := proxyView{}
	left := 0
	for _, inst := range insts {
		ip := net.ParseIP(inst.IPAddr) // no zones, no host names
		if ip == nil || ip.IsUnspecified() || ip.IsLoopback() || ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast() {
			left++
			continue
		}
		family := corev1.IPv6Protocol
		if ip.To4() != nil {
			family, ip = corev1.IPv4Protocol, ip.To4()
		}
		if families != nil && !slices.Contains(families, family) {
			left++
			continue
		}
		served := 0
		for _, p := range imp.EffectivePorts() {
			port, enabled := inst.Port, inst.PortEnabled
			if p.InstancePort == v1alpha1.InstancePortSecure {
				port, enabled = inst.SecurePort, inst.SecurePortEnabled
			}
			if !enabled || port < 1 || port > 65535 {
				continue
			}
			served++
			if view[p.Name] == nil {
				view[p.Name] = map[string]bool{}
			}
			hp := net.JoinHostPort(ip.String(), fmt.Sprint(port))
			view[p.Name][hp] = view[p.Name][hp] || inst.Status == eureka.StatusUp
		}
		if served == 0 {
			left++
		}
	}
	return view, left
}

// randomFamilies are a Service's IP families: nil (not known yet), one,
// or both.
func randomFamilies(r *rand.Rand) []corev1.IPFamily {
	return [][]corev1.IPFamily{nil, {corev1.IPv4Protocol}, {corev1.IPv6Protocol}, {corev1.IPv4Protocol, corev1.IPv6Protocol}}[r.IntN(4)]
}

// sizes are the registries' sizes the properties run over: small ones,
// past a slice's 100, and past a thousand.
func planSize(r *rand.Rand, seed uint64) int {
	switch {
	case seed%25 == 0:
		return 1000 + r.IntN(1500)
	case seed%5 == 0:
		return 100 + r.IntN(400)
	}
	return r.IntN(60)
}

// The slices are what Kubernetes takes, and kube-proxy routes to exactly
// what the instances say: each address and port once, ready if any of its
// instances is UP; every instance that serves nothing is named.
func TestImportPlan_KubeProxyRoutesToWhatEurekaSays(t *testing.T) {
	harness.OnlyComputes(t)
	for seed := range uint64(300) {
		r := rand.New(rand.NewPCG(seed, 29))
		imp := randomImport(r)
		families := randomFamilies(r)
		taken := importedInstances(imp, randomInstances(r, planSize(r, seed)), planTestCluster)
		var existing []discoveryv1.EndpointSlice
		if r.IntN(2) == 0 { // over what an earlier registry left
			existing = planImport(imp, importedInstances(imp, randomInstances(r, planSize(r, seed)), planTestCluster), families, nil).slices
		}
		plan := planImport(imp, taken, families, existing)
		got := kubeProxyView(t, seed, imp, &plan)
		want, left := modelView(imp, taken, families)
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("seed %d: kube-proxy routes to\n%v\nEureka says\n%v", seed, got, want)
		}
		if len(plan.leftOut) != left {
			t.Fatalf("seed %d: %d instance(s) named as left out, %d serve nothing: %v", seed, len(plan.leftOut), left, plan.leftOutNames())
		}
		var ready, total int32
		for _, s := range plan.slices {
			for _, ep := range s.Endpoints {
				total++
				if *ep.Conditions.Ready {
					ready++
				}
			}
		}
		if plan.total != total || plan.ready != ready {
			t.Fatalf("seed %d: counts %d/%d, the slices hold %d/%d", seed, plan.ready, plan.total, ready, total)
		}
		// Planned again over what it wrote, it writes nothing.
		again := planImport(imp, taken, families, plan.slices)
		if again.writes() != 0 {
			t.Fatalf("seed %d: planned over its own slices, it writes %d", seed, again.writes())
		}
	}
}

func TestImportPlan_SlicesFromScratchAreAsFewAsTheirShapesAllow(t *testing.T) {
	harness.OnlyComputes(t)
	for seed := range uint64(100) {
		r := rand.New(rand.NewPCG(seed, 2900))
		imp := randomImport(r)
		plan := planImport(imp, randomInstances(r, r.IntN(500)), randomFamilies(r), nil)
		perShape := map[string]int{}
		for _, s := range plan.slices {
			perShape[(&sliceShape{addressType: s.AddressType, ports: s.Ports}).key()] += len(s.Endpoints)
		}
		want := 0
		for _, n := range perShape {
			want += (n + maxSliceEndpoints - 1) / maxSliceEndpoints
		}
		if len(plan.slices) != want || len(plan.create) != want || len(plan.update)+len(plan.remove) != 0 {
			t.Fatalf("seed %d: %d slices (%d made) for %v endpoints by shape, want %d", seed, len(plan.slices), len(plan.create), perShape, want)
		}
	}
}

func TestImportPlan_TheOrderEurekaListsInstancesInChangesNothing(t *testing.T) {
	harness.OnlyComputes(t)
	for seed := range uint64(200) {
		r := rand.New(rand.NewPCG(seed, 290))
		imp := randomImport(r)
		families := randomFamilies(r)
		all := randomInstances(r, r.IntN(300))
		existing := planImport(imp, randomInstances(r, r.IntN(300)), families, nil).slices
		first := planImport(imp, all, families, existing)
		shuffled := slices.Clone(all)
		r.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
		r.Shuffle(len(existing), func(i, j int) { existing[i], existing[j] = existing[j], existing[i] })
		again := planImport(imp, shuffled, families, existing)
		if !reflect.DeepEqual(first, again) {
			t.Fatalf("seed %d: the plan changed with the instances' order:\n%s\nthen\n%s", seed, describePlan(&first), describePlan(&again))
		}
	}
}

// One instance's change (its status, its zone, a new one with the lowest
// address, one gone) writes one slice at most, and leaves every other
// endpoint in the slice that held it; one whose secure port is switched on
// or off moves to the slices of its new ports (two writes, the slice it
// joins first). Applied in the plan's order, no write leaves an address
// and port that is served before and after in no slice. Over hundreds of
// changes to registries past 100 and past 1,000 instances, one address
// each.
func TestImportPlan_OneInstancesChangeWritesOneSliceAtMost(t *testing.T) {
	harness.OnlyComputes(t)
	// make unit (-short) replays the first three seeds, one of each
	// kind (past 1,000 with one port, 150–350 with two, with one); make
	// test all twelve.
	seeds := uint64(12)
	if testing.Short() {
		seeds = 3
	}
	for seed := range seeds {
		r := rand.New(rand.NewPCG(seed, 2905))
		imp := randomImport(r)
		imp.Spec.Service.Ports = nil // one port: every instance has it
		twoPorts := seed%2 == 1
		if twoPorts {
			imp.Spec.Service.Ports = []v1alpha1.ImportPort{{Name: "http", Port: 80}, {Name: "https", Port: 443, InstancePort: v1alpha1.InstancePortSecure}}
		}
		n := 150 + r.IntN(200)
		if seed%3 == 0 {
			n = 1000 + r.IntN(1000)
		}
		var insts []eureka.Instance
		for i := range n {
			insts = append(insts, eureka.Instance{App: "PAYMENTS", InstanceID: fmt.Sprintf("vm-%05d", i), IPAddr: fmt.Sprintf("10.1.%d.%d", i/250, 1+i%250),
				Port: 8080, PortEnabled: true, SecurePort: 8443, SecurePortEnabled: r.IntN(2) == 0,
				Status: planStatuses[r.IntN(len(planStatuses))], Metadata: map[string]string{sidecar.MetaZone: planZones[r.IntN(3)]}})
		}
		plan := planImport(imp, insts, nil, nil)
		next := 0
		for step := range 300 {
			before := sliceOf(&plan)
			i := r.IntN(len(insts))
			changed, allowed := insts[i].IPAddr, 1
			switch r.IntN(5) {
			case 0:
				insts[i].Status = planStatuses[r.IntN(len(planStatuses))]
			case 1:
				insts[i].Metadata = map[string]string{sidecar.MetaZone: planZones[r.IntN(3)]}
			case 2: // a new one that sorts first
				changed = fmt.Sprintf("10.0.0.%d", 1+next%250)
				next++
				insts = append(insts, eureka.Instance{App: "PAYMENTS", InstanceID: fmt.Sprintf("new-%05d", step), IPAddr: changed, Port: 8080, PortEnabled: true, Status: eureka.StatusUp})
			case 3:
				insts[i].SecurePortEnabled = !insts[i].SecurePortEnabled
				if twoPorts {
					allowed = 2 // out of one slice, into another
				}
			default:
				insts = slices.Delete(insts, i, i+1)
			}
			// An address taken twice by the new ones is not one instance's change.
			seen := map[string]int{}
			for _, inst := range insts {
				seen[inst.IPAddr]++
			}
			if seen[changed] > 1 {
				insts = insts[:len(insts)-1]
				continue
			}
			got := planImport(imp, insts, nil, plan.slices)
			if w := got.writes(); w > allowed {
				t.Fatalf("seed %d, step %d: one instance's change (%s) writes %d slices:\n%s", seed, step, changed, w, describePlan(&got))
			}
			for addr, name := range sliceOf(&got) {
				if was, ok := before[addr]; ok && was != name && !strings.HasPrefix(addr, changed+":") {
					t.Fatalf("seed %d, step %d: %s moved from slice %s to %s on %s's change", seed, step, addr, was, name, changed)
				}
			}
			neverInNone(t, seed, plan.slices, &got)
			plan = got
		}
	}
}

// sliceOf is where each address:port of the plan is: its slice's name.
func sliceOf(p *importPlan) map[string]string {
	out := map[string]string{}
	for _, s := range p.slices {
		for _, ep := range s.Endpoints {
			for _, port := range s.Ports {
				out[net.JoinHostPort(ep.Addresses[0], fmt.Sprint(*port.Port))] = s.Name
			}
		}
	}
	return out
}

// neverInNone writes plan over existing in its order (made, written over,
// removed) and fails when a write leaves an address and port served
// before and after it in no slice.
func neverInNone(t *testing.T, seed uint64, existing []discoveryv1.EndpointSlice, plan *importPlan) {
	t.Helper()
	served := func(state map[string]discoveryv1.EndpointSlice) map[string]bool {
		out := map[string]bool{}
		for _, s := range state {
			for _, ep := range s.Endpoints {
				for _, port := range s.Ports {
					out[*port.Name+" "+net.JoinHostPort(ep.Addresses[0], fmt.Sprint(*port.Port))] = true
				}
			}
		}
		return out
	}
	state := map[string]discoveryv1.EndpointSlice{}
	for _, s := range existing {
		state[s.Name] = s
	}
	after := map[string]discoveryv1.EndpointSlice{}
	for _, s := range plan.slices {
		after[s.Name] = s
	}
	keep, stays := served(state), served(after)
	for k := range keep {
		if !stays[k] {
			delete(keep, k)
		}
	}
	check := func(what string) {
		now := served(state)
		for k := range keep {
			if !now[k] {
				t.Fatalf("seed %d: after %s, %s is in no slice", seed, what, k)
			}
		}
	}
	for _, i := range plan.create {
		state[plan.slices[i].Name] = plan.slices[i]
		check("making " + plan.slices[i].Name)
	}
	for _, i := range plan.update {
		state[plan.slices[i].Name] = plan.slices[i]
		check("writing over " + plan.slices[i].Name)
	}
	for _, s := range plan.remove {
		delete(state, s.Name)
		check("removing " + s.Name)
	}
}

// An instance without one of the Service's ports serves the others, and
// the Endpoints then names a port in two subsets, as Kubernetes' would:
// the plan says so, for the condition that warns Spring Cloud Kubernetes
// users.
func TestImportPlan_AnInstanceWithoutAPortServesTheOthers(t *testing.T) {
	harness.OnlyComputes(t)
	imp := &v1alpha1.EurekaImport{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "payments"}, Spec: v1alpha1.EurekaImportSpec{App: "PAYMENTS",
		Service: v1alpha1.ImportService{Ports: []v1alpha1.ImportPort{{Name: "http", Port: 80}, {Name: "https", Port: 443, InstancePort: v1alpha1.InstancePortSecure}}}}}
	insts := []eureka.Instance{
		{InstanceID: "both", IPAddr: "10.0.0.1", Port: 8080, PortEnabled: true, SecurePort: 8443, SecurePortEnabled: true, Status: eureka.StatusUp},
		{InstanceID: "plain", IPAddr: "10.0.0.2", Port: 8080, PortEnabled: true, Status: eureka.StatusUp},
	}
	plan := planImport(imp, insts, nil, nil)
	view := kubeProxyView(t, 0, imp, &plan)
	if !view["http"]["10.0.0.2:8080"] || !view["http"]["10.0.0.1:8080"] || !view["https"]["10.0.0.1:8443"] || len(view["https"]) != 1 {
		t.Fatalf("kube-proxy routes %v: want both on http, one on https", view)
	}
	if !slices.Equal(plan.splitPorts, []string{"http"}) || len(plan.leftOut) != 0 {
		t.Fatalf("split ports %v, left out %v", plan.splitPorts, plan.leftOutNames())
	}
}

// A Service of one IP family leaves the other's instances out, names
// them, and lists the primary family's addresses in its Endpoints.
func TestImportPlan_AFamilyTheServiceLacksIsNamedAndLeftOut(t *testing.T) {
	harness.OnlyComputes(t)
	imp := &v1alpha1.EurekaImport{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "payments"}, Spec: v1alpha1.EurekaImportSpec{App: "PAYMENTS"}}
	insts := []eureka.Instance{
		{InstanceID: "v4", IPAddr: "10.0.0.1", Port: 8080, PortEnabled: true, Status: eureka.StatusUp},
		{InstanceID: "v6", IPAddr: "2001:db8::1", Port: 8080, PortEnabled: true, Status: eureka.StatusUp},
		{InstanceID: "host", IPAddr: "vm-3.example.com", Port: 8080, PortEnabled: true, Status: eureka.StatusUp},
	}
	plan := planImport(imp, insts, []corev1.IPFamily{corev1.IPv4Protocol}, nil)
	if plan.total != 1 || len(plan.leftOut) != 2 || leftOutReason(plan.leftOut) != reasonSeveralReasons {
		t.Fatalf("%d endpoints, left out %v", plan.total, plan.leftOutNames())
	}
	if got := strings.Join(plan.leftOutNames(), "; "); !strings.Contains(got, "v6 (IPv6 address 2001:db8::1: the Service has only IPv4)") || !strings.Contains(got, `host (ipAddr "vm-3.example.com" is not an IP address)`) {
		t.Fatalf("left out: %s", got)
	}
	if r := leftOutReason(plan.leftOut[:1]); r != v1alpha1.ReasonNoIPAddress {
		t.Fatalf("a host name alone: reason %s, want %s", r, v1alpha1.ReasonNoIPAddress)
	}
	dual := planImport(imp, insts, []corev1.IPFamily{corev1.IPv6Protocol, corev1.IPv4Protocol}, nil)
	if dual.total != 2 || len(dual.endpoints.Subsets) != 1 || len(dual.endpoints.Subsets[0].Addresses) != 1 || dual.endpoints.Subsets[0].Addresses[0].IP != "2001:db8::1" {
		t.Fatalf("dual-stack, IPv6 first: %d endpoints, Endpoints %+v", dual.total, dual.endpoints.Subsets)
	}
}

func TestImportPlan_TheServiceIsSelectorlessWithTheImportsPorts(t *testing.T) {
	harness.OnlyComputes(t)
	for seed := range uint64(200) {
		r := rand.New(rand.NewPCG(seed, 2901))
		imp := randomImport(r)
		svc := planImport(imp, randomInstances(r, r.IntN(20)), nil, nil).service
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
			got = append(got, fmt.Sprintf("%s:%d/%s %s", p.Name, p.Port, p.Protocol, ptr.Deref(p.AppProtocol, "")))
		}
		for _, p := range imp.EffectivePorts() {
			want = append(want, fmt.Sprintf("%s:%d/TCP %s", p.Name, p.Port, p.AppProtocol))
		}
		if !slices.Equal(got, want) {
			t.Fatalf("seed %d: Service ports %v, want %v", seed, got, want)
		}
	}
}

func TestImportPlan_ThisClustersOwnPodsAreLeftOutUnlessAskedFor(t *testing.T) {
	harness.OnlyComputes(t)
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
	fmt.Fprintf(&b, "%d/%d, left out %v; made %v, written over %v, %d removed\n", p.ready, p.total, p.leftOutNames(), p.create, p.update, len(p.remove))
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
		var ports []string
		for _, p := range s.Ports {
			ports = append(ports, fmt.Sprintf("%s=%d", *p.Name, *p.Port))
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
		var ports []string
		for _, p := range ss.Ports {
			ports = append(ports, fmt.Sprintf("%s=%d", p.Name, p.Port))
			if p.Protocol != corev1.ProtocolTCP || p.Port < 1 || p.Port > 65535 || !slices.Contains(svcPortNames, p.Name) {
				fail("port %+v, the Service's are %v", p, svcPortNames)
			}
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
	harness.OnlyComputes(t)
	for seed := range uint64(300) {
		r := rand.New(rand.NewPCG(seed, 2903))
		imp := randomImport(r)
		plan := planImport(imp, importedInstances(imp, randomInstances(r, r.IntN(200)), planTestCluster), nil, nil)
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
	harness.OnlyComputes(t)
	for seed := range uint64(20) {
		r := rand.New(rand.NewPCG(seed, 2904))
		imp := randomImport(r)
		all := randomInstances(r, 1500+r.IntN(2500))
		if seed%2 == 0 { // more ready addresses than the cap
			for i := range all {
				all[i].Status = eureka.StatusUp
			}
		}
		plan := planImport(imp, all, nil, nil)
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
