package cluster

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/eurekube/eurekube/api/v1alpha1"
	"github.com/eurekube/eurekube/internal/allowlist"
	"github.com/eurekube/eurekube/tests/harness"
	"github.com/eurekube/eurekube/tests/node"
)

// Names of the installed objects, from manifests/.
const (
	ManagerNamespace  = "eurekube-system"
	ManagerDeployment = "eurekube-manager"
	WebhookConfig     = "eurekube"
)

// EurekaPeers is how many Eureka servers replicate to each other, as in
// production.
const EurekaPeers = 3

// Options configure Start.
type Options struct {
	// Node configures the node.
	Node node.Options
	// EurekaProfile is harness.ProfileFast (default) or harness.ProfileReal.
	EurekaProfile string
	// EurekaPort is the first peer's port on the node's address; 0 picks a
	// free one. The other peers pick free ports.
	EurekaPort int
	// LogDir receives cert-manager's and Eureka's logs (the node's go to
	// Node.LogDir). Default: a new temporary directory.
	LogDir string
	// Peers is how many Eureka servers replicate to each other; 0 means
	// EurekaPeers, 1 a single server.
	Peers int
	// Bare starts the node and Eureka only: no cert-manager, no Eurekube,
	// for tests that install (and uninstall) Eurekube themselves.
	Bare bool
	// FirstClaim leaves tenancy as a user's install has it: no
	// EurekaAppPolicy, so each app belongs to the first namespace that
	// registers it (the sandbox). Otherwise WaitInstalled shares every app
	// with every namespace (harness.ShareEveryApp) but those labelled
	// NoSharedAppsLabel: the suites' stories run the same app in many
	// namespaces.
	FirstClaim bool
	// EurekaAuth, when set, is the basic auth every Eureka server demands
	// (their peers' replication included).
	EurekaAuth *harness.EurekaAuth
	// Gateway, with EurekaAuth, makes the installed gateway enforce its
	// rules in front of the Eureka servers, holding their credentials
	// (EnforceGateway): the manager and every client then write through it.
	Gateway bool
}

// Cluster is a node with cert-manager, Eureka peers and Eurekube installed.
type Cluster struct {
	Node *node.Node
	// ControlPlane is the node's API server as the harness parts see it.
	ControlPlane *harness.ControlPlane
	// Clientset reaches the node's API server where the typed client
	// cannot: tokens, pod logs.
	Clientset   *kubernetes.Clientset
	CertManager *harness.CertManager
	// Peers are the Eureka servers, replicating to each other, on the
	// node's address. Syncers and clients list them in order, so the first
	// is the one registrars talk to while it lives.
	Peers *harness.EurekaPeers
	// Eureka is the peer tests read through: the last, which nothing
	// writes to while the first lives, so every read shows what
	// replication brought.
	Eureka *harness.Eureka

	// firstClaim: Options.FirstClaim.
	firstClaim bool
	// apps: the Eureka app names deployed, by namespace (Deploy).
	apps   sync.Map
	LogDir string

	scraper       scraper
	registrarCopy registrarCopy
}

// StartT starts a cluster for a test (skipping it where no node can run)
// and stops it when the test ends.
func StartT(t testing.TB, o Options) *Cluster {
	t.Helper()
	if o.LogDir == "" {
		o.LogDir = t.TempDir()
	}
	n := node.StartT(t, o.Node)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	c, err := install(ctx, n, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.stopServices(); err != nil {
			t.Error(err)
		}
	})
	return c
}

// Start starts a node and installs everything on it; Stop undoes it.
func Start(ctx context.Context, o Options) (*Cluster, error) {
	if o.LogDir == "" {
		dir, err := os.MkdirTemp("", "eurekube-cluster-")
		if err != nil {
			return nil, err
		}
		o.LogDir = dir
	}
	n, err := node.Start(ctx, o.Node)
	if err != nil {
		return nil, err
	}
	c, err := install(ctx, n, o)
	if err != nil {
		if terr := n.Teardown(); terr != nil {
			err = errors.Join(err, terr)
		}
		return nil, err
	}
	return c, nil
}

// Stop ends cert-manager and Eureka and tears the node down. cert-manager
// must stop cleanly on SIGTERM, as it does in a Deployment.
func (c *Cluster) Stop() error {
	err := c.stopServices()
	return errors.Join(err, c.Node.Teardown())
}

