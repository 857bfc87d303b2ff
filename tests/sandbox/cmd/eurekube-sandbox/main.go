// Command eurekube-sandbox is `make run`: a real single-node Kubernetes
// cluster on this machine (package cluster: containerd, the kubelet,
// kube-proxy and the control plane, cert-manager, three replicating Eureka
// servers on the node's address) with Eurekube installed from manifests/default as users
// install it, and a sample service, ORDERS, deployed as a team would: a
// labelled namespace, an EurekaSyncer and a Deployment of 3 replicas. A real
// Spring Cloud client on the host, playing a VM that reaches pod IPs, calls
// it by name so a rollout can be watched from the caller's side.
//
// ORDERS also runs on a "VM" (a Spring Boot app on the host), and the other
// direction is shown too: the EurekaImport of manifests/samples makes ORDERS,
// the VM's instance and the pods', Service orders of namespace shop, and a
// pod calls it as a caller that discovers through Kubernetes does: by its
// DNS name where the node runs the cluster's DNS, else by its ClusterIP (the
// welcome says which, and why).
//
// Tenancy is the product's default: no EurekaAppPolicy is installed, so
// ORDERS belongs to shop, the first namespace to register it (its
// EurekaAppClaim), and a second namespace naming it is refused.
//
// The node needs root: it mounts, creates interfaces and iptables rules and
// runs containerd. The command says why and exits at once where no node can
// run. It prints how to reach everything and runs until Ctrl-C, then stops
// the client, cert-manager and Eureka, tears the node down (which restores
// the host) and reports whether the host is as it found it.
package main

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"github.com/sirupsen/logrus"
	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/yaml"

	"github.com/eurekube/eurekube/api/v1alpha1"
	"github.com/eurekube/eurekube/internal/builders"
	"github.com/eurekube/eurekube/tests/cluster"
	"github.com/eurekube/eurekube/tests/harness"
	"github.com/eurekube/eurekube/tests/node"
)

// needsRoot is said up front, in --help and when the command cannot run.
const needsRoot = "it runs a real Kubernetes node on this machine, so it needs root (it mounts, creates network interfaces and iptables rules, and runs containerd)"

func main() {
	if err := run(); err != nil {
		if errors.Is(err, context.Canceled) {
			os.Exit(130) // interrupted during start-up; what started is stopped
		}
		fmt.Fprintf(os.Stderr, "eurekube-sandbox: %v\n", err)
		os.Exit(1)
	}
}

