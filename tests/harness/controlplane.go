package harness

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	eurekubev1alpha1 "github.com/eurekube/eurekube/api/v1alpha1"
)

// WebhookManifest is the MutatingWebhookConfiguration of manifests/, relative
// to the repository root. InstallWebhook installs this very file, so the
// acceptance tests exercise the selectors and policies clusters get.
const WebhookManifest = "manifests/webhook/mutating_webhook.yaml"

// ControlPlaneOptions configure StartControlPlane.
type ControlPlaneOptions struct {
	// Webhook, when set, installs Eurekube's MutatingWebhookConfiguration
	// pointed at a webhook server on this machine once the API server runs.
	// Tests that start the manager after the control plane call
	// InstallWebhook instead.
	Webhook *LocalWebhook
	// CRDPaths are more CRD files or directories to install beside
	// manifests/crd/bases, such as cert-manager's.
	CRDPaths []string
	// AdmissionPlugins are kube-apiserver admission plugins to enable
	// beyond its defaults, such as OwnerReferencesPermissionEnforcement
	// (on in OpenShift).
	AdmissionPlugins []string
	// ServiceClusterIPRange replaces envtest's 10.0.0.0/24 (254
	// ClusterIPs) for tests that make more Services.
	ServiceClusterIPRange string
}

// LocalWebhook is a webhook server on this machine, reached over TLS.
type LocalWebhook struct {
	// Host defaults to 127.0.0.1.
	Host string
	// Port of the webhook server.
	Port int
	// CABundle verifies the server's certificate (certs.CA.PEM).
	CABundle []byte
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
	// Kubeconfig is a file for kubectl, as an administrator.
	Kubeconfig string
}

// Scheme returns a scheme with client-go's types and Eurekube's API.
func Scheme() *runtime.Scheme {
	s := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(s)
	_ = eurekubev1alpha1.AddToScheme(s)
	return s
}

// controlPlaneStartTimeout bounds one attempt to start kube-apiserver and
// etcd.
const controlPlaneStartTimeout = 3 * time.Minute

// StartControlPlane starts kube-apiserver and etcd from the binaries in
// KUBEBUILDER_ASSETS, or else those tests/tools/envtest/build.sh builds
// (cached after the first run), and installs the CRDs of manifests/crd/bases.
func StartControlPlane(ctx context.Context, opts ControlPlaneOptions) (*ControlPlane, error) {
	assets, err := BuildArtifact("KUBEBUILDER_ASSETS", "tests/tools/envtest/build.sh")
	if err != nil {
		return nil, fmt.Errorf("control plane: %w", err)
	}
	for _, bin := range []string{"kube-apiserver", "etcd"} {
		if _, err := os.Stat(filepath.Join(assets, bin)); err != nil {
			return nil, fmt.Errorf("control plane: %s missing in %s (unset KUBEBUILDER_ASSETS to build it with tests/tools/envtest/build.sh, or run make envtest): %w", bin, assets, err)
		}
	}
	root, err := RepoRoot()
	if err != nil {
		return nil, err
	}
	scheme := Scheme()
	env := &envtest.Environment{
		BinaryAssetsDirectory: assets,
		CRDDirectoryPaths:     append([]string{filepath.Join(root, "manifests", "crd", "bases")}, opts.CRDPaths...),
		ErrorIfCRDPathMissing: true,
		Scheme:                scheme,
		// envtest gives each attempt 20 s, then kills it and tries again:
		// on two cores shared with other suites (load 30, in a cold run
		// beside another) kube-apiserver took longer than that five times
		// over. One patient attempt starts it.
		ControlPlaneStartTimeout: controlPlaneStartTimeout,
	}
	if len(opts.AdmissionPlugins) > 0 {
		env.ControlPlane.GetAPIServer().Configure().Append("enable-admission-plugins", strings.Join(opts.AdmissionPlugins, ","))
	}
	if opts.ServiceClusterIPRange != "" {
		env.ControlPlane.GetAPIServer().Configure().Set("service-cluster-ip-range", opts.ServiceClusterIPRange)
	}
	cfg, err := env.Start()
	if err != nil {
		// Start leaves the processes running when a later step (such as
		// installing the CRDs) fails.
		_ = env.Stop()
		return nil, fmt.Errorf("control plane: start kube-apiserver and etcd from %s: %w", assets, err)
	}
	cp := &ControlPlane{Env: env, Config: cfg, Scheme: scheme}
	if err := cp.init(ctx, opts); err != nil {
		_ = cp.Stop()
		return nil, err
	}
	return cp, nil
}

