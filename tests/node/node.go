package node

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/eurekube/eurekube/tests/harness"
	"github.com/eurekube/eurekube/tests/images"
)

// The node's fixed names and address ranges (see the package doc).
const (
	NodeName = "eurekube-node"
	// NodeIP is from TEST-NET-2 (RFC 5737). Not TEST-NET-1: on these
	// machines 192.0.2.0/24 is eth0's real network (the machine is
	// 192.0.2.2, its gateway 192.0.2.1), where a second address could
	// answer a neighbour's ARP.
	NodeIP      = "198.51.100.2"
	PodCIDR     = "10.88.0.0/16"
	ServiceCIDR = "10.96.0.0/16"
	// LoadBalancerCIDR is where tests put the ingress IPs of their
	// LoadBalancer Services, as a cloud controller would (kube-proxy then
	// routes them to the pods). Like the Service range it is routed to
	// DummyName: a connection made before kube-proxy has written an
	// address's rules goes nowhere, not off the machine along the default
	// route, where something else answered it (a kept-alive connection
	// then never reaches the pods). Not TEST-NET-3: on these machines
	// every package registry (the Go module proxy, Maven Central) is
	// 203.0.113.80, so routing it here cut the machine off from them while
	// a node ran (a cold run's downloads failed: no route to host).
	// checkRoutedRanges refuses a range that would do that.
	LoadBalancerCIDR = "10.97.0.0/24"
	// KubernetesServiceIP is the first address of ServiceCIDR: the API
	// server's ClusterIP.
	KubernetesServiceIP = "10.96.0.1"
	// BridgeName is the pods' bridge (the CNI bridge plugin's).
	BridgeName = "cni0"
	// DummyName is a bridge without ports holding NodeIP and swallowing
	// packets routed to it (these kernels have no dummy interfaces).
	DummyName = "eknode0"
	// LockPath is held (flock) while a node runs: one node per machine.
	LockPath = "/run/eurekube-node.lock"
)

// ErrNotRoot is returned by Start when the process is not root: a node
// mounts, configures interfaces and rules, and runs containers.
var ErrNotRoot = errors.New("a real node needs root (it mounts, creates interfaces and iptables rules, and runs containerd)")

// Options configure Start. The zero value is a complete node.
type Options struct {
	// DataDir holds the node's PKI, configuration, etcd, containerd's
	// content and the kubelet's root; RunDir containerd's state and
	// sockets. Both are removed by Teardown.
	DataDir, RunDir string
	// LogDir receives one log per process (kept after Teardown). Default:
	// a new temporary directory.
	LogDir string
	// Binaries is the directory of etcd, kube-apiserver,
	// kube-controller-manager, kube-scheduler, kubelet, kube-proxy and
	// kubectl. Default: $KUBEBUILDER_ASSETS, else what
	// tests/tools/envtest/build.sh builds (cached).
	Binaries string
	// ImageTag tags the imported images (eurekube/<name>:<tag>); default
	// "dev". Images are built from the working tree at every start, unless
	// ImageDir is set.
	ImageTag string
	// ImageDir, when set, holds the archives to import instead (every
	// *.tar, such as the bin/images of `make images`, whose tag must be
	// ImageTag).
	ImageDir string
	// CoreDNS is the coredns binary (dns.go). Default: $EUREKUBE_COREDNS,
	// else what tests/tools/coredns/build.sh builds (cached).
	CoreDNS string
	// Containerd, Runc and Ctr are the Debian packages' binaries (looked up
	// on PATH); CNIBinDir their CNI plugins (/usr/lib/cni).
	Containerd, Runc, Ctr, CNIBinDir string
	// CallerHandlesInterrupts leaves SIGINT and SIGTERM to the program,
	// which then stops what it runs beside the node and calls Teardown
	// itself (the sandbox stops its Spring client, cert-manager and Eureka
	// first, then reports what is left). By default an interrupt tears the
	// node down and exits the process, as a test binary needs.
	CallerHandlesInterrupts bool
}

