package gateway

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/eurekube/eurekube/eureka"
)

func TestParseRoute_EurekasRoutes(t *testing.T) {
	for _, c := range []struct {
		method, path string
		op           string
		app, id, vip string
		status       int
	}{
		{http.MethodGet, "/eureka/apps", OpApps, "", "", "", 0},
		{http.MethodGet, "/eureka/apps/", OpApps, "", "", "", 0},
		{http.MethodGet, "/eureka/v2/apps/delta", OpDelta, "", "", "", 0},
		{http.MethodGet, "/eureka/apps/orders", OpApp, "ORDERS", "", "", 0},
		{http.MethodPost, "/eureka/apps/orders", OpRegister, "ORDERS", "", "", 0},
		{http.MethodPut, "/eureka/apps/ORDERS/a.b.c:orders:8080", OpRenew, "ORDERS", "a.b.c:orders:8080", "", 0},
		{http.MethodDelete, "/eureka/apps/ORDERS/x", OpCancel, "ORDERS", "x", "", 0},
		{http.MethodGet, "/eureka/apps/ORDERS/x", OpInstance, "ORDERS", "x", "", 0},
		{http.MethodPut, "/eureka/apps/ORDERS/x/status", OpStatus, "ORDERS", "x", "", 0},
		{http.MethodDelete, "/eureka/apps/ORDERS/x/status", OpStatusRemove, "ORDERS", "x", "", 0},
		{http.MethodPut, "/eureka/apps/ORDERS/x/metadata", OpMetadata, "ORDERS", "x", "", 0},
		{http.MethodGet, "/eureka/instances/x", OpInstanceByID, "", "x", "", 0},
		{http.MethodGet, "/eureka/vips/orders", OpVIP, "", "", "orders", 0},
		{http.MethodGet, "/eureka/svips/orders", OpSVIP, "", "", "orders", 0},
		// An id with an escaped slash is one segment, passed on escaped.
		{http.MethodPut, "/eureka/apps/ORDERS/a%2Fb", OpRenew, "ORDERS", "a/b", "", 0},
		{http.MethodGet, "/eureka/apps/ORDERS/x/y/z", "", "", "", "", http.StatusNotFound},
		{http.MethodPatch, "/eureka/apps/ORDERS", "", "", "", "", http.StatusMethodNotAllowed},
		{http.MethodPost, "/eureka/peerreplication/batch/", "", "", "", "", http.StatusForbidden},
		{http.MethodGet, "/eureka/asg/x", "", "", "", "", http.StatusForbidden},
		{http.MethodGet, "/actuator/env", "", "", "", "", http.StatusNotFound},
		{http.MethodGet, "/eureka/apps//x", "", "", "", "", http.StatusNotFound},
	} {
		u, err := url.Parse(c.path)
		if err != nil {
			t.Fatal(err)
		}
		r, rerr := parseRoute(c.method, u)
		if c.status != 0 {
			if rerr == nil || rerr.status != c.status {
				t.Errorf("%s %s: got %+v %+v, want status %d", c.method, c.path, r, rerr, c.status)
			}
			continue
		}
		if rerr != nil || r.op != c.op || r.app != c.app || r.id != c.id || r.vip != c.vip {
			t.Errorf("%s %s: got %+v %+v, want %s app %q id %q vip %q", c.method, c.path, r, rerr, c.op, c.app, c.id, c.vip)
		}
	}
}

// FuzzRequest holds the gateway's reading of a request to its rules for
// any input: parsing never panics; a route it accepts is passed on as the
// client wrote it (its path below /eureka/, without /v2/); and a
// registration body is either read or refused as malformed.
func FuzzRequest(f *testing.F) {
	f.Add("PUT", "/eureka/apps/ORDERS/a.b.c:orders:8080?status=UP", `{"instance":{"app":"ORDERS","instanceId":"x","ipAddr":"10.0.0.1","hostName":"10.0.0.1","metadata":{"eurekube.io/pod":"p"}}}`)
	f.Add("POST", "/eureka/v2/apps/orders", `<instance><app>ORDERS</app><metadata><zone>a</zone></metadata></instance>`)
	f.Add("GET", "/eureka/apps/delta", "")
	f.Add("DELETE", "/eureka/apps/%41/%2F/status", "")
	f.Fuzz(func(t *testing.T, method, path, body string) {
		u, err := url.Parse(path)
		if err != nil {
			return
		}
		r, rerr := parseRoute(method, u)
		if rerr != nil {
			if rerr.status < 400 || rerr.reason == "" || rerr.msg == "" {
				t.Fatalf("%s %s: a refusal without status or reason: %+v", method, path, rerr)
			}
			return
		}
		want := strings.TrimSuffix(strings.TrimPrefix(strings.TrimPrefix(u.EscapedPath(), "/eureka/"), "v2/"), "/")
		if u.RawQuery != "" {
			want += "?" + u.RawQuery
		}
		if r.upstream != want {
			t.Fatalf("%s %s: passed on as %q, want %q", method, path, r.upstream, want)
		}
		if r.write() && r.app == "" {
			t.Fatalf("%s %s: a write without an app", method, path)
		}
		if r.op == OpRegister {
			for _, ct := range []string{"application/json", "application/xml", ""} {
				if _, err := eureka.ParseRegistration([]byte(body), ct); err != nil && !strings.Contains(err.Error(), "malformed") {
					t.Fatalf("body %q (%s): error %v does not say malformed", body, ct, err)
				}
			}
		}
	})
}

func TestPodMarkers_NameOnlyThePodItself(t *testing.T) {
	id := Identity{Kind: KindPod, Namespace: "shop", Pod: "orders-1", PodUID: "uid-1"}
	for _, c := range []struct {
		meta map[string]string
		ok   bool
	}{
		{nil, true},
		{map[string]string{"zone": "a"}, true},
		{map[string]string{eureka.MetaPod: "orders-1", eureka.MetaNamespace: "shop", eureka.MetaPodUID: "uid-1", eureka.MetaCluster: "c1", eureka.MetaManagedBy: eureka.ManagedByValue}, true},
		{map[string]string{eureka.MetaPod: "orders-2"}, false},
		{map[string]string{eureka.MetaNamespace: "other"}, false},
		{map[string]string{eureka.MetaCluster: "c2"}, false},
		{map[string]string{eureka.MetaService: "orders"}, false},
		{map[string]string{eureka.MetaManagedBy: "someone"}, false},
	} {
		if got := podMarkers(id, c.meta, "c1") == ""; got != c.ok {
			t.Errorf("%v: ok %v, want %v", c.meta, got, c.ok)
		}
	}
}