func run() error {
	root, err := harness.RepoRoot()
	if err != nil {
		return err
	}
	fs := pflag.NewFlagSet("eurekube-sandbox", pflag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintf(os.Stderr, "Usage of eurekube-sandbox (make run): %s.\n%s", needsRoot, fs.FlagUsages())
	}
	dir := fs.String("dir", filepath.Join(root, ".sandbox"), "directory for the kubeconfig and every log (emptied at start)")
	eurekaPort := fs.Int("eureka-port", 8761, "port of the first Eureka peer and its dashboard on the node's address, "+node.NodeIP+" (0 picks a free one; the other peers pick free ports)")
	replicas := fs.Int32("replicas", 3, "replicas of the sample Deployment")
	withClient := fs.Bool("spring-client", true, "run a Spring Cloud client on the host that calls the sample service by name")
	exitWhenReady := fs.Bool("exit-when-ready", false, "stop everything once the sandbox is up (a smoke test of this command)")
	if err := fs.Parse(os.Args[1:]); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return nil
		}
		return err
	}
	if os.Geteuid() != 0 {
		return errors.New("not root: " + needsRoot + "; run make run as root")
	}
	nodeOpts := node.Options{LogDir: filepath.Join(*dir, "logs"), CallerHandlesInterrupts: true}
	if reason := node.Unavailable(nodeOpts); reason != "" {
		return errors.New(reason)
	}
	if err := os.RemoveAll(*dir); err != nil {
		return err
	}
	if err := os.MkdirAll(nodeOpts.LogDir, 0o755); err != nil {
		return err
	}

	// The harness's controller-runtime calls (installing cert-manager's
	// CRDs) log nothing worth showing; without a logger, controller-runtime
	// prints a stack trace when its first line comes over 30 s after start,
	// as after waiting for another node.
	ctrllog.SetLogger(logr.Discard())
	log := logrus.New()
	log.SetFormatter(&logrus.TextFormatter{FullTimestamp: true, TimestampFormat: time.TimeOnly})
	// Ctrl-C during start-up cancels it, and what has started is stopped;
	// later ones are caught too, so the teardown is never cut short.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	start := time.Now()

	log.Info("the sandbox runs a real Kubernetes node on this machine, as root (waiting first if another node runs here)")
	log.Info("starting the node (containerd, etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kubelet, kube-proxy), cert-manager and Eureka, and installing Eurekube from manifests/default")
	opts := sandboxOptions(nodeOpts, *eurekaPort)
	c, err := cluster.Start(ctx, opts)
	if err != nil {
		return fmt.Errorf("start the cluster (logs in %s): %w", nodeOpts.LogDir, err)
	}
	log.WithField("took", time.Since(start).Round(time.Second)).Info("Eurekube installed: the manager's pods are ready, the webhook's CA is injected, and the gateway enforces in front of Eureka, which takes nothing without the gateway's credentials")

	var spring, vm *harness.SpringClient
	defer func() {
		log.Info("stopping the Spring client, the VM, cert-manager and Eureka, and tearing the node down")
		if vm != nil {
			_ = vm.Stop()
		}
		if spring != nil {
			_ = spring.Stop()
		}
		if err := c.Stop(); err != nil {
			log.WithError(err).Warn("stop")
		}
		reportHost(c.Node)
	}()

	kubeconfig := filepath.Join(*dir, "kubeconfig")
	if err := copyFile(c.Node.Kubeconfig, kubeconfig); err != nil {
		return err
	}
	// Everything names the gateway: the syncer (its registrars write with
	// their pods' tokens), the import, the VM and the Spring client (from
	// the host, at its Service's ClusterIP).
	app := cluster.App{Namespace: "shop", Name: "orders", Replicas: *replicas, Metadata: map[string]string{"zone": "zone-a"},
		EurekaURLs: []string{cluster.GatewayURL}}
	gatewayURL, err := c.GatewayHostURL(ctx)
	if err != nil {
		return err
	}
	log.Info("binding vm-1's credentials to ORDERS: Secret " + vmSecret + " in " + cluster.ManagerNamespace + ", EurekaAppPolicy " + ordersPolicy + " (ORDERS for namespace shop and for that Secret)")
	vmPassword, err := tenancy(ctx, c)
	if err != nil {
		return err
	}
	// The migration story: ORDERS ran on VMs before; one still does.
	log.Info("starting ORDERS on a \"VM\": a Spring Boot app on the host, registered by Spring Cloud's own Eureka client through the gateway with its credentials, answering vm-1")
	vm, err = harness.StartSpringVM(ctx, harness.SpringVMOptions{
		EurekaURL: cluster.WithCredentials(gatewayURL, vmUser, vmPassword), App: app.Name, Name: "vm-1", Host: node.NodeIP, RenewalSeconds: 30, LogDir: c.LogDir,
	})
	if err != nil {
		return err
	}
	log.Info("deploying the sample service ORDERS: namespace shop, EurekaSyncer orders, Deployment orders")
	if err := c.Deploy(ctx, app, nil); err != nil {
		return err
	}
	log.Info("waiting until Eureka lists the ready pods and the syncer's status agrees (Eureka caches responses for up to 30 s)")
	if err := waitSettled(ctx, c, app); err != nil {
		return err
	}
	// Started once Eureka lists the pods, so its first registry fetch finds
	// them and its "failed" count starts at 0, not with the calls made
	// while the pods were starting.
	if *withClient {
		log.Info("starting a Spring Cloud client on the host that reads the registry through the gateway and calls http://orders/ by name")
		spring, err = harness.StartSpringClient(ctx, harness.SpringClientOptions{
			EurekaURL: gatewayURL, Service: app.Name, Interval: 100 * time.Millisecond, LogDir: c.LogDir,
		})
		if err != nil {
			return err
		}
	}
	log.Info("running a rogue pod: namespace " + rogueNamespace + " never opted in, a copy of the registrar's image under another name registers ORDERS with the pod's own token for the gateway, and at Eureka directly")
	rogue, err := runRogue(ctx, c, strings.ToUpper(app.Name))
	if err != nil {
		return err
	}
	log.WithFields(logrus.Fields{"gateway": rogue.reason, "eureka": "401"}).Info("the rogue pod was refused by the gateway and by Eureka, and Eureka never listed it")
	log.Info("importing ORDERS the other way: EurekaImport orders (manifests/samples/eurekaimport.yaml) keeps Service orders, whose endpoints are the app's instances, vm-1's included")
	imp, err := deployImport(ctx, c, root)
	if err != nil {
		return err
	}
	if err := waitImported(ctx, c, imp, app.Replicas+1); err != nil {
		return err
	}
	callee, err := importTarget(ctx, c, imp)
	if err != nil {
		return err
	}
	// The import's status says its slices are written, not that kube-proxy
	// routes them: it programs the Service as soon as it appears (no
	// endpoints: refused) and then at most once a second, so a caller
	// started at once can find it refusing. The caller starts once a pod's
	// call on its path answers.
	log.WithField("url", callee.url).Info("waiting until Service orders answers a pod through the cluster's DNS and kube-proxy")
	probed, err := waitRoutable(ctx, c, imp.Namespace, callee.url)
	if err != nil {
		return err
	}
	log.WithFields(logrus.Fields{"took": probed.took.Round(10 * time.Millisecond), "failed_first": probed.failed, "answered_by": probed.answeredBy}).Info(probed.String())
	log.WithField("url", callee.url).Info("starting a pod that calls Service orders every 100 ms, as a Go or Node pod would")
	callerStats, err := startPodCaller(ctx, c, imp.Namespace, callee.url)
	if err != nil {
		return err
	}
	first, err := waitFirstCalls(ctx, callerStats, firstCalls)
	if err != nil {
		return err
	}
	var springStats *harness.SpringStats
	if spring != nil {
		st, err := spring.Stats(ctx)
		if err != nil {
			return err
		}
		springStats = &st
	}
	printWelcome(c, kubeconfig, gatewayURL, opts.EurekaAuth, spring, springStats, imp, callee, callerStats, first,
		gatewayWelcome(rogue), tenancyWelcome(strings.ToUpper(app.Name), app.Namespace), time.Since(start))
	if *exitWhenReady {
		// The smoke test: a call that failed before the welcome is a real
		// failure, as the import was routable before the caller started.
		if first.Failed > 0 {
			return fmt.Errorf("the pod caller's first %d calls: %d failed, last: %s (kubectl -n %s logs caller)", first.OK+first.Failed, first.Failed, first.LastError, imp.Namespace)
		}
		if springStats != nil && springStats.Failed > 0 {
			return fmt.Errorf("the Spring client's calls: %d of %d failed, last: %s", springStats.Failed, springStats.OK+springStats.Failed, springStats.LastError)
		}
		return nil
	}
	<-ctx.Done()
	fmt.Println()
	return nil
}