func (o *Options) defaults() {
	if o.DataDir == "" {
		o.DataDir = "/var/lib/eurekube-node"
	}
	if o.RunDir == "" {
		o.RunDir = "/run/eurekube-node"
	}
	if o.ImageTag == "" {
		o.ImageTag = "dev"
	}
	for _, b := range []struct {
		field *string
		name  string
	}{{&o.Containerd, "containerd"}, {&o.Runc, "runc"}, {&o.Ctr, "ctr"}} {
		if *b.field == "" {
			*b.field = b.name
			if p, err := exec.LookPath(b.name); err == nil {
				*b.field = p
			}
		}
	}
	if o.CNIBinDir == "" {
		o.CNIBinDir = "/usr/lib/cni"
	}
}

// Node is a running single-node cluster on this machine.
type Node struct {
	// Config reaches the API server as an administrator (system:masters);
	// Client uses it with harness.Scheme().
	Config *rest.Config
	Client client.Client
	// Kubeconfig is the administrator's kubeconfig file, for kubectl.
	Kubeconfig string
	// APIServer is the API server's URL (https://NodeIP:port).
	APIServer string

	opts  Options
	ports ports
	lock  *os.File
	state hostState
	procs map[string]*harness.Process
	order []string // start order; stopped in reverse

	// before and after list the host under the lock, before the node
	// changed anything and once Teardown restored it.
	before, after Listing

	signals  chan os.Signal
	tornDown sync.Once
	err      error
}

type ports struct {
	etcd, etcdPeer, apiServer, controllerManager, scheduler int
	kubelet, kubeletHealthz, proxyMetrics, proxyHealthz     int
	dnsHealth, dnsReady                                     int
}

// StartT starts a node for a test, skipping the test when the machine
// cannot run one (not root, containerd or the CNI plugins missing), and
// tears it down when the test ends.
func StartT(t testing.TB, opts Options) *Node {
	t.Helper()
	harness.SkipWhenShort(t, "a real node")
	if reason := Unavailable(opts); reason != "" {
		t.Skip("skipped: " + reason)
	}
	opts.defaults()
	if opts.LogDir == "" {
		dir, err := os.MkdirTemp("", "eurekube-node-logs-")
		if err != nil {
			t.Fatal(err)
		}
		opts.LogDir = dir
		// Registered first, so it runs after the teardown.
		t.Cleanup(func() {
			if t.Failed() {
				t.Logf("node logs kept in %s", dir)
				return
			}
			os.RemoveAll(dir)
		})
	}
	// Long enough to wait for another suite's node to end, then start.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	n, err := Start(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := n.Teardown(); err != nil {
			t.Errorf("tear the node down: %v", err)
		}
	})
	return n
}

// Unavailable says why this machine cannot run a node ("" when it can):
// not root, or the Debian packages missing. Suites that start a node in
// TestMain skip with it.
func Unavailable(opts Options) string {
	if os.Geteuid() != 0 {
		return "a real node needs root (it mounts, creates interfaces and iptables rules, and runs containerd); run the test as root"
	}
	opts.defaults()
	for _, bin := range []string{opts.Containerd, opts.Runc, opts.Ctr, filepath.Join(opts.CNIBinDir, "bridge"), "iptables", "ip"} {
		if _, err := exec.LookPath(bin); err != nil {
			return bin + " is missing: install the node's Debian packages with tests/tools/deps.sh (as root)"
		}
	}
	return ""
}

// Start brings a node up: it waits while another node runs on the machine
// (LockPath) until ctx ends, restores what a crashed node left, records
// the host's settings, then starts containerd (with the project's images
// imported), etcd, kube-apiserver, kube-controller-manager, kube-scheduler,
// the kubelet, kube-proxy and CoreDNS, and waits until the node is Ready
// and the default ServiceAccount exists. On failure it tears down what it started.
// An interrupt (SIGINT, SIGTERM) tears the node down before the process
// exits, unless opts.CallerHandlesInterrupts.
func Start(ctx context.Context, opts Options) (*Node, error) {
	if os.Geteuid() != 0 {
		return nil, ErrNotRoot
	}
	opts.defaults()
	n := &Node{opts: opts, procs: map[string]*harness.Process{}}
	if err := n.acquireLock(ctx); err != nil {
		return nil, err
	}
	if err := n.recover(); err != nil {
		n.releaseLock()
		return nil, fmt.Errorf("node: restore what a previous node left: %w", err)
	}
	n.before = ListHost(n.opts)
	n.state = recordHost()
	if err := n.saveState(n.state); err != nil {
		n.releaseLock()
		return nil, fmt.Errorf("node: %w", err)
	}
	if !opts.CallerHandlesInterrupts {
		n.signals = make(chan os.Signal, 1)
		signal.Notify(n.signals, syscall.SIGINT, syscall.SIGTERM)
		go n.teardownOnSignal()
	}
	if err := n.start(ctx); err != nil {
		if terr := n.Teardown(); terr != nil {
			err = fmt.Errorf("%w (and tearing down: %v)", err, terr)
		}
		return nil, err
	}
	return n, nil
}

