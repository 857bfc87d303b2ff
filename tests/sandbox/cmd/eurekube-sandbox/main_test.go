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
// share-every-app policy, so ORDERS belongs to its first registrant.
func TestSandboxOptions_InstallsNoShareEveryAppPolicy(t *testing.T) {
	if o := sandboxOptions(node.Options{LogDir: t.TempDir()}, 8761); !o.FirstClaim {
		t.Errorf("the sandbox's cluster options %+v share every app with every namespace (harness.ShareEveryApp); want FirstClaim", o)
	}
}

func TestTenancyWelcome_ShowsTheClaimAndWhatAnotherNamespaceSees(t *testing.T) {
	got := tenancyWelcome("ORDERS", "shop")
	for _, want := range []string{"No EurekaAppPolicy is installed", "ORDERS belongs to namespace shop", "kubectl get eac", "PERMITTED", "False"} {
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
