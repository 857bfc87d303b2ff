package controller

import (
	"fmt"
	"net/netip"
	"sort"
	"strings"

	"github.com/eurekube/eurekube/eureka"
)

// Which addresses an import may write. An EndpointSlice of a selector-less
// Service is a way into whatever address it lists: an Ingress or a
// Gateway route of the import's namespace sends traffic there, past the
// NetworkPolicies of the namespace the address belongs to (the hole
// Kubernetes closed for the edit role with CVE-2021-25740). Eureka checks
// nothing an instance says of itself, so anyone may register an instance
// whose ipAddr is another team's pod or a ClusterIP. The rule:
//
//   - An address outside the cluster (no pod range, no Service range, no
//     running pod's IP) is a VM's or another cluster's: it is written.
//   - An address inside the cluster is written only when it is the IP of a
//     running pod whose namespace may register the app itself
//     (ownership.Checker, a dry run), and the import asks for this
//     cluster's instances (includeThisCluster) from a namespace that may
//     register the app too. Whoever registered the instance, and
//     whatever markers it carries.
//
// The pod and Service ranges are the manager's flags where given,
// detected where the cluster tells otherwise (import_ranges.go). A pod's
// IP counts as inside even where no range covers it (a CNI that gives
// pods addresses of the nodes' network); a host-network pod's does not,
// as it is its node's (import_ranges.go).

// clusterRanges are the address ranges of this cluster: its pods' and its
// Services', each with where it was learnt.
type clusterRanges struct {
	pods, services []namedPrefix
}

// namedPrefix is a range and where it comes from ("--pod-cidr", "Node
// a's spec.podCIDRs", "ServiceCIDR kubernetes").
type namedPrefix struct {
	prefix netip.Prefix
	from   string
}

// inside says which of the cluster's ranges addr is in, "" when none.
func (c clusterRanges) inside(addr netip.Addr) string {
	addr = addr.Unmap()
	for _, p := range c.pods {
		if p.prefix.Contains(addr) {
			return fmt.Sprintf("in the pod range %s (%s)", p.prefix, p.from)
		}
	}
	for _, p := range c.services {
		if p.prefix.Contains(addr) {
			return fmt.Sprintf("in the Service range %s (%s)", p.prefix, p.from)
		}
	}
	return ""
}

// clusterPod is what the address rule needs of the running pods that have
// an address: their namespace and name.
type clusterPod struct{ namespace, name string }

// addressRule decides, without I/O, which instance addresses an import
// may write (see above).
type addressRule struct {
	ranges clusterRanges
	// podsAt lists the running pods whose IP is addr.
	podsAt func(addr netip.Addr) []clusterPod
	// includeThisCluster: the import asks for this cluster's instances,
	// and its namespace may register the app.
	includeThisCluster bool
	// mayRegister says whether a namespace may register the app; a
	// namespace it cannot decide is not allowed.
	mayRegister func(namespace string) bool
}

// refusal says why addr may not be written, "" when it may.
func (r addressRule) refusal(addr netip.Addr) string {
	addr = addr.Unmap()
	where := r.ranges.inside(addr)
	pods := r.podsAt(addr)
	if where == "" && len(pods) == 0 {
		return ""
	}
	if where == "" {
		where = "a pod's IP"
	}
	if len(pods) == 0 {
		return where + ", and no running pod has it"
	}
	var others []string
	for _, p := range pods {
		if !r.mayRegister(p.namespace) {
			others = append(others, p.namespace+"/"+p.name)
			continue
		}
		if r.includeThisCluster {
			return ""
		}
	}
	if len(others) > 0 {
		sort.Strings(others)
		return fmt.Sprintf("%s, of pod %s, whose namespace may not register the app", where, strings.Join(others, ", "))
	}
	return fmt.Sprintf("%s, of pod %s/%s: this cluster's instances are imported only with includeThisCluster, by a namespace that may register the app", where, pods[0].namespace, pods[0].name)
}

// refusedInstance is an instance an import left out for its address.
type refusedInstance struct {
	id, addr, why string
}

// allowedInstances splits instances into those whose address the rule
// allows (or that have no IP address: planImport names those) and those
// it refuses, the latter in instance id order.
func allowedInstances(instances []eureka.Instance, rule addressRule) ([]eureka.Instance, []refusedInstance) {
	var kept []eureka.Instance
	var refused []refusedInstance
	for _, inst := range instances {
		addr, bad := endpointAddress(inst.IPAddr)
		if bad != "" {
			kept = append(kept, inst)
			continue
		}
		if why := rule.refusal(addr); why != "" {
			refused = append(refused, refusedInstance{id: inst.InstanceID, addr: addr.String(), why: why})
			continue
		}
		kept = append(kept, inst)
	}
	sort.Slice(refused, func(i, j int) bool { return refused[i].id < refused[j].id })
	return kept, refused
}

// maxNamedRefusals is how many left-out instances a condition names.
const maxNamedRefusals = 3

// refusalMessage is the AddressesAllowed condition's message for refused
// instances of app: the count, the first few, and the fix.
func refusalMessage(app string, refused []refusedInstance) string {
	var named []string
	for _, r := range refused[:min(len(refused), maxNamedRefusals)] {
		named = append(named, fmt.Sprintf("%s at %s (%s)", r.id, r.addr, r.why))
	}
	more := ""
	if n := len(refused) - len(named); n > 0 {
		more = fmt.Sprintf(" and %d more", n)
	}
	return fmt.Sprintf("%d instance(s) of %s left out, their address inside this cluster and not a pod of a namespace that may register %s: %s%s. "+
		"An import reaches this cluster's pods only with includeThisCluster, from a namespace that may register the app (an EurekaAppPolicy or its claim); "+
		"a VM whose address falls in a range wrongly detected is let in by giving the manager --pod-cidr and --service-cidr",
		len(refused), app, app, strings.Join(named, "; "), more)
}
