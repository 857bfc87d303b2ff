package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/eurekube/eurekube/tests/harness"
	"github.com/eurekube/eurekube/tests/node"
)

// The sandbox shows the product: tenancy as a user's install has it, no
// share-every-app policy, so an app belongs to the policy that names it,
// else to its first registrant; and Eureka locked behind the gateway,
// enforcing.
func TestSandboxOptions_InstallsNoShareEveryAppPolicyAndEnforcesTheGateway(t *testing.T) {
	o := sandboxOptions(node.Options{LogDir: t.TempDir()}, 8761)
	if !o.FirstClaim {
		t.Errorf("the sandbox's cluster options %+v share every app with every namespace (harness.ShareEveryApp); want FirstClaim", o)
	}
	if !o.Gateway || o.EurekaAuth == nil || o.EurekaAuth.Password == "" || strings.Contains(o.EurekaAuth.Password, ":") {
		t.Errorf("the sandbox's cluster options %+v do not lock Eureka behind the gateway with a password Spring sends", o)
	}
}

func TestTenancyWelcome_ShowsThePolicyAndWhatAnotherNamespaceSees(t *testing.T) {
	got := tenancyWelcome("ORDERS", "shop")
	for _, want := range []string{"EurekaAppPolicy orders grants ORDERS to namespace shop", "Secret orders-vm", "kubectl get eap orders", "PERMITTED", "False", "kubectl get eac"} {
		if !strings.Contains(strings.Join(strings.Fields(got), " "), want) {
			t.Errorf("the welcome's tenancy part does not say %q:\n%s", want, got)
		}
	}
}

// The welcome shows the pod caller's first calls, which it makes once the
// import answered a pod: failed counts only real failures.
func TestWaitFirstCalls_TheWelcomeShowsTheCallersCounts(t *testing.T) {
	var calls atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		n := calls.Add(4) // a few calls between two reads
		_ = json.NewEncoder(w).Encode(map[string]any{"ok": n, "failed": 0, "lastError": "", "byInstance": map[string]int64{"vm-1": n}})
	}))
	defer srv.Close()
	st, err := waitFirstCalls(t.Context(), srv.URL+"/stats", firstCalls)
	if err != nil {
		t.Fatal(err)
	}
	if st.OK < firstCalls {
		t.Errorf("returned after %d calls, want at least %d", st.OK, firstCalls)
	}
	if got := callerCounts(st); !strings.Contains(got, "failed 0") || strings.Contains(got, "the last") {
		t.Errorf("the welcome's counts %q do not say failed 0", got)
	}
	failed := callerCounts(harness.SpringStats{OK: 9, Failed: 1, LastError: "dial tcp 10.96.0.20:80: connect: connection refused"})
	if !strings.Contains(failed, "failed 1") || !strings.Contains(failed, "connection refused") {
		t.Errorf("the welcome's counts %q hide a failed call", failed)
	}
}

// The welcome says what the gateway answered the rogue pod, its reason
// and message whole.
func TestGatewayWelcome_ShowsTheRoguePodsVerdict(t *testing.T) {
	note := "Eureka register of app ORDERS instance orders-impostor.rogue.1a2b3c4d:orders:8080 refused by Eurekube's gateway (AppNotGranted): Eureka app ORDERS is governed by EurekaAppPolicy orders, which does not grant it to namespace rogue"
	got := gatewayWelcome(rogueResult{reason: "EurekaWriteRefused", note: note})
	flat := strings.Join(strings.Fields(got), " ")
	for _, want := range []string{"rogue/orders-impostor", "EurekaWriteRefused", note, "401", "never listed it"} {
		if !strings.Contains(flat, want) {
			t.Errorf("the welcome's rogue part does not say %q:\n%s", want, got)
		}
	}
	for line := range strings.SplitSeq(got, "\n") {
		if len(line) > 100 {
			t.Errorf("a line of %d characters: %q", len(line), line)
		}
	}
}

// Why the probe's calls failed comes from the proxy's own log.
func TestProxyError_IsTheLastFailureLogged(t *testing.T) {
	log := "2026/11/28 10:28:55 http: proxy error: dial tcp 10.96.140.242:80: connect: connection refused\n" +
		"2026/11/28 10:28:55 http: proxy error: dial tcp: lookup orders.shop.svc on 198.51.100.2:53: no such host\n"
	if got, want := proxyError(log), "dial tcp: lookup orders.shop.svc on 198.51.100.2:53: no such host"; got != want {
		t.Errorf("proxyError = %q, want %q", got, want)
	}
	if got := proxyError(""); got != "not logged" {
		t.Errorf("proxyError of an empty log = %q", got)
	}
}