// sandboxOptions is the sandbox's cluster: production timings for Eureka
// (self-preservation on, 30 s response caches); Eureka servers that take
// nothing without the credentials only the gateway holds, the gateway
// enforcing in front of them; and no share-every-app policy: tenancy is
// the policy the sandbox installs for ORDERS (tenancy), first claim for
// any other app, as a user's install has it.
func sandboxOptions(nodeOpts node.Options, eurekaPort int) cluster.Options {
	return cluster.Options{
		Node:          nodeOpts,
		EurekaPort:    eurekaPort,
		EurekaProfile: harness.ProfileReal,
		LogDir:        nodeOpts.LogDir,
		FirstClaim:    true,
		EurekaAuth:    &harness.EurekaAuth{Username: "eurekube-gateway", Password: newPassword()},
		Gateway:       true,
	}
}

// newPassword is a random password without ':' (Spring drops the
// credentials of a service URL whose password has one).
func newPassword() string { return strings.ToLower(rand.Text()) }

// What binds vm-1's credentials to ORDERS.
const (
	vmSecret     = "orders-vm"
	vmUser       = "orders-vm"
	ordersPolicy = "orders"
)

// tenancy makes vm-1's identity, the Secret vmSecret in the gateway's
// namespace, and the EurekaAppPolicy that grants ORDERS to namespace shop
// and binds the Secret to it; it returns the Secret's password. A policy
// that names an app governs it: the namespace is named beside the Secret,
// or the app would be no namespace's.
func tenancy(ctx context.Context, c *cluster.Cluster) (string, error) {
	password := newPassword()
	if err := c.ClientSecret(ctx, vmSecret, vmUser, password); err != nil {
		return "", err
	}
	policy := &v1alpha1.EurekaAppPolicy{ObjectMeta: metav1.ObjectMeta{Name: ordersPolicy},
		Spec: v1alpha1.EurekaAppPolicySpec{Apps: []string{"ORDERS"}, Namespaces: []string{"shop"}, ClientSecrets: []string{vmSecret}}}
	if err := c.Node.Client.Create(ctx, policy); err != nil {
		return "", fmt.Errorf("create EurekaAppPolicy %s: %w", ordersPolicy, err)
	}
	return password, nil
}

// tenancyWelcome is the welcome's part about who owns what: the policy,
// and what a second namespace that names the app sees.
func tenancyWelcome(app, owner string) string {
	return fmt.Sprintf(`  Tenancy            EurekaAppPolicy %[3]s grants %[1]s to namespace %[2]s and to vm-1's credentials
                     (Secret %[4]s in %[5]s): kubectl get eap %[3]s -o yaml
                     A syncer of %[1]s in another namespace is refused: PERMITTED False in
                     kubectl get esync -A and eurekube status, the policy and the fix in its
                     Permitted condition. An import of %[1]s there lists vm-1 only, never
                     %[2]s's pods (its AddressesAllowed condition names them). Any other app
                     belongs to the first namespace that registers it (kubectl get eac).
                     docs/operations.md, "Security model".
`, app, owner, ordersPolicy, vmSecret, cluster.ManagerNamespace)
}

