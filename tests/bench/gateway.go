package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/sirupsen/logrus"
	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/eurekube/eurekube/api/v1alpha1"
	"github.com/eurekube/eurekube/eureka"
	"github.com/eurekube/eurekube/gateway"
	"github.com/eurekube/eurekube/sidecar"
	"github.com/eurekube/eurekube/tests/harness"
)

// The gateway phase (issue 43) measures Eurekube's Eureka gateway as it
// runs in a cluster: the manager binary's `gateway` command, a process of
// its own with its informers, in front of a Eureka server that takes
// requests only with the credentials the gateway holds, beside that same
// server reached directly. Out of process, so that the CPU it spends is
// read from /proc as the Eureka server's (JVM) is, without the load
// generators', which run in this process.

// GatewayOptions configure MeasureGateway.
type GatewayOptions struct {
	// ManagerBinary is the built ./cmd/manager; `manager gateway` runs it
	// as the gateway.
	ManagerBinary string
	WorkDir       string
	Sizes         GatewaySizes
	Log           logrus.FieldLogger
}

// GatewaySizes are the counts and windows of the gateway phase.
type GatewaySizes struct {
	// Instances in the registry every read answers, 10 to an app.
	Instances int
	// Samples of each operation, on each path, for the latencies.
	Samples int
	// NewTokens: registrations each with a token the gateway has not seen.
	NewTokens int
	// ReadClients ask one read over and over on each path, ReadWarmup
	// first, then ReadDuration per path in each of ReadRounds rounds.
	ReadClients              int
	ReadWarmup, ReadDuration time.Duration
	ReadRounds               int
	// Pollers, Spring-like clients, fetch the delta every PollInterval
	// (Spring's 30 s, scaled down) for PollWindow, through the gateway and
	// then directly.
	Pollers                  int
	PollInterval, PollWindow time.Duration
}

const (
	// gatewayApp is the app the measured writes write.
	gatewayApp = "bench-gateway"
	// gatewayPodNamespace holds the pod whose token writes gatewayApp.
	gatewayPodNamespace = "bench-gateway"
	// gatewayNamespace is the gateway's own: the client Secrets, and the
	// manager's ServiceAccount and pod.
	gatewayNamespace    = "eurekube-system"
	gatewayManagerSA    = "eurekube-manager"
	gatewayClientSecret = "bench-vm-client"
	gatewayClusterID    = "bench-cluster"
	gatewayAppPort      = 8080
	// registryAppSize is how many instances each app of the registry has.
	registryAppSize = 10
	// springFetchInterval is a Spring Cloud Eureka client's registry fetch
	// interval (eureka.client.registry-fetch-interval-seconds).
	springFetchInterval = 30 * time.Second
)

// gatewayEurekaAuth are the credentials only the gateway holds: the Eureka
// server takes no request without them.
var gatewayEurekaAuth = harness.EurekaAuth{Username: "eurekube-gateway", Password: "held-by-the-gateway-only"}

// gatewayClientAuth are a VM client's, in gatewayClientSecret.
var gatewayClientAuth = harness.EurekaAuth{Username: "vm-client", Password: "the-vm-clients-own"}

