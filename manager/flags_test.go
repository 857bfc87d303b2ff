package manager

import (
	"errors"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/eurekube/eurekube/internal/builders"
)

func TestParseFlags_DefaultsAreTheDocumentedOnes(t *testing.T) {
	t.Setenv("POD_NAMESPACE", "eurekube-system")
	cfg, err := ParseFlags([]string{"--registrar-image=eurekube/registrar:dev"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	checks := []struct {
		flag      string
		got, want any
	}{
		{"--default-drain", cfg.DefaultDrainSeconds, int32(100)},
		{"--resync-period", cfg.ResyncPeriod, 30 * time.Second},
		{"--eureka-timeout", cfg.EurekaTimeout, 5 * time.Second},
		{"--claim-hold", cfg.ClaimHold, 24 * time.Hour},
		{"--max-eureka-server-sets", cfg.MaxServerSets, 32},
		{"--webhook-port", cfg.WebhookPort, 9443},
		{"--cluster-id", cfg.ClusterID, ""},
		{"--exec-sleep-fallback", cfg.ExecSleepFallback, false},
		{"--leader-elect", cfg.LeaderElect, false},
		{"--metrics-secure", cfg.MetricsSecure, true},
		{"--log-level", cfg.LogLevel, "info"},
		{"--excluded-namespace", strings.Join(cfg.ExcludedNamespaces, ","), "kube-system"},
		{"--allowed-registrar-image", len(cfg.AllowedRegistrarImages), 0},
		{"--allowed-eureka-host", len(cfg.AllowedEurekaHosts), 0},
		{"--certificate-mode", cfg.CertificateMode, "cert-manager"},
		{"--webhook-configuration", cfg.WebhookConfiguration, "eurekube"},
		{"--webhook-service", cfg.WebhookService, "eurekube-webhook"},
		{"--certificate-secret", cfg.CertificateSecret, "eurekube-webhook-tls"},
		{"--credentials-cluster-role", cfg.CredentialsClusterRole, "eurekube-eureka-credentials"},
		{"--gateway-audience", cfg.GatewayAudience, ""},
		{"--gateway-token-file", cfg.GatewayTokenFile, ""},
		{"POD_NAMESPACE", cfg.Namespace, "eurekube-system"},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s = %v, want %v", c.flag, c.got, c.want)
		}
	}
}

func TestParseFlags_EurekaURLsAreRepeatableAndCommaSeparated(t *testing.T) {
	cfg, err := ParseFlags([]string{
		"--registrar-image=r:1",
		"--eureka-url=http://a:8761/eureka,http://b:8761/eureka",
		"--eureka-url=https://c/eureka",
	}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	want := "http://a:8761/eureka http://b:8761/eureka https://c/eureka"
	if got := strings.Join(cfg.EurekaURLs, " "); got != want {
		t.Fatalf("--eureka-url = %s, want %s", got, want)
	}
}

func TestParseFlags_RefusesInvalidSettingsNamingTheFlag(t *testing.T) {
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"no registrar image", nil, "--registrar-image is required"},
		{"relative Eureka URL", []string{"--eureka-url=eureka:8761"}, `--eureka-url "eureka:8761": want an absolute http:// or https:// URL`},
		{"Eureka URL with a password", []string{"--eureka-url=http://eureka:s3cret@e:8761/eureka"}, `--eureka-url "http://eureka:xxxxx@e:8761/eureka": must not carry credentials (user:password@): put them in a Secret named by spec.eureka.credentialsSecretRef`},
		{"Eureka URL with a user", []string{"--eureka-url=http://eureka@e:8761/eureka"}, `--eureka-url "http://eureka@e:8761/eureka": must not carry credentials`},
		{"Eureka URL with a query", []string{"--eureka-url=http://e:8761/eureka?zone=a"}, `--eureka-url "http://e:8761/eureka?zone=a": must not carry a query (?) or a fragment (#)`},
		{"Eureka URL with a fragment", []string{"--eureka-url=http://e:8761/eureka#x"}, `--eureka-url "http://e:8761/eureka#x": must not carry a query (?) or a fragment (#)`},
		{"no server set", []string{"--max-eureka-server-sets=0"}, "--max-eureka-server-sets 0: want at least 1"},
		{"negative drain", []string{"--default-drain=-1"}, "--default-drain -1: want 0 to 3600"},
		{"drain above an hour", []string{"--default-drain=3601"}, "--default-drain 3601: want 0 to 3600"},
		{"port 0", []string{"--webhook-port=0"}, "--webhook-port 0: want 1 to 65535"},
		{"zero resync", []string{"--resync-period=0s"}, "--resync-period 0s: want a positive duration"},
		{"zero Eureka timeout", []string{"--eureka-timeout=0s"}, "--eureka-timeout 0s: want a duration from 1ms to 1m"},
		{"Eureka timeout above a minute", []string{"--eureka-timeout=2m"}, "--eureka-timeout 2m0s: want a duration from 1ms to 1m"},
		{"claim hold shorter than a syncer's re-creation", []string{"--claim-hold=10s"}, "--claim-hold 10s: want at least 1m"},
		{"unknown log level", []string{"--log-level=loud"}, `--log-level "loud"`},
		{"leader election without a namespace", []string{"--leader-elect"}, "--leader-elect needs the manager's namespace in POD_NAMESPACE"},
		{"unknown certificate mode", []string{"--certificate-mode=vault"}, `--certificate-mode "vault": want cert-manager or self-managed`},
		{"self-managed without a namespace", []string{"--certificate-mode=self-managed"}, "--certificate-mode=self-managed needs the manager's namespace in POD_NAMESPACE"},
		{"webhook configuration not a name", []string{"--certificate-mode=self-managed", "--webhook-configuration=Eurekube!"}, `--webhook-configuration "Eurekube!": want the name of an object`},
		{"webhook service not a name", []string{"--certificate-mode=self-managed", "--webhook-service=eurekube.webhook"}, `--webhook-service "eurekube.webhook": want the name of an object`},
		{"empty certificate Secret", []string{"--certificate-mode=self-managed", "--certificate-secret="}, `--certificate-secret "": want the name of an object`},
		{"empty credentials ClusterRole", []string{"--credentials-cluster-role="}, `--credentials-cluster-role "": want the name of a ClusterRole`},
		{"credentials ClusterRole with a slash", []string{"--credentials-cluster-role=a/b"}, `--credentials-cluster-role "a/b": want the name of a ClusterRole: may not contain '/'`},
		{"registrar image pattern with an inner star", []string{"--allowed-registrar-image=registry.example.com/team*"}, `--allowed-registrar-image "registry.example.com/team*": want an image reference prefix ending in "/", ":" or "@" before the "*"`},
		{"registrar image pattern not a reference", []string{"--allowed-registrar-image=r:1,Not An Image"}, `--allowed-registrar-image "Not An Image": want an image reference`},
		{"Eureka host pattern that is a URL", []string{"--allowed-eureka-host=http://eureka:8761"}, `--allowed-eureka-host "http://eureka:8761": `},
		{"Eureka host pattern with port 0", []string{"--allowed-eureka-host=eureka:0"}, `--allowed-eureka-host "eureka:0": port "0": want 1 to 65535`},
		{"gateway audience with a space", []string{"--eureka-url=http://gateway:8761/eureka", "--gateway-audience=eurekube gateway"}, `--gateway-audience "eurekube gateway": want one audience`},
		{"gateway audiences, a list", []string{"--eureka-url=http://gateway:8761/eureka", "--gateway-audience=a,b"}, `--gateway-audience "a,b": want one audience`},
		{"gateway audience without servers", []string{"--gateway-audience=eurekube-gateway"}, "--gateway-audience needs --eureka-url"},
		{"relative gateway token file", []string{"--eureka-url=http://gateway:8761/eureka", "--gateway-token-file=token"}, `--gateway-token-file "token": want an absolute path`},
		{"gateway token file without servers", []string{"--gateway-token-file=/var/run/secrets/eurekube.io/gateway/token"}, "--gateway-token-file needs --eureka-url"},
		{"stray argument", []string{"--registrar-image=r:1", "serve"}, `unexpected arguments ["serve"]`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("POD_NAMESPACE", "")
			_, err := ParseFlags(tc.args, io.Discard)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("ParseFlags(%q) = %v, want an error containing %q", tc.args, err, tc.want)
			}
			if strings.Contains(err.Error(), "s3cret") {
				t.Errorf("ParseFlags(%q) = %v: it shows the password", tc.args, err)
			}
		})
	}
}