// The rogue pod the sandbox runs once at start-up.
const (
	rogueNamespace = "rogue"
	roguePod       = "orders-impostor"
)

// rogueResult is what the rogue pod met.
type rogueResult struct {
	// reason and note are the gateway's Event on the pod.
	reason, note string
	// eureka is the direct registrar's log line with Eureka's 401.
	eureka string
}

// runRogue runs the rogue pod (cluster.StartRoguePod) as app, waits for
// the gateway's refusal and Eureka's, checks that no peer lists it, and
// deletes the pod; its namespace and the Events stay.
func runRogue(ctx context.Context, c *cluster.Cluster, app string) (rogueResult, error) {
	var r rogueResult
	pod, err := c.StartRoguePod(ctx, cluster.RogueOptions{
		Namespace: rogueNamespace, Name: roguePod, App: app, GatewayURL: cluster.GatewayURL, EurekaURL: c.Peers.URLs()[0],
	})
	if pod != nil {
		defer deletePod(c, pod)
	}
	if err != nil {
		return r, err
	}
	ev, err := c.WaitRefusal(ctx, pod, "register", 2*time.Minute)
	if err != nil {
		return r, fmt.Errorf("%w (the gateway's log: kubectl -n %s logs deploy/%s)", err, cluster.ManagerNamespace, cluster.GatewayDeployment)
	}
	r.reason, r.note = ev.Reason, ev.Note
	if r.eureka, err = c.WaitEurekaRefused(ctx, pod, 2*time.Minute); err != nil {
		return r, err
	}
	id := cluster.RogueInstanceID(pod, app)
	for i, peer := range c.Peers.Servers {
		listed, err := cluster.Listed(ctx, peer, app, id)
		if err != nil {
			return r, err
		}
		if listed {
			return r, fmt.Errorf("the Eureka peer %d lists the rogue pod's instance %s", i+1, id)
		}
	}
	return r, nil
}

// gatewayWelcome is the welcome's part about the gateway and the rogue
// pod's fate.
func gatewayWelcome(r rogueResult) string {
	return fmt.Sprintf(`  Rogue pod          %[1]s/%[2]s: a namespace that never opted in, a copy of the
                     registrar's image under another name, registering ORDERS with its own
                     token for the gateway's audience. Run once at start-up:
                       the gateway: %[3]s
                         %[4]s
                       Eureka directly: 401, the token is no credential of Eureka's
                       Eureka never listed it. kubectl -n %[1]s get events
`, rogueNamespace, roguePod, r.reason, wrap(r.note, 70, "                         "))
}

// wrap breaks s into lines of at most width characters, each but the
// first indented.
func wrap(s string, width int, indent string) string {
	var lines []string
	line := ""
	for _, w := range strings.Fields(s) {
		if line != "" && len(line)+1+len(w) > width {
			lines = append(lines, line)
			line = w
			continue
		}
		if line != "" {
			line += " "
		}
		line += w
	}
	lines = append(lines, line)
	return strings.Join(lines, "\n"+indent)
}

// waitSettled waits until Eureka lists exactly the sample's ready pods and
// the syncer's status says so too, so what the welcome suggests (kubectl get
// esync, the dashboard, the client's stats) agrees from the first look.
func waitSettled(ctx context.Context, c *cluster.Cluster, app cluster.App) error {
	err := harness.Poll(ctx, 3*time.Minute, 500*time.Millisecond, "the sample service settled", func() error {
		v, err := c.Look(ctx, app)
		if err == nil {
			err = v.Settled(int(app.Replicas))
		}
		if err == nil {
			err = syncerSettled(ctx, c, app)
		}
		return err
	})
	switch {
	case err == nil:
		return nil
	case errors.Is(ctx.Err(), context.Canceled):
		return ctx.Err()
	}
	return fmt.Errorf("%w (logs in %s; pods: kubectl -n %s logs)", err, c.LogDir, app.Namespace)
}

// syncerSettled reports whether the sample's EurekaSyncer status counts
// every replica registered and UP (READY n/n), and is Synced.
func syncerSettled(ctx context.Context, c *cluster.Cluster, app cluster.App) error {
	var s v1alpha1.EurekaSyncer
	if err := c.Node.Client.Get(ctx, client.ObjectKey{Namespace: app.Namespace, Name: app.Name}, &s); err != nil {
		return fmt.Errorf("read EurekaSyncer %s/%s: %w", app.Namespace, app.Name, err)
	}
	st := s.Status
	ready := fmt.Sprintf("%d/%d", app.Replicas, app.Replicas)
	if st.RegisteredInstances != app.Replicas || st.Ready != ready || !meta.IsStatusConditionTrue(st.Conditions, v1alpha1.ConditionSynced) {
		return fmt.Errorf("EurekaSyncer %s status: %d registered, READY %s, Synced %v; want %d, %s, true",
			app.Name, st.RegisteredInstances, st.Ready, meta.IsStatusConditionTrue(st.Conditions, v1alpha1.ConditionSynced), app.Replicas, ready)
	}
	return nil
}