func (n *Node) teardownOnSignal() {
	sig, ok := <-n.signals
	if !ok {
		return
	}
	fmt.Fprintf(os.Stderr, "node: %s: tearing the node down\n", sig)
	if err := n.Teardown(); err != nil {
		fmt.Fprintln(os.Stderr, "node:", err)
	}
	os.Exit(130)
}

// acquireLock takes the machine's node lock, waiting while another node
// (another suite's, `go test` runs packages in parallel) holds it, until
// ctx ends.
func (n *Node) acquireLock(ctx context.Context) error {
	f, err := os.OpenFile(LockPath, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return fmt.Errorf("node: lock %s: %w", LockPath, err)
	}
	waiting := false
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			n.lock = f
			return nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			f.Close()
			return fmt.Errorf("node: lock %s: %w", LockPath, err)
		}
		if !waiting {
			fmt.Fprintf(os.Stderr, "node: another node runs on this machine (%s is locked): waiting for it to end\n", LockPath)
			waiting = true
		}
		select {
		case <-ctx.Done():
			f.Close()
			return fmt.Errorf("node: another node runs on this machine (%s is locked) and did not end in time; one node per machine: suites share it or run one after the other: %w", LockPath, ctx.Err())
		case <-time.After(500 * time.Millisecond):
		}
	}
}

func (n *Node) releaseLock() {
	if n.lock != nil {
		_ = syscall.Flock(int(n.lock.Fd()), syscall.LOCK_UN)
		n.lock.Close()
		n.lock = nil
	}
}

// recover restores the host after a node that ended without its teardown
// (its state file is still there).
func (n *Node) recover() error {
	s, err := n.loadState()
	if err != nil || s == nil {
		return err
	}
	return n.restoreHost(*s)
}

func (n *Node) start(ctx context.Context) error {
	var err error
	if n.opts.Binaries == "" {
		if n.opts.Binaries, err = harness.BuildArtifact("KUBEBUILDER_ASSETS", "tests/tools/envtest/build.sh"); err != nil {
			return fmt.Errorf("node: %w", err)
		}
	}
	for _, bin := range []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubelet", "kube-proxy", "kubectl"} {
		if _, err := os.Stat(filepath.Join(n.opts.Binaries, bin)); err != nil {
			return fmt.Errorf("node: %s missing in %s (tests/tools/envtest/build.sh builds it): %w", bin, n.opts.Binaries, err)
		}
	}
	if n.opts.LogDir == "" {
		if n.opts.LogDir, err = os.MkdirTemp("", "eurekube-node-logs-"); err != nil {
			return err
		}
	}
	for _, dir := range []string{n.opts.LogDir, n.path("pki"), n.path("cni", "net.d"), n.path("etcd"), n.run()} {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return fmt.Errorf("node: %w", err)
		}
	}
	if err := n.allocatePorts(); err != nil {
		return err
	}
	if err := setUpNetwork(); err != nil {
		return fmt.Errorf("node: network: %w", err)
	}
	archives, err := n.imageArchives()
	if err != nil {
		return err
	}
	if err := n.writePKI(); err != nil {
		return fmt.Errorf("node: PKI: %w", err)
	}
	if err := n.writeConfigs(); err != nil {
		return fmt.Errorf("node: configuration: %w", err)
	}
	steps := []func(context.Context) error{
		n.startContainerd,
		func(ctx context.Context) error { return n.importImages(ctx, archives) },
		n.startEtcd,
		n.startAPIServer,
		n.startControllerManager,
		n.startScheduler,
		n.startKubelet,
		n.startKubeProxy,
		n.startCoreDNS,
		n.waitReady,
	}
	for _, step := range steps {
		if err := step(ctx); err != nil {
			return err
		}
	}
	return nil
}

