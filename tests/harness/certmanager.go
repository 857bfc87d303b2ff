package harness

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// CertManagerModule is the Go module whose controllers, cainjector and CRDs
// the harness runs: the version Eurekube's go.mod requires.
const CertManagerModule = "github.com/cert-manager/cert-manager"

// CertManagerOptions configure StartCertManager.
type CertManagerOptions struct {
	// Binary is tests/tools/certmanager; empty uses $EUREKUBE_CERT_MANAGER,
	// else builds it with tests/tools/certmanager/build.sh (cached after the
	// first run, which takes about 4 minutes on a busy 2-core machine).
	Binary string
	// CRDDir holds cert-manager's CRDs; empty is the deploy/crds directory of
	// CertManagerModule in the module cache.
	CRDDir string
	// LogPath receives cert-manager's JSON log (default: a file in the
	// system's temporary directory, kept for post-mortems).
	LogPath string
	// ClusterResourceNamespace is where ClusterIssuers read their Secrets
	// (default cert-manager).
	ClusterResourceNamespace string
	// CertificateRequestBackoff is the first retry delay after a failed
	// CertificateRequest, doubling up to twelve times it (default 5 s;
	// cert-manager's own default is 1 h).
	CertificateRequestBackoff time.Duration
	// StartTimeout bounds the wait for /readyz (default 2 min: a busy
	// machine and a cold API server).
	StartTimeout time.Duration
}

// CertManager is cert-manager's controller and cainjector, running as one
// process against a control plane with cert-manager's CRDs installed.
type CertManager struct {
	*Process
	healthPort int
}

// StartCertManager installs cert-manager's CRDs in cp, starts its
// controllers (certificates, SelfSigned and CA issuers) and cainjector
// (webhook configurations, API services, CRDs) as the administrator of cp,
// and waits until their informers have synced. The caller ends it with
// Stop.
func StartCertManager(ctx context.Context, cp *ControlPlane, o CertManagerOptions) (*CertManager, error) {
	var err error
	if o.Binary == "" {
		if o.Binary, err = BuildArtifact("EUREKUBE_CERT_MANAGER", "tests/tools/certmanager/build.sh"); err != nil {
			return nil, fmt.Errorf("cert-manager: %w", err)
		}
	}
	if o.CRDDir == "" {
		if o.CRDDir, err = CertManagerCRDDir(); err != nil {
			return nil, err
		}
	}
	if _, err := envtest.InstallCRDs(cp.Config, envtest.CRDInstallOptions{
		Paths:              []string{o.CRDDir},
		ErrorIfPathMissing: true,
	}); err != nil {
		return nil, fmt.Errorf("cert-manager: install the CRDs of %s: %w", o.CRDDir, err)
	}
	if o.ClusterResourceNamespace == "" {
		o.ClusterResourceNamespace = "cert-manager"
	}
	if o.CertificateRequestBackoff == 0 {
		o.CertificateRequestBackoff = 5 * time.Second
	}
	if o.StartTimeout == 0 {
		o.StartTimeout = 2 * time.Minute
	}
	if o.LogPath == "" {
		f, err := os.CreateTemp("", "eurekube-cert-manager-*.log")
		if err != nil {
			return nil, fmt.Errorf("cert-manager: %w", err)
		}
		f.Close()
		o.LogPath = f.Name()
	}
	cm := &CertManager{}
	if cm.healthPort, err = FreePort(); err != nil {
		return nil, fmt.Errorf("cert-manager: %w", err)
	}
	args := []string{
		"--kubeconfig=" + cp.Kubeconfig,
		"--health-probe-bind-address=127.0.0.1:" + strconv.Itoa(cm.healthPort),
		"--cluster-resource-namespace=" + o.ClusterResourceNamespace,
		"--certificate-request-minimum-backoff-duration=" + o.CertificateRequestBackoff.String(),
		"--certificate-request-maximum-backoff-duration=" + (12 * o.CertificateRequestBackoff).String(),
	}
	if cm.Process, err = StartProcess("cert-manager", o.Binary, args, nil, o.LogPath); err != nil {
		return nil, err
	}
	if err := cm.WaitHTTP200(ctx, nil, cm.HealthURL()+"/readyz?verbose", o.StartTimeout); err != nil {
		return nil, err
	}
	return cm, nil
}

// HealthURL is the base of /healthz and /readyz.
func (cm *CertManager) HealthURL() string {
	return "http://127.0.0.1:" + strconv.Itoa(cm.healthPort)
}

// CertManagerCRDDir is the deploy/crds directory of CertManagerModule at the
// version go.mod requires, in the module cache (downloaded if missing).
func CertManagerCRDDir() (string, error) {
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	cmd := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", CertManagerModule)
	cmd.Dir = root
	out, err := cmd.Output()
	if err == nil && strings.TrimSpace(string(out)) == "" {
		// A module not yet downloaded has no directory.
		dl := exec.Command("go", "mod", "download", CertManagerModule)
		dl.Dir = root
		if msg, err := dl.CombinedOutput(); err != nil {
			return "", fmt.Errorf("cert-manager: go mod download %s: %w\n%s", CertManagerModule, err, msg)
		}
		out, err = cmd.Output()
	}
	if err != nil {
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			err = fmt.Errorf("%w: %s", err, exit.Stderr)
		}
		return "", fmt.Errorf("cert-manager: locate module %s: %w", CertManagerModule, err)
	}
	dir := filepath.Join(strings.TrimSpace(string(out)), "deploy", "crds")
	if _, err := os.Stat(filepath.Join(dir, "cert-manager.io_certificates.yaml")); err != nil {
		return "", fmt.Errorf("cert-manager: the module's CRDs: %w", err)
	}
	return dir, nil
}