// sampleImport is the import the sandbox deploys, with the node's Eureka
// servers in place of the sample's.
const sampleImport = "manifests/samples/eurekaimport.yaml"

// deployImport creates the sample's EurekaImport, naming the gateway as
// the sample syncer does: it reads through it, as Eureka answers nobody
// else.
func deployImport(ctx context.Context, c *cluster.Cluster, root string) (*v1alpha1.EurekaImport, error) {
	data, err := os.ReadFile(filepath.Join(root, sampleImport))
	if err != nil {
		return nil, err
	}
	imp := &v1alpha1.EurekaImport{}
	if err := yaml.UnmarshalStrict(data, imp); err != nil {
		return nil, fmt.Errorf("%s: %w", sampleImport, err)
	}
	imp.Spec.Eureka.ServiceURLs = []string{cluster.GatewayURL}
	if err := c.Node.Client.Create(ctx, imp); err != nil {
		return nil, fmt.Errorf("create EurekaImport %s/%s: %w", imp.Namespace, imp.Name, err)
	}
	return imp, nil
}

// waitImported waits until the import is Synced with want endpoints, all
// ready: the VM's and the pods'.
func waitImported(ctx context.Context, c *cluster.Cluster, imp *v1alpha1.EurekaImport, want int32) error {
	return harness.Poll(ctx, 3*time.Minute, 500*time.Millisecond, "the import synced", func() error {
		if err := c.Node.Client.Get(ctx, client.ObjectKeyFromObject(imp), imp); err != nil {
			return fmt.Errorf("read EurekaImport %s/%s: %w", imp.Namespace, imp.Name, err)
		}
		st := imp.Status
		if synced := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionSynced); synced == nil || synced.Status != metav1.ConditionTrue ||
			st.ReadyEndpoints != want || st.TotalEndpoints != want {
			return fmt.Errorf("EurekaImport %s status: endpoints %q, Synced %+v; want %d/%d, True", imp.Name, st.Endpoints, synced, want, want)
		}
		return nil
	})
}

// callee is how a pod reaches the imported Service.
type callee struct {
	// url is what the pod calls.
	url string
	// byName is true when url holds the Service's DNS name; else its
	// ClusterIP, and why.
	byName bool
	why    string
}

// importTarget is the URL a pod calls the import's Service by: its DNS
// name once the node's cluster DNS answers it with the ClusterIP (as the
// kubelet tells pods to ask it; CoreDNS learns of a new Service from its
// watch, a moment after it is made), else its ClusterIP, which kube-proxy
// serves without any DNS.
func importTarget(ctx context.Context, c *cluster.Cluster, imp *v1alpha1.EurekaImport) (callee, error) {
	var svc corev1.Service
	if err := c.Node.Client.Get(ctx, client.ObjectKey{Namespace: imp.Namespace, Name: imp.Status.ServiceName}, &svc); err != nil {
		return callee{}, fmt.Errorf("read the import's Service: %w", err)
	}
	name := svc.Name + "." + svc.Namespace + ".svc"
	var why string
	err := harness.Poll(ctx, time.Minute, 500*time.Millisecond, "the cluster's DNS answering "+name, func() error {
		rctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		defer cancel()
		addrs, err := node.NodeResolver().LookupHost(rctx, name+"."+node.ClusterDomain)
		switch {
		case err == nil && slices.Contains(addrs, svc.Spec.ClusterIP):
			return nil
		case err == nil:
			why = fmt.Sprintf("the node's DNS answers %v, not the ClusterIP", addrs)
		default:
			why = fmt.Sprintf("the node's DNS does not answer for %s (%v)", name, err)
		}
		return errors.New(why)
	})
	switch {
	case err == nil:
		return callee{url: "http://" + name + "/", byName: true}, nil
	case ctx.Err() != nil:
		return callee{}, ctx.Err()
	}
	return callee{url: "http://" + svc.Spec.ClusterIP + "/", why: why}, nil
}

// routable is what waitRoutable saw.
type routable struct {
	url string
	// took: from the probe pod's start to the first answer; failed: the
	// calls before it that failed, and how the last one did.
	took      time.Duration
	failed    int
	lastError string
	// answeredBy is the body of the first answer: the instance's name.
	answeredBy string
}

func (r routable) String() string {
	if r.failed == 0 {
		return fmt.Sprintf("%s answered a pod at its first call", r.url)
	}
	return fmt.Sprintf("%s answered a pod after %d failed call(s) (the last: %s): kube-proxy had not routed it yet", r.url, r.failed, r.lastError)
}

