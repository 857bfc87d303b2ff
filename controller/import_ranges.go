package controller

import (
	"context"
	"fmt"
	"net/netip"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
)

// Where the cluster's ranges come from (import_addresses.go says what
// they are for). Flags win: Options.PodCIDRs and Options.ServiceCIDRs,
// each replacing what would be detected for its kind. Otherwise:
//
//   - Pods: every node's spec.podCIDRs (set where the controller manager
//     allocates node ranges, --allocate-node-cidrs; many CNIs do not:
//     then only the running pods' own IPs count as inside, and the flag
//     says the rest).
//   - Services: the ServiceCIDR objects (networking.k8s.io/v1, served
//     from Kubernetes 1.33), the API server's own list of its ranges,
//     both families. Where that API is not served (or not readable), the
//     ClusterIPs of Service default/kubernetes, each widened to its /12
//     (IPv4) or /108 (IPv6): the API server refuses a larger Service range
//     (20 bits at most), so the range that holds that ClusterIP lies
//     inside it. That is sound and wider than the range: a VM inside it
//     but outside the real range is left out, named, until --service-cidr
//     says the range.
//
// Nodes' own addresses are not inside: what listens there serves the
// node's network, as a VM does (the sandbox's VMs run on its node), and
// a NetworkPolicy does not guard it either. Host-network pods are left
// out of the pods by IP for the same reason.
//
// The Service ranges are read from the API server at most once a minute;
// the nodes' podCIDRs come from the manager's cache on each pass.

// serviceRangesTTL: how long a read of the Service ranges is used.
const serviceRangesTTL = time.Minute

// podsByIP is the pod cache's index of running pods by IP.
const podsByIP = "eurekube.io/pod-ip"

// indexPodsByIP registers the index the address rule reads.
func indexPodsByIP(ctx context.Context, mgr manager.Manager) error {
	err := mgr.GetFieldIndexer().IndexField(ctx, &corev1.Pod{}, podsByIP, func(o client.Object) []string {
		p, ok := o.(*corev1.Pod)
		// A host-network pod's IP is its node's (the trimmed pod has no
		// spec.hostNetwork; its IP equal to its host's says the same):
		// not the pod's own, and shared with whatever else runs there.
		if !ok || p.Status.Phase != corev1.PodRunning || p.Status.PodIP != "" && p.Status.PodIP == p.Status.HostIP {
			return nil
		}
		var ips []string
		for _, ip := range p.Status.PodIPs {
			if a, err := netip.ParseAddr(ip.IP); err == nil {
				ips = append(ips, a.Unmap().String())
			}
		}
		if len(ips) == 0 && p.Status.PodIP != "" {
			if a, err := netip.ParseAddr(p.Status.PodIP); err == nil {
				ips = append(ips, a.Unmap().String())
			}
		}
		return ips
	})
	if err != nil {
		return fmt.Errorf("index pods by IP: %w", err)
	}
	return nil
}

// rangeSource gives the cluster's ranges (see above).
type rangeSource struct {
	pods, services []netip.Prefix // from the flags
	cache, api     client.Reader

	mu       sync.Mutex
	detected []namedPrefix // the Service ranges last read
	readAt   time.Time
}

// ranges are the cluster's ranges now.
func (s *rangeSource) ranges(ctx context.Context) (clusterRanges, error) {
	var out clusterRanges
	var nodes corev1.NodeList
	if err := s.cache.List(ctx, &nodes, client.UnsafeDisableDeepCopy); err != nil {
		return out, fmt.Errorf("list nodes: %w", err)
	}
	for _, n := range nodes.Items {
		if len(s.pods) > 0 {
			break
		}
		for _, c := range n.Spec.PodCIDRs {
			if p, err := netip.ParsePrefix(c); err == nil {
				out.pods = append(out.pods, namedPrefix{prefix: p.Masked(), from: "node " + n.Name + "'s spec.podCIDRs"})
			}
		}
	}
	for _, p := range s.pods {
		out.pods = append(out.pods, namedPrefix{prefix: p, from: "--pod-cidr"})
	}
	if len(s.services) > 0 {
		for _, p := range s.services {
			out.services = append(out.services, namedPrefix{prefix: p, from: "--service-cidr"})
		}
		return out, nil
	}
	svc, err := s.serviceRanges(ctx)
	out.services = svc
	return out, err
}

// serviceRanges detects the Service ranges, at most once per
// serviceRangesTTL.
func (s *rangeSource) serviceRanges(ctx context.Context) ([]namedPrefix, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.readAt.IsZero() && time.Since(s.readAt) < serviceRangesTTL {
		return s.detected, nil
	}
	var cidrs networkingv1.ServiceCIDRList
	err := s.api.List(ctx, &cidrs)
	var found []namedPrefix
	switch {
	case err == nil:
		for _, c := range cidrs.Items {
			for _, cidr := range c.Spec.CIDRs {
				if p, perr := netip.ParsePrefix(cidr); perr == nil {
					found = append(found, namedPrefix{prefix: p.Masked(), from: "ServiceCIDR " + c.Name})
				}
			}
		}
	case meta.IsNoMatchError(err), apierrors.IsNotFound(err), apierrors.IsForbidden(err):
		// Not served (before 1.33), or not granted: the hint below.
	default:
		return nil, fmt.Errorf("list ServiceCIDRs: %w", err)
	}
	if len(found) == 0 {
		var kubernetes corev1.Service
		if err := s.api.Get(ctx, client.ObjectKey{Namespace: "default", Name: "kubernetes"}, &kubernetes); err != nil {
			return nil, fmt.Errorf("read Service default/kubernetes for the Service range (or give the manager --service-cidr): %w", err)
		}
		found = widenedClusterIPs(kubernetes.Spec.ClusterIPs)
	}
	s.detected, s.readAt = found, time.Now()
	return found, nil
}

// maxServiceRangeBits: the API server refuses a Service range of more
// than 2^20 addresses, in either family.
const maxServiceRangeBits = 20

// widenedClusterIPs are the largest Service ranges that can hold ips: each
// ClusterIP's /12 (IPv4) or /108 (IPv6).
func widenedClusterIPs(ips []string) []namedPrefix {
	var out []namedPrefix
	for _, ip := range ips {
		a, err := netip.ParseAddr(ip)
		if err != nil {
			continue
		}
		a = a.Unmap()
		p, err := a.Prefix(a.BitLen() - maxServiceRangeBits)
		if err != nil {
			continue
		}
		out = append(out, namedPrefix{prefix: p, from: fmt.Sprintf("the widest Service range holding default/kubernetes' ClusterIP %s", a)})
	}
	return out
}
