package manager

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/sirupsen/logrus"
	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/certwatcher"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	eurekubev1alpha1 "github.com/eurekube/eurekube/api/v1alpha1"
	"github.com/eurekube/eurekube/eureka"
	"github.com/eurekube/eurekube/gateway"
	"github.com/eurekube/eurekube/internal/ownership"
	"github.com/eurekube/eurekube/sidecar"
)

// GatewayCommand is the manager's first argument that runs the gateway
// instead: the same image, another Deployment.
const GatewayCommand = "gateway"

// DefaultGatewayPort is the port the gateway serves Eureka's API on,
// Eureka's own.
const DefaultGatewayPort = 8761

// GatewayConfig is the gateway process's configuration.
type GatewayConfig struct {
	ListenAddr string
	// TLSCertDir, when set, holds tls.crt and tls.key: the gateway serves
	// HTTPS only, reloading them when they change.
	TLSCertDir string
	EurekaURLs []string
	// EurekaUsernameFile and EurekaPasswordFile hold the credentials only
	// the gateway (and the manager) hold.
	EurekaUsernameFile, EurekaPasswordFile string
	EurekaCAFile                           string
	EurekaTimeout                          time.Duration
	Mode                                   string
	Audience                               string
	ReadTTL, TokenTTL                      time.Duration
	// ShutdownDelay: after SIGTERM the gateway reports not ready and keeps
	// serving this long, while kube-proxy stops sending it requests.
	ShutdownDelay time.Duration
	ClusterID     string
	// ManagerServiceAccount, namespace/name, is the manager's: its writes
	// are the reconciler's.
	ManagerServiceAccount  string
	Namespace              string
	MetricsBindAddress     string
	MetricsSecure          bool
	HealthProbeBindAddress string
	LogLevel               string
	LogOutput              io.Writer
	RestConfig             *rest.Config
}

// ParseGatewayFlags reads the gateway's flags (after the gateway command).
func ParseGatewayFlags(args []string, out io.Writer) (GatewayConfig, error) {
	cfg := GatewayConfig{Namespace: os.Getenv("POD_NAMESPACE")}
	fs := pflag.NewFlagSet("manager gateway", pflag.ContinueOnError)
	fs.SetOutput(out)
	fs.StringVar(&cfg.ListenAddr, "listen-address", fmt.Sprintf(":%d", DefaultGatewayPort), "address the gateway serves Eureka's API on (clients' service URL: http(s)://<gateway>:<port>/eureka)")
	fs.StringVar(&cfg.TLSCertDir, "tls-cert-dir", "", "directory with tls.crt and tls.key: serve HTTPS only, reloading them when they change (default: plain HTTP)")
	fs.StringSliceVar(&cfg.EurekaURLs, "eureka-url", nil, "Eureka server behind the gateway, such as http://eureka:8761/eureka (repeatable or comma-separated; required)")
	fs.StringVar(&cfg.EurekaUsernameFile, "eureka-username-file", "", "file with the username the Eureka servers take writes from (a mounted Secret's username)")
	fs.StringVar(&cfg.EurekaPasswordFile, "eureka-password-file", "", "file with that user's password")
	fs.StringVar(&cfg.EurekaCAFile, "eureka-ca-file", "", "CA bundle the Eureka servers' certificates are checked against (default: the system's)")
	fs.DurationVar(&cfg.EurekaTimeout, "eureka-timeout", DefaultEurekaTimeout, "bound on one request to one Eureka server, after which the next URL is tried")
	fs.StringVar(&cfg.Mode, "mode", gateway.ModeAudit, "enforce: refuse writes without an identity allowed to make them; audit: let them through and record them (the weeks of a migration)")
	fs.StringVar(&cfg.Audience, "audience", gateway.DefaultAudience, "audience of the pods' projected ServiceAccount tokens (the manager's --gateway-audience)")
	fs.DurationVar(&cfg.ReadTTL, "read-ttl", gateway.DefaultReadTTL, "how long one copy of a polled read (apps, delta, app, vips) answers every client")
	fs.DurationVar(&cfg.TokenTTL, "token-ttl", gateway.DefaultTokenTTL, "how long a token's TokenReview verdict is reused (refusals: a tenth of it)")
	fs.DurationVar(&cfg.ShutdownDelay, "shutdown-delay", 10*time.Second, "after SIGTERM, how long the gateway keeps serving while it is taken out of its Service's endpoints")
	fs.StringVar(&cfg.ManagerServiceAccount, "manager-service-account", "", "Eurekube manager's ServiceAccount, namespace/name: its pods' tokens write any app, as the reconciler does (Service-mode instances, Standby's status overrides, orphans' cancels)")
	fs.StringVar(&cfg.ClusterID, "cluster-id", "", "this cluster's eurekube.io/cluster marker, as the manager's --cluster-id (default: the UID of the kube-system namespace)")
	fs.StringVar(&cfg.MetricsBindAddress, "metrics-bind-address", ":8443", `address of the metrics endpoint ("0" disables it)`)
	fs.BoolVar(&cfg.MetricsSecure, "metrics-secure", true, "serve metrics over HTTPS to authenticated and authorized callers only")
	fs.StringVar(&cfg.HealthProbeBindAddress, "health-probe-bind-address", ":8081", `address of /healthz and /readyz ("0" disables them)`)
	fs.StringVar(&cfg.LogLevel, "log-level", "info", "log level: debug, info, warn or error")
	if err := fs.Parse(args); err != nil {
		return cfg, err
	}
	return cfg, cfg.Validate()
}

