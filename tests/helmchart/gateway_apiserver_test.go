package helmchart

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	eurekubev1alpha1 "github.com/eurekube/eurekube/api/v1alpha1"
	"github.com/eurekube/eurekube/gateway"
	"github.com/eurekube/eurekube/manager"
	"github.com/eurekube/eurekube/tests/harness"
)

// gatewayServiceAccount is who the gateway's pods are to the API server.
func gatewayServiceAccount(name string) authorizationv1.SubjectAccessReviewSpec {
	return authorizationv1.SubjectAccessReviewSpec{
		User:   "system:serviceaccount:" + releaseNamespace + ":" + name,
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + releaseNamespace, "system:authenticated"},
	}
}

// gatewayRBACIsWhatItNeedsAndNoMore asks the API server's own authorizer
// (SubjectAccessReviews) what the gateway's ServiceAccount may do, with
// the RBAC the chart installed: what the gateway reads and writes, and
// nothing else; above all no Secret outside its own namespace.
func gatewayRBACIsWhatItNeedsAndNoMore(ctx context.Context, t *testing.T, c client.Client, serviceAccount string) {
	type attrs = authorizationv1.ResourceAttributes
	cases := []struct {
		allowed bool
		a       attrs
	}{
		{true, attrs{Group: "authentication.k8s.io", Resource: "tokenreviews", Verb: "create"}},
		{true, attrs{Group: "authorization.k8s.io", Resource: "subjectaccessreviews", Verb: "create"}},
		{true, attrs{Resource: "pods", Verb: "get", Namespace: "shop", Name: "orders-1"}},
		{true, attrs{Resource: "namespaces", Verb: "get", Name: "kube-system"}},
		{true, attrs{Resource: "namespaces", Verb: "watch"}},
		{true, attrs{Group: "eurekube.io", Resource: "eurekaapppolicies", Verb: "list"}},
		{true, attrs{Group: "eurekube.io", Resource: "eurekaappclaims", Verb: "watch"}},
		{true, attrs{Group: "eurekube.io", Resource: "eurekasyncers", Verb: "list"}},
		{true, attrs{Group: "events.k8s.io", Resource: "events", Verb: "create", Namespace: "shop"}},
		{true, attrs{Group: "events.k8s.io", Resource: "events", Verb: "patch", Namespace: "shop"}},
		{true, attrs{Resource: "secrets", Verb: "get", Namespace: releaseNamespace, Name: "vm-payments"}},
		{true, attrs{Resource: "secrets", Verb: "list", Namespace: releaseNamespace}},
		{true, attrs{Resource: "secrets", Verb: "watch", Namespace: releaseNamespace}},

		{false, attrs{Resource: "secrets", Verb: "get", Namespace: "shop", Name: "eureka-login"}},
		{false, attrs{Resource: "secrets", Verb: "get", Namespace: "kube-system", Name: "any"}},
		{false, attrs{Resource: "secrets", Verb: "list"}},
		{false, attrs{Resource: "secrets", Verb: "update", Namespace: releaseNamespace, Name: "vm-payments"}},
		{false, attrs{Resource: "configmaps", Verb: "get", Namespace: releaseNamespace, Name: "any"}},
		{false, attrs{Resource: "pods", Verb: "list", Namespace: "shop"}},
		{false, attrs{Resource: "pods", Verb: "patch", Namespace: "shop", Name: "orders-1"}},
		{false, attrs{Group: "eurekube.io", Resource: "eurekasyncers", Verb: "update", Namespace: "shop", Name: "orders"}},
		{false, attrs{Group: "eurekube.io", Resource: "eurekaappclaims", Verb: "create"}},
		{false, attrs{Group: "eurekube.io", Resource: "eurekaapppolicies", Verb: "create"}},
		{false, attrs{Resource: "events", Verb: "create", Namespace: "shop"}},
		{false, attrs{Resource: "serviceaccounts", Verb: "create", Namespace: "shop", Subresource: "token"}},
	}
	for _, tc := range cases {
		a := tc.a
		review := &authorizationv1.SubjectAccessReview{Spec: gatewayServiceAccount(serviceAccount)}
		review.Spec.ResourceAttributes = &a
		if err := c.Create(ctx, review); err != nil {
			t.Fatal(err)
		}
		if review.Status.Allowed != tc.allowed {
			t.Errorf("ServiceAccount %s/%s may %s %s/%s in %q (name %q): %v, want %v (%s)", releaseNamespace, serviceAccount,
				a.Verb, a.Group, a.Resource+"/"+a.Subresource, a.Namespace, a.Name, review.Status.Allowed, tc.allowed, review.Status.Reason)
		}
	}
}

