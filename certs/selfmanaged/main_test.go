package selfmanaged_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/eurekube/eurekube/certs"
	"github.com/eurekube/eurekube/manager"
	"github.com/eurekube/eurekube/tests/harness"
)

// cp is the API server the manager tests share; nil in -short mode, where
// only the tests that need nothing but Go run. It enforces owner
// references' permissions, as OpenShift does: the leader sets the
// certificate Secret's owner.
var cp *harness.ControlPlane

func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() {
		os.Exit(m.Run())
	}
	var err error
	if cp, err = harness.StartControlPlane(context.Background(), harness.ControlPlaneOptions{
		AdmissionPlugins: []string{"OwnerReferencesPermissionEnforcement"},
	}); err != nil {
		fmt.Fprintf(os.Stderr, "selfmanaged tests: %v\n", err)
		os.Exit(1)
	}
	code := m.Run()
	if err := cp.Stop(); err != nil {
		fmt.Fprintf(os.Stderr, "stop control plane: %v\n", err)
	}
	os.Exit(code)
}

// deadline bounds every wait of these tests: generous for a busy
// two-core machine, far below the test timeout.
const deadline = 40 * time.Second

// env is one test's manager namespace and webhook configuration, each
// unique, so the tests share the API server without meeting.
type env struct {
	t         *testing.T
	namespace string
	webhook   string
	// webhookObject is the configuration as created, to create it again.
	webhookObject *admissionregistrationv1.MutatingWebhookConfiguration
	ctx           context.Context
}

func newEnv(t *testing.T) *env {
	t.Helper()
	harness.SkipWhenShort(t, "a kube-apiserver and etcd")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "eurekube-system-"}}
	if err := cp.Client.Create(ctx, ns); err != nil {
		t.Fatal(err)
	}
	// The manifest's webhook configuration, renamed and pointed at this
	// machine; a namespace selector no namespace matches keeps the API
	// server from calling it for other tests' objects.
	mwc, err := harness.LoadWebhookManifest()
	if err != nil {
		t.Fatal(err)
	}
	mwc.Name = ns.Name
	for i := range mwc.Webhooks {
		url := "https://127.0.0.1:1" + *mwc.Webhooks[i].ClientConfig.Service.Path
		mwc.Webhooks[i].ClientConfig = admissionregistrationv1.WebhookClientConfig{URL: &url}
		mwc.Webhooks[i].NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"eurekube.io/no-such-label": ns.Name}}
	}
	created := mwc.DeepCopy()
	if err := cp.Client.Create(ctx, created); err != nil {
		t.Fatal(err)
	}
	return &env{t: t, namespace: ns.Name, webhook: mwc.Name, webhookObject: mwc, ctx: ctx}
}

// replica is a manager started in-process by manager.Run.
type replica struct {
	webhookPort, healthPort, metricsPort int
	done                                 chan struct{}
	log                                  string // the file it logs to
}

// start runs a manager in self-managed mode from its own flags, as
// cmd/manager would, with leader election on, and waits until /readyz
// passes.
func (e *env) start(lifetimes manager.CertificateLifetimes) *replica {
	e.t.Helper()
	return e.startWith(cp.Config, lifetimes, []string{
		"--registrar-image=eurekube/registrar:test",
		"--certificate-mode=self-managed",
		"--webhook-configuration=" + e.webhook,
		"--leader-elect",
	})
}

