package gateway_test

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/eurekube/eurekube/api/v1alpha1"
	"github.com/eurekube/eurekube/eureka"
	"github.com/eurekube/eurekube/gateway"
	"github.com/eurekube/eurekube/tests/harness"
)

// The suite: a real kube-apiserver (TokenReview, TokenRequest, pods), a
// real Spring Cloud Eureka server that takes requests only with the
// credentials the gateway holds, and gateways in this process in front of
// it. In -short mode (make unit) only the pure tests run.
var (
	cp     *harness.ControlPlane
	server *harness.Eureka
	k8s    client.Client
	// recorder records the gateways' Events, as the manager's does.
	recorder events.EventRecorder
	// eurekaAuth is what only the gateway (and the manager) hold.
	eurekaAuth = &harness.EurekaAuth{Username: "gateway", Password: "only-the-gateway-knows"}
)

const clusterID = "gateway-suite"

// TestMain stops the servers if a test started them. They start at the
// first test that needs them (needsServers): the pure tests and the fuzz
// target's workers start none.
func TestMain(m *testing.M) {
	flag.Parse()
	code := m.Run()
	if stopServers != nil {
		stopServers()
	}
	os.Exit(code)
}

var (
	serversOnce sync.Once
	serversErr  error
	stopServers func()
)

// needsServers skips t in -short mode; else it starts the suite's servers
// once: a real API server (TokenReview, TokenRequest, pods) and a real
// Eureka server that takes requests only with the gateway's credentials.
func needsServers(t testing.TB) {
	t.Helper()
	harness.SkipWhenShort(t, "a kube-apiserver, etcd and a Eureka server (a JVM)")
	serversOnce.Do(func() { serversErr = startServers() })
	if serversErr != nil {
		t.Fatal(serversErr)
	}
}

func startServers() error {
	ctx, cancel := context.WithCancel(context.Background())
	var err error
	var stops []func()
	stopServers = func() {
		cancel()
		for i := len(stops) - 1; i >= 0; i-- {
			stops[i]()
		}
	}
	if cp, err = harness.StartControlPlane(ctx, harness.ControlPlaneOptions{}); err != nil {
		return err
	}
	stops = append(stops, func() { _ = cp.Stop() })
	if server, err = harness.StartEureka(ctx, harness.EurekaOptions{Auth: eurekaAuth}); err != nil {
		return err
	}
	stops = append(stops, func() { _ = server.Stop() })
	k8s = cp.Client
	cs, err := kubernetes.NewForConfig(cp.Config)
	if err != nil {
		return err
	}
	broadcaster := events.NewBroadcaster(&events.EventSinkImpl{Interface: cs.EventsV1()})
	broadcaster.StartRecordingToSink(ctx.Done())
	stops = append(stops, broadcaster.Shutdown)
	recorder = broadcaster.NewRecorder(cp.Scheme, "eurekube-gateway")
	return nil
}

// patience bounds every wait: generous for a busy two-core machine.
const patience = time.Minute

// gw is a gateway under test, served over HTTP on loopback.
type gw struct {
	*httptest.Server
	// upstream counts the requests the gateway sent to Eureka.
	upstream atomic.Int64
	mu       sync.Mutex
	logs     bytes.Buffer
}

// URL is the gateway's Eureka service URL.
func (g *gw) eurekaURL() string { return g.Server.URL + "/eureka" }

func (g *gw) ObserveRequest(string, string, time.Duration, error) { g.upstream.Add(1) }

func (g *gw) Write(p []byte) (int, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.logs.Write(p)
}

func (g *gw) log() string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.logs.String()
}

type gwOptions struct {
	// urls are the Eureka servers behind it (default: the suite's).
	urls     []string
	mode     string
	readTTL  time.Duration
	reviewer gateway.TokenReviewer
	manager  string
	tokenTTL time.Duration
}

