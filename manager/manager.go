package manager

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"slices"

	"github.com/go-logr/logr"
	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	ctrlwebhook "sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	eurekubev1alpha1 "github.com/eurekube/eurekube/api/v1alpha1"
	"github.com/eurekube/eurekube/controller"
	"github.com/eurekube/eurekube/internal/logging"
	"github.com/eurekube/eurekube/internal/ownership"
	"github.com/eurekube/eurekube/sidecar"
	"github.com/eurekube/eurekube/webhook"
)

// NewScheme returns the types the manager reads and writes: client-go's
// and Eurekube's API.
func NewScheme() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		return nil, fmt.Errorf("scheme: %w", err)
	}
	if err := eurekubev1alpha1.AddToScheme(s); err != nil {
		return nil, fmt.Errorf("scheme: %w", err)
	}
	return s, nil
}

// defaultGCPercent is the manager's GOGC when its environment sets none.
// Most of its heap is live for good: the informer caches (every pod of
// the cluster, trimmed) and the decoded Eureka registry. At Go's default
// of 100 the heap grows to twice that before each collection, and the
// runtime keeps those pages resident: 448 MiB of RSS for a 244 MiB heap
// with 1,000 syncers and 20,000 pods (`make bench`). At 50 it grows by
// half; the collections this adds cost little of the manager's CPU,
// which goes mostly to decoding. A default GOMEMLIMIT would not do: the
// manager cannot know its container's limit, and a limit below the live
// heap makes the collector run without pause. GOGC and GOMEMLIMIT in the
// environment still apply.
const defaultGCPercent = 50

// Run starts the manager and blocks until ctx ends or a part of it fails.
func Run(ctx context.Context, cfg Config) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	if _, set := os.LookupEnv("GOGC"); !set {
		debug.SetGCPercent(defaultGCPercent)
	}
	base, err := startProcess(ctx, "manager", cfg.LogOutput, cfg.LogLevel, cfg.RestConfig, cfg.ClusterID)
	if err != nil {
		return err
	}
	log, logger, restCfg, scheme, clusterID := base.log, base.logger, base.restCfg, base.scheme, base.clusterID

	certificates, err := newWebhookCertificates(cfg, restCfg, log)
	if err != nil {
		return err
	}
	mgr, err := ctrl.NewManager(restCfg, managerOptions(cfg, scheme, logger, certificates.getCertificate))
	if err != nil {
		return fmt.Errorf("create manager: %w", err)
	}
	if err := setupCertificates(mgr, certificates); err != nil {
		return err
	}
	// The webhook's ownership check and the reconciler's read syncers by
	// app from this one index of the shared cache.
	if err := ownership.IndexSyncers(ctx, mgr.GetFieldIndexer()); err != nil {
		return err
	}
	// The webhook reads the reconciler's registry reads (elsewhere: Refuse).
	registries := &controller.Registries{}
	if err := setupWebhook(ctx, mgr, cfg, clusterID, registries, log); err != nil {
		return err
	}
	if err := setupControllers(mgr, cfg, clusterID, registries, log); err != nil {
		return err
	}
	if err := setupProbes(mgr); err != nil {
		return err
	}
	fields := logrus.Fields{
		"webhookPort":     cfg.WebhookPort,
		"certificateMode": cfg.CertificateMode,
		"certDir":         cfg.CertDir,
		"leaderElect":     cfg.LeaderElect,
		"eurekaURLs":      cfg.EurekaURLs,
		"defaultDrain":    cfg.DefaultDrainSeconds,
		// What a syncer may name besides the manager's own image and servers.
		"allowedRegistrarImages": cfg.AllowedRegistrarImages,
		"allowedEurekaHosts":     cfg.AllowedEurekaHosts,
		"gatewayAudience":        cfg.GatewayAudience,
		"gatewayTokenFile":       cfg.GatewayTokenFile,
	}
	if cfg.CertificateMode == CertificateModeSelfManaged {
		delete(fields, "certDir")
		fields["certificateSecret"] = cfg.CertificateSecret
	}
	log.WithFields(fields).Info("starting manager")
	if err := mgr.Start(ctx); err != nil {
		return fmt.Errorf("manager: %w", err)
	}
	return nil
}

