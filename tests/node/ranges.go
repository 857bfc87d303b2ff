package node

import (
	"context"
	"fmt"
	"net/netip"
	"time"
)

// registryHosts are the package registries a run downloads from: the Go
// module proxy and Maven Central. A node must not route their addresses
// to DummyName, or every download fails while it runs.
var registryHosts = []string{"proxy.golang.org", "repo.maven.apache.org", "repo1.maven.org"}

// dummyRoutes are the ranges setUpNetwork routes to DummyName, where a
// packet no rule rewrites is dropped, each with its route's further
// arguments (the pod range's yields to cni0's once the bridge exists).
var dummyRoutes = []struct {
	cidr  string
	extra []string
}{
	{ServiceCIDR, nil},
	{LoadBalancerCIDR, nil},
	{PodCIDR, []string{"metric", "1000"}},
}

// routedRanges are the addresses a node takes from this machine: its
// routes to DummyName and NodeIP, which DummyName holds.
func routedRanges() []netip.Prefix {
	ranges := []netip.Prefix{netip.PrefixFrom(netip.MustParseAddr(NodeIP), 32)}
	for _, r := range dummyRoutes {
		ranges = append(ranges, netip.MustParsePrefix(r.cidr))
	}
	return ranges
}

// checkRoutedRanges refuses to start a node whose routed ranges hold an
// address one of hosts resolves to: the node would cut this machine off
// from it. A host that does not resolve (no network) is no conflict.
func checkRoutedRanges(hosts []string, lookup func(ctx context.Context, network, host string) ([]netip.Addr, error)) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ranges := routedRanges()
	for _, host := range hosts {
		addrs, err := lookup(ctx, "ip4", host)
		if err != nil {
			continue
		}
		for _, addr := range addrs {
			for _, r := range ranges {
				if r.Contains(addr.Unmap()) {
					return fmt.Errorf("the node would route %s to %s, and %s is %s on this machine: it would cut the machine off from %s while it runs; choose the node's ranges (tests/node/node.go) outside it", r, DummyName, host, addr, host)
				}
			}
		}
	}
	return nil
}
