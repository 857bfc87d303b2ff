package harness

import (
	"context"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// ManagerNamespace is the namespace the harness runs managers "in": where
// their leader election Lease lives, and never mutated.
const ManagerNamespace = "eurekube-system"

// SandboxRegistrarImage is the registrar image the harness's managers
// inject. No image is pulled anywhere: the pod runner runs the registrar
// binary for the container named eurekube-registrar.
const SandboxRegistrarImage = "eurekube/registrar:sandbox"

// ManagerOptions configure StartManager. Each field is the manager flag of
// the same name (see cmd/manager/app/flags.go).
type ManagerOptions struct {
	// Binary is the manager binary; empty builds ./cmd/manager into BinDir.
	Binary string
	BinDir string
	// Kubeconfig reaches the API server (ControlPlane.Kubeconfig).
	Kubeconfig string
	// EurekaURLs for syncers that name none.
	EurekaURLs []string
	// ClusterID; empty means the UID of kube-system, as in a cluster.
	ClusterID string
	// DefaultDrainSeconds is --default-drain (0 keeps the flag's default).
	DefaultDrainSeconds int32
	// ResyncPeriod defaults to 2 s, short so tests see status quickly.
	ResyncPeriod time.Duration
	// CertDir holds the webhook's tls.crt and tls.key (certs.Bootstrap).
	CertDir string
	// WebhookPort on 127.0.0.1; 0 picks a free one.
	WebhookPort int
	// LeaderElect runs the reconciler on one replica at a time; the Lease
	// lives in Namespace.
	LeaderElect bool
	// Namespace is POD_NAMESPACE (default ManagerNamespace).
	Namespace string
	// ExtraArgs are appended to the flags.
	ExtraArgs []string
	// LogPath receives the manager's JSON log (default: a file in BinDir).
	LogPath string
	// StartTimeout bounds the wait for /readyz (default 60 s).
	StartTimeout time.Duration
}

// Manager is a running cmd/manager process.
type Manager struct {
	*Process
	webhookPort, metricsPort, healthPort int
}

// StartManager starts the manager binary on 127.0.0.1 with plain-HTTP
// metrics and waits until /readyz passes (webhook serving TLS, caches
// synced).
func StartManager(ctx context.Context, o ManagerOptions) (*Manager, error) {
	if o.Kubeconfig == "" || o.CertDir == "" {
		return nil, errors.New("manager: ManagerOptions needs a Kubeconfig and a CertDir")
	}
	if o.Binary == "" {
		if o.BinDir == "" {
			return nil, errors.New("manager: ManagerOptions needs a Binary or a BinDir to build it into")
		}
		bin, err := BuildBinary("./cmd/manager", o.BinDir)
		if err != nil {
			return nil, err
		}
		o.Binary = bin
	}
	if o.Namespace == "" {
		o.Namespace = ManagerNamespace
	}
	if o.ResyncPeriod == 0 {
		o.ResyncPeriod = 2 * time.Second
	}
	if o.StartTimeout == 0 {
		o.StartTimeout = 60 * time.Second
	}
	m := &Manager{webhookPort: o.WebhookPort}
	var err error
	for _, p := range []*int{&m.webhookPort, &m.metricsPort, &m.healthPort} {
		if *p == 0 {
			if *p, err = FreePort(); err != nil {
				return nil, fmt.Errorf("manager: %w", err)
			}
		}
	}
	if o.LogPath == "" {
		o.LogPath = filepath.Join(filepath.Dir(o.Binary), "manager-"+strconv.Itoa(m.webhookPort)+".log")
	}
	args := []string{
		"--registrar-image=" + SandboxRegistrarImage,
		"--cert-dir=" + o.CertDir,
		"--webhook-host=127.0.0.1",
		"--webhook-port=" + strconv.Itoa(m.webhookPort),
		"--metrics-bind-address=127.0.0.1:" + strconv.Itoa(m.metricsPort),
		"--metrics-secure=false",
		"--health-probe-bind-address=127.0.0.1:" + strconv.Itoa(m.healthPort),
		"--resync-period=" + o.ResyncPeriod.String(),
		"--leader-elect=" + strconv.FormatBool(o.LeaderElect),
	}
	if len(o.EurekaURLs) > 0 {
		args = append(args, "--eureka-url="+strings.Join(o.EurekaURLs, ","))
	}
	if o.ClusterID != "" {
		args = append(args, "--cluster-id="+o.ClusterID)
	}
	if o.DefaultDrainSeconds != 0 {
		args = append(args, "--default-drain="+strconv.Itoa(int(o.DefaultDrainSeconds)))
	}
	args = append(args, o.ExtraArgs...)
	env := []string{"KUBECONFIG=" + o.Kubeconfig, "POD_NAMESPACE=" + o.Namespace}
	if m.Process, err = StartProcess("manager", o.Binary, args, env, o.LogPath); err != nil {
		return nil, err
	}
	if err := m.WaitHTTP200(ctx, nil, m.HealthURL()+"/readyz", o.StartTimeout); err != nil {
		return nil, err
	}
	return m, nil
}

// WebhookAddr is the webhook server's host:port (TLS).
func (m *Manager) WebhookAddr() string {
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(m.webhookPort))
}

// WebhookPort is the webhook server's port.
func (m *Manager) WebhookPort() int { return m.webhookPort }

// MetricsURL is the Prometheus endpoint, plain HTTP.
func (m *Manager) MetricsURL() string {
	return "http://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(m.metricsPort)) + "/metrics"
}

// HealthURL is the base of /healthz and /readyz.
func (m *Manager) HealthURL() string {
	return "http://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(m.healthPort))
}