// probePod is the pod waitRoutable calls through.
const probePod = "caller-probe"

// waitRoutable runs a pod in namespace that forwards every request to
// url's host (`testapp proxy`): the pod resolves the name with the
// cluster's DNS and connects through kube-proxy, as the caller will. It
// sends GET / through the pod until the Service answers 200, then deletes
// the pod. The proxy logs why each failed call failed (a refused
// connection while kube-proxy has not programmed the endpoints yet).
func waitRoutable(ctx context.Context, c *cluster.Cluster, namespace, target string) (routable, error) {
	r := routable{url: target}
	u, err := url.Parse(target)
	if err != nil {
		return r, err
	}
	to := u.Host
	if u.Port() == "" {
		to = net.JoinHostPort(u.Hostname(), "80")
	}
	port := strconv.Itoa(int(builders.PortNumber))
	pod := builders.Pod(namespace, probePod, builders.Named(probePod), builders.Image(c.Node.Image("testapp")), builders.Restricted(),
		func(p *corev1.Pod) {
			p.Spec.TerminationGracePeriodSeconds = ptr.To[int64](1)
			ct := &p.Spec.Containers[0]
			ct.ImagePullPolicy = corev1.PullNever
			ct.Args = []string{"proxy", "-listen", ":" + port, "-to", to, "-exit-after-sigterm", "0s"}
		})
	if err := c.Node.Client.Create(ctx, pod); err != nil {
		return r, fmt.Errorf("create the pod %s: %w", probePod, err)
	}
	defer deletePod(c, pod)
	err = harness.Poll(ctx, 2*time.Minute, 200*time.Millisecond, "the pod "+probePod+" running", func() error {
		if err := c.Node.Client.Get(ctx, client.ObjectKeyFromObject(pod), pod); err != nil {
			return err
		}
		if pod.Status.PodIP == "" || !containerRunning(pod) {
			return fmt.Errorf("pod %s/%s: phase %s, IP %q", pod.Namespace, pod.Name, pod.Status.Phase, pod.Status.PodIP)
		}
		return nil
	})
	if err != nil {
		return r, err
	}
	through := "http://" + net.JoinHostPort(pod.Status.PodIP, port) + "/"
	hc := &http.Client{Timeout: 5 * time.Second}
	start := time.Now()
	calls := 0
	err = harness.Poll(ctx, 2*time.Minute, 100*time.Millisecond, target+" answering through the pod "+probePod, func() error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, through, nil)
		if err != nil {
			return err
		}
		resp, err := hc.Do(req)
		if err != nil {
			// The proxy itself not listening yet: not a call to the
			// Service.
			return fmt.Errorf("the pod %s: %w", probePod, err)
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(io.LimitReader(resp.Body, 1024))
		if err != nil {
			return err
		}
		calls++
		if resp.StatusCode != http.StatusOK {
			r.failed++
			return fmt.Errorf("GET %s through the pod %s: %s", target, probePod, resp.Status)
		}
		r.answeredBy = strings.TrimSpace(string(body))
		return nil
	})
	r.took = time.Since(start)
	if r.failed > 0 {
		r.lastError = lastProxyError(ctx, c, pod)
	}
	if err != nil {
		return r, fmt.Errorf("%w (the pod's proxy: %s)", err, r.lastError)
	}
	return r, nil
}

// lastProxyError is the last failure `testapp proxy` logged in pod: why
// its last failed call failed.
func lastProxyError(ctx context.Context, c *cluster.Cluster, pod *corev1.Pod) string {
	out, err := c.Clientset.CoreV1().Pods(pod.Namespace).GetLogs(pod.Name, &corev1.PodLogOptions{}).DoRaw(ctx)
	if err != nil {
		return fmt.Sprintf("no log: %v", err)
	}
	return proxyError(string(out))
}

// proxyError is the last failure in a `testapp proxy` log (httputil's
// "http: proxy error: …" lines).
func proxyError(log string) string {
	lines := strings.Split(strings.TrimSpace(log), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if _, after, ok := strings.Cut(lines[i], "proxy error: "); ok {
			return after
		}
	}
	return "not logged"
}

// containerRunning reports whether pod's container runs.
func containerRunning(pod *corev1.Pod) bool {
	return len(pod.Status.ContainerStatuses) > 0 && pod.Status.ContainerStatuses[0].State.Running != nil
}