// startWith runs a manager with args, then this machine's addresses and
// ports, as the user of restCfg.
func (e *env) startWith(restCfg *rest.Config, lifetimes manager.CertificateLifetimes, args []string) *replica {
	t := e.t
	t.Helper()
	r := &replica{done: make(chan struct{})}
	for _, p := range []*int{&r.webhookPort, &r.healthPort, &r.metricsPort} {
		var err error
		if *p, err = harness.FreePort(); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("POD_NAMESPACE", e.namespace)
	cfg, err := manager.ParseFlags(append(slices.Clone(args),
		"--cluster-id=selfmanaged-test",
		"--webhook-host=127.0.0.1",
		"--webhook-port="+strconv.Itoa(r.webhookPort),
		"--metrics-bind-address=127.0.0.1:"+strconv.Itoa(r.metricsPort),
		"--metrics-secure=false",
		"--health-probe-bind-address=127.0.0.1:"+strconv.Itoa(r.healthPort),
		"--log-level=debug",
	), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	logPath := filepath.Join(t.TempDir(), "manager.log")
	r.log = logPath
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cfg.RestConfig, cfg.LogOutput, cfg.CertificateLifetimes = restCfg, logFile, lifetimes

	ctx, cancel := context.WithCancel(context.Background())
	runErr := make(chan error, 1)
	go func() {
		defer close(r.done)
		runErr <- manager.Run(ctx, cfg)
	}()
	t.Cleanup(func() {
		cancel()
		<-r.done
		data, _ := os.ReadFile(logPath)
		for _, line := range strings.Split(string(data), "\n") {
			if strings.Contains(line, `"part":"certificates"`) && strings.Contains(line, `"level":"error"`) {
				t.Errorf("the manager logged an error about certificates: %s", line)
			}
			if strings.Contains(line, "forbidden") {
				t.Errorf("the manager was refused something: %s", line)
			}
		}
		if t.Failed() {
			t.Logf("manager on port %d logged:\n%s", r.webhookPort, tail(string(data), 60))
		}
		// The log file stays open: controller-runtime's and client-go's
		// global loggers, set by the last manager started, may still write.
	})
	harness.Eventually(t, deadline, "the manager is ready", func() error {
		select {
		case err := <-runErr:
			t.Fatalf("the manager stopped: %v", err)
		default:
		}
		return r.ready()
	})
	return r
}

func (r *replica) ready() error {
	resp, err := http.Get("http://127.0.0.1:" + strconv.Itoa(r.healthPort) + "/readyz")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("/readyz: %s: %s", resp.Status, body)
	}
	return nil
}

// caBundle is what the webhook configuration's first webhook trusts.
func (e *env) caBundle() []byte {
	var mwc admissionregistrationv1.MutatingWebhookConfiguration
	if err := cp.Client.Get(e.ctx, client.ObjectKey{Name: e.webhook}, &mwc); err != nil {
		e.t.Fatal(err)
	}
	return mwc.Webhooks[0].ClientConfig.CABundle
}

// secret is the certificate Secret, nil while there is none.
func (e *env) secret() *corev1.Secret {
	var s corev1.Secret
	err := cp.Client.Get(e.ctx, client.ObjectKey{Namespace: e.namespace, Name: manager.DefaultCertificateSecret}, &s)
	if err != nil {
		return nil
	}
	return &s
}

// handshake connects to r as the API server does through the webhook
// Service: trusting only the caBundle of the webhook configuration, for
// the Service's name. It returns the certificate served.
func (e *env) handshake(r *replica) (*x509.Certificate, error) {
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(e.caBundle()) {
		return nil, errors.New("the caBundle holds no certificate")
	}
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp",
		net.JoinHostPort("127.0.0.1", strconv.Itoa(r.webhookPort)),
		&tls.Config{RootCAs: roots, ServerName: manager.ServiceDNSNames(manager.DefaultWebhookService, e.namespace)[0]})
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0], nil
}

// waitForCertificates waits until the Secret holds a key pair and the
// caBundle is the Secret's ca.crt, and returns the Secret.
func (e *env) waitForCertificates() *corev1.Secret {
	var s *corev1.Secret
	harness.Eventually(e.t, deadline, "the leader stores the certificates and patches the caBundle", func() error {
		if s = e.secret(); s == nil {
			return errors.New("no Secret " + manager.DefaultCertificateSecret)
		}
		for _, k := range []string{certs.CAFile, certs.CAKeyFile, certs.CertFile, certs.KeyFile} {
			if len(s.Data[k]) == 0 {
				return fmt.Errorf("the Secret has no %s", k)
			}
		}
		if !bytes.Equal(e.caBundle(), s.Data[certs.CAFile]) {
			return errors.New("the caBundle is not the Secret's ca.crt")
		}
		return nil
	})
	return s
}

func leaf(t *testing.T, s *corev1.Secret) *x509.Certificate {
	t.Helper()
	c, err := certs.LoadServing(s.Data[certs.CertFile], s.Data[certs.KeyFile])
	if err != nil {
		t.Fatal(err)
	}
	return c.Cert
}

func tail(s string, lines int) string {
	l := strings.Split(s, "\n")
	if len(l) > lines {
		l = l[len(l)-lines:]
	}
	return strings.Join(l, "\n")
}
