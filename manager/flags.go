package manager

import (
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"time"
	"unicode"

	"github.com/sirupsen/logrus"
	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/api/validate/content"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/rest"

	"github.com/eurekube/eurekube/api/v1alpha1"
	"github.com/eurekube/eurekube/controller"
	"github.com/eurekube/eurekube/eureka"
	"github.com/eurekube/eurekube/internal/allowlist"
	"github.com/eurekube/eurekube/webhook"
)

// Config is everything the manager is configured with. ParseFlags fills it
// from the command line; tests may build it directly.
type Config struct {
	// RegistrarImage is the image of the injected registrar (required).
	RegistrarImage string
	// EurekaURLs are the Eureka servers for syncers that name none.
	EurekaURLs []string
	// AllowedRegistrarImages are the image patterns a syncer's
	// spec.sidecar.image may name besides RegistrarImage (internal/allowlist
	// gives the syntax); none by default.
	AllowedRegistrarImages []string
	// AllowedEurekaHosts are the host patterns a syncer's
	// spec.eureka.serviceURLs may name besides the hosts and ports of
	// EurekaURLs; none by default.
	AllowedEurekaHosts []string
	// DefaultDrainSeconds is the preStop sleep for syncers that set none.
	DefaultDrainSeconds int32
	// ClusterID marks this cluster's instances in Eureka; empty means the
	// UID of the kube-system namespace.
	ClusterID string
	// ExecSleepFallback drains through the drain helper instead of the
	// kubelet's sleep action.
	ExecSleepFallback bool
	// ExcludedNamespaces are never mutated, whatever their labels; the
	// manager's own namespace is always added.
	ExcludedNamespaces []string

	// CertificateMode says where the webhook's certificates come from:
	// CertificateModeCertManager or CertificateModeSelfManaged.
	CertificateMode string
	// CertDir holds tls.crt and tls.key of the webhook server
	// (cert-manager mode).
	CertDir string
	// WebhookConfiguration is the MutatingWebhookConfiguration whose
	// caBundle the leader keeps current (self-managed mode).
	WebhookConfiguration string
	// WebhookService is the webhook's Service: the serving certificate is
	// issued for its DNS names (self-managed mode).
	WebhookService string
	// CertificateSecret is the Secret in Namespace holding the CA and the
	// serving key pair (self-managed mode).
	CertificateSecret string
	// CertificateLifetimes shorten the self-managed certificates' validity
	// in tests; there is no flag for them. Zero values are the defaults.
	CertificateLifetimes CertificateLifetimes
	// WebhookHost is the address the webhook server listens on ("" = all).
	WebhookHost string
	// WebhookPort is the webhook server's port.
	WebhookPort int
	// EnableHTTP2 lets the webhook and metrics servers speak HTTP/2, off by
	// default against HTTP/2 stream-reset attacks (CVE-2023-44487).
	EnableHTTP2 bool
	// MetricsBindAddress is where metrics are served; "0" disables them.
	MetricsBindAddress string
	// MetricsSecure serves metrics over HTTPS to authenticated and
	// authorized callers only.
	MetricsSecure bool
	// HealthProbeBindAddress serves /healthz and /readyz; "0" disables them.
	HealthProbeBindAddress string
	// PprofBindAddress serves Go's /debug/pprof; "0", the default,
	// disables it.
	PprofBindAddress string

	// LeaderElect runs the reconcilers on one replica at a time.
	LeaderElect bool
	// Namespace is the manager's own namespace (POD_NAMESPACE): where the
	// leader election Lease lives, and never mutated.
	Namespace string
	// ServiceAccount is the manager's ServiceAccount (POD_SERVICE_ACCOUNT),
	// named in how to grant it a namespace's Eureka credentials.
	ServiceAccount string
	// CredentialsClusterRole is the ClusterRole a namespace binds to let
	// the manager read the Secrets and ConfigMaps its syncers name.
	CredentialsClusterRole string
	// ResyncPeriod is how often every syncer is reconciled even when
	// nothing in Kubernetes changed, because Eureka cannot be watched.
	ResyncPeriod time.Duration
	// EurekaTimeout bounds one request of the reconciler to one Eureka
	// server; the next URL is tried after it.
	EurekaTimeout time.Duration
	// PodCIDRs and ServiceCIDRs are the cluster's pod and Service ranges,
	// where an import writes no address but its own namespace's pods';
	// each, when given, replaces what the manager detects.
	PodCIDRs, ServiceCIDRs []string
	// MaxPatternApps caps the apps one pattern import imports.
	MaxPatternApps int
	// ClaimHold is how long an EurekaAppClaim is held for a namespace that
	// registers its app no more, before another namespace may claim it.
	ClaimHold time.Duration
	// MaxServerSets caps the Eureka server sets (with their credentials
	// and TLS material) whose registries the manager holds at once.
	MaxServerSets int
	// GatewayAudience, when set, is the audience of the projected
	// ServiceAccount token the webhook gives every registrar for
	// Eurekube's gateway (the gateway's --audience); empty: none.
	GatewayAudience string
	// GatewayTokenFile, when set, holds the manager's own projected
	// ServiceAccount token for the gateway, which the reconciler sends to
	// the --eureka-url servers, read again when a stat shows it changed;
	// empty: none.
	GatewayTokenFile string

	// LogLevel is debug, info, warn or error.
	LogLevel string
	// LogOutput receives the JSON log lines (default os.Stderr).
	LogOutput io.Writer
	// RestConfig reaches the API server; nil means the kubeconfig or the
	// in-cluster config, as kubectl finds them.
	RestConfig *rest.Config
}