// Validate says what is wrong with cfg.
func (c GatewayConfig) Validate() error {
	switch {
	case len(c.EurekaURLs) == 0:
		return errors.New("--eureka-url: name the Eureka servers behind the gateway")
	case c.Mode != gateway.ModeEnforce && c.Mode != gateway.ModeAudit:
		return fmt.Errorf("--mode %q: want %s or %s", c.Mode, gateway.ModeEnforce, gateway.ModeAudit)
	case (c.EurekaUsernameFile == "") != (c.EurekaPasswordFile == ""):
		return errors.New("--eureka-username-file and --eureka-password-file go together")
	case c.Audience == "":
		return errors.New("--audience must not be empty")
	}
	if _, err := eureka.ServerSet(c.EurekaURLs); err != nil {
		return fmt.Errorf("--eureka-url: %w", err)
	}
	return nil
}

// RunGateway runs the gateway until ctx ends.
func RunGateway(ctx context.Context, cfg GatewayConfig) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	base, err := startProcess(ctx, "gateway", cfg.LogOutput, cfg.LogLevel, cfg.RestConfig, cfg.ClusterID)
	if err != nil {
		return err
	}
	log, logger, restCfg, scheme, clusterID := base.log, base.logger, base.restCfg, base.scheme, base.clusterID
	eurekaOpts := eureka.Options{URLs: cfg.EurekaURLs, Timeout: cfg.EurekaTimeout, Logger: log.WithField("part", "eureka")}
	if cfg.EurekaUsernameFile != "" {
		eurekaOpts.Credentials = sidecar.CredentialsFromFiles(cfg.EurekaUsernameFile, cfg.EurekaPasswordFile, log)
	}
	if cfg.EurekaCAFile != "" {
		if eurekaOpts.RootCAs, err = readCAPool(cfg.EurekaCAFile); err != nil {
			return err
		}
	}
	ec, err := eureka.New(eurekaOpts)
	if err != nil {
		return err
	}
	metrics := metricsserver.Options{BindAddress: cfg.MetricsBindAddress, SecureServing: cfg.MetricsSecure}
	if cfg.MetricsSecure {
		metrics.FilterProvider = filters.WithAuthenticationAndAuthorization
	}
	byObject := map[client.Object]cache.ByObject{}
	if cfg.Namespace != "" {
		// The client Secrets live in the gateway's namespace: its Role
		// reads Secrets there only.
		byObject[&corev1.Secret{}] = cache.ByObject{Namespaces: map[string]cache.Config{cfg.Namespace: {}}}
	}
	mgr, err := ctrl.NewManager(restCfg, ctrl.Options{
		Scheme:                 scheme,
		Logger:                 logger,
		Cache:                  cache.Options{ByObject: byObject, DefaultTransform: cache.TransformStripManagedFields()},
		Metrics:                metrics,
		HealthProbeBindAddress: cfg.HealthProbeBindAddress,
	})
	if err != nil {
		return fmt.Errorf("create gateway's manager: %w", err)
	}
	if err := ownership.IndexSyncers(ctx, mgr.GetFieldIndexer()); err != nil {
		return err
	}
	// The informers the gateway reads, created now so that readiness waits
	// for them rather than the first write.
	for _, obj := range []client.Object{&eurekubev1alpha1.EurekaAppPolicy{}, &eurekubev1alpha1.EurekaAppClaim{}, &eurekubev1alpha1.EurekaSyncer{}, &corev1.Namespace{}, &corev1.Secret{}} {
		if _, err := mgr.GetCache().GetInformer(ctx, obj); err != nil {
			return fmt.Errorf("gateway: informer for %T: %w", obj, err)
		}
	}
	gw, err := gateway.New(gateway.Options{
		Eureka: ec, Mode: cfg.Mode, Audience: cfg.Audience,
		Reviewer: gateway.ClientReviewer{Client: mgr.GetClient()},
		Cache:    mgr.GetCache(), IndexedSyncers: true, Pods: mgr.GetAPIReader(),
		Namespace: cfg.Namespace, ClusterID: clusterID, ManagerServiceAccount: cfg.ManagerServiceAccount,
		Events:  mgr.GetEventRecorder("eurekube-gateway"),
		ReadTTL: cfg.ReadTTL, TokenTTL: cfg.TokenTTL,
		Log: log.WithField("part", "gateway"),
	})
	if err != nil {
		return err
	}
	srv := &gatewayServer{cfg: cfg, handler: gw, log: log}
	if err := mgr.Add(srv); err != nil {
		return err
	}
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("informers", cacheSynced(mgr.GetCache())); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("serving", srv.ready); err != nil {
		return err
	}
	log.WithFields(logrus.Fields{"listen": cfg.ListenAddr, "mode": cfg.Mode, "audience": cfg.Audience, "eurekaURLs": ec.URLs(), "tls": cfg.TLSCertDir != ""}).Info("starting gateway")
	if err := mgr.Start(ctx); err != nil {
		return fmt.Errorf("gateway: %w", err)
	}
	return nil
}