// deletePod deletes pod and waits until it is gone, so that the welcome's
// kubectl get pods does not list it terminating; it outlives an
// interrupted start-up.
func deletePod(c *cluster.Cluster, pod *corev1.Pod) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := c.Node.Client.Delete(ctx, pod, client.GracePeriodSeconds(0)); client.IgnoreNotFound(err) != nil {
		return
	}
	_ = harness.Poll(ctx, time.Minute, 200*time.Millisecond, "the pod "+pod.Name+" gone", func() error {
		err := c.Node.Client.Get(ctx, client.ObjectKeyFromObject(pod), &corev1.Pod{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("pod %s/%s still there (%v)", pod.Namespace, pod.Name, err)
	})
}

// startPodCaller runs `testapp call` in a pod of namespace: every 100 ms it
// calls url on a new connection (resolving the name anew each time) and
// counts who answered. It returns the URL of its counts, which the host
// reaches.
func startPodCaller(ctx context.Context, c *cluster.Cluster, namespace, url string) (string, error) {
	port := strconv.Itoa(int(builders.PortNumber))
	pod := builders.Pod(namespace, "caller", builders.Named("caller"), builders.Image(c.Node.Image("testapp")), builders.Restricted(),
		func(p *corev1.Pod) {
			ct := &p.Spec.Containers[0]
			ct.ImagePullPolicy = corev1.PullNever
			ct.Args = []string{"call", "-url", url, "-listen", ":" + port}
			ct.ReadinessProbe = &corev1.Probe{PeriodSeconds: 1, ProbeHandler: corev1.ProbeHandler{
				HTTPGet: &corev1.HTTPGetAction{Path: "/stats", Port: intstr.FromString(builders.PortName)}}}
		})
	if err := c.Node.Client.Create(ctx, pod); err != nil {
		return "", fmt.Errorf("create the caller pod: %w", err)
	}
	err := harness.Poll(ctx, 2*time.Minute, 500*time.Millisecond, "the caller pod ready", func() error {
		if err := c.Node.Client.Get(ctx, client.ObjectKeyFromObject(pod), pod); err != nil {
			return err
		}
		if pod.Status.PodIP == "" || !cluster.PodReady(pod) {
			return fmt.Errorf("pod %s/%s: phase %s, IP %q", pod.Namespace, pod.Name, pod.Status.Phase, pod.Status.PodIP)
		}
		return nil
	})
	if err != nil {
		return "", err
	}
	return "http://" + net.JoinHostPort(pod.Status.PodIP, port) + "/stats", nil
}

// firstCalls is how many calls the pod caller makes before the welcome,
// which shows their counts (about a second of calls).
const firstCalls = 10

// waitFirstCalls waits until the caller at statsURL has made n calls, and
// returns its counts.
func waitFirstCalls(ctx context.Context, statsURL string, n int64) (harness.SpringStats, error) {
	var st harness.SpringStats
	hc := &http.Client{Timeout: 5 * time.Second}
	err := harness.Poll(ctx, time.Minute, 200*time.Millisecond, fmt.Sprintf("the pod caller's first %d calls", n), func() error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, statsURL, nil)
		if err != nil {
			return err
		}
		resp, err := hc.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("GET %s: %s", statsURL, resp.Status)
		}
		st = harness.SpringStats{}
		if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
			return fmt.Errorf("GET %s: %w", statsURL, err)
		}
		if st.OK+st.Failed < n {
			return fmt.Errorf("%d calls so far", st.OK+st.Failed)
		}
		return nil
	})
	return st, err
}

// callerCounts is the welcome's line of the caller's counts so far.
func callerCounts(st harness.SpringStats) string {
	line := fmt.Sprintf("so far: %d calls, ok %d, failed %d", st.OK+st.Failed, st.OK, st.Failed)
	if st.Failed > 0 {
		line += " (the last: " + st.LastError + ")"
	}
	return line
}