// Default values of the flags.
const (
	DefaultDrainSeconds = 100
	DefaultWebhookPort  = 9443
	DefaultResync       = 30 * time.Second
	// DefaultEurekaTimeout is the reconciler's bound on one Eureka request.
	DefaultEurekaTimeout = eureka.DefaultTimeout
	// LeaderElectionID names the leader election Lease.
	LeaderElectionID = "eurekube-manager"

	// Certificate modes (--certificate-mode).
	CertificateModeCertManager  = "cert-manager"
	CertificateModeSelfManaged  = "self-managed"
	DefaultWebhookConfiguration = "eurekube"
	DefaultWebhookService       = "eurekube-webhook"
	DefaultCertificateSecret    = "eurekube-webhook-tls"
)

// ParseFlags reads the manager's command line (without the program name)
// and the POD_NAMESPACE and POD_SERVICE_ACCOUNT environment variables. It
// returns pflag.ErrHelp after printing the usage for --help.
func ParseFlags(args []string, usage io.Writer) (Config, error) {
	cfg := Config{Namespace: os.Getenv("POD_NAMESPACE"), ServiceAccount: os.Getenv("POD_SERVICE_ACCOUNT")}
	fs := pflag.NewFlagSet("manager", pflag.ContinueOnError)
	fs.SetOutput(usage)

	fs.StringVar(&cfg.RegistrarImage, "registrar-image", "", "image of the injected registrar container (required)")
	fs.StringSliceVar(&cfg.EurekaURLs, "eureka-url", nil, "Eureka server URL for syncers that name none, such as http://eureka:8761/eureka (repeatable or comma-separated)")
	fs.StringSliceVar(&cfg.AllowedRegistrarImages, allowlist.ImagesFlag, nil, "registrar image a syncer's spec.sidecar.image may name besides --registrar-image: an exact reference, or a prefix ending in /*, :* or @* (registry.example.com/eurekube/*), or * for any; the image runs in every pod the syncer selects (repeatable or comma-separated; default none)")
	fs.StringSliceVar(&cfg.AllowedEurekaHosts, allowlist.HostsFlag, nil, "Eureka host a syncer's spec.eureka.serviceURLs may name besides the hosts and ports of --eureka-url: host or host:port, *.example.com for every name below example.com, or * for any; the manager and the registrars call it (repeatable or comma-separated; default none)")
	fs.Int32Var(&cfg.DefaultDrainSeconds, "default-drain", DefaultDrainSeconds, "preStop sleep in seconds for syncers that set none: how long an app keeps serving after leaving Eureka (0-3600)")
	fs.StringVar(&cfg.ClusterID, "cluster-id", "", "id marking this cluster's instances in Eureka (default: the UID of the kube-system namespace)")
	fs.BoolVar(&cfg.ExecSleepFallback, "exec-sleep-fallback", false, "drain through Eurekube's drain helper (an exec preStop, no shell or sleep binary needed) instead of the kubelet's sleep action, for kubelets before 1.30 without it")
	fs.StringVar(&cfg.CredentialsClusterRole, "credentials-cluster-role", v1alpha1.EurekaAccessClusterRole, "ClusterRole a namespace binds to the manager's ServiceAccount to let it read the Secrets and ConfigMaps its syncers' spec.eureka names (named in the hint of a forbidden read)")
	fs.StringSliceVar(&cfg.ExcludedNamespaces, "excluded-namespace", []string{"kube-system"}, "namespace never mutated, whatever its labels (repeatable; the manager's own namespace is always excluded)")

	fs.StringVar(&cfg.CertificateMode, "certificate-mode", CertificateModeCertManager, "where the webhook's certificates come from: "+CertificateModeCertManager+" (files in --cert-dir, from cert-manager's Secret) or "+CertificateModeSelfManaged+" (the leader issues and rotates them in --certificate-secret and keeps the caBundle of --webhook-configuration current)")
	fs.StringVar(&cfg.CertDir, "cert-dir", "/tmp/k8s-webhook-server/serving-certs", "directory with the webhook server's tls.crt and tls.key, reloaded when they change ("+CertificateModeCertManager+" mode)")
	fs.StringVar(&cfg.WebhookConfiguration, "webhook-configuration", DefaultWebhookConfiguration, "MutatingWebhookConfiguration whose caBundle the leader keeps current ("+CertificateModeSelfManaged+" mode)")
	fs.StringVar(&cfg.WebhookService, "webhook-service", DefaultWebhookService, "the webhook's Service in $POD_NAMESPACE: the serving certificate is issued for <service>.<namespace>.svc and <service>.<namespace>.svc.cluster.local ("+CertificateModeSelfManaged+" mode)")
	fs.StringVar(&cfg.CertificateSecret, "certificate-secret", DefaultCertificateSecret, "Secret in $POD_NAMESPACE holding the CA and the serving certificate (tls.crt, tls.key, ca.crt, ca.key) ("+CertificateModeSelfManaged+" mode)")
	fs.StringVar(&cfg.WebhookHost, "webhook-host", "", "address the webhook server listens on (default: all)")
	fs.IntVar(&cfg.WebhookPort, "webhook-port", DefaultWebhookPort, "port of the webhook server")
	fs.BoolVar(&cfg.EnableHTTP2, "enable-http2", false, "serve the webhook and metrics over HTTP/2 too")
	fs.StringVar(&cfg.MetricsBindAddress, "metrics-bind-address", ":8443", `address of the metrics endpoint ("0" disables it)`)
	fs.BoolVar(&cfg.MetricsSecure, "metrics-secure", true, "serve metrics over HTTPS to authenticated and authorized callers only")
	fs.StringVar(&cfg.HealthProbeBindAddress, "health-probe-bind-address", ":8081", `address of /healthz and /readyz ("0" disables them)`)
	fs.StringVar(&cfg.PprofBindAddress, "pprof-bind-address", "0", `address of Go's /debug/pprof profiles, unauthenticated: bind it to 127.0.0.1 ("0" disables it)`)

	fs.BoolVar(&cfg.LeaderElect, "leader-elect", false, "elect one replica to run the reconcilers (Lease "+LeaderElectionID+" in $POD_NAMESPACE)")
	fs.DurationVar(&cfg.ResyncPeriod, "resync-period", DefaultResync, "how often every syncer is reconciled against Eureka")
	fs.DurationVar(&cfg.EurekaTimeout, "eureka-timeout", DefaultEurekaTimeout, "bound on one reconciler request to one Eureka server, after which the next URL is tried")
	fs.StringSliceVar(&cfg.PodCIDRs, "pod-cidr", nil, "range of this cluster's pod IPs, either family: an EurekaImport writes no address inside it but pods' of namespaces that may register the app (repeatable or comma-separated; default: the nodes' spec.podCIDRs)")
	fs.StringSliceVar(&cfg.ServiceCIDRs, "service-cidr", nil, "range of this cluster's ClusterIPs, either family: an EurekaImport writes no address inside it (repeatable or comma-separated; default: the ServiceCIDR objects, else the /12 or /108 around Service default/kubernetes' ClusterIP)")
	fs.IntVar(&cfg.MaxPatternApps, "max-pattern-apps", controller.DefaultMaxPatternApps, "most apps one pattern EurekaImport (spec.app with '*') imports; past it the first are kept and the rest named in its AppsWithinCap condition")
	fs.IntVar(&cfg.MaxServerSets, "max-eureka-server-sets", controller.DefaultMaxServerSets, "most distinct Eureka server sets (in canonical form, with their credentials and TLS material) whose registries the manager holds at once, each a copy of a registry; a syncer or import past it reads nothing and says so in its EurekaReachable condition")
	fs.DurationVar(&cfg.ClaimHold, "claim-hold", controller.DefaultClaimHold, "how long an EurekaAppClaim is held for a namespace that registers its app no more, before another namespace may claim it")
	fs.StringVar(&cfg.GatewayAudience, "gateway-audience", "", "audience of the projected ServiceAccount token injected into every registrar that talks to the --eureka-url servers, sent to Eurekube's gateway as its identity (the gateway's --audience, such as eurekube-gateway; default: none)")
	fs.StringVar(&cfg.GatewayTokenFile, "gateway-token-file", "", "file with the manager's own projected ServiceAccount token for Eurekube's gateway, which the reconciler sends to the --eureka-url servers, read again when it changes (default: none)")

	fs.StringVar(&cfg.LogLevel, "log-level", "info", "log level: debug, info, warn or error")

	if err := fs.Parse(args); err != nil {
		return Config{}, err
	}
	if fs.NArg() > 0 {
		return Config{}, fmt.Errorf("unexpected arguments %q: the manager takes flags only", fs.Args())
	}
	return cfg, cfg.Validate()
}