// gatewayServer serves the gateway's handler on every replica (no leader
// election), and on shutdown reports not ready, keeps serving for
// ShutdownDelay and then lets the requests under way finish.
type gatewayServer struct {
	cfg     GatewayConfig
	handler http.Handler
	log     *logrus.Entry
	// state is 0 before serving, 1 serving, 2 stopping.
	state atomic.Int32
}

func (s *gatewayServer) NeedLeaderElection() bool { return false }

func (s *gatewayServer) ready(*http.Request) error {
	switch s.state.Load() {
	case 0:
		return errors.New("not serving yet")
	case 2:
		return errors.New("shutting down")
	}
	return nil
}

func (s *gatewayServer) Start(ctx context.Context) error {
	ln, err := net.Listen("tcp", s.cfg.ListenAddr)
	if err != nil {
		return fmt.Errorf("gateway: listen on %s: %w", s.cfg.ListenAddr, err)
	}
	srv := &http.Server{Handler: s.handler, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 90 * time.Second}
	if s.cfg.TLSCertDir != "" {
		w, err := certwatcher.New(filepath.Join(s.cfg.TLSCertDir, "tls.crt"), filepath.Join(s.cfg.TLSCertDir, "tls.key"))
		if err != nil {
			return fmt.Errorf("gateway: serving certificate: %w", err)
		}
		go func() { _ = w.Start(ctx) }()
		srv.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: w.GetCertificate, NextProtos: []string{"http/1.1"}}
		ln = tls.NewListener(ln, srv.TLSConfig)
	}
	s.state.Store(1)
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	select {
	case err := <-done:
		return fmt.Errorf("gateway: serve: %w", err)
	case <-ctx.Done():
	}
	s.state.Store(2)
	s.log.WithField("delay", s.cfg.ShutdownDelay).Info("stopping: not ready, still serving while the endpoints forget this replica")
	time.Sleep(s.cfg.ShutdownDelay)
	shutdown, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return srv.Shutdown(shutdown)
}

var _ manager.Runnable = (*gatewayServer)(nil)

// readCAPool reads a PEM bundle of CAs.
func readCAPool(path string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("the Eureka CA bundle: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("the Eureka CA bundle %s: no PEM certificate in it", path)
	}
	return pool, nil
}