func (n *Node) allocatePorts() error {
	for _, p := range []*int{
		&n.ports.etcd, &n.ports.etcdPeer, &n.ports.apiServer, &n.ports.controllerManager, &n.ports.scheduler,
		&n.ports.kubelet, &n.ports.kubeletHealthz, &n.ports.proxyMetrics, &n.ports.proxyHealthz,
		&n.ports.dnsHealth, &n.ports.dnsReady,
	} {
		port, err := harness.FreePort()
		if err != nil {
			return fmt.Errorf("node: %w", err)
		}
		*p = port
	}
	n.APIServer = "https://" + net.JoinHostPort(NodeIP, strconv.Itoa(n.ports.apiServer))
	return nil
}

// imageArchives are the archives of ImageDir, else those buildImages
// writes.
func (n *Node) imageArchives() ([]string, error) {
	if n.opts.ImageDir == "" {
		return n.buildImages()
	}
	paths, err := filepath.Glob(filepath.Join(n.opts.ImageDir, "*.tar"))
	if err != nil || len(paths) == 0 {
		return nil, fmt.Errorf("node: no image archives (*.tar) in %s (make images writes bin/images): %v", n.opts.ImageDir, err)
	}
	return paths, nil
}

// buildImages compiles the images' binaries as make build does and writes
// their archives beside the logs' parent (a cache reused across starts).
func (n *Node) buildImages() ([]string, error) {
	return buildImages(n.opts.ImageTag, "images", images.All())
}

// ImportRelease builds the named images again under another tag, as a new
// release of Eurekube would ship them, and imports them: an upgrade test
// moves from Image(name) to images.Repository/<name>:tag.
func (n *Node) ImportRelease(ctx context.Context, tag string, specs ...images.Spec) error {
	archives, err := buildImages(tag, "images-"+tag, specs)
	if err != nil {
		return err
	}
	return n.importImages(ctx, archives)
}

func buildImages(tag, outDir string, specs []images.Spec) ([]string, error) {
	root, err := harness.RepoRoot()
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(os.TempDir(), "eurekube-node-images")
	if err := images.Compile(root, filepath.Join(dir, "bin"), specs); err != nil {
		return nil, fmt.Errorf("node: %w", err)
	}
	revision, _ := exec.Command("git", "-C", root, "rev-parse", "HEAD").Output()
	archives, err := images.WriteAll(specs, images.Options{
		BinDir: filepath.Join(dir, "bin"), OutDir: filepath.Join(dir, outDir),
		Tag: tag, Revision: strings.TrimSpace(string(revision)),
	})
	if err != nil {
		return nil, fmt.Errorf("node: %w", err)
	}
	paths := make([]string, len(archives))
	for i, a := range archives {
		paths[i] = a.Path
	}
	return paths, nil
}

// Image is the reference a pod uses for one of the project's images
// (images.Registrar.Name, …): imported, never pulled (imagePullPolicy
// Never or IfNotPresent).
func (n *Node) Image(name string) string {
	return images.Repository + "/" + name + ":" + n.opts.ImageTag
}

func (n *Node) imageRef(name string) string { return "docker.io/" + n.Image(name) }

// LogDir holds one log file per process.
func (n *Node) LogDir() string { return n.opts.LogDir }

// Kubectl is the kubectl of the node's release.
func (n *Node) Kubectl() string { return filepath.Join(n.opts.Binaries, "kubectl") }

func (n *Node) bin(name string) string { return filepath.Join(n.opts.Binaries, name) }

func (n *Node) logPath(name string) string { return filepath.Join(n.opts.LogDir, name+".log") }

func (n *Node) startProcess(name, bin string, args ...string) (*harness.Process, error) {
	p, err := harness.StartProcess(name, bin, args, nil, n.logPath(name))
	if err != nil {
		return nil, fmt.Errorf("node: %w", err)
	}
	if _, again := n.procs[name]; !again { // StartKubelet starts it again
		n.order = append(n.order, name)
	}
	n.procs[name] = p
	return p, nil
}

