package harness

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	eurekubev1alpha1 "github.com/eurekube/eurekube/api/v1alpha1"
)

// ControlPlaneOptions configure StartControlPlane.
type ControlPlaneOptions struct {
	// Webhooks, when set, are installed by envtest, which also generates
	// their serving certificate into Webhooks.LocalServingCertDir.
	Webhooks *envtest.WebhookInstallOptions
}

// ControlPlane is a running kube-apiserver with etcd and Eurekube's CRDs.
type ControlPlane struct {
	Env *envtest.Environment
	// Config reaches the API server as an administrator.
	Config *rest.Config
	// Client uses Scheme.
	Client client.Client
	// Scheme knows client-go's types and Eurekube's API.
	Scheme *runtime.Scheme
	// Kubeconfig is a file for kubectl.
	Kubeconfig string
}

// Scheme returns a scheme with client-go's types and Eurekube's API.
func Scheme() *runtime.Scheme {
	s := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(s)
	_ = eurekubev1alpha1.AddToScheme(s)
	return s
}

// StartControlPlane starts kube-apiserver and etcd from the binaries that
// tests/tools/envtest/build.sh builds (or KUBEBUILDER_ASSETS names) and
// installs the CRDs of manifests/crd/bases.
func StartControlPlane(ctx context.Context, opts ControlPlaneOptions) (*ControlPlane, error) {
	assets, err := buildArtifact("KUBEBUILDER_ASSETS", "tests/tools/envtest/build.sh")
	if err != nil {
		return nil, fmt.Errorf("control plane: %w", err)
	}
	for _, bin := range []string{"kube-apiserver", "etcd"} {
		if _, err := os.Stat(filepath.Join(assets, bin)); err != nil {
			return nil, fmt.Errorf("control plane: %s missing in %s (run tests/tools/envtest/build.sh): %w", bin, assets, err)
		}
	}
	root, err := RepoRoot()
	if err != nil {
		return nil, err
	}
	scheme := Scheme()
	env := &envtest.Environment{
		BinaryAssetsDirectory: assets,
		CRDDirectoryPaths:     []string{filepath.Join(root, "manifests", "crd", "bases")},
		ErrorIfCRDPathMissing: true,
		Scheme:                scheme,
	}
	if opts.Webhooks != nil {
		env.WebhookInstallOptions = *opts.Webhooks
	}
	cfg, err := env.Start()
	if err != nil {
		return nil, fmt.Errorf("control plane: start kube-apiserver and etcd from %s: %w", assets, err)
	}
	cp := &ControlPlane{Env: env, Config: cfg, Scheme: scheme}
	if cp.Client, err = client.New(cfg, client.Options{Scheme: scheme}); err != nil {
		_ = env.Stop()
		return nil, fmt.Errorf("control plane: client: %w", err)
	}
	if cp.Kubeconfig, err = writeKubeconfig(env); err != nil {
		_ = env.Stop()
		return nil, err
	}
	return cp, nil
}

// ControlPlaneT starts a control plane for a test and stops it when the
// test ends.
func ControlPlaneT(t testing.TB, opts ControlPlaneOptions) *ControlPlane {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cp, err := StartControlPlane(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cp.Stop() })
	return cp
}

// Stop ends the API server and etcd.
func (cp *ControlPlane) Stop() error {
	if cp.Kubeconfig != "" {
		_ = os.RemoveAll(filepath.Dir(cp.Kubeconfig))
	}
	return cp.Env.Stop()
}

func writeKubeconfig(env *envtest.Environment) (string, error) {
	user, err := env.ControlPlane.AddUser(envtest.User{Name: "eurekube-admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return "", fmt.Errorf("control plane: admin user: %w", err)
	}
	data, err := user.KubeConfig()
	if err != nil {
		return "", fmt.Errorf("control plane: kubeconfig: %w", err)
	}
	dir, err := os.MkdirTemp("", "eurekube-kubeconfig-")
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		return "", err
	}
	return path, nil
}