// MeasureGateway adds the gateway's figures to r: the latency it adds to
// each operation, the reads it serves per core beside Eureka's own, and
// the requests that reach Eureka from 1,000 polling clients through it
// against directly.
func MeasureGateway(ctx context.Context, o GatewayOptions, r *Results) error {
	eurekaDir := filepath.Join(o.WorkDir, "eureka")
	if err := os.MkdirAll(eurekaDir, 0o755); err != nil {
		return fmt.Errorf("gateway phase: %w", err)
	}
	server, err := harness.StartEureka(ctx, harness.EurekaOptions{
		// Eureka's production timings: the read-only response cache that
		// serves every polled read, refreshed every 30 s.
		Profile: harness.ProfileReal, LogDir: eurekaDir, Auth: &gatewayEurekaAuth,
	})
	if err != nil {
		return err
	}
	defer func() { _ = server.Stop() }()
	eurekaPID, err := eurekaPid(server.Addr())
	if err != nil {
		return err
	}
	cp, err := harness.StartControlPlane(ctx, harness.ControlPlaneOptions{})
	if err != nil {
		return err
	}
	defer func() { _ = cp.Stop() }()
	fx, err := makeGatewayFixtures(ctx, cp)
	if err != nil {
		return err
	}
	direct, err := eureka.New(eureka.Options{URLs: []string{server.URL()}, Username: gatewayEurekaAuth.Username, Password: gatewayEurekaAuth.Password, Timeout: 10 * time.Second, Logger: o.Log})
	if err != nil {
		return err
	}
	if err := fillRegistry(ctx, direct, o.Sizes.Instances); err != nil {
		return err
	}
	if err := waitRegistryListed(ctx, direct, o.Sizes.Instances); err != nil {
		return err
	}

	gw, err := startGatewayProcess(ctx, o, cp, server.URL(), "gateway")
	if err != nil {
		return err
	}
	lat, err := measureGatewayLatency(ctx, o, server, gw, fx)
	if err != nil {
		_ = gw.Stop()
		return err
	}
	addLatencyFigures(r, o.Sizes, lat)
	if lat.statusRefused != "" {
		// The other figures stand; the report lists this beside the
		// failed phases, and the run fails.
		r.Fail(PhaseGateway, fmt.Errorf("the gateway refused the status override of the manager's pod (--manager-service-account=%s/%s), so its figures are missing: %s", gatewayNamespace, gatewayManagerSA, strings.TrimSpace(lat.statusRefused)))
	}
	reads, err := measureReadsPerCore(ctx, o, server, eurekaPID, gw)
	_ = gw.Stop()
	if err != nil {
		return err
	}
	addReadsPerCoreFigures(r, o.Sizes, reads)

	polls, err := measurePollers(ctx, o, cp, server)
	if err != nil {
		return err
	}
	addPollerFigure(r, o.Sizes, polls)
	return nil
}

// gatewayFixtures are the identities the measured writes carry.
type gatewayFixtures struct {
	// pod is in gatewayPodNamespace, which an EurekaAppPolicy grants
	// gatewayApp; manager is the manager's pod (status overrides are its
	// alone).
	pod, manager *corev1.Pod
	// podToken and managerToken are their projected tokens for the
	// gateway's audience.
	podToken, managerToken string
	cp                     *harness.ControlPlane
}

// makeGatewayFixtures creates the namespaces, ServiceAccounts and pods
// (with the IPs a kubelet would give them), the policy granting
// gatewayApp to the pod's namespace and binding it to a VM client's
// Secret, and the pods' tokens.
func makeGatewayFixtures(ctx context.Context, cp *harness.ControlPlane) (*gatewayFixtures, error) {
	k8s := cp.Client
	for _, ns := range []string{gatewayPodNamespace, gatewayNamespace} {
		if err := k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil && !apierrors.IsAlreadyExists(err) {
			return nil, fmt.Errorf("namespace %s: %w", ns, err)
		}
	}
	fx := &gatewayFixtures{cp: cp}
	var err error
	if fx.pod, err = benchPodAt(ctx, k8s, gatewayPodNamespace, "app", "orders-0", "10.244.1.10"); err != nil {
		return nil, err
	}
	if fx.manager, err = benchPodAt(ctx, k8s, gatewayNamespace, gatewayManagerSA, "eurekube-manager-0", "10.244.0.5"); err != nil {
		return nil, err
	}
	policy := &v1alpha1.EurekaAppPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "bench-gateway"},
		Spec:       v1alpha1.EurekaAppPolicySpec{Apps: []string{gatewayApp}, Namespaces: []string{gatewayPodNamespace}, ClientSecrets: []string{gatewayClientSecret}},
	}
	if err := k8s.Create(ctx, policy); err != nil {
		return nil, fmt.Errorf("EurekaAppPolicy: %w", err)
	}
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: gatewayNamespace, Name: gatewayClientSecret},
		Type:       corev1.SecretTypeBasicAuth,
		StringData: map[string]string{corev1.BasicAuthUsernameKey: gatewayClientAuth.Username, corev1.BasicAuthPasswordKey: gatewayClientAuth.Password},
	}
	if err := k8s.Create(ctx, secret); err != nil {
		return nil, fmt.Errorf("client Secret: %w", err)
	}
	if fx.podToken, err = fx.token(ctx, fx.pod); err != nil {
		return nil, err
	}
	if fx.managerToken, err = fx.token(ctx, fx.manager); err != nil {
		return nil, err
	}
	return fx, nil
}