// Validate reports every invalid setting at once.
func (c Config) Validate() error {
	var errs []error
	if c.RegistrarImage == "" {
		errs = append(errs, errors.New("--registrar-image is required"))
	}
	for _, u := range c.EurekaURLs {
		if err := validateEurekaURL(u); err != nil {
			errs = append(errs, err)
		}
	}
	if _, err := c.allowlists(); err != nil {
		errs = append(errs, err)
	}
	if c.DefaultDrainSeconds < 0 || c.DefaultDrainSeconds > 3600 {
		errs = append(errs, fmt.Errorf("--default-drain %d: want 0 to 3600 seconds", c.DefaultDrainSeconds))
	}
	errs = append(errs, c.validateCertificates()...)
	if c.WebhookPort < 1 || c.WebhookPort > 65535 {
		errs = append(errs, fmt.Errorf("--webhook-port %d: want 1 to 65535", c.WebhookPort))
	}
	if c.ResyncPeriod <= 0 {
		errs = append(errs, fmt.Errorf("--resync-period %s: want a positive duration such as 30s", c.ResyncPeriod))
	}
	if c.ClaimHold < time.Minute {
		errs = append(errs, fmt.Errorf("--claim-hold %s: want at least 1m, longer than a syncer takes to be deleted and made again (default %s)", c.ClaimHold, controller.DefaultClaimHold))
	}
	if _, err := parseCIDRs("--pod-cidr", c.PodCIDRs); err != nil {
		errs = append(errs, err)
	}
	if _, err := parseCIDRs("--service-cidr", c.ServiceCIDRs); err != nil {
		errs = append(errs, err)
	}
	if c.MaxServerSets < 1 {
		errs = append(errs, fmt.Errorf("--max-eureka-server-sets %d: want at least 1 (the --eureka-url servers are one; default %d)", c.MaxServerSets, controller.DefaultMaxServerSets))
	}
	if c.MaxPatternApps < 0 {
		errs = append(errs, fmt.Errorf("--max-pattern-apps %d: want a positive number of apps (0: the default, %d)", c.MaxPatternApps, controller.DefaultMaxPatternApps))
	}
	if c.EurekaTimeout <= 0 || c.EurekaTimeout > time.Minute {
		errs = append(errs, fmt.Errorf("--eureka-timeout %s: want a duration from 1ms to 1m, such as 5s", c.EurekaTimeout))
	}
	if msgs := content.IsPathSegmentName(c.CredentialsClusterRole); c.CredentialsClusterRole == "" || len(msgs) > 0 {
		errs = append(errs, fmt.Errorf("--credentials-cluster-role %q: want the name of a ClusterRole%s", c.CredentialsClusterRole, strings.Join(append([]string{""}, msgs...), ": ")))
	}
	if _, err := logrus.ParseLevel(c.LogLevel); err != nil {
		errs = append(errs, fmt.Errorf("--log-level %q: want debug, info, warn or error", c.LogLevel))
	}
	errs = append(errs, c.validateGateway()...)
	if c.LeaderElect && c.Namespace == "" {
		errs = append(errs, errors.New("--leader-elect needs the manager's namespace in POD_NAMESPACE (the downward API sets it in manifests/manager)"))
	}
	return errors.Join(errs...)
}

