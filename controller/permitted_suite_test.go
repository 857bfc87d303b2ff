package controller_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/eurekube/eurekube/api/v1alpha1"
	"github.com/eurekube/eurekube/internal/builders"
	"github.com/eurekube/eurekube/tests/harness"
)

// A syncer's author points it at a server of their own, with the
// namespace's Eureka credentials (the Secret consents to serve the
// namespace's syncers): the host is not on the manager's allowlist, so the
// syncer is Permitted=False naming the field, the host, the flag and the
// Helm value, and the pod injected before; and the attacker's server never
// receives a request, credentials or not, through a change of the spec
// too. Pointed back at an allowed server, the syncer is permitted and
// synced.
func TestPermitted_ASyncerNamingAHostNotAllowedIsRefusedAndTheHostNeverCalled(t *testing.T) {
	needsServers(t)
	ctx := context.Background()
	var calls atomic.Int32
	ln, err := net.Listen("tcp", "127.0.0.2:0") // the suite allows 127.0.0.1 only
	if err != nil {
		t.Fatal(err)
	}
	attacker := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		calls.Add(1)
		w.WriteHeader(http.StatusNoContent)
	}))
	attacker.Listener = ln
	attacker.Start()
	t.Cleanup(attacker.Close)

	ns := newNamespace(t)
	login := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "eureka-login", Namespace: ns, Labels: map[string]string{v1alpha1.EurekaCredentialsLabel: "true"}},
		Data: map[string][]byte{"username": []byte("eureka"), "password": []byte("s3cret")}}
	if err := k8s.Create(ctx, login); err != nil {
		t.Fatal(err)
	}
	s := builders.Syncer(ns, "orders", builders.Port(intstr.FromInt32(8080)), builders.EurekaURLs(attacker.URL+"/eureka"), builders.Credentials(login.Name))
	if err := k8s.Create(ctx, s); err != nil {
		t.Fatal(err)
	}
	before := newPod(t, ns, "orders", "orders-before", true, "10.1.0.1")
	host := strings.TrimPrefix(attacker.URL, "http://")

	harness.Eventually(t, patience, "Permitted=False naming the host, the flag, the Helm value and the pod injected before",
		permitted(s, metav1.ConditionFalse, v1alpha1.ReasonEurekaHostNotAllowed,
			"spec.eureka.serviceURLs[0] names host "+host, "--allowed-eureka-host", "manager.allowedEurekaHosts", before.Name))
	harness.Eventually(t, patience, "Synced and EurekaReachable False, saying why", func() error {
		for _, typ := range []string{v1alpha1.ConditionSynced, v1alpha1.ConditionEurekaReachable} {
			c, _, err := condition(s, typ)
			if err != nil {
				return err
			}
			if c.Status != metav1.ConditionFalse || c.Reason != v1alpha1.ReasonEurekaHostNotAllowed || !strings.Contains(c.Message, "Permitted") {
				return fmt.Errorf("%s: %+v", typ, c)
			}
		}
		return nil
	})

	// Another reconcile of a changed spec: still refused, still not called.
	patchSpec(t, s, `{"metadata":{"zone":"zone-b"}}`)
	harness.Eventually(t, patience, "the changed spec reconciled, still refused", func() error {
		c, now, err := condition(s, v1alpha1.ConditionPermitted)
		if err != nil {
			return err
		}
		if c.ObservedGeneration != now.Generation || c.Status != metav1.ConditionFalse {
			return fmt.Errorf("generation %d, condition %+v", now.Generation, c)
		}
		return nil
	})
	if n := calls.Load(); n != 0 {
		t.Fatalf("the manager sent %d request(s) to a host it does not allow", n)
	}

	// Back to an allowed server (the manager's own): permitted, read.
	patchSpec(t, s, fmt.Sprintf(`{"eureka":{"serviceURLs":[%q],"credentialsSecretRef":null}}`, "http://"+proxy.Addr()+"/eureka"))
	harness.Eventually(t, patience, "Permitted=True and Eureka read once the server is allowed",
		permitted(s, metav1.ConditionTrue, ""))
	harness.Eventually(t, patience, "EurekaReachable=True", reachable(s, metav1.ConditionTrue, ""))
	if n := calls.Load(); n != 0 {
		t.Fatalf("the manager sent %d request(s) to a host it does not allow", n)
	}
	_ = k8s.Delete(ctx, before, client.GracePeriodSeconds(0))
}

// patchSpec merges spec into the syncer's spec.
func patchSpec(t *testing.T, s *v1alpha1.EurekaSyncer, spec string) {
	t.Helper()
	patch := client.RawPatch(types.MergePatchType, []byte(`{"spec":`+spec+`}`))
	if err := k8s.Patch(context.Background(), s.DeepCopy(), patch); err != nil {
		t.Fatal(err)
	}
}

// permitted waits for the syncer's Permitted condition to have status and
// reason (any when ""), with a message mentioning each of mention.
func permitted(s *v1alpha1.EurekaSyncer, status metav1.ConditionStatus, reason string, mention ...string) func() error {
	return func() error {
		c, _, err := condition(s, v1alpha1.ConditionPermitted)
		if err != nil {
			return err
		}
		if c.Status != status || reason != "" && c.Reason != reason {
			return fmt.Errorf("condition %+v", c)
		}
		for _, m := range mention {
			if !strings.Contains(c.Message, m) {
				return fmt.Errorf("condition %+v does not mention %q", c, m)
			}
		}
		return nil
	}
}