// benchPodAt creates a pod of ServiceAccount sa with ip in its status, as
// the API server knows a running pod (no kubelet runs it).
func benchPodAt(ctx context.Context, k8s client.Client, ns, sa, name, ip string) (*corev1.Pod, error) {
	if err := k8s.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: sa}}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("ServiceAccount %s/%s: %w", ns, sa, err)
	}
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.PodSpec{
			ServiceAccountName: sa, AutomountServiceAccountToken: ptr.To(false),
			Containers: []corev1.Container{{Name: "app", Image: "example.com/app:1"}},
		},
	}
	if err := k8s.Create(ctx, p); err != nil {
		return nil, fmt.Errorf("pod %s/%s: %w", ns, name, err)
	}
	p.Status.PodIP, p.Status.PodIPs, p.Status.Phase = ip, []corev1.PodIP{{IP: ip}}, corev1.PodRunning
	if err := k8s.Status().Update(ctx, p); err != nil {
		return nil, fmt.Errorf("pod %s/%s status: %w", ns, name, err)
	}
	return p, nil
}

// token is a new projected token of pod, bound to it, for the gateway's
// audience: what the kubelet mounts for the registrar.
func (fx *gatewayFixtures) token(ctx context.Context, pod *corev1.Pod) (string, error) {
	tr := &authnv1.TokenRequest{Spec: authnv1.TokenRequestSpec{
		Audiences: []string{gateway.DefaultAudience}, ExpirationSeconds: ptr.To[int64](3600),
		BoundObjectRef: &authnv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID},
	}}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: pod.Spec.ServiceAccountName}}
	if err := fx.cp.Client.SubResource("token").Create(ctx, sa, tr); err != nil {
		return "", fmt.Errorf("TokenRequest for pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	return tr.Status.Token, nil
}

// podInstanceID is the instance id pod's registrar registers gatewayApp
// under.
func podInstanceID(pod *corev1.Pod) string {
	return sidecar.InstanceIDPrefix(pod.Name, pod.Namespace, string(pod.UID)) + gatewayApp + ":" + strconv.Itoa(gatewayAppPort)
}

// registryApp is the i-th app of the registry the reads answer.
func registryApp(i int) string { return fmt.Sprintf("BENCH-REGISTRY-%03d", i) }

// fillRegistry registers n instances, registryAppSize to an app, with an
// hour's lease: the registry every read answers.
func fillRegistry(ctx context.Context, c *eureka.Client, n int) error {
	return inParallel(ctx, n, func(k int) error {
		app, ip := registryApp(k/registryAppSize), fmt.Sprintf("10.201.%d.%d", k/200, 10+k%200)
		return c.Register(ctx, eureka.Instance{
			App: app, InstanceID: ip + ":" + strings.ToLower(app) + ":8080", HostName: ip, IPAddr: ip,
			VIPAddress: strings.ToLower(app), Status: eureka.StatusUp, Port: 8080, PortEnabled: true,
			Duration: time.Hour, Metadata: map[string]string{"zone": "zone-a", "version": "1.4.2"},
		})
	})
}

// waitRegistryListed waits until GET /apps lists the n instances: Eureka
// answers it from its read-only response cache, refreshed every 30 s.
func waitRegistryListed(ctx context.Context, c *eureka.Client, n int) error {
	return harness.Poll(ctx, 2*eureka.ServerCacheDelay, time.Second, "GET /apps listing the registry", func() error {
		reg, err := c.Applications(ctx)
		if err != nil {
			return err
		}
		listed := 0
		for i := range (n + registryAppSize - 1) / registryAppSize {
			listed += len(reg.Instances(registryApp(i)))
		}
		if listed < n {
			return fmt.Errorf("it lists %d of %d instances", listed, n)
		}
		return nil
	})
}

// gatewayProcess is a running `manager gateway`.
type gatewayProcess struct {
	*harness.Process
	// url is its Eureka service URL.
	url        string
	metricsURL string
}

// startGatewayProcess runs `manager gateway` in front of eurekaURL, in
// enforce mode, with its defaults otherwise (read TTL, token TTL), and
// waits until /readyz passes (informers synced, serving).
func startGatewayProcess(ctx context.Context, o GatewayOptions, cp *harness.ControlPlane, eurekaURL, name string) (*gatewayProcess, error) {
	var listen, metrics, health int
	for _, p := range []*int{&listen, &metrics, &health} {
		var err error
		if *p, err = harness.FreePort(); err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
	}
	user, pass := filepath.Join(o.WorkDir, "eureka-username"), filepath.Join(o.WorkDir, "eureka-password")
	if err := os.WriteFile(user, []byte(gatewayEurekaAuth.Username), 0o600); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if err := os.WriteFile(pass, []byte(gatewayEurekaAuth.Password), 0o600); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	addr := func(port int) string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(port)) }
	args := []string{"gateway",
		"--listen-address=" + addr(listen),
		"--eureka-url=" + eurekaURL,
		"--eureka-username-file=" + user, "--eureka-password-file=" + pass,
		"--mode=" + gateway.ModeEnforce,
		"--manager-service-account=" + gatewayNamespace + "/" + gatewayManagerSA,
		"--cluster-id=" + gatewayClusterID,
		"--metrics-bind-address=" + addr(metrics), "--metrics-secure=false",
		"--health-probe-bind-address=" + addr(health),
		"--shutdown-delay=0s",
	}
	env := []string{"KUBECONFIG=" + cp.Kubeconfig, "POD_NAMESPACE=" + gatewayNamespace}
	p, err := harness.StartProcess(name, o.ManagerBinary, args, env, filepath.Join(o.WorkDir, name+".log"))
	if err != nil {
		return nil, err
	}
	if err := p.WaitHTTP200(ctx, nil, "http://"+addr(health)+"/readyz", time.Minute); err != nil {
		_ = p.Stop()
		return nil, err
	}
	return &gatewayProcess{Process: p, url: "http://" + addr(listen) + "/eureka", metricsURL: "http://" + addr(metrics) + "/metrics"}, nil
}

// tokenReviews is how many TokenReviews the gateway has made so far.
func (g *gatewayProcess) tokenReviews() (float64, error) {
	text, err := scrape(g.metricsURL)
	if err != nil {
		return 0, err
	}
	n, err := sumCounter(bytes.NewReader(text), "eurekube_gateway_token_reviews_total", "")
	if err != nil && strings.Contains(err.Error(), "not found") {
		return 0, nil // none yet: a counter vector shows no sample before its first
	}
	return n, err
}

// eurekaPid is the pid of the Eureka server (a JVM) listening on addr,
// found by its command line.
func eurekaPid(addr string) (int, error) {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return 0, fmt.Errorf("eureka server's pid: %w", err)
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0, fmt.Errorf("eureka server's pid: %w", err)
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		raw, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		line := strings.ReplaceAll(string(raw), "\x00", " ")
		if strings.HasPrefix(line, "java ") && strings.Contains(line, "--server.port="+port+" ") {
			return pid, nil
		}
	}
	return 0, errors.New("eureka server's pid: no java process with --server.port=" + port)
}