// validateGateway checks the gateway flags. The tokens go to the
// --eureka-url servers alone (where the gateway answers), so either flag
// without them would send nothing.
func (c Config) validateGateway() []error {
	var errs []error
	if strings.ContainsFunc(c.GatewayAudience, unicode.IsSpace) || strings.Contains(c.GatewayAudience, ",") {
		errs = append(errs, fmt.Errorf("--gateway-audience %q: want one audience, without spaces or commas, such as eurekube-gateway", c.GatewayAudience))
	}
	if c.GatewayTokenFile != "" && !filepath.IsAbs(c.GatewayTokenFile) {
		errs = append(errs, fmt.Errorf("--gateway-token-file %q: want an absolute path, such as /var/run/secrets/eurekube.io/gateway/token", c.GatewayTokenFile))
	}
	for _, f := range []struct{ flag, value string }{{"--gateway-audience", c.GatewayAudience}, {"--gateway-token-file", c.GatewayTokenFile}} {
		if f.value != "" && len(c.EurekaURLs) == 0 {
			errs = append(errs, fmt.Errorf("%s needs --eureka-url, the gateway's address: the token goes to those servers alone", f.flag))
		}
	}
	return errs
}

// parseCIDRs parses a range flag's values; an error names the flag and
// each bad value.
func parseCIDRs(flag string, values []string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	var errs []error
	for _, v := range values {
		p, err := netip.ParsePrefix(strings.TrimSpace(v))
		if err != nil {
			errs = append(errs, fmt.Errorf("%s %q: want a range such as 10.244.0.0/16 or fd00:10:244::/56", flag, v))
			continue
		}
		out = append(out, p.Masked())
	}
	return out, errors.Join(errs...)
}