func printWelcome(c *cluster.Cluster, kubeconfig, gatewayURL string, auth *harness.EurekaAuth, spring *harness.SpringClient, springStats *harness.SpringStats,
	imp *v1alpha1.EurekaImport, to callee, callerStats string, first harness.SpringStats, rogue, tenancy string, took time.Duration) {
	eureka := "http://" + c.Peers.Servers[0].Addr()
	var others []string
	for _, p := range c.Peers.Servers[1:] {
		others = append(others, "http://"+p.Addr()+"/")
	}
	// The node's own kubectl comes first on PATH, so the commands below
	// work on a machine without one.
	fmt.Printf(`
Eurekube sandbox is up (%[1]s).

  kubectl            export KUBECONFIG=%[2]s PATH=%[3]s:$PATH
                     kubectl -n shop get esync,deploy,pods
  Gateway            %[4]s   (Service %[5]s.%[6]s, enforcing)
                     a write goes through for its writer's apps only: the pods' with their
                     projected tokens, the manager's with its own, vm-1's with the credentials
                     of Secret %[7]s; every verdict is logged:
                     kubectl -n %[6]s logs deploy/%[5]s | grep '"verdict"'
  Eureka registry    curl -s -H 'Accept: application/json' %[4]s/apps/ORDERS
  Eureka dashboard   %[8]s/   (peers replicating to it: %[9]s)
                     user %[10]s, password %[11]s: Eureka takes nothing without them,
                     and only the gateway holds them (Secret %[12]s)
`, took.Round(time.Second), kubeconfig, filepath.Dir(c.Node.Kubectl()), gatewayURL, cluster.GatewayService, cluster.ManagerNamespace, vmSecret,
		eureka, strings.Join(others, " "), auth.Username, auth.Password, cluster.GatewayEurekaSecret)
	if spring != nil {
		fmt.Printf("  Spring client      curl -s %s   (reads the registry through the gateway, calls http://orders/\n"+
			"                     by name every 100 ms; %s)\n", spring.StatsURL(), springCounts(springStats))
	}
	svc := imp.Status.ServiceName
	how := "by name: the cluster's DNS, then kube-proxy"
	if !to.byName {
		how = fmt.Sprintf("Service %s's ClusterIP, through kube-proxy: %s, so pods cannot resolve %s.%s.svc", svc, to.why, svc, imp.Namespace)
	}
	fmt.Printf(`  Pod caller         curl -s %s   (a pod calling %s every 100 ms,
                     %s; kubectl -n %s logs caller lists failed calls)
                     %[6]s; it started once the Service answered a pod
                     kubectl -n %[4]s run call --rm -i --restart=Never --image=%[5]s --image-pull-policy=Never -- hook %[2]s
                       one call from a new pod: it exits 0 once answered (2xx), else says why
`, callerStats, to.url, how, imp.Namespace, c.Node.Image("testapp"), callerCounts(first))
	fmt.Print(rogue)
	fmt.Printf(`
  Try                kubectl -n shop rollout restart deploy/orders   (the client's "failed" stays 0)
                     kubectl -n shop scale deploy/orders --replicas 5

  Migrate            ORDERS also runs on a VM (vm-1, a Spring Boot app on this host): ELSEWHERE in
                     kubectl -n shop get esync counts it, CALLS-TO says where calls go.
                     kubectl -n shop patch esync orders --type merge -p '{"spec":{"traffic":"Standby"}}'
                       the pods stay registered, OUT_OF_SERVICE: calls go to vm-1 only (the
                       client's byInstance stops counting pods once its caches expire, ~100 s)
                     kubectl -n shop patch esync orders --type merge -p '{"spec":{"traffic":"Serve"}}'
                       the pods take their share again; Standby again is the rollback

  Import             The other way, for callers that discover through Kubernetes: EurekaImport
                     %[2]s keeps Service %[3]s, whose endpoints are ORDERS's instances in Eureka,
                     vm-1's and (includeThisCluster) the pods', ready while UP.
                     kubectl -n %[4]s get eimp,endpointslices   (ENDPOINTS: ready/total)
                     The pod caller's byInstance counts vm-1 and the pods; in Standby, vm-1 only
                     once the manager's next registry read, behind Eureka's 30 s response
                     cache, makes the pods not ready (within about a minute). Handing the
                     Service to Kubernetes, then retiring Eureka: docs/operations.md, "From VMs
                     to the day Eureka retires".
%[5]s  Logs               %[1]s   (pods: kubectl -n shop logs)

The Eureka servers run with production timings: their responses are cached
for up to 30 s (and the gateway's copy of a polled read for 5 s), and old pods
keep serving for 100 s after they leave Eureka.

Press Ctrl-C to stop everything.
`, c.LogDir, imp.Name, imp.Status.ServiceName, imp.Namespace, tenancy)
}

// springCounts is the welcome's note of the Spring client's counts so far.
func springCounts(st *harness.SpringStats) string {
	if st == nil {
		return "no counts"
	}
	line := fmt.Sprintf("so far %d calls, failed %d", st.OK+st.Failed, st.Failed)
	if st.Failed > 0 {
		line += " (the last: " + st.LastError + ")"
	}
	return line
}

// reportHost compares the host after the node's teardown with the host
// before it started (both listed under the machine's node lock).
func reportHost(n *node.Node) {
	before, after := n.HostListings()
	if after == nil {
		fmt.Fprintln(os.Stderr, "the node was not torn down: run make node-clean (as root) to restore the host")
		return
	}
	if diff := before.Diff(after); len(diff) > 0 {
		fmt.Fprintf(os.Stderr, "the host differs from before the sandbox (make node-clean restores what the node left):\n")
		for _, line := range diff {
			fmt.Fprintln(os.Stderr, "  "+line)
		}
		return
	}
	fmt.Println("Stopped. Nothing is left: the host's processes, mounts, interfaces, routes, iptables rules, cgroups, sysctls and paths are as before the sandbox.")
}

func copyFile(from, to string) error {
	data, err := os.ReadFile(from)
	if err != nil {
		return err
	}
	return os.WriteFile(to, data, 0o600)
}