// startGateway starts a gateway in front of the suite's Eureka server; its
// audit log is printed when the test fails.
func startGateway(t testing.TB, o gwOptions) *gw {
	t.Helper()
	g := &gw{}
	log := logrus.New()
	log.SetOutput(g)
	log.SetFormatter(&logrus.JSONFormatter{})
	if o.urls == nil {
		o.urls = []string{server.URL()}
	}
	ec, err := eureka.New(eureka.Options{URLs: o.urls, Username: eurekaAuth.Username, Password: eurekaAuth.Password, Timeout: 5 * time.Second, Observer: g})
	if err != nil {
		t.Fatal(err)
	}
	if o.mode == "" {
		o.mode = gateway.ModeEnforce
	}
	if o.readTTL == 0 {
		o.readTTL = time.Millisecond
	}
	if o.reviewer == nil {
		o.reviewer = gateway.ClientReviewer{Client: k8s}
	}
	h, err := gateway.New(gateway.Options{
		Eureka: ec, Mode: o.mode, Reviewer: o.reviewer, Cache: k8s, Pods: k8s,
		Namespace: secretsNamespace(t), ClusterID: clusterID, ReadTTL: o.readTTL, Log: log,
		ManagerServiceAccount: o.manager, TokenTTL: o.tokenTTL, Events: recorder,
	})
	if err != nil {
		t.Fatal(err)
	}
	g.Server = httptest.NewServer(h)
	t.Cleanup(func() {
		g.Close()
		if t.Failed() {
			t.Logf("gateway log:\n%s", g.log())
		}
	})
	return g
}

func startGatewayTo(t testing.TB, urls []string) *gw {
	t.Helper()
	return startGateway(t, gwOptions{urls: urls})
}

var (
	secretsNS     string
	secretsNSOnce sync.Once
)

// secretsNamespace is the gateway's own namespace, where client Secrets
// live.
func secretsNamespace(t testing.TB) string {
	secretsNSOnce.Do(func() { secretsNS = newNamespace(t) })
	return secretsNS
}

var nsSeq atomic.Int64

func newNamespace(t testing.TB) string {
	t.Helper()
	name := fmt.Sprintf("gw-%d-%d", time.Now().UnixNano()%100000, nsSeq.Add(1))
	if err := k8s.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil {
		t.Fatal(err)
	}
	return name
}

// grant makes an EurekaAppPolicy granting apps to namespaces and binding
// them to client Secrets, removed when the test ends.
func grant(t testing.TB, apps, namespaces, secrets []string) {
	t.Helper()
	p := &v1alpha1.EurekaAppPolicy{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "gw-"},
		Spec:       v1alpha1.EurekaAppPolicySpec{Apps: apps, Namespaces: namespaces, ClientSecrets: secrets},
	}
	if err := k8s.Create(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), p) })
}

// clientSecret makes a basic-auth Secret in the gateway's namespace.
func clientSecret(t testing.TB, name, user, pass string) {
	t.Helper()
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: secretsNamespace(t), Name: name},
		Type:       corev1.SecretTypeBasicAuth,
		StringData: map[string]string{corev1.BasicAuthUsernameKey: user, corev1.BasicAuthPasswordKey: pass},
	}
	if err := k8s.Create(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), s) })
}

// testPod is a pod as the API server knows it (no kubelet runs it), with
// the IP its status would carry.
type testPod struct {
	*corev1.Pod
}

var ipSeq atomic.Int64

// newPod creates a pod of ServiceAccount "app" in ns with a pod IP.
func newPod(t testing.TB, ns, name string, annotations map[string]string) testPod {
	t.Helper()
	n := ipSeq.Add(1)
	return newPodWith(t, ns, name, fmt.Sprintf("10.244.%d.%d", n/250, n%250+1), annotations)
}

// newPodAt creates a pod whose IP is ip (127.0.0.1: a process of this
// machine plays it).
func newPodAt(t testing.TB, ns, name, ip string) testPod {
	t.Helper()
	return newPodWith(t, ns, name, ip, nil)
}

func newPodWith(t testing.TB, ns, name, ip string, annotations map[string]string) testPod {
	t.Helper()
	return newPodAs(t, ns, name, "app", ip, annotations)
}

