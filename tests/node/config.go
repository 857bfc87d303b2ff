package node

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strconv"

	"sigs.k8s.io/yaml"
)

// The node's configuration files, generated at every start from the layout.

// containerdConfig keeps everything containerd owns under the node's
// directories, runs pods with runc and cgroupfs, and names the sandbox image
// the node imported (no registry is ever contacted).
func (n *Node) containerdConfig() string {
	return fmt.Sprintf(`version = 2
root = %[1]q
state = %[2]q
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.zfs", "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing"]

[grpc]
  address = %[3]q

[ttrpc]
  address = %[4]q

[plugins]
  [plugins."io.containerd.internal.v1.opt"]
    path = %[5]q
  [plugins."io.containerd.grpc.v1.cri"]
    sandbox_image = %[6]q
    stream_server_address = "127.0.0.1"
    stream_server_port = "0"
    enable_selinux = false
    # These machines drop CAP_SYS_RESOURCE: the negative oom_score_adj that
    # containerd gives sandboxes and Guaranteed pods makes runc create fail
    # ("can't get final child's PID from pipe: EOF"). Clamp it to ours.
    restrict_oom_score_adj = true
    [plugins."io.containerd.grpc.v1.cri".containerd]
      snapshotter = "overlayfs"
      default_runtime_name = "runc"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
        runtime_type = "io.containerd.runc.v2"
        [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
          SystemdCgroup = false
          BinaryName = %[7]q
          Root = %[8]q
    [plugins."io.containerd.grpc.v1.cri".cni]
      bin_dir = %[9]q
      conf_dir = %[10]q
      max_conf_num = 1
`,
		n.path("containerd"), n.run("containerd"),
		n.containerdSocket(), n.run("containerd", "containerd.sock.ttrpc"),
		n.path("containerd", "opt"), n.imageRef("pause"),
		n.opts.Runc, n.run("runc"),
		n.opts.CNIBinDir, n.path("cni", "net.d"))
}

// cniConfig puts pods on the cni0 bridge with addresses from PodCIDR. Pods
// get routes to the pod and Service ranges and to the node's address only —
// no default route — and nothing is masqueraded, so no pod packet can leave
// this machine.
func (n *Node) cniConfig() ([]byte, error) {
	return json.MarshalIndent(map[string]any{
		"cniVersion": "1.0.0",
		"name":       "eurekube-node",
		"plugins": []any{
			map[string]any{
				"type": "bridge", "bridge": BridgeName,
				"isGateway": true, "ipMasq": false, "hairpinMode": true,
				"ipam": map[string]any{
					"type":    "host-local",
					"dataDir": n.path("cni", "ipam"),
					"ranges":  [][]map[string]string{{{"subnet": PodCIDR}}},
					"routes": []map[string]string{
						{"dst": ServiceCIDR}, {"dst": NodeIP + "/32"},
					},
				},
			},
			map[string]any{"type": "loopback"},
		},
	}, "", "  ")
}

// kubeletConfig is a KubeletConfiguration (kubelet.config.k8s.io/v1beta1).
func (n *Node) kubeletConfig() ([]byte, error) {
	return yaml.Marshal(map[string]any{
		"apiVersion": "kubelet.config.k8s.io/v1beta1",
		"kind":       "KubeletConfiguration",
		// These machines mount cgroup v1; kubelet 1.36 refuses it unless
		// told otherwise (1.37 drops v1 altogether).
		"failCgroupV1":             false,
		"cgroupDriver":             "cgroupfs",
		"containerRuntimeEndpoint": "unix://" + n.containerdSocket(),
		"address":                  NodeIP,
		"port":                     n.ports.kubelet,
		"readOnlyPort":             0,
		"healthzBindAddress":       "127.0.0.1",
		"healthzPort":              n.ports.kubeletHealthz,
		"podLogsDir":               n.path("pod-logs"),
		"volumePluginDir":          n.path("volume-plugins"),
		"authentication": map[string]any{
			"anonymous": map[string]any{"enabled": false},
			"webhook":   map[string]any{"enabled": true},
			"x509":      map[string]any{"clientCAFile": n.path("pki", "ca.crt")},
		},
		"authorization":      map[string]any{"mode": "Webhook"},
		"tlsCertFile":        n.path("pki", "kubelet-serving.crt"),
		"tlsPrivateKeyFile":  n.path("pki", "kubelet-serving.key"),
		"rotateCertificates": false,
		"serverTLSBootstrap": false,
		"failSwapOn":         false,
		// Pods resolve Services through CoreDNS on the node's address
		// (dns.go).
		"clusterDomain": ClusterDomain,
		"clusterDNS":    []string{NodeIP},
		// The disk is shared with builds: evict only when it is really full,
		// and never collect the imported images (they cannot be pulled).
		"evictionHard":                map[string]string{"memory.available": "100Mi", "nodefs.available": "1%", "imagefs.available": "1%"},
		"imageGCHighThresholdPercent": 100,
		"imageGCLowThresholdPercent":  99,
		"syncFrequency":               "10s",
		"fileCheckFrequency":          "10s",
		"nodeStatusUpdateFrequency":   "5s",
		// The node's Lease is renewed every quarter of this: 5 s, against
		// the controller manager's grace of 25 s (node.go).
		"nodeLeaseDurationSeconds": 20,
		"serializeImagePulls":      false,
	})
}

// kubeProxyConfig is a KubeProxyConfiguration in iptables mode that leaves
// the conntrack sysctls and route_localnet alone and serves NodePorts on the
// node's address only, never on the machine's other interfaces.
// masqueradeAll makes a pod that calls a Service backed by a pod on the
// same bridge get its replies through the host (no br_netfilter needed).
func (n *Node) kubeProxyConfig() ([]byte, error) {
	return yaml.Marshal(map[string]any{
		"apiVersion":         "kubeproxy.config.k8s.io/v1alpha1",
		"kind":               "KubeProxyConfiguration",
		"clientConnection":   map[string]any{"kubeconfig": n.path("pki", "kube-proxy.kubeconfig")},
		"hostnameOverride":   NodeName,
		"mode":               "iptables",
		"clusterCIDR":        PodCIDR,
		"bindAddress":        NodeIP,
		"nodePortAddresses":  []string{NodeIP + "/32"},
		"metricsBindAddress": "127.0.0.1:" + strconv.Itoa(n.ports.proxyMetrics),
		"healthzBindAddress": "127.0.0.1:" + strconv.Itoa(n.ports.proxyHealthz),
		"iptables":           map[string]any{"masqueradeAll": true, "localhostNodePorts": false},
		"conntrack": map[string]any{
			"maxPerCore": 0, "min": 0,
			"tcpEstablishedTimeout": "0s", "tcpCloseWaitTimeout": "0s",
		},
	})
}

func (n *Node) path(elem ...string) string {
	return filepath.Join(append([]string{n.opts.DataDir}, elem...)...)
}

func (n *Node) run(elem ...string) string {
	return filepath.Join(append([]string{n.opts.RunDir}, elem...)...)
}

func (n *Node) containerdSocket() string { return n.run("containerd", "containerd.sock") }