func (cp *ControlPlane) init(ctx context.Context, opts ControlPlaneOptions) error {
	var err error
	if cp.Client, err = client.New(cp.Config, client.Options{Scheme: cp.Scheme}); err != nil {
		return fmt.Errorf("control plane: client: %w", err)
	}
	if cp.Kubeconfig, err = writeKubeconfig(cp.Env); err != nil {
		return err
	}
	if opts.Webhook != nil {
		return cp.InstallWebhook(ctx, *opts.Webhook)
	}
	return nil
}

// ControlPlaneT starts a control plane for a test and stops it when the
// test ends.
func ControlPlaneT(t testing.TB, opts ControlPlaneOptions) *ControlPlane {
	t.Helper()
	SkipWhenShort(t, "a kube-apiserver and etcd")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cp, err := StartControlPlane(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := cp.Stop(); err != nil {
			t.Errorf("stop control plane: %v", err)
		}
	})
	return cp
}

// Stop ends the API server and etcd and removes the kubeconfig.
func (cp *ControlPlane) Stop() error {
	if cp.Kubeconfig != "" {
		_ = os.RemoveAll(filepath.Dir(cp.Kubeconfig))
	}
	return cp.Env.Stop()
}

// InstallWebhook creates (or replaces) Eurekube's MutatingWebhookConfiguration
// from WebhookManifest with every webhook's client config pointed at w:
// the service reference becomes https://host:port/<the service's path>, and
// the caBundle w.CABundle. Everything else (rules, selectors, failure
// policy, timeouts) is the manifest's.
func (cp *ControlPlane) InstallWebhook(ctx context.Context, w LocalWebhook) error {
	mwc, err := LoadWebhookManifest()
	if err != nil {
		return err
	}
	if w.Host == "" {
		w.Host = "127.0.0.1"
	}
	if w.Port == 0 || len(w.CABundle) == 0 {
		return errors.New("install webhook: LocalWebhook needs a Port and a CABundle")
	}
	for i := range mwc.Webhooks {
		cc := &mwc.Webhooks[i].ClientConfig
		if cc.Service == nil || cc.Service.Path == nil {
			return fmt.Errorf("install webhook: %s in %s has no service path to point at the local server", mwc.Webhooks[i].Name, WebhookManifest)
		}
		url := "https://" + net.JoinHostPort(w.Host, strconv.Itoa(w.Port)) + *cc.Service.Path
		cc.URL, cc.Service, cc.CABundle = &url, nil, w.CABundle
	}
	err = cp.Client.Create(ctx, mwc)
	if apierrors.IsAlreadyExists(err) {
		var old admissionregistrationv1.MutatingWebhookConfiguration
		if err = cp.Client.Get(ctx, client.ObjectKeyFromObject(mwc), &old); err == nil {
			mwc.ResourceVersion = old.ResourceVersion
			err = cp.Client.Update(ctx, mwc)
		}
	}
	if err != nil {
		return fmt.Errorf("install webhook %s: %w", mwc.Name, err)
	}
	return nil
}

// LoadWebhookManifest reads WebhookManifest.
func LoadWebhookManifest() (*admissionregistrationv1.MutatingWebhookConfiguration, error) {
	root, err := RepoRoot()
	if err != nil {
		return nil, err
	}
	data, err := os.ReadFile(filepath.Join(root, WebhookManifest))
	if err != nil {
		return nil, fmt.Errorf("webhook manifest: %w", err)
	}
	var mwc admissionregistrationv1.MutatingWebhookConfiguration
	if err := yaml.UnmarshalStrict(data, &mwc); err != nil {
		return nil, fmt.Errorf("webhook manifest %s: %w", WebhookManifest, err)
	}
	if mwc.Kind != "MutatingWebhookConfiguration" || len(mwc.Webhooks) == 0 {
		return nil, fmt.Errorf("webhook manifest %s: want a MutatingWebhookConfiguration with webhooks, got kind %q with %d", WebhookManifest, mwc.Kind, len(mwc.Webhooks))
	}
	return &mwc, nil
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
		return "", fmt.Errorf("control plane: kubeconfig: %w", err)
	}
	path := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		return "", fmt.Errorf("control plane: kubeconfig: %w", err)
	}
	return path, nil
}

// Kubectl is the kubectl built beside the API server by
// tests/tools/envtest/build.sh, of the same release.
func (c *ControlPlane) Kubectl() (string, error) {
	path := filepath.Join(c.Env.BinaryAssetsDirectory, "kubectl")
	fi, err := os.Stat(path)
	if err != nil {
		return "", fmt.Errorf("kubectl is built with the control plane (tests/tools/envtest/build.sh): %w", err)
	}
	if !fi.Mode().IsRegular() || fi.Mode()&0o111 == 0 {
		return "", fmt.Errorf("kubectl %s is not an executable file", path)
	}
	return path, nil
}