func managerOptions(cfg Config, scheme *runtime.Scheme, logger logr.Logger, getCertificate func(*tls.ClientHelloInfo) (*tls.Certificate, error)) ctrl.Options {
	var tlsOpts []func(*tls.Config)
	if !cfg.EnableHTTP2 {
		tlsOpts = append(tlsOpts, func(c *tls.Config) { c.NextProtos = []string{"http/1.1"} })
	}
	// The metrics server keeps its own (self-signed) certificate; the
	// webhook server serves the one of the certificate mode.
	webhookTLSOpts := append(slices.Clone(tlsOpts), func(c *tls.Config) { c.GetCertificate = getCertificate })
	metrics := metricsserver.Options{
		BindAddress:   cfg.MetricsBindAddress,
		SecureServing: cfg.MetricsSecure,
		TLSOpts:       tlsOpts,
	}
	if cfg.MetricsSecure {
		metrics.FilterProvider = filters.WithAuthenticationAndAuthorization
	}
	return ctrl.Options{
		Scheme: scheme,
		Logger: logger,
		// managedFields stripped, pods trimmed to what the reconciler reads.
		Cache: controller.CacheOptions(),
		Client: client.Options{
			// Secrets are read one at a time from the API server: caching
			// them would need list and watch on every Secret of the cluster.
			Cache: &client.CacheOptions{DisableFor: []client.Object{&corev1.Secret{}}},
		},
		// The name check guards a process against two controllers of one
		// name; the manager has one, and tests run two managers (replicas)
		// in one process.
		Controller:             config.Controller{SkipNameValidation: ptr.To(true)},
		Metrics:                metrics,
		HealthProbeBindAddress: cfg.HealthProbeBindAddress,
		PprofBindAddress:       cfg.PprofBindAddress,
		WebhookServer: ctrlwebhook.NewServer(ctrlwebhook.Options{
			Host:    cfg.WebhookHost,
			Port:    cfg.WebhookPort,
			CertDir: cfg.CertDir,
			TLSOpts: webhookTLSOpts,
		}),
		LeaderElection:                cfg.LeaderElect,
		LeaderElectionID:              LeaderElectionID,
		LeaderElectionNamespace:       cfg.Namespace,
		LeaderElectionReleaseOnCancel: true,
	}
}

// setupCertificates runs what keeps the webhook's key pair current.
func setupCertificates(mgr manager.Manager, c *webhookCertificates) error {
	if err := mgr.Add(c.everyReplica); err != nil {
		return fmt.Errorf("webhook certificates: %w", err)
	}
	if c.leader != nil {
		if err := mgr.Add(c.leader(mgr)); err != nil {
			return fmt.Errorf("webhook certificates: %w", err)
		}
	}
	return nil
}

// setupWebhook registers the pod injection handler. The informers it reads
// are created here, before the manager starts, so that the readiness check
// waits for them instead of the first admission request.
func setupWebhook(ctx context.Context, mgr manager.Manager, cfg Config, clusterID string, registries *controller.Registries, log *logrus.Entry) error {
	for _, obj := range []client.Object{&eurekubev1alpha1.EurekaSyncer{}, &corev1.Namespace{}} {
		if _, err := mgr.GetCache().GetInformer(ctx, obj); err != nil {
			return fmt.Errorf("webhook: informer for %T: %w", obj, err)
		}
	}
	excluded := slices.Clone(cfg.ExcludedNamespaces)
	if cfg.Namespace != "" && !slices.Contains(excluded, cfg.Namespace) {
		excluded = append(excluded, cfg.Namespace)
	}
	h := webhook.NewHandler(webhook.Options{
		Reader:             mgr.GetCache(),
		LiveReader:         mgr.GetAPIReader(),
		Defaults:           webhookDefaults(cfg, clusterID),
		ExcludedNamespaces: excluded,
		// Run registers the index on this cache.
		Ownership:  &ownership.Checker{Reader: mgr.GetCache(), Live: mgr.GetAPIReader(), Writer: mgr.GetClient(), Indexed: true},
		Registries: registries,
		// The Secrets a syncer names: their metadata, one GET each, with
		// the get a namespace grants (no list or watch of Secrets).
		Secrets: mgr.GetAPIReader(),
		Grant:   cfg.Grant(),
		Logger:  log.WithField("part", "webhook"),
	})
	mgr.GetWebhookServer().Register(webhook.Path, &admission.Webhook{Handler: h})
	return nil
}

