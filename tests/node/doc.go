// Package node runs a real single-node Kubernetes cluster on this machine
// for the end-to-end suites: containerd, runc and the CNI plugins from
// Debian packages (tests/tools/deps.sh), etcd, kube-apiserver,
// kube-controller-manager, kube-scheduler, the kubelet and kube-proxy built
// from Go modules (tests/tools/envtest/build.sh), CoreDNS from its own
// (tests/tools/coredns/build.sh), a PKI generated at every start, and the
// project's images (tests/images) imported into containerd, so pods run
// exactly what users deploy and nothing is pulled.
//
// Network — nothing is routed off the machine:
//
//	node address   198.51.100.2/32 (TEST-NET-2) on eknode0, a bridge without
//	               ports standing in for a dummy interface (these kernels
//	               have no dummy driver); the API server and the kubelet
//	               listen there only. TEST-NET-1 is not used: on these
//	               machines it is eth0's real network (192.0.2.2/24)
//	pods           10.88.0.0/16 on the bridge cni0 (host-local IPAM), no
//	               masquerading; pods get routes to the pod and Service
//	               ranges and to the node address, and no default route
//	Services       10.96.0.0/16 (the API server is 10.96.0.1), kube-proxy in
//	               iptables mode; the range is routed to eknode0, which drops
//	               what kube-proxy does not rewrite; NodePorts on 198.51.100.2 only
//	load balancers 10.97.0.0/24, the ingress IPs tests give LoadBalancer
//	               Services; routed to eknode0 as the Service range. Not
//	               TEST-NET-3: on these machines the package registries
//	               are there (203.0.113.80), and the node must not cut the
//	               machine off from them
//	DNS            CoreDNS (tests/tools/coredns/build.sh) on 198.51.100.2:53,
//	               serving cluster.local from the API server; the kubelet's
//	               clusterDNS, so pods resolve <service>.<namespace>.svc.
//	               Nothing is forwarded: other names are refused
//
// On these machines two settings are required (see reference/realnode.md):
// containerd's restrict_oom_score_adj (no CAP_SYS_RESOURCE) and the
// kubelet's failCgroupV1: false (cgroup v1 hierarchies).
//
// A node needs root. One runs per machine: Start waits for LockPath while
// another suite's node runs (go test runs packages in parallel). Teardown
// restores the host — processes, mounts, cni0 and eknode0, the KUBE-/CNI-
// iptables chains, the kubepods cgroups, the sysctls the kubelet and the
// plugins change, and the node's directories. A node interrupted by SIGINT
// or SIGTERM tears itself down; one whose process was killed leaves a state
// file, and the next Start (or `make node-clean`) restores the host from it
// before anything else. ListHost lists what a node could leave behind;
// Node.HostListings are the listings before the node and after its
// teardown, taken under the lock.
//
// A test starts a node with StartT (skipped without root or the Debian
// packages; torn down when the test ends); a suite that shares one node
// between its tests calls Start in TestMain and Teardown after m.Run. Pods
// use the project's images by Node.Image (imagePullPolicy Never); Client,
// Config and Kubeconfig reach the API server as an administrator.
package node