// podCIDRs and serviceCIDRs are the range flags, parsed (Validate has
// refused bad ones).
func (c Config) podCIDRs() []netip.Prefix {
	p, _ := parseCIDRs("--pod-cidr", c.PodCIDRs)
	return p
}

func (c Config) serviceCIDRs() []netip.Prefix {
	p, _ := parseCIDRs("--service-cidr", c.ServiceCIDRs)
	return p
}

// allowlists parses the allowlist flags; an error names the flag and the
// pattern of each bad one.
func (c Config) allowlists() (webhook.Allowlists, error) {
	var errs []error
	for _, p := range c.AllowedRegistrarImages {
		if _, err := allowlist.ParseImages([]string{p}); err != nil {
			errs = append(errs, fmt.Errorf("--%s %w", allowlist.ImagesFlag, err))
		}
	}
	for _, p := range c.AllowedEurekaHosts {
		if _, err := allowlist.ParseHosts([]string{p}); err != nil {
			errs = append(errs, fmt.Errorf("--%s %w", allowlist.HostsFlag, err))
		}
	}
	if len(errs) > 0 {
		return webhook.Allowlists{}, errors.Join(errs...)
	}
	images, _ := allowlist.ParseImages(c.AllowedRegistrarImages)
	hosts, _ := allowlist.ParseHosts(c.AllowedEurekaHosts)
	return webhook.Allowlists{RegistrarImages: images, EurekaHosts: hosts}, nil
}

// Grant is how a namespace lets this manager read its syncers' Eureka
// credentials.
func (c Config) Grant() v1alpha1.ReadGrant {
	return v1alpha1.ReadGrant{ClusterRole: c.CredentialsClusterRole, ServiceAccountNamespace: c.Namespace, ServiceAccountName: c.ServiceAccount}
}

func (c Config) validateCertificates() []error {
	var errs []error
	switch c.CertificateMode {
	case CertificateModeCertManager, "": // "": a Config built without ParseFlags
		if c.CertDir == "" {
			errs = append(errs, errors.New("--cert-dir is required"))
		}
	case CertificateModeSelfManaged:
		if c.Namespace == "" {
			errs = append(errs, errors.New("--certificate-mode="+CertificateModeSelfManaged+" needs the manager's namespace in POD_NAMESPACE (the downward API sets it in manifests/manager)"))
		}
		names := []struct {
			flag, value string
			check       func(string) []string
		}{
			{"--webhook-configuration", c.WebhookConfiguration, validation.IsDNS1123Subdomain},
			{"--webhook-service", c.WebhookService, validation.IsDNS1035Label},
			{"--certificate-secret", c.CertificateSecret, validation.IsDNS1123Subdomain},
		}
		for _, n := range names {
			if msgs := n.check(n.value); len(msgs) > 0 {
				errs = append(errs, fmt.Errorf("%s %q: want the name of an object: %s", n.flag, n.value, strings.Join(msgs, "; ")))
			}
		}
	default:
		errs = append(errs, fmt.Errorf("--certificate-mode %q: want %s or %s", c.CertificateMode, CertificateModeCertManager, CertificateModeSelfManaged))
	}
	return errs
}

// validateEurekaURL refuses at start-up what the registrar and the CRD
// refuse, a password in the URL included: credentials come from each
// syncer's Secret.
func validateEurekaURL(raw string) error {
	if err := eureka.CheckServerURL(raw); err != nil {
		return fmt.Errorf("--eureka-url %q: %w", eureka.Redact(raw), err)
	}
	return nil
}