func TestParseFlags_HelpIsNotAnError(t *testing.T) {
	var usage strings.Builder
	_, err := ParseFlags([]string{"--help"}, &usage)
	if !errors.Is(err, pflag.ErrHelp) {
		t.Fatalf("--help: %v, want pflag.ErrHelp", err)
	}
	if !strings.Contains(usage.String(), "--registrar-image") {
		t.Fatalf("usage does not list the flags:\n%s", usage.String())
	}
}

func TestParseFlags_SelfManagedCertificatesNeedNoCertDir(t *testing.T) {
	t.Setenv("POD_NAMESPACE", "eurekube-system")
	cfg, err := ParseFlags([]string{"--registrar-image=r:1", "--certificate-mode=self-managed", "--cert-dir="}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.CertificateMode != CertificateModeSelfManaged {
		t.Fatalf("--certificate-mode = %q", cfg.CertificateMode)
	}
}

// The flags' defaults name the objects of manifests/: one fact, two
// homes, compared here.
func TestCertificateDefaults_NameTheManifestsObjects(t *testing.T) {
	checks := []struct {
		file, want string
	}{
		{"../manifests/webhook/mutating_webhook.yaml", "name: " + DefaultWebhookConfiguration + "\n"},
		{"../manifests/webhook/service.yaml", "name: " + DefaultWebhookService + "\n"},
		{"../manifests/certmanager/certificates.yaml", "secretName: " + DefaultCertificateSecret + "\n"},
		{"../manifests/certmanager/certificates.yaml", "- " + ServiceDNSNames(DefaultWebhookService, "eurekube-system")[0] + "\n"},
		{"../manifests/certmanager/certificates.yaml", "- " + ServiceDNSNames(DefaultWebhookService, "eurekube-system")[1] + "\n"},
	}
	for _, c := range checks {
		data, err := os.ReadFile(c.file)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(data), c.want) {
			t.Errorf("%s has no %q", c.file, strings.TrimSpace(c.want))
		}
	}
}