// setupControllers registers the reconcilers; they run on the elected
// leader only.
func setupControllers(mgr manager.Manager, cfg Config, clusterID string, registries *controller.Registries, log *logrus.Entry) error {
	var bearer func() (string, error)
	if cfg.GatewayTokenFile != "" {
		bearer = sidecar.TokenFromFile(cfg.GatewayTokenFile)
	}
	err := controller.Setup(mgr, controller.Options{
		ClusterID:     clusterID,
		ResyncPeriod:  cfg.ResyncPeriod,
		EurekaTimeout: cfg.EurekaTimeout,
		// The manager's token for the gateway, sent to --eureka-url's
		// servers where no credentials are.
		EurekaBearerToken: bearer,
		PodCIDRs:          cfg.podCIDRs(),
		ServiceCIDRs:      cfg.serviceCIDRs(),
		PatternCap:        cfg.MaxPatternApps,
		ClaimHold:         cfg.ClaimHold,
		MaxServerSets:     cfg.MaxServerSets,
		Defaults:          webhookDefaults(cfg, clusterID),
		Grant:             cfg.Grant(),
		AppIndexed:        true, // by Run
		Registries:        registries,
		Logger:            log.WithField("controller", "eurekasyncer"),
	})
	if err != nil {
		return fmt.Errorf("set up the EurekaSyncer reconciler: %w", err)
	}
	return nil
}

// setupProbes: /healthz answers while the process runs; /readyz once the
// webhook server serves TLS and the caches have synced.
func setupProbes(mgr manager.Manager) error {
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return fmt.Errorf("health check: %w", err)
	}
	if err := mgr.AddReadyzCheck("webhook", mgr.GetWebhookServer().StartedChecker()); err != nil {
		return fmt.Errorf("readiness check: %w", err)
	}
	if err := mgr.AddReadyzCheck("informers", cacheSynced(mgr.GetCache())); err != nil {
		return fmt.Errorf("readiness check: %w", err)
	}
	return nil
}

// process is what the manager and the gateway each set up first.
type process struct {
	log       *logrus.Entry
	logger    logr.Logger
	restCfg   *rest.Config
	scheme    *runtime.Scheme
	clusterID string
}

// startProcess sets up a process's logs (logrus, bridged into
// controller-runtime's and klog's), its API server config (restCfg, else
// the kubeconfig or the in-cluster one), its scheme and its cluster id
// (clusterID, else kube-system's UID).
func startProcess(ctx context.Context, name string, out io.Writer, level string, restCfg *rest.Config, clusterID string) (process, error) {
	if out == nil {
		out = os.Stderr
	}
	log, err := logging.New(out, level, name)
	if err != nil {
		return process{}, err
	}
	p := process{logger: bridgeLogs(log), restCfg: restCfg, clusterID: clusterID}
	if p.restCfg == nil {
		if p.restCfg, err = ctrl.GetConfig(); err != nil {
			return process{}, fmt.Errorf("API server config (kubeconfig or in-cluster): %w", err)
		}
	}
	if p.scheme, err = NewScheme(); err != nil {
		return process{}, err
	}
	if p.clusterID == "" {
		if p.clusterID, err = kubeSystemUID(ctx, p.restCfg, p.scheme); err != nil {
			return process{}, err
		}
	}
	p.log = log.WithField("cluster", p.clusterID)
	return p, nil
}
