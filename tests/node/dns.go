package node

import (
	"context"
	"fmt"
	"net"
	"os"
	"strconv"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/eurekube/eurekube/tests/harness"
)

// The cluster's DNS: CoreDNS, built from its Go module
// (tests/tools/coredns/build.sh), runs beside kube-proxy as a process of
// the node, serving ClusterDomain from the API server (its kubernetes
// plugin) on the node's address, which every pod reaches. The kubelet gives
// pods that address as their nameserver (clusterDNS), so they resolve
// <service>.<namespace>.svc as in every cluster. It answers for
// ClusterDomain only: nothing is forwarded off the machine.
const (
	// ClusterDomain is the kubelet's clusterDomain and CoreDNS's zone.
	ClusterDomain = "cluster.local"
	// DNSPort is where CoreDNS answers on NodeIP, UDP and TCP.
	DNSPort = 53
	// coreDNSUser is CoreDNS's identity at the API server, and the name of
	// the ClusterRole and binding that let it read what it serves (as
	// kubeadm names them).
	coreDNSUser = "system:coredns"
)

// coreDNSRole grants what the kubernetes plugin lists and watches.
func coreDNSRole() (*rbacv1.ClusterRole, *rbacv1.ClusterRoleBinding) {
	read := []string{"list", "watch"}
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: coreDNSUser}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"services", "endpoints", "pods", "namespaces"}, Verbs: read},
		{APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}, Verbs: read},
	}}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: coreDNSUser},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: coreDNSUser},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: coreDNSUser}},
	}
	return role, binding
}

// corefile serves ClusterDomain on NodeIP from the API server, as
// kubeadm's Corefile does, with health and readiness on the loopback.
func (n *Node) corefile() ([]byte, error) {
	return fmt.Appendf(nil, `%[1]s:%[2]d {
    bind %[3]s
    errors
    health 127.0.0.1:%[4]d
    ready 127.0.0.1:%[5]d
    kubernetes %[1]s {
        kubeconfig %[6]s
        ttl 5
    }
}
`, ClusterDomain, DNSPort, NodeIP, n.ports.dnsHealth, n.ports.dnsReady, n.path("pki", "coredns.kubeconfig")), nil
}

// startCoreDNS grants CoreDNS its reads, starts it, and waits until its
// kubernetes plugin has synced with the API server (the ready plugin) and
// it answers for the API server's own Service on NodeIP.
func (n *Node) startCoreDNS(ctx context.Context) error {
	if n.opts.CoreDNS == "" {
		var err error
		if n.opts.CoreDNS, err = harness.BuildArtifact("EUREKUBE_COREDNS", "tests/tools/coredns/build.sh"); err != nil {
			return fmt.Errorf("node: %w", err)
		}
	}
	if _, err := os.Stat(n.opts.CoreDNS); err != nil {
		return fmt.Errorf("node: coredns (tests/tools/coredns/build.sh builds it): %w", err)
	}
	role, binding := coreDNSRole()
	for _, obj := range []client.Object{role, binding} {
		if err := n.Client.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("node: CoreDNS's %T %s: %w", obj, obj.GetName(), err)
		}
	}
	p, err := n.startProcess("coredns", n.opts.CoreDNS, "-conf", n.path("Corefile"))
	if err != nil {
		return err
	}
	if err := p.WaitHTTP200(ctx, nil, "http://127.0.0.1:"+strconv.Itoa(n.ports.dnsReady)+"/ready", 2*time.Minute); err != nil {
		return err
	}
	name := "kubernetes.default.svc." + ClusterDomain
	return n.waitFor(ctx, p, time.Minute, "CoreDNS resolves "+name+" to "+KubernetesServiceIP, func() error {
		addrs, err := NodeResolver().LookupHost(ctx, name)
		if err != nil {
			return err
		}
		if len(addrs) != 1 || addrs[0] != KubernetesServiceIP {
			return fmt.Errorf("%s resolves to %v", name, addrs)
		}
		return nil
	})
}

// NodeResolver asks the node's DNS (CoreDNS on NodeIP), as a pod's
// resolver does, for a test on the host.
func NodeResolver() *net.Resolver {
	addr := net.JoinHostPort(NodeIP, strconv.Itoa(DNSPort))
	return &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, network, addr)
	}}
}
