package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/eurekube/eurekube/certs"
	eurekubemanager "github.com/eurekube/eurekube/manager"
	"github.com/eurekube/eurekube/tests/harness"
	"github.com/eurekube/eurekube/webhook"
)

// The bench runs the manager binary as a process on this machine against a
// bare control plane, not as a pod on the real node: its scale scenarios
// hold 5,000 pods whose statuses it writes itself, which no two-core node
// can run, and its figures are the manager's own (memory, CPU, requests)
// without containerd and kube-proxy between. How users install it is
// proved by tests/cluster.

const (
	// managerNamespace holds the manager's leader election Lease.
	managerNamespace = "eurekube-system"
	// benchRegistrarImage is what the manager injects; no bench pod runs.
	benchRegistrarImage = "eurekube/registrar:bench"
)

// managerOptions are the manager flags the bench sets.
type managerOptions struct {
	Binary     string
	Kubeconfig string
	// CertDir holds the webhook's tls.crt and tls.key (certs.Bootstrap).
	CertDir      string
	EurekaURLs   []string
	ClusterID    string
	ResyncPeriod time.Duration
	LogPath      string
}

// manager is a running cmd/manager process on 127.0.0.1 with plain-HTTP
// metrics.
type manager struct {
	*harness.Process
	webhookPort, metricsPort, pprofPort int
}

// startManager starts the manager and waits until /readyz passes (webhook
// serving TLS, caches synced).
func startManager(ctx context.Context, o managerOptions) (*manager, error) {
	m := &manager{}
	var healthPort int
	for _, p := range []*int{&m.webhookPort, &m.metricsPort, &healthPort, &m.pprofPort} {
		var err error
		if *p, err = harness.FreePort(); err != nil {
			return nil, fmt.Errorf("manager: %w", err)
		}
	}
	args := o.args(m.webhookPort, m.metricsPort, healthPort)
	if hasFlag(o.Binary, "--pprof-bind-address") { // an older manager may lack it
		args = append(args, "--pprof-bind-address=127.0.0.1:"+strconv.Itoa(m.pprofPort))
	} else {
		m.pprofPort = 0
	}
	env := []string{"KUBECONFIG=" + o.Kubeconfig, "POD_NAMESPACE=" + managerNamespace}
	var err error
	if m.Process, err = harness.StartProcess("manager", o.Binary, args, env, o.LogPath); err != nil {
		return nil, err
	}
	readyz := "http://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(healthPort)) + "/readyz"
	if err := m.WaitHTTP200(ctx, nil, readyz, time.Minute); err != nil {
		_ = m.Stop()
		return nil, err
	}
	return m, nil
}

// args are the manager's command line.
func (o managerOptions) args(webhookPort, metricsPort, healthPort int) []string {
	return []string{
		"--registrar-image=" + benchRegistrarImage,
		"--cert-dir=" + o.CertDir,
		"--webhook-host=127.0.0.1",
		"--webhook-port=" + strconv.Itoa(webhookPort),
		"--metrics-bind-address=127.0.0.1:" + strconv.Itoa(metricsPort),
		"--metrics-secure=false",
		"--health-probe-bind-address=127.0.0.1:" + strconv.Itoa(healthPort),
		"--resync-period=" + o.ResyncPeriod.String(),
		"--leader-elect=false",
		"--eureka-url=" + strings.Join(o.EurekaURLs, ","),
		"--cluster-id=" + o.ClusterID,
	}
}

// webhookDefaults are what the manager started with o gives every
// registrar it injects: read from the same flags by the manager's own code.
func (o managerOptions) webhookDefaults() (webhook.Defaults, error) {
	cfg, err := eurekubemanager.ParseFlags(o.args(1, 2, 3), io.Discard)
	if err != nil {
		return webhook.Defaults{}, fmt.Errorf("manager flags: %w", err)
	}
	return eurekubemanager.WebhookDefaults(cfg, o.ClusterID), nil
}

// hasFlag says whether binary's --help lists flag.
func hasFlag(binary, flag string) bool {
	out, _ := exec.Command(binary, "--help").CombinedOutput() // --help exits 0 or 2 by version
	return bytes.Contains(out, []byte(flag))
}

// profile saves the manager's pprof profile kind (such as
// "profile?seconds=30" or "heap") to file.
func (m *manager) profile(ctx context.Context, kind, file string) error {
	if m.pprofPort == 0 {
		return errors.New("this manager has no --pprof-bind-address")
	}
	return saveProfile(ctx, http.DefaultClient, "http://"+net.JoinHostPort("127.0.0.1", strconv.Itoa(m.pprofPort)), kind, file)
}

// saveProfile saves the pprof profile kind served under base (a manager's
// or the kube-apiserver's /debug/pprof/) to file.
func saveProfile(ctx context.Context, c *http.Client, base, kind, file string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(base, "/")+"/debug/pprof/"+kind, nil)
	if err != nil {
		return fmt.Errorf("pprof %s: %w", kind, err)
	}
	resp, err := c.Do(req)
	if err != nil {
		return fmt.Errorf("pprof %s: %w", kind, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("pprof %s: %s", kind, resp.Status)
	}
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("pprof %s: %w", kind, err)
	}
	return os.WriteFile(file, data, 0o644)
}

// apiServerProfile saves the kube-apiserver's pprof profile kind to file.
func apiServerProfile(ctx context.Context, cp *harness.ControlPlane, kind, file string) error {
	c, err := rest.HTTPClientFor(cp.Config)
	if err != nil {
		return fmt.Errorf("API server pprof: %w", err)
	}
	return saveProfile(ctx, c, cp.Config.Host, kind, file)
}

// WebhookAddr is the webhook server's host:port (TLS).
func (m *manager) WebhookAddr() string {
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(m.webhookPort))
}

// MetricsURL is the Prometheus endpoint, plain HTTP.
func (m *manager) MetricsURL() string {
	return "http://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(m.metricsPort)) + "/metrics"
}

// installManager starts one manager on cp with a bootstrapped webhook
// certificate and points Eurekube's webhook configuration (from manifests/)
// straight at it. It returns the CA that signed the certificate.
func installManager(ctx context.Context, cp *harness.ControlPlane, dir string, o managerOptions) (*manager, *certs.CA, error) {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: managerNamespace}}
	if err := cp.Client.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, nil, fmt.Errorf("namespace %s: %w", managerNamespace, err)
	}
	o.CertDir = filepath.Join(dir, "certs")
	ca, err := certs.Bootstrap(o.CertDir, certs.LocalHosts())
	if err != nil {
		return nil, nil, fmt.Errorf("webhook certificate: %w", err)
	}
	o.Kubeconfig, o.LogPath = cp.Kubeconfig, filepath.Join(dir, "manager.log")
	m, err := startManager(ctx, o)
	if err != nil {
		return nil, nil, err
	}
	if err := cp.InstallWebhook(ctx, harness.LocalWebhook{Port: m.webhookPort, CABundle: ca.PEM}); err != nil {
		_ = m.Stop()
		return nil, nil, err
	}
	return m, ca, nil
}
