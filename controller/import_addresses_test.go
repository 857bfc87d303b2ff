package controller

import (
	"math/rand/v2"
	"net/netip"
	"strings"
	"testing"

	"github.com/eurekube/eurekube/eureka"
)

// randomAddr is a random address of the family of bits (32 or 128).
func randomAddr(rng *rand.Rand, bits int) netip.Addr {
	if bits == 32 {
		var b [4]byte
		for i := range b {
			b[i] = byte(rng.IntN(256))
		}
		return netip.AddrFrom4(b)
	}
	var b [16]byte
	for i := range b {
		b[i] = byte(rng.IntN(256))
	}
	return netip.AddrFrom16(b)
}

// randomPrefix is a random range of the family of bits, 8 to 24 bits
// (IPv4) or 32 to 120 (IPv6) long.
func randomPrefix(rng *rand.Rand, bits int) netip.Prefix {
	n := 8 + rng.IntN(17)
	if bits == 128 {
		n = 32 + rng.IntN(89)
	}
	p, _ := randomAddr(rng, bits).Prefix(n)
	return p
}

// inside is a random address inside p.
func inside(rng *rand.Rand, p netip.Prefix) netip.Addr {
	a := randomAddr(rng, p.Addr().BitLen()).AsSlice()
	base := p.Addr().AsSlice()
	for bit := 0; bit < p.Bits(); bit++ {
		mask := byte(0x80 >> (bit % 8))
		a[bit/8] = a[bit/8]&^mask | base[bit/8]&mask
	}
	out, _ := netip.AddrFromSlice(a)
	return out
}

// The property: an address is written when, and only when, it is outside
// every range of the cluster and no running pod has it, or it is the IP
// of a running pod of a namespace that may register the app and the
// import asks for this cluster's instances; in both families, with
// IPv4-mapped IPv6 addresses counted as their IPv4 address.
func TestImportAddresses_WritesAnInClusterAddressOnlyForAPodOfANamespaceThatMayRegister(t *testing.T) {
	rng := rand.New(rand.NewPCG(41, 2))
	for i := 0; i < 20000; i++ {
		bits := 32
		if rng.IntN(2) == 0 {
			bits = 128
		}
		podRange, svcRange := randomPrefix(rng, bits), randomPrefix(rng, bits)
		ranges := clusterRanges{pods: []namedPrefix{{prefix: podRange, from: "--pod-cidr"}}, services: []namedPrefix{{prefix: svcRange, from: "--service-cidr"}}}
		var addr netip.Addr
		switch rng.IntN(3) {
		case 0:
			addr = inside(rng, podRange)
		case 1:
			addr = inside(rng, svcRange)
		default:
			addr = randomAddr(rng, bits)
		}
		hasPod, podNSAllowed, include := rng.IntN(2) == 0, rng.IntN(2) == 0, rng.IntN(2) == 0
		rule := addressRule{
			ranges: ranges,
			podsAt: func(a netip.Addr) []clusterPod {
				if hasPod && a == addr.Unmap() {
					return []clusterPod{{namespace: "shop", name: "orders-1"}}
				}
				return nil
			},
			includeThisCluster: include,
			mayRegister:        func(ns string) bool { return ns == "shop" && podNSAllowed },
		}
		inCluster := podRange.Contains(addr) || svcRange.Contains(addr) || hasPod
		want := !inCluster || hasPod && podNSAllowed && include
		probe := addr
		if bits == 32 && rng.IntN(4) == 0 {
			probe = netip.AddrFrom16(addr.As16()) // ::ffff:a.b.c.d
		}
		if got := rule.refusal(probe) == ""; got != want {
			t.Fatalf("%s (pod range %s, Service range %s, pod %v, its namespace allowed %v, includeThisCluster %v): written %v, want %v (%q)",
				probe, podRange, svcRange, hasPod, podNSAllowed, include, got, want, rule.refusal(probe))
		}
	}
}

func TestImportAddresses_NamesTheRangeThePodAndTheFix(t *testing.T) {
	ranges := clusterRanges{
		pods:     []namedPrefix{{prefix: netip.MustParsePrefix("10.88.0.0/16"), from: "node a's spec.podCIDRs"}, {prefix: netip.MustParsePrefix("fd00:88::/64"), from: "--pod-cidr"}},
		services: []namedPrefix{{prefix: netip.MustParsePrefix("10.96.0.0/12"), from: "ServiceCIDR kubernetes"}},
	}
	pods := map[string][]clusterPod{"10.88.0.4": {{"shop", "orders-1"}}, "fd00:88::4": {{"shop", "orders-2"}}, "172.16.0.9": {{"shop", "orders-3"}}}
	rule := addressRule{ranges: ranges, podsAt: func(a netip.Addr) []clusterPod { return pods[a.String()] },
		mayRegister: func(ns string) bool { return ns == "evil" }}
	instances := []eureka.Instance{
		{InstanceID: "a-vm", IPAddr: "10.20.0.1"},
		{InstanceID: "b-shop-pod", IPAddr: "10.88.0.4"},
		{InstanceID: "c-shop-pod-v6", IPAddr: "fd00:88::4"},
		{InstanceID: "d-clusterip", IPAddr: "10.96.0.10"},
		{InstanceID: "e-free-pod-ip", IPAddr: "10.88.3.3"},
		{InstanceID: "f-vm-on-a-node", IPAddr: "192.168.1.10"},
		{InstanceID: "g-pod-outside-ranges", IPAddr: "172.16.0.9"},
		{InstanceID: "h-hostname", IPAddr: "vm-1.example.com"},
		{InstanceID: "i-vm-v6", IPAddr: "2001:db8::1"},
	}
	kept, refused := allowedInstances(instances, rule)
	var keptIDs []string
	for _, k := range kept {
		keptIDs = append(keptIDs, k.InstanceID)
	}
	if got := strings.Join(keptIDs, " "); got != "a-vm f-vm-on-a-node h-hostname i-vm-v6" {
		t.Errorf("kept %s, want the VMs and the host name (planImport names it)", got)
	}
	want := map[string]string{
		"b-shop-pod":           "in the pod range 10.88.0.0/16 (node a's spec.podCIDRs), of pod shop/orders-1, whose namespace may not register the app",
		"c-shop-pod-v6":        "in the pod range fd00:88::/64 (--pod-cidr), of pod shop/orders-2",
		"d-clusterip":          "in the Service range 10.96.0.0/12 (ServiceCIDR kubernetes), and no running pod has it",
		"e-free-pod-ip":        "in the pod range 10.88.0.0/16 (node a's spec.podCIDRs), and no running pod has it",
		"g-pod-outside-ranges": "a pod's IP, of pod shop/orders-3",
	}
	if len(refused) != len(want) {
		t.Fatalf("refused %+v", refused)
	}
	for _, r := range refused {
		if !strings.HasPrefix(r.why, want[r.id]) {
			t.Errorf("%s: %q, want %q", r.id, r.why, want[r.id])
		}
	}
	msg := refusalMessage("ORDERS", refused)
	for _, s := range []string{"5 instance(s) of ORDERS left out", "b-shop-pod at 10.88.0.4", "and 2 more", "includeThisCluster", "--pod-cidr and --service-cidr"} {
		if !strings.Contains(msg, s) {
			t.Errorf("message %q lacks %q", msg, s)
		}
	}
}
