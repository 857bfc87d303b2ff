// Command eurekube-sandbox is `make run`: a real single-node Kubernetes
// cluster on this machine (package cluster: containerd, the kubelet,
// kube-proxy and the control plane, cert-manager, three replicating Eureka
// servers on the node's address) with Eurekube installed from manifests/default as users
// install it, and a sample service, ORDERS, deployed as a team would: a
// labelled namespace, an EurekaSyncer and a Deployment of 3 replicas. A real
// Spring Cloud client on the host, playing a VM that reaches pod IPs, calls
// it by name so a rollout can be watched from the caller's side.
//
// The node needs root: it mounts, creates interfaces and iptables rules and
// runs containerd. The command says why and exits at once where no node can
// run. It prints how to reach everything and runs until Ctrl-C, then stops
// the client, cert-manager and Eureka, tears the node down (which restores
// the host) and reports whether the host is as it found it.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"github.com/sirupsen/logrus"
	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/eurekube/eurekube/api/v1alpha1"
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
	c, err := cluster.Start(ctx, cluster.Options{
		Node:       nodeOpts,
		EurekaPort: *eurekaPort,
		// Production timings: self-preservation on, 30 s response caches.
		EurekaProfile: harness.ProfileReal,
		LogDir:        nodeOpts.LogDir,
	})
	if err != nil {
		return fmt.Errorf("start the cluster (logs in %s): %w", nodeOpts.LogDir, err)
	}
	log.WithField("took", time.Since(start).Round(time.Second)).Info("Eurekube installed: the manager's pods are ready and the webhook's CA is injected")

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
	app := cluster.App{Namespace: "shop", Name: "orders", Replicas: *replicas, Metadata: map[string]string{"zone": "zone-a"}}
	// The migration story: ORDERS ran on VMs before; one still does.
	log.Info("starting ORDERS on a \"VM\": a Spring Boot app on the host, registered by Spring Cloud's own Eureka client, answering vm-1")
	vm, err = harness.StartSpringVM(ctx, harness.SpringVMOptions{
		EurekaURL: c.Peers.DefaultZone(), App: app.Name, Name: "vm-1", Host: node.NodeIP, RenewalSeconds: 30, LogDir: c.LogDir,
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
		log.Info("starting a Spring Cloud client on the host that calls http://orders/ by name")
		spring, err = harness.StartSpringClient(ctx, harness.SpringClientOptions{
			EurekaURL: c.Peers.DefaultZone(), Service: app.Name, Interval: 100 * time.Millisecond, LogDir: c.LogDir,
		})
		if err != nil {
			return err
		}
	}
	printWelcome(c, kubeconfig, spring, time.Since(start))
	if *exitWhenReady {
		return nil
	}
	<-ctx.Done()
	fmt.Println()
	return nil
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

func printWelcome(c *cluster.Cluster, kubeconfig string, spring *harness.SpringClient, took time.Duration) {
	eureka := "http://" + c.Peers.Servers[0].Addr()
	var others []string
	for _, p := range c.Peers.Servers[1:] {
		others = append(others, "http://"+p.Addr()+"/")
	}
	// The node's own kubectl comes first on PATH, so the commands below
	// work on a machine without one.
	fmt.Printf(`
Eurekube sandbox is up (%s).

  kubectl            export KUBECONFIG=%s PATH=%s:$PATH
                     kubectl -n shop get esync,deploy,pods
  Eureka dashboard   %s/   (peers replicating to it: %s)
  Eureka registry    curl -s -H 'Accept: application/json' %s/eureka/apps/ORDERS
`, took.Round(time.Second), kubeconfig, filepath.Dir(c.Node.Kubectl()), eureka, strings.Join(others, " "), eureka)
	if spring != nil {
		fmt.Printf("  Spring client      curl -s %s   (calls http://orders/ by name every 100 ms)\n", spring.StatsURL())
	}
	fmt.Printf(`
  Try                kubectl -n shop rollout restart deploy/orders   (the client's "failed" stays 0)
                     kubectl -n shop scale deploy/orders --replicas 5

  Migrate            ORDERS also runs on a VM (vm-1, a Spring Boot app on this host): ELSEWHERE in
                     kubectl -n shop get esync counts it, CALLS-TO says where calls go.
                     kubectl -n shop patch esync orders --type merge -p '{"spec":{"traffic":"Standby"}}'
                       the pods stay registered, OUT_OF_SERVICE: calls go to vm-1 only (the
                       client's byInstance stops counting pods once its caches expire, ~95 s)
                     kubectl -n shop patch esync orders --type merge -p '{"spec":{"traffic":"Serve"}}'
                       the pods take their share again; Standby again is the rollback
  Logs               %s   (pods: kubectl -n shop logs)

The Eureka servers run with production timings: their responses are cached
for up to 30 s, and old pods keep serving for 100 s after they leave Eureka.

Press Ctrl-C to stop everything.
`, c.LogDir)
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