func (c *Cluster) stopServices() error {
	var errs []error
	if c.CertManager != nil {
		if err := c.CertManager.Stop(); err != nil {
			errs = append(errs, fmt.Errorf("stop cert-manager: %w", err))
		} else if code := c.CertManager.ExitCode(); code != 0 {
			errs = append(errs, fmt.Errorf("cert-manager exited %d on SIGTERM (log %s):\n%s", code, c.CertManager.LogPath(), c.CertManager.LogTail()))
		}
	}
	if c.Peers != nil {
		_ = c.Peers.Stop()
	}
	return errors.Join(errs...)
}

func install(ctx context.Context, n *node.Node, o Options) (*Cluster, error) {
	c := &Cluster{Node: n, LogDir: o.LogDir, firstClaim: o.FirstClaim,
		ControlPlane: &harness.ControlPlane{Config: n.Config, Client: n.Client, Scheme: harness.Scheme(), Kubeconfig: n.Kubeconfig}}
	var err error
	if c.Clientset, err = kubernetes.NewForConfig(n.Config); err != nil {
		return nil, fmt.Errorf("clientset: %w", err)
	}
	// Eureka's JVMs start while cert-manager starts and Eurekube
	// installs: nothing of the install needs them.
	eureka := make(chan error, 1)
	go func() {
		var err error
		opts := harness.EurekaOptions{Host: node.NodeIP, Port: o.EurekaPort, Profile: o.EurekaProfile, LogDir: o.LogDir, Auth: o.EurekaAuth}
		if o.Peers == 1 {
			var e *harness.Eureka
			if e, err = harness.StartEureka(ctx, opts); err == nil {
				c.Peers = &harness.EurekaPeers{Servers: []*harness.Eureka{e}}
			}
		} else {
			c.Peers, err = harness.StartEurekaPeers(ctx, opts, cmp.Or(o.Peers, EurekaPeers))
		}
		if err == nil {
			c.Eureka = c.Peers.Servers[len(c.Peers.Servers)-1]
		}
		eureka <- err
	}()
	if !o.Bare {
		c.CertManager, err = harness.StartCertManager(ctx, c.ControlPlane, harness.CertManagerOptions{LogPath: filepath.Join(o.LogDir, "cert-manager.log")})
		if err == nil {
			err = c.applyDefault(ctx)
		}
		if err == nil {
			err = c.WaitInstalled(ctx)
		}
	}
	if err = errors.Join(err, <-eureka); err == nil && o.Gateway && !o.Bare {
		if o.EurekaAuth == nil {
			err = errors.New("cluster: Options.Gateway needs EurekaAuth, the credentials the gateway holds")
		} else {
			_, err = c.EnforceGateway(ctx, GatewayOptions{EurekaURLs: c.Peers.URLs(), Auth: o.EurekaAuth})
		}
	}
	if err != nil {
		_ = c.stopServices()
		return nil, err
	}
	return c, nil
}

// applyDefault applies manifests/default with the node's kubectl, as the
// README tells users to, allowing the node's Eureka servers as a platform
// team allows its own (AllowNodeEureka).
func (c *Cluster) applyDefault(ctx context.Context) error {
	root, err := harness.RepoRoot()
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "eurekube-default-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	// The manager names the gateway as users are told to once they run it
	// (manifests/manager/deployment.yaml): the syncers that name it get the
	// registrars' tokens for it, and the manager sends its own. The
	// stories' other syncers name the node's Eureka servers.
	overlay, err := managerArgsOverlay(filepath.Join(root, "manifests", "default"), dir,
		"--"+allowlist.HostsFlag+"="+node.NodeIP, "--eureka-url="+GatewayURL)
	if err != nil {
		return err
	}
	out, err := exec.CommandContext(ctx, c.Node.Kubectl(), "--kubeconfig", c.Node.Kubeconfig,
		"apply", "--server-side", "-k", overlay).CombinedOutput()
	if err != nil {
		return fmt.Errorf("kubectl apply -k manifests/default: %w\n%s", err, out)
	}
	return nil
}

// AllowNodeEureka writes into dir a kustomization of base (manifests/default
// or manifests/self-managed) that adds what a platform team adds for its
// Eureka servers: the manager's --allowed-eureka-host for the node's
// address, where the suites' Eureka servers listen on ports of their own.
// The syncers of the stories name those servers; without it the manager
// would refuse them (docs/operations.md, the allowlists). It returns the
// directory to apply with kubectl -k.
func AllowNodeEureka(base, dir string) (string, error) {
	return managerArgsOverlay(base, dir, "--"+allowlist.HostsFlag+"="+node.NodeIP)
}