// gatewayRunsAsItsServiceAccount runs the gateway of the chart's
// Deployment (its flags, as the kubelet expands them) in this process, as
// its ServiceAccount, against the API server that holds the chart's RBAC,
// with a recorder in place of Eureka: it gets ready (its caches of
// policies, claims, syncers, namespaces and its namespace's Secrets
// synced, kube-system read), takes a VM's write with the credentials of a
// client Secret in its namespace, verifies a pod's projected token by a
// TokenReview, and records the refusal of that pod's write as an Event on
// the pod. The mode is enforce here, so that its verdicts show.
func gatewayRunsAsItsServiceAccount(ctx context.Context, t *testing.T, cp *harness.ControlPlane, d *appsv1.Deployment) {
	c := cp.Client
	cfg, err := manager.ParseGatewayFlags(gatewayArgs(t, d), io.Discard)
	if err != nil {
		t.Fatalf("the chart's gateway flags: %v", err)
	}

	eureka := &recorder{}
	fake := httptest.NewServer(eureka)
	defer fake.Close()
	port, err := harness.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	health, err := harness.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	asGateway := rest.CopyConfig(cp.Config)
	sa := gatewayServiceAccount(d.Spec.Template.Spec.ServiceAccountName)
	asGateway.Impersonate = rest.ImpersonationConfig{UserName: sa.User, Groups: sa.Groups}
	cfg.RestConfig = asGateway
	cfg.Namespace = d.Namespace // POD_NAMESPACE, from the downward API
	cfg.Mode = gateway.ModeEnforce
	cfg.EurekaURLs = []string{fake.URL + "/eureka"}
	cfg.ListenAddr = fmt.Sprintf("127.0.0.1:%d", port)
	cfg.HealthProbeBindAddress = fmt.Sprintf("127.0.0.1:%d", health)
	cfg.MetricsBindAddress = "0"
	cfg.ShutdownDelay = 0
	var logs syncBuffer
	cfg.LogOutput = &logs

	// A VM's credentials, bound to PAYMENTS by a policy.
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: d.Namespace, Name: "vm-payments"},
		Type:       corev1.SecretTypeBasicAuth,
		StringData: map[string]string{corev1.BasicAuthUsernameKey: "payments-vm", corev1.BasicAuthPasswordKey: "s3cret"},
	}
	policy := &eurekubev1alpha1.EurekaAppPolicy{ObjectMeta: metav1.ObjectMeta{Name: "payments-vms"},
		Spec: eurekubev1alpha1.EurekaAppPolicySpec{Apps: []string{"PAYMENTS"}, ClientSecrets: []string{secret.Name}}}
	// A pod of namespace shop with a projected token for the gateway.
	shop := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "gateway-shop"}}
	podSA := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: shop.Name, Name: "orders"}}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: shop.Name, Name: "orders-1"}, Spec: corev1.PodSpec{
		ServiceAccountName: podSA.Name, Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10"}},
	}}
	for _, obj := range []client.Object{secret, policy, shop, podSA, pod} {
		if err := c.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	cs, err := kubernetes.NewForConfig(cp.Config)
	if err != nil {
		t.Fatal(err)
	}
	expiry := int64(600)
	tr, err := cs.CoreV1().ServiceAccounts(shop.Name).CreateToken(ctx, podSA.Name, &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		Audiences: []string{cfg.Audience}, ExpirationSeconds: &expiry,
		BoundObjectRef: &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID},
	}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("a projected token for pod %s/%s: %v", shop.Name, pod.Name, err)
	}

	gctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- manager.RunGateway(gctx, cfg) }()
	defer func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("the gateway ended with %v", err)
		}
		if t.Failed() {
			t.Logf("the gateway's log:\n%s", logs.String())
		}
	}()
	readyz := fmt.Sprintf("http://127.0.0.1:%d/readyz", health)
	harness.Eventually(t, time.Minute, "the gateway is ready as its ServiceAccount", func() error {
		select {
		case err := <-done:
			done <- err
			return fmt.Errorf("the gateway ended: %v", err)
		default:
		}
		resp, err := http.Get(readyz)
		if err != nil {
			return err
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("/readyz %d: %s", resp.StatusCode, body)
		}
		return nil
	})
	base := fmt.Sprintf("http://127.0.0.1:%d/eureka", port)

	t.Run("a client Secret of its namespace is a VM's identity", func(t *testing.T) {
		// The cache sees the policy and the Secret within moments.
		harness.Eventually(t, 30*time.Second, "the VM's heartbeat passes", func() error {
			status, refused := send(t, http.MethodPut, base+"/apps/PAYMENTS/vm-1", func(r *http.Request) { r.SetBasicAuth("payments-vm", "s3cret") })
			if status != http.StatusOK || refused != "" {
				return fmt.Errorf("PUT as the VM: %d %s", status, refused)
			}
			return nil
		})
		if !eureka.saw("PUT /eureka/apps/PAYMENTS/vm-1") {
			t.Errorf("Eureka did not get the VM's heartbeat: %v", eureka.requests())
		}
	})

	t.Run("a pod's token is verified and its refused write recorded on it", func(t *testing.T) {
		// Not an instance of the pod's: refused, and an Event on the pod.
		status, refused := send(t, http.MethodPut, base+"/apps/ORDERS/someone-else", func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+tr.Status.Token) })
		if status != http.StatusForbidden || refused != gateway.ReasonNotOwnInstance {
			t.Fatalf("PUT as pod %s/%s of another's instance: %d %s, want 403 %s", shop.Name, pod.Name, status, refused, gateway.ReasonNotOwnInstance)
		}
		harness.Eventually(t, 30*time.Second, "the gateway's Event on the pod", func() error {
			var events eventsv1.EventList
			if err := c.List(ctx, &events, client.InNamespace(shop.Name)); err != nil {
				return err
			}
			for _, e := range events.Items {
				if e.Reason == gateway.EventReasonRefused && e.ReportingController == "eurekube-gateway" && e.Regarding.Name == pod.Name && e.Regarding.UID == pod.UID {
					return nil
				}
			}
			return fmt.Errorf("no %s Event on pod %s among %d", gateway.EventReasonRefused, pod.Name, len(events.Items))
		})
		if eureka.saw("PUT /eureka/apps/ORDERS/someone-else") {
			t.Error("Eureka got the refused heartbeat")
		}
	})
}

// send sends a request with no body and returns its status and the
// gateway's refusal reason.
func send(t *testing.T, method, url string, auth func(*http.Request)) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	auth(req)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, resp.Header.Get(gateway.RefusedHeader)
}

// recorder stands in for Eureka: it answers every write as Eureka does
// and remembers "METHOD path".
type recorder struct {
	mu   sync.Mutex
	seen []string
}

func (r *recorder) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	r.mu.Lock()
	r.seen = append(r.seen, req.Method+" "+req.URL.Path)
	r.mu.Unlock()
	if req.Method == http.MethodPost {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	w.WriteHeader(http.StatusOK)
}

func (r *recorder) requests() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.seen...)
}

func (r *recorder) saw(what string) bool {
	for _, s := range r.requests() {
		if strings.HasPrefix(s, what) {
			return true
		}
	}
	return false
}

// syncBuffer is a buffer the gateway's log writes to while the test reads.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
