package admission

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	eurekubev1alpha1 "github.com/eurekube/eurekube/api/v1alpha1"
	"github.com/eurekube/eurekube/certs"
	"github.com/eurekube/eurekube/internal/builders"
	"github.com/eurekube/eurekube/manager"
	"github.com/eurekube/eurekube/tests/harness"
)

// Settings the manager runs with in this suite.
const (
	managerNamespace = "eurekube-system"
	registrarImage   = "eurekube/registrar:test"
	defaultEureka    = "http://127.0.0.1:8761/eureka"
	defaultDrain     = 100
)

// suite is what TestMain started, shared by every test.
var suite struct {
	cp          *harness.ControlPlane
	c           client.Client
	ca          *certs.CA
	certDir     string
	webhookPort int
	logPath     string
	// cfg is the running manager's configuration.
	cfg manager.Config
	// injectionErr says why the API server does not inject pods, if so.
	injectionErr error
	// managerDone is closed when the manager's Run returns.
	managerDone chan struct{}
}

func TestMain(m *testing.M) {
	harness.SkipSuiteWhenShort("a kube-apiserver and etcd")
	code, err := runSuite(m)
	if err != nil {
		fmt.Fprintf(os.Stderr, "admission suite: %v\n", err)
		code = 1
	}
	if suite.logPath != "" {
		if code == 0 {
			os.Remove(suite.logPath)
		} else {
			fmt.Fprintf(os.Stderr, "manager logs: %s\n", suite.logPath)
		}
	}
	os.Exit(code)
}

func runSuite(m *testing.M) (int, error) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	// OwnerReferencesPermissionEnforcement, as OpenShift runs it: the
	// manager's owner references on its imports' Services and slices pass
	// it with the shipped RBAC (vap_test.go).
	cp, err := harness.StartControlPlane(ctx, harness.ControlPlaneOptions{AdmissionPlugins: []string{"OwnerReferencesPermissionEnforcement"}})
	if err != nil {
		return 0, err
	}
	defer cp.Stop()
	suite.cp, suite.c = cp, cp.Client

	tmp, err := os.MkdirTemp("", "eurekube-admission-")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(tmp)
	suite.certDir = filepath.Join(tmp, "certs")
	if suite.ca, err = certs.Bootstrap(suite.certDir, certs.LocalHosts()); err != nil {
		return 0, err
	}

	// The manager's namespace holds its leader election Lease.
	if err := cp.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: managerNamespace}}); err != nil {
		return 0, err
	}
	// Many tests run the same app in namespaces of their own; the tenancy
	// tests remove it for their run.
	if err := harness.ShareEveryApp(ctx, cp.Client); err != nil {
		return 0, err
	}
	stop, err := startManager(ctx)
	if err != nil {
		return 0, err
	}
	defer stop()

	if err := cp.InstallWebhook(ctx, harness.LocalWebhook{Port: suite.webhookPort, CABundle: suite.ca.PEM}); err != nil {
		return 0, err
	}
	// Tests that need injection fail with this error; the others (CRD
	// validation, manifests) still run and report.
	suite.injectionErr = waitForInjection(ctx)
	return m.Run(), nil
}