// managerArgsOverlay writes into dir a kustomization of base that adds
// args to the manager's, and returns dir.
func managerArgsOverlay(base, dir string, args ...string) (string, error) {
	rel, err := filepath.Rel(dir, base) // kustomize takes a base by relative path
	if err != nil {
		return "", err
	}
	var ops strings.Builder
	for _, a := range args {
		fmt.Fprintf(&ops, `
    - op: add
      path: /spec/template/spec/containers/0/args/-
      value: %s`, a)
	}
	kustomization := fmt.Sprintf(`apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
- %s
patches:
- target:
    kind: Deployment
    name: %s
  patch: |-%s
`, filepath.ToSlash(rel), ManagerDeployment, ops.String())
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(kustomization), 0o644); err != nil {
		return "", fmt.Errorf("kustomization of the manager's arguments: %w", err)
	}
	return dir, nil
}

// WaitInstalled waits until the manager's Deployment is available with
// every replica ready and the webhook configuration carries its CA (which
// cainjector injected, or the manager itself in self-managed mode).
func (c *Cluster) WaitInstalled(ctx context.Context) error {
	err := harness.Poll(ctx, 5*time.Minute, time.Second, "eurekube installed", func() error { return c.installed(ctx) })
	if err != nil {
		return fmt.Errorf("%w (logs in %s)", err, c.Node.LogDir())
	}
	if c.firstClaim {
		return nil
	}
	// The stories run the same apps in many namespaces at once.
	if err := harness.ShareEveryApp(ctx, c.Node.Client); err != nil {
		return err
	}
	return c.exceptLabelledNamespaces(ctx)
}

// NoSharedAppsLabel on a namespace keeps it out of the suites' share-every-
// app policy (harness.ShareEveryApp): its pods may register only what a
// user's cluster would let them, by the policies that name an app, else by
// its claim. The gateway's rogue tenant is such a namespace.
const NoSharedAppsLabel = "eurekube.test/no-shared-apps"

// exceptLabelledNamespaces narrows the share-every-app policy to the
// namespaces without NoSharedAppsLabel.
func (c *Cluster) exceptLabelledNamespaces(ctx context.Context) error {
	p := &v1alpha1.EurekaAppPolicy{}
	switch err := c.Node.Client.Get(ctx, client.ObjectKey{Name: harness.SharedAppsPolicy}, p); {
	case meta.IsNoMatchError(err):
		return nil // no EurekaAppPolicy kind: an older release installed
	case err != nil:
		return fmt.Errorf("EurekaAppPolicy %s: %w", harness.SharedAppsPolicy, err)
	}
	before := p.DeepCopy()
	p.Spec.NamespaceSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
		{Key: NoSharedAppsLabel, Operator: metav1.LabelSelectorOpDoesNotExist},
	}}
	if err := c.Node.Client.Patch(ctx, p, client.MergeFrom(before)); err != nil {
		return fmt.Errorf("EurekaAppPolicy %s: except the namespaces labelled %s: %w", harness.SharedAppsPolicy, NoSharedAppsLabel, err)
	}
	return nil
}

func (c *Cluster) installed(ctx context.Context) error {
	var dep appsv1.Deployment
	if err := c.Node.Client.Get(ctx, client.ObjectKey{Namespace: ManagerNamespace, Name: ManagerDeployment}, &dep); err != nil {
		return err
	}
	want := int32(1)
	if dep.Spec.Replicas != nil {
		want = *dep.Spec.Replicas
	}
	if dep.Status.ReadyReplicas != want || dep.Status.UpdatedReplicas != want {
		return fmt.Errorf("deployment %s: %d of %d replicas ready", ManagerDeployment, dep.Status.ReadyReplicas, want)
	}
	var wh admissionregistrationv1.MutatingWebhookConfiguration
	if err := c.Node.Client.Get(ctx, client.ObjectKey{Name: WebhookConfig}, &wh); err != nil {
		return err
	}
	for _, w := range wh.Webhooks {
		if len(w.ClientConfig.CABundle) == 0 {
			return fmt.Errorf("webhook %s has no caBundle yet", w.Name)
		}
	}
	return nil
}