// By default a syncer may name the manager's own registrar image and
// Eureka servers only; the allowlist flags, repeatable or comma-separated,
// add to them, and reach the webhook and the reconciler in their defaults.
func TestParseFlags_AllowlistsReachTheWebhookDefaults(t *testing.T) {
	syncer := builders.Syncer("shop", "orders",
		builders.RegistrarImage("registry.example.com/eurekube/registrar:v2"),
		builders.EurekaURLs("http://eureka:8761/eureka", "http://eureka-0.eureka.eureka.svc:8761/eureka"))
	own := []string{"--registrar-image=eurekube/registrar:dev", "--eureka-url=http://eureka:8761/eureka"}

	cfg, err := ParseFlags(own, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	err = WebhookDefaults(cfg, "c").CheckAllowed(syncer)
	for _, refused := range []string{`spec.sidecar.image "registry.example.com/eurekube/registrar:v2"`, "spec.eureka.serviceURLs[1] names host eureka-0.eureka.eureka.svc:8761"} {
		if err == nil || !strings.Contains(err.Error(), refused) {
			t.Errorf("by default, CheckAllowed = %v, want it to refuse %s", err, refused)
		}
	}
	if err != nil && strings.Contains(err.Error(), "serviceURLs[0]") {
		t.Errorf("the manager's own server is refused: %v", err)
	}

	cfg, err = ParseFlags(append(own,
		"--allowed-registrar-image=registry.example.com/eurekube/*",
		"--allowed-eureka-host=10.0.0.7,*.eureka.svc:8761"), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if err := WebhookDefaults(cfg, "c").CheckAllowed(syncer); err != nil {
		t.Errorf("with the allowlists, CheckAllowed = %v", err)
	}
}

// The gateway audience reaches the webhook's defaults, so every registrar
// of the manager's servers is given a token for it; without the flag the
// webhook injects none.
func TestParseFlags_GatewayAudienceReachesTheWebhookDefaults(t *testing.T) {
	own := []string{"--registrar-image=eurekube/registrar:dev", "--eureka-url=http://gateway:8761/eureka"}
	cfg, err := ParseFlags(own, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if got := WebhookDefaults(cfg, "c").GatewayAudience; got != "" {
		t.Fatalf("without --gateway-audience, the webhook's audience is %q, want none", got)
	}
	cfg, err = ParseFlags(append(own, "--gateway-audience=eurekube-gateway", "--gateway-token-file=/var/run/secrets/eurekube.io/gateway/token"), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if got := WebhookDefaults(cfg, "c").GatewayAudience; got != "eurekube-gateway" {
		t.Fatalf("the webhook's audience is %q, want eurekube-gateway", got)
	}
	if cfg.GatewayTokenFile != "/var/run/secrets/eurekube.io/gateway/token" {
		t.Fatalf("--gateway-token-file = %q", cfg.GatewayTokenFile)
	}
}