// startManager runs the manager in-process from its own flags, as
// cmd/manager would, and waits until /readyz passes.
func startManager(ctx context.Context) (stop func(), err error) {
	if suite.webhookPort, err = harness.FreePort(); err != nil {
		return nil, err
	}
	healthPort, err := harness.FreePort()
	if err != nil {
		return nil, err
	}
	// The log outlives the suite's temporary directory, for a failed run
	// to be read; a passing run removes it.
	logFile, err := os.CreateTemp("", "eurekube-admission-manager-*.log")
	if err != nil {
		return nil, err
	}
	suite.logPath = logFile.Name()
	os.Setenv("POD_NAMESPACE", managerNamespace)
	cfg, err := manager.ParseFlags([]string{
		"--registrar-image=" + registrarImage,
		"--eureka-url=" + defaultEureka,
		// The Eureka server the TLS story's syncer names, as a platform team
		// allows its own (allowlist_test.go refuses others).
		"--allowed-eureka-host=eureka.corp.example",
		"--default-drain=" + strconv.Itoa(defaultDrain),
		"--cert-dir=" + suite.certDir,
		"--webhook-host=127.0.0.1",
		"--webhook-port=" + strconv.Itoa(suite.webhookPort),
		"--metrics-bind-address=0",
		"--health-probe-bind-address=127.0.0.1:" + strconv.Itoa(healthPort),
		"--leader-elect",
		"--log-level=debug",
	}, io.Discard)
	if err != nil {
		return nil, fmt.Errorf("manager flags: %w", err)
	}
	cfg.RestConfig, cfg.LogOutput = suite.cp.Config, logFile
	suite.cfg = cfg

	mctx, cancel := context.WithCancel(ctx)
	suite.managerDone = make(chan struct{})
	runErr := make(chan error, 1)
	go func() {
		defer close(suite.managerDone)
		runErr <- manager.Run(mctx, cfg)
	}()
	// The log file stays open: the manager's last goroutines may still
	// write while it shuts down.
	stop = func() {
		cancel()
		<-suite.managerDone
	}

	readyz := "http://127.0.0.1:" + strconv.Itoa(healthPort) + "/readyz"
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		select {
		case err := <-runErr:
			return false, fmt.Errorf("manager stopped before it was ready: %w", err)
		default:
		}
		resp, err := http.Get(readyz)
		if err != nil {
			return false, nil
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
	if err != nil {
		stop()
		return nil, fmt.Errorf("manager not ready at %s: %w", readyz, err)
	}
	return stop, nil
}

// waitForInjection returns once the API server calls the webhook: the
// webhook configuration reaches the API server's admission chain through
// an informer, a moment after it is created.
func waitForInjection(ctx context.Context) error {
	ns := optedInNamespace(ctx, nil, "warm-up")
	if err := suite.c.Create(ctx, builders.Syncer(ns, "warm-up")); err != nil {
		return err
	}
	var last error
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		p := builders.Pod(ns, "warm-up", builders.Restricted())
		if err := suite.c.Create(ctx, p, client.DryRunAll); err != nil {
			if ctx.Err() == nil {
				last = err
			}
			return false, nil
		}
		last = errors.New("the dry-run pod came back without the registrar")
		return eurekubev1alpha1.RunsRegistrar(p), nil
	})
	if err != nil {
		return fmt.Errorf("the API server did not inject a dry-run pod through the webhook within 30s: %v", last)
	}
	return nil
}

// Helpers of the tests; the syncers and pods they create come from
// internal/builders.

// optedInNamespace creates a namespace labelled for injection, with more
// labels when given, and a name unique to the suite run. t may be nil.
func optedInNamespace(ctx context.Context, t testing.TB, prefix string, labels ...string) string {
	l := map[string]string{eurekubev1alpha1.NamespaceInjectionLabel: "enabled"}
	for i := 0; i+1 < len(labels); i += 2 {
		l[labels[i]] = labels[i+1]
	}
	return namespace(ctx, t, prefix, l)
}

func namespace(ctx context.Context, t testing.TB, prefix string, labels map[string]string) string {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix + "-", Labels: labels}}
	if err := suite.c.Create(ctx, ns); err != nil {
		if t == nil {
			panic(err)
		}
		t.Fatalf("create namespace: %v", err)
	}
	return ns.Name
}

// registrar returns the injected container, or nil.
func registrar(p *corev1.Pod) *corev1.Container {
	for i := range p.Spec.Containers {
		if p.Spec.Containers[i].Name == eurekubev1alpha1.RegistrarContainerName {
			return &p.Spec.Containers[i]
		}
	}
	return nil
}

// requireInjection stops a test that needs the webhook when the API server
// does not inject pods through it.
func requireInjection(t *testing.T) {
	t.Helper()
	if suite.injectionErr != nil {
		t.Fatal(suite.injectionErr)
	}
}

func ptr[T any](v T) *T { return &v }

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func createSyncer(t *testing.T, s *eurekubev1alpha1.EurekaSyncer) {
	t.Helper()
	if err := suite.c.Create(testContext(t), s); err != nil {
		t.Fatalf("create syncer: %v", err)
	}
}

// ensureNamespace creates the namespace or sets its labels.
func ensureNamespace(t *testing.T, name string, labels map[string]string) {
	t.Helper()
	ctx := testContext(t)
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if _, err := controllerutil.CreateOrUpdate(ctx, suite.c, ns, func() error {
		if ns.Labels == nil {
			ns.Labels = map[string]string{}
		}
		for k, v := range labels {
			ns.Labels[k] = v
		}
		return nil
	}); err != nil {
		t.Fatalf("namespace %s: %v", name, err)
	}
}

func containerNames(p *corev1.Pod) []string {
	var names []string
	for _, c := range p.Spec.Containers {
		names = append(names, c.Name)
	}
	return names
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}