func (n *Node) writePKI() error {
	ca, err := newAuthority()
	if err != nil {
		return err
	}
	dir := n.path("pki")
	if err := os.WriteFile(filepath.Join(dir, "ca.crt"), ca.pem, 0o600); err != nil {
		return err
	}
	saPrivate, saPublic, err := serviceAccountKeys()
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "sa.key"), saPrivate, 0o600); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "sa.pub"), saPublic, 0o600); err != nil {
		return err
	}
	nodeIP, loopback, serviceIP := net.ParseIP(NodeIP), net.ParseIP("127.0.0.1"), net.ParseIP(KubernetesServiceIP)
	servers := []struct {
		name, cn string
		dns      []string
		ips      []net.IP
	}{
		{"apiserver", "kube-apiserver", []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc." + ClusterDomain}, []net.IP{nodeIP, loopback, serviceIP}},
		{"kubelet-serving", NodeName, []string{NodeName, "localhost"}, []net.IP{nodeIP, loopback}},
	}
	for _, s := range servers {
		kp, err := ca.serving(s.cn, s.dns, s.ips)
		if err != nil {
			return err
		}
		if _, _, err := kp.write(dir, s.name); err != nil {
			return err
		}
	}
	// Each component as the identity the API server's bootstrap RBAC
	// grants its rights to; the API server reaches kubelets as an admin.
	clients := []struct {
		name, user string
		groups     []string
	}{
		{"admin", "eurekube-admin", []string{"system:masters"}},
		{"kubelet", "system:node:" + NodeName, []string{"system:nodes"}},
		{"kube-proxy", "system:kube-proxy", nil},
		{"kube-controller-manager", "system:kube-controller-manager", nil},
		{"kube-scheduler", "system:kube-scheduler", nil},
		{"coredns", coreDNSUser, nil},
	}
	for _, c := range clients {
		kp, err := ca.client(c.user, c.groups...)
		if err != nil {
			return err
		}
		if _, _, err := kp.write(dir, c.name); err != nil {
			return err
		}
		cfg, err := kubeconfig(n.APIServer, ca.pem, kp)
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, c.name+".kubeconfig"), cfg, 0o600); err != nil {
			return err
		}
	}
	n.Kubeconfig = filepath.Join(dir, "admin.kubeconfig")
	return nil
}

func (n *Node) writeConfigs() error {
	files := map[string]func() ([]byte, error){
		n.path("containerd.toml"):                      func() ([]byte, error) { return []byte(n.containerdConfig()), nil },
		n.path("cni", "net.d", "10-eurekube.conflist"): n.cniConfig,
		n.path("kubelet.yaml"):                         n.kubeletConfig,
		n.path("kube-proxy.yaml"):                      n.kubeProxyConfig,
		n.path("Corefile"):                             n.corefile,
	}
	for path, gen := range files {
		data, err := gen()
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		if err := os.WriteFile(path, data, 0o600); err != nil {
			return err
		}
	}
	return nil
}

func (n *Node) startContainerd(ctx context.Context) error {
	p, err := n.startProcess("containerd", n.opts.Containerd, "--config", n.path("containerd.toml"))
	if err != nil {
		return err
	}
	return n.waitFor(ctx, p, time.Minute, "containerd answers on "+n.containerdSocket(), func() error {
		_, err := n.ctr(ctx, "version")
		return err
	})
}