// newPodAs creates a pod of ServiceAccount sa.
func newPodAs(t testing.TB, ns, name, saName, ip string, annotations map[string]string) testPod {
	t.Helper()
	ctx := context.Background()
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: saName}}
	if err := k8s.Create(ctx, sa); err != nil && !strings.Contains(err.Error(), "already exists") {
		t.Fatal(err)
	}
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Annotations: annotations},
		Spec: corev1.PodSpec{
			ServiceAccountName:           saName,
			AutomountServiceAccountToken: ptr.To(false),
			Containers:                   []corev1.Container{{Name: "app", Image: "example.com/app:1"}},
		},
	}
	if err := k8s.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	p.Status.PodIP = ip
	p.Status.PodIPs = []corev1.PodIP{{IP: ip}}
	p.Status.Phase = corev1.PodRunning
	if err := k8s.Status().Update(ctx, p); err != nil {
		t.Fatal(err)
	}
	return testPod{p}
}

// token is a projected token of the pod, bound to it, for audience.
func (p testPod) token(t testing.TB, audience string) string {
	t.Helper()
	return requestToken(t, p.Namespace, p.Spec.ServiceAccountName, audience, &authnv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: p.Name, UID: p.UID})
}

func requestToken(t testing.TB, ns, sa, audience string, bound *authnv1.BoundObjectReference) string {
	t.Helper()
	tr := &authnv1.TokenRequest{Spec: authnv1.TokenRequestSpec{Audiences: []string{audience}, ExpirationSeconds: ptr.To[int64](600), BoundObjectRef: bound}}
	obj := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: sa}}
	if err := k8s.SubResource("token").Create(context.Background(), obj, tr); err != nil {
		t.Fatalf("TokenRequest for %s/%s: %v", ns, sa, err)
	}
	return tr.Status.Token
}

// registration is a registrar-shaped instance of the pod.
func (p testPod) instanceID(app string, port int) string {
	return fmt.Sprintf("%s.%s.%s:%s:%d", p.Name, p.Namespace, string(p.UID)[:8], strings.ToLower(app), port)
}

func (p testPod) ip() string { return p.Status.PodIP }

// call is one HTTP request and its answer.
type call struct {
	method, url, body, contentType, accept, auth string
}

type answer struct {
	status int
	header http.Header
	body   string
}

func do(t testing.TB, c call) answer {
	t.Helper()
	var body *strings.Reader
	if c.body != "" {
		body = strings.NewReader(c.body)
	} else {
		body = strings.NewReader("")
	}
	req, err := http.NewRequest(c.method, c.url, body)
	if err != nil {
		t.Fatal(err)
	}
	if c.contentType != "" {
		req.Header.Set("Content-Type", c.contentType)
	}
	if c.accept != "" {
		req.Header.Set("Accept", c.accept)
	}
	if c.auth != "" {
		req.Header.Set("Authorization", c.auth)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", c.method, c.url, err)
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	_, _ = b.ReadFrom(resp.Body)
	return answer{status: resp.StatusCode, header: resp.Header, body: b.String()}
}

func bearer(token string) string { return "Bearer " + token }

// direct is the auth header that reaches Eureka itself.
func direct() string {
	req, _ := http.NewRequest(http.MethodGet, "http://x", nil)
	req.SetBasicAuth(eurekaAuth.Username, eurekaAuth.Password)
	return req.Header.Get("Authorization")
}

func basic(user, pass string) string {
	req, _ := http.NewRequest(http.MethodGet, "http://x", nil)
	req.SetBasicAuth(user, pass)
	return req.Header.Get("Authorization")
}

func harnessEventually(t testing.TB, what string, cond func() error) {
	t.Helper()
	harness.Eventually(t, patience, what, cond)
}

// refusalEvent is nil once an EurekaWriteRefused Event regards the pod.
func refusalEvent(ns, pod string) error {
	var list eventsv1.EventList
	if err := k8s.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
		return err
	}
	for _, e := range list.Items {
		if e.Regarding.Name == pod && e.Reason == gateway.EventReasonRefused && e.ReportingController == "eurekube-gateway" {
			return nil
		}
	}
	return fmt.Errorf("%d Events in %s, none refusing pod %s", len(list.Items), ns, pod)
}