// ctr runs containerd's CLI against the node's containerd, in the
// kubelet's namespace.
func (n *Node) ctr(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, n.opts.Ctr, append([]string{"--address", n.containerdSocket(), "--namespace", "k8s.io"}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("ctr %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return string(out), nil
}

func (n *Node) importImages(ctx context.Context, archives []string) error {
	for _, a := range archives {
		if err := n.ImportImage(ctx, a); err != nil {
			return err
		}
	}
	return nil
}

// ImportImage loads an image archive (`docker save` or OCI layout tar) into
// the node's containerd, where pods find it by the reference it is tagged
// with: the node never pulls.
func (n *Node) ImportImage(ctx context.Context, archive string) error {
	if _, err := n.ctr(ctx, "images", "import", archive); err != nil {
		return fmt.Errorf("node: import %s: %w", archive, err)
	}
	return nil
}

func (n *Node) startEtcd(ctx context.Context) error {
	client := "http://127.0.0.1:" + strconv.Itoa(n.ports.etcd)
	peer := "http://127.0.0.1:" + strconv.Itoa(n.ports.etcdPeer)
	p, err := n.startProcess("etcd", n.bin("etcd"),
		"--name=node", "--data-dir="+n.path("etcd"),
		"--listen-client-urls="+client, "--advertise-client-urls="+client,
		"--listen-peer-urls="+peer, "--initial-advertise-peer-urls="+peer,
		"--initial-cluster=node="+peer, "--unsafe-no-fsync")
	if err != nil {
		return err
	}
	return p.WaitHTTP200(ctx, nil, client+"/health", time.Minute)
}

func (n *Node) startAPIServer(ctx context.Context) error {
	pki := func(f string) string { return n.path("pki", f) }
	p, err := n.startProcess("kube-apiserver", n.bin("kube-apiserver"),
		"--etcd-servers=http://127.0.0.1:"+strconv.Itoa(n.ports.etcd),
		"--bind-address="+NodeIP, "--advertise-address="+NodeIP,
		"--secure-port="+strconv.Itoa(n.ports.apiServer),
		"--tls-cert-file="+pki("apiserver.crt"), "--tls-private-key-file="+pki("apiserver.key"),
		"--client-ca-file="+pki("ca.crt"),
		"--service-account-issuer=https://kubernetes.default.svc."+ClusterDomain,
		"--service-account-key-file="+pki("sa.pub"), "--service-account-signing-key-file="+pki("sa.key"),
		"--service-cluster-ip-range="+ServiceCIDR,
		"--authorization-mode=Node,RBAC", "--enable-admission-plugins=NodeRestriction",
		"--allow-privileged=true",
		"--kubelet-client-certificate="+pki("admin.crt"), "--kubelet-client-key="+pki("admin.key"),
		"--kubelet-certificate-authority="+pki("ca.crt"),
		// The node's name resolves nowhere: logs and exec go to its IP.
		"--kubelet-preferred-address-types=InternalIP,Hostname",
	)
	if err != nil {
		return err
	}
	c, err := n.adminHTTPClient()
	if err != nil {
		return err
	}
	if err := p.WaitHTTP200(ctx, c, n.APIServer+"/readyz", 2*time.Minute); err != nil {
		return err
	}
	if n.Config, err = clientcmd.BuildConfigFromFlags("", n.Kubeconfig); err != nil {
		return fmt.Errorf("node: %w", err)
	}
	if n.Client, err = client.New(n.Config, client.Options{Scheme: harness.Scheme()}); err != nil {
		return fmt.Errorf("node: %w", err)
	}
	return nil
}

func (n *Node) adminHTTPClient() (*http.Client, error) {
	caPEM, err := os.ReadFile(n.path("pki", "ca.crt"))
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	cert, err := tls.LoadX509KeyPair(n.path("pki", "admin.crt"), n.path("pki", "admin.key"))
	if err != nil {
		return nil, err
	}
	return &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12},
	}}, nil
}

// insecureHealth checks a component's self-signed health endpoint: only
// whether it answers counts.
var insecureHealth = &http.Client{Timeout: time.Second, Transport: &http.Transport{
	TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // loopback health check
}}

func (n *Node) startControllerManager(ctx context.Context) error {
	kubeconfig := n.path("pki", "kube-controller-manager.kubeconfig")
	p, err := n.startProcess("kube-controller-manager", n.bin("kube-controller-manager"),
		"--kubeconfig="+kubeconfig,
		"--authentication-kubeconfig="+kubeconfig, "--authorization-kubeconfig="+kubeconfig,
		"--bind-address=127.0.0.1", "--secure-port="+strconv.Itoa(n.ports.controllerManager),
		"--leader-elect=false", "--use-service-account-credentials=true",
		"--service-account-private-key-file="+n.path("pki", "sa.key"),
		"--root-ca-file="+n.path("pki", "ca.crt"),
		"--service-cluster-ip-range="+ServiceCIDR, "--cluster-cidr="+PodCIDR,
		// The bridge plugin assigns pod addresses: no node CIDRs.
		"--controllers=*,-nodeipam", "--allocate-node-cidrs=false",
		"--flex-volume-plugin-dir="+n.path("volume-plugins"),
		// A lost node is NotReady 25 s after its last Lease renewal, not
		// the default 50 s: the kubelet renews every 5 s (its
		// nodeLeaseDurationSeconds, config.go), so five renewals in a row
		// must be missed, and the lost-node story waits half as long.
		"--node-monitor-grace-period=25s",
	)
	if err != nil {
		return err
	}
	return p.WaitHTTP200(ctx, insecureHealth, "https://127.0.0.1:"+strconv.Itoa(n.ports.controllerManager)+"/healthz", time.Minute)
}

func (n *Node) startScheduler(ctx context.Context) error {
	kubeconfig := n.path("pki", "kube-scheduler.kubeconfig")
	p, err := n.startProcess("kube-scheduler", n.bin("kube-scheduler"),
		"--kubeconfig="+kubeconfig,
		"--authentication-kubeconfig="+kubeconfig, "--authorization-kubeconfig="+kubeconfig,
		"--bind-address=127.0.0.1", "--secure-port="+strconv.Itoa(n.ports.scheduler),
		"--leader-elect=false",
	)
	if err != nil {
		return err
	}
	return p.WaitHTTP200(ctx, insecureHealth, "https://127.0.0.1:"+strconv.Itoa(n.ports.scheduler)+"/healthz", time.Minute)
}

func (n *Node) startKubelet(ctx context.Context) error {
	p, err := n.startProcess("kubelet", n.bin("kubelet"),
		"--config="+n.path("kubelet.yaml"),
		"--kubeconfig="+n.path("pki", "kubelet.kubeconfig"),
		"--root-dir="+n.path("kubelet"), "--cert-dir="+n.path("kubelet", "pki"),
		"--hostname-override="+NodeName, "--node-ip="+NodeIP,
		"--v=2",
	)
	if err != nil {
		return err
	}
	return p.WaitHTTP200(ctx, nil, "http://127.0.0.1:"+strconv.Itoa(n.ports.kubeletHealthz)+"/healthz", 2*time.Minute)
}

func (n *Node) startKubeProxy(ctx context.Context) error {
	p, err := n.startProcess("kube-proxy", n.bin("kube-proxy"), "--config="+n.path("kube-proxy.yaml"), "--v=2")
	if err != nil {
		return err
	}
	return p.WaitHTTP200(ctx, nil, "http://127.0.0.1:"+strconv.Itoa(n.ports.proxyHealthz)+"/healthz", 2*time.Minute)
}

// waitReady waits until the node reports Ready and the controller manager
// has created the default ServiceAccount that pods run as.
func (n *Node) waitReady(ctx context.Context) error {
	kubelet := n.procs["kubelet"]
	if err := n.waitFor(ctx, kubelet, 2*time.Minute, "node "+NodeName+" Ready", func() error {
		var node corev1.Node
		if err := n.Client.Get(ctx, client.ObjectKey{Name: NodeName}, &node); err != nil {
			return err
		}
		for _, c := range node.Status.Conditions {
			if c.Type == corev1.NodeReady {
				if c.Status == corev1.ConditionTrue {
					return nil
				}
				return fmt.Errorf("condition Ready is %s: %s", c.Status, c.Message)
			}
		}
		return errors.New("no Ready condition yet")
	}); err != nil {
		return err
	}
	return n.waitFor(ctx, n.procs["kube-controller-manager"], time.Minute, "the default ServiceAccount", func() error {
		var sa corev1.ServiceAccount
		return n.Client.Get(ctx, client.ObjectKey{Namespace: "default", Name: "default"}, &sa)
	})
}

// waitFor polls cond until it holds, p exits (an error with its log) or
// timeout passes.
func (n *Node) waitFor(ctx context.Context, p *harness.Process, timeout time.Duration, what string, cond func() error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-p.Done():
			cancel()
		case <-ctx.Done():
		}
	}()
	err := harness.Poll(ctx, timeout, 200*time.Millisecond, "node: "+what, cond)
	switch {
	case err == nil:
		return nil
	case p.Exited():
		return fmt.Errorf("node: waiting for %s: it exited (log %s):\n%s", what, p.LogPath(), p.LogTail())
	}
	return fmt.Errorf("%w (log %s):\n%s", err, p.LogPath(), p.LogTail())
}

// HostListings are the listings of the host taken, under the machine's
// node lock, before the node changed anything and after Teardown restored
// it (nil before Teardown). A test compares them with Listing.Diff.
func (n *Node) HostListings() (before, after Listing) { return n.before, n.after }

// Teardown deletes every pod, stops every process of the node, and restores
// the host: mounts, interfaces, iptables chains, cgroups, sysctls and the
// node's directories. It is safe to call more than once.
func (n *Node) Teardown() error {
	n.tornDown.Do(func() { n.err = n.teardown() })
	return n.err
}

func (n *Node) teardown() error {
	if n.signals != nil {
		signal.Stop(n.signals)
		close(n.signals)
	}
	var errs []error
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// Nothing may create pods any more: the controllers would replace
	// every pod of a Deployment deleted below.
	for _, name := range []string{"kube-controller-manager", "kube-scheduler"} {
		if p, ok := n.procs[name]; ok {
			stopQuietly(p)
		}
	}
	// A test that froze pods (FreezePod) and failed leaves them frozen:
	// thawed, they can be stopped.
	thawAll()
	// Pods first, while the kubelet runs: it stops their containers and
	// the CNI plugin releases their addresses and interfaces.
	if err := n.deletePods(ctx); err != nil {
		errs = append(errs, err)
	}
	for i := len(n.order) - 1; i >= 0; i-- {
		name := n.order[i]
		if name == "containerd" {
			// What the kubelet left (sandboxes it had not removed yet)
			// goes through containerd, which ends their shims.
			n.removeContainers(ctx)
		}
		stopQuietly(n.procs[name])
	}
	if err := n.restoreHost(n.state); err != nil {
		errs = append(errs, err)
	}
	// Listed before the lock goes: the next node may start at once.
	n.after = ListHost(n.opts)
	n.releaseLock()
	if len(errs) > 0 {
		return fmt.Errorf("node teardown: %w", errors.Join(errs...))
	}
	return nil
}

func (n *Node) deletePods(ctx context.Context) error {
	kubelet, ok := n.procs["kubelet"]
	if !ok || n.Client == nil || kubelet.Exited() {
		return nil
	}
	var pods corev1.PodList
	if err := n.Client.List(ctx, &pods); err != nil {
		return fmt.Errorf("list pods: %w", err)
	}
	zero := int64(0)
	for i := range pods.Items {
		err := n.Client.Delete(ctx, &pods.Items[i], &client.DeleteOptions{GracePeriodSeconds: &zero})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete pod %s/%s: %w", pods.Items[i].Namespace, pods.Items[i].Name, err)
		}
	}
	// Gone from the API once the kubelet has stopped them; then their
	// sandboxes have been torn down (CNI DEL) too.
	return n.waitFor(ctx, kubelet, time.Minute, "every pod stopped", func() error {
		var left corev1.PodList
		if err := n.Client.List(ctx, &left); err != nil {
			return err
		}
		if len(left.Items) > 0 {
			return fmt.Errorf("%d pods left, such as %s/%s", len(left.Items), left.Items[0].Namespace, left.Items[0].Name)
		}
		out, err := n.ctr(ctx, "tasks", "ls")
		if err != nil {
			return err
		}
		if strings.Contains(out, "RUNNING") {
			return fmt.Errorf("containers still running:\n%s", out)
		}
		return nil
	})
}

// stopQuietly stops p. One that needs killing after its SIGTERM (an API
// server with watches open on a busy machine) is reported but is no
// failure of the teardown: what it leaves on the host is checked by
// restoreHost and the listings.
func stopQuietly(p *harness.Process) {
	if err := p.Stop(); err != nil {
		fmt.Fprintf(os.Stderr, "node teardown: %v\n", err)
	}
}

// removeContainers kills and removes every container containerd still has
// in the kubelet's namespace. Best effort: restoreHost kills what remains.
func (n *Node) removeContainers(ctx context.Context) {
	if p, ok := n.procs["containerd"]; !ok || p.Exited() {
		return
	}
	out, err := n.ctr(ctx, "containers", "ls", "-q")
	if err != nil {
		return
	}
	for _, id := range strings.Fields(out) {
		_, _ = n.ctr(ctx, "tasks", "kill", "--signal", "SIGKILL", id)
		_, _ = n.ctr(ctx, "tasks", "delete", "--force", id)
		_, _ = n.ctr(ctx, "containers", "delete", id)
	}
}

// Clean restores the host after a node that ended without its teardown (a
// killed test binary leaves containers, shims, mounts and rules behind):
// what Start does first, for a person at a shell. It fails while a node
// runs.
func Clean(opts Options) error {
	if os.Geteuid() != 0 {
		return ErrNotRoot
	}
	opts.defaults()
	n := &Node{opts: opts}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := n.acquireLock(ctx); err != nil {
		return err
	}
	defer n.releaseLock()
	s, err := n.loadState()
	if err != nil {
		return err
	}
	if s == nil {
		// No state: restore what can be found, keeping the sysctls.
		s = &hostState{}
	}
	return n.restoreHost(*s)
}
