package gateway_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	authnv1 "k8s.io/api/authentication/v1"

	"github.com/eurekube/eurekube/api/v1alpha1"
	"github.com/eurekube/eurekube/eureka"
	"github.com/eurekube/eurekube/gateway"
	"github.com/eurekube/eurekube/internal/ownership"
)

var appSeq atomic.Int64

func newApp(prefix string) string { return fmt.Sprintf("%s-%d", prefix, appSeq.Add(1)) }

// want asserts a gateway answer: its status and, for a refusal, its
// reason.
func want(t testing.TB, what string, a answer, status int, reason string) {
	t.Helper()
	if a.status != status || a.header.Get(gateway.RefusedHeader) != reason {
		t.Fatalf("%s: got %d %q (%s), want %d %q", what, a.status, a.header.Get(gateway.RefusedHeader), strings.TrimSpace(a.body), status, reason)
	}
}

// listed reads the instance from Eureka itself; "" when it is not there.
func listed(t testing.TB, app, id string) string {
	t.Helper()
	a := do(t, call{method: http.MethodGet, url: server.URL() + "/apps/" + app + "/" + id, accept: "application/json", auth: direct()})
	if a.status == http.StatusNotFound {
		return ""
	}
	if a.status != http.StatusOK {
		t.Fatalf("read %s/%s from Eureka: %d %s", app, id, a.status, a.body)
	}
	return a.body
}

// A pod of a namespace the app is granted to registers, renews, updates
// the metadata of and cancels its own instance through the gateway, in
// JSON and in XML.
func TestPod_WritesItsOwnInstance(t *testing.T) {
	needsServers(t)
	g := startGateway(t, gwOptions{})
	ns := newNamespace(t)
	for _, format := range []string{"json", "xml"} {
		app := newApp("orders")
		grant(t, []string{app}, []string{ns}, nil)
		p := newPod(t, ns, "orders-"+format, nil)
		tok := bearer(p.token(t, gateway.DefaultAudience))
		id := p.instanceID(app, 8080)
		b := instanceBody{app: app, id: id, host: p.ip(), ip: p.ip(), port: 8080,
			metadata: map[string]string{"zone": "a"}}
		body, ct := b.json(), "application/json"
		if format == "xml" {
			body, ct = b.xml(), "application/xml"
		}
		base := g.eurekaURL() + "/apps/" + strings.ToUpper(app)
		want(t, "register "+format, do(t, call{method: http.MethodPost, url: base, body: body, contentType: ct, auth: tok}), http.StatusNoContent, "")
		if listed(t, strings.ToUpper(app), id) == "" {
			t.Fatalf("%s: registered through the gateway, not listed by Eureka", format)
		}
		want(t, "renew", do(t, call{method: http.MethodPut, url: base + "/" + id + "?status=UP", auth: tok}), http.StatusOK, "")
		want(t, "metadata", do(t, call{method: http.MethodPut, url: base + "/" + id + "/metadata?team=orders", auth: tok}), http.StatusOK, "")
		if !strings.Contains(listed(t, strings.ToUpper(app), id), `"team":"orders"`) {
			t.Fatalf("metadata update through the gateway not in Eureka")
		}
		want(t, "cancel", do(t, call{method: http.MethodDelete, url: base + "/" + id, auth: tok}), http.StatusOK, "")
		if listed(t, strings.ToUpper(app), id) != "" {
			t.Fatalf("cancelled through the gateway, still listed")
		}
		// Eureka's 404 to a renew of an instance it does not know passes
		// through: it makes a client register again.
		want(t, "renew after cancel", do(t, call{method: http.MethodPut, url: base + "/" + id, auth: tok}), http.StatusNotFound, "")
	}
}

// A tenant with edit rights in its own namespace runs a pod there, takes
// the pod's own token (which it can) and tries every write against an app
// that belongs to another namespace, and against another pod's instance.
// Each is refused with its reason, none reaches Eureka, and each is
// recorded (metric, log line, Event on the pod).
func TestTenant_CannotWriteWhatIsNotItsOwn(t *testing.T) {
	needsServers(t)
	g := startGateway(t, gwOptions{})
	owner, tenant := newNamespace(t), newNamespace(t)
	granted := newApp("payments")
	grant(t, []string{granted}, []string{owner}, nil)
	claimed := newApp("claimed")
	claim := ownership.NewClaim(claimed, owner)
	if err := k8s.Create(context.Background(), claim); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), claim) })

	victim := newPod(t, owner, "payments-1", nil)
	victimTok := bearer(victim.token(t, gateway.DefaultAudience))
	victimID := victim.instanceID(granted, 8080)
	vb := instanceBody{app: granted, id: victimID, host: victim.ip(), ip: victim.ip(), port: 8080}
	base := g.eurekaURL() + "/apps/" + strings.ToUpper(granted)
	want(t, "the owner's pod registers", do(t, call{method: http.MethodPost, url: base, body: vb.json(), contentType: "application/json", auth: victimTok}), http.StatusNoContent, "")

	rogue := newPod(t, tenant, "rogue", nil)
	rogueTok := bearer(rogue.token(t, gateway.DefaultAudience))
	before := g.upstream.Load()
	for _, app := range []string{granted, claimed} {
		rb := instanceBody{app: app, id: rogue.instanceID(app, 8080), host: rogue.ip(), ip: rogue.ip(), port: 8080}
		reason := ownership.ReasonNotGranted
		if app == claimed {
			reason = ownership.ReasonOwnedElsewhere
		}
		want(t, "register "+app+" from another namespace", do(t, call{method: http.MethodPost, url: g.eurekaURL() + "/apps/" + strings.ToUpper(app), body: rb.json(), contentType: "application/json", auth: rogueTok}), http.StatusForbidden, reason)
	}
	for _, c := range []struct{ what, method, path string }{
		{"renew the victim", http.MethodPut, "/" + victimID},
		{"cancel the victim", http.MethodDelete, "/" + victimID},
		{"override the victim's status", http.MethodPut, "/" + victimID + "/status?value=OUT_OF_SERVICE"},
		{"remove the victim's override", http.MethodDelete, "/" + victimID + "/status"},
		{"rewrite the victim's metadata", http.MethodPut, "/" + victimID + "/metadata?zone=evil"},
	} {
		want(t, c.what, do(t, call{method: c.method, url: base + c.path, auth: rogueTok}), http.StatusForbidden, ownership.ReasonNotGranted)
	}

	// A second pod of the owner's own namespace is still not the victim.
	sibling := newPod(t, owner, "payments-2", nil)
	sibTok := bearer(sibling.token(t, gateway.DefaultAudience))
	want(t, "a sibling cancels the victim", do(t, call{method: http.MethodDelete, url: base + "/" + victimID, auth: sibTok}), http.StatusForbidden, gateway.ReasonNotOwnInstance)
	stolen := vb
	stolen.ip, stolen.host = victim.ip(), victim.ip()
	stolen.id = sibling.instanceID(granted, 8080)
	want(t, "a sibling registers the victim's address", do(t, call{method: http.MethodPost, url: base, body: stolen.json(), contentType: "application/json", auth: sibTok}), http.StatusForbidden, gateway.ReasonNotOwnAddress)
	hijack := instanceBody{app: granted, id: sibling.instanceID(granted, 8080), host: "evil.example.com", ip: sibling.ip(), port: 8080}
	want(t, "a sibling registers another host name", do(t, call{method: http.MethodPost, url: base, body: hijack.json(), contentType: "application/json", auth: sibTok}), http.StatusForbidden, gateway.ReasonNotOwnAddress)
	forged := instanceBody{app: granted, id: sibling.instanceID(granted, 8080), host: sibling.ip(), ip: sibling.ip(), port: 8080,
		metadata: map[string]string{eureka.MetaPod: victim.Name}}
	want(t, "a sibling forges the victim's markers", do(t, call{method: http.MethodPost, url: base, body: forged.json(), contentType: "application/json", auth: sibTok}), http.StatusForbidden, gateway.ReasonForgedMarkers)
	want(t, "the victim overrides its own status", do(t, call{method: http.MethodPut, url: base + "/" + victimID + "/status?value=UP", auth: victimTok}), http.StatusForbidden, gateway.ReasonStatusReserved)
	if n := g.upstream.Load() - before; n != 0 {
		t.Fatalf("%d refused writes reached Eureka", n)
	}
	if !strings.Contains(listed(t, strings.ToUpper(granted), victimID), `"status":"UP"`) {
		t.Fatalf("the victim's instance changed:\n%s", listed(t, strings.ToUpper(granted), victimID))
	}
	// Refusals are Events on the pod that tried.
	harnessEventually(t, "an EurekaWriteRefused Event on the rogue pod", func() error {
		return refusalEvent(tenant, rogue.Name)
	})
	if !strings.Contains(g.log(), `"verdict":"refused"`) || !strings.Contains(g.log(), `"who":"pod `+tenant+`/rogue"`) {
		t.Fatalf("no audit line of the rogue's refusals")
	}
}

// A pod of a Standby syncer registers OUT_OF_SERVICE or not at all; a
// detached pod not at all.
func TestPod_TrafficAnnotationHolds(t *testing.T) {
	needsServers(t)
	g := startGateway(t, gwOptions{})
	ns := newNamespace(t)
	app := newApp("standby")
	grant(t, []string{app}, []string{ns}, nil)
	base := g.eurekaURL() + "/apps/" + strings.ToUpper(app)
	standby := newPod(t, ns, "standby", map[string]string{v1alpha1.TrafficAnnotation: string(v1alpha1.TrafficStandby)})
	tok := bearer(standby.token(t, gateway.DefaultAudience))
	b := instanceBody{app: app, id: standby.instanceID(app, 8080), host: standby.ip(), ip: standby.ip(), port: 8080}
	want(t, "Standby without override", do(t, call{method: http.MethodPost, url: base, body: b.json(), contentType: "application/json", auth: tok}), http.StatusForbidden, gateway.ReasonStandby)
	b.override = "OUT_OF_SERVICE"
	want(t, "Standby with override", do(t, call{method: http.MethodPost, url: base, body: b.json(), contentType: "application/json", auth: tok}), http.StatusNoContent, "")
	detached := newPod(t, ns, "detached", map[string]string{v1alpha1.TrafficAnnotation: v1alpha1.TrafficDetached})
	db := instanceBody{app: app, id: detached.instanceID(app, 8080), host: detached.ip(), ip: detached.ip(), port: 8080, override: "OUT_OF_SERVICE"}
	want(t, "detached", do(t, call{method: http.MethodPost, url: base, body: db.json(), contentType: "application/json", auth: bearer(detached.token(t, gateway.DefaultAudience))}), http.StatusForbidden, gateway.ReasonDetached)
}

// Tokens the gateway refuses, and writes with no identity: each is named,
// none reaches Eureka.
func TestTokens_RefusedWithTheirReason(t *testing.T) {
	needsServers(t)
	g := startGateway(t, gwOptions{})
	ns := newNamespace(t)
	app := newApp("tokens")
	grant(t, []string{app}, []string{ns}, nil)
	p := newPod(t, ns, "tokens", nil)
	body := instanceBody{app: app, id: p.instanceID(app, 8080), host: p.ip(), ip: p.ip(), port: 8080}.json()
	base := g.eurekaURL() + "/apps/" + strings.ToUpper(app)
	gone := newPod(t, ns, "gone", nil)
	goneTok := gone.token(t, gateway.DefaultAudience)
	if err := k8s.Delete(context.Background(), gone.Pod); err != nil {
		t.Fatal(err)
	}
	before := g.upstream.Load()
	for _, c := range []struct {
		what, auth, reason string
	}{
		{"no identity", "", gateway.ReasonNoIdentity},
		{"a token for another audience", bearer(p.token(t, "https://kubernetes.default.svc")), gateway.ReasonBadToken},
		{"a token bound to no pod", bearer(requestToken(t, ns, "app", gateway.DefaultAudience, nil)), gateway.ReasonBadToken},
		{"the token of a deleted pod", bearer(goneTok), gateway.ReasonBadToken},
		{"a forged token", bearer("eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJ4In0.c2ln"), gateway.ReasonBadToken},
		{"an empty bearer", "Bearer ", gateway.ReasonMalformedHeader},
		{"unknown basic credentials", basic("vm", "guess"), gateway.ReasonBadCredentials},
		{"another scheme", "Negotiate abc", gateway.ReasonMalformedHeader},
		{"Eureka's own credentials", direct(), gateway.ReasonBadCredentials},
	} {
		status := http.StatusUnauthorized
		if c.reason == gateway.ReasonNoIdentity {
			status = http.StatusUnauthorized
		}
		want(t, c.what, do(t, call{method: http.MethodPost, url: base, body: body, contentType: "application/json", auth: c.auth}), status, c.reason)
	}
	if n := g.upstream.Load() - before; n != 0 {
		t.Fatalf("%d refused writes reached Eureka", n)
	}
}

// Requests the gateway answers itself, with Eureka's status code and the
// reason: none reaches Eureka.
func TestBadInput_NeverReachesEureka(t *testing.T) {
	needsServers(t)
	g := startGateway(t, gwOptions{})
	ns := newNamespace(t)
	app := newApp("bad")
	grant(t, []string{app}, []string{ns}, nil)
	p := newPod(t, ns, "bad", nil)
	tok := bearer(p.token(t, gateway.DefaultAudience))
	before := g.upstream.Load()
	base := g.eurekaURL()
	for _, c := range []struct {
		what   string
		call   call
		status int
		reason string
	}{
		{"malformed JSON", call{method: http.MethodPost, url: base + "/apps/" + app, body: `{"instance":`, contentType: "application/json", auth: tok}, http.StatusBadRequest, gateway.ReasonMalformedBody},
		{"JSON without instance", call{method: http.MethodPost, url: base + "/apps/" + app, body: `{"app":"x"}`, contentType: "application/json", auth: tok}, http.StatusBadRequest, gateway.ReasonMalformedBody},
		{"malformed XML", call{method: http.MethodPost, url: base + "/apps/" + app, body: `<instance><app>`, contentType: "application/xml", auth: tok}, http.StatusBadRequest, gateway.ReasonMalformedBody},
		{"unknown route", call{method: http.MethodGet, url: base + "/nothing/here", auth: tok}, http.StatusNotFound, gateway.ReasonUnknownRoute},
		{"outside Eureka's API", call{method: http.MethodGet, url: g.URL + "/actuator/env", auth: tok}, http.StatusNotFound, gateway.ReasonUnknownRoute},
		{"a method a route does not take", call{method: http.MethodPatch, url: base + "/apps/" + app, auth: tok}, http.StatusMethodNotAllowed, gateway.ReasonBadMethod},
		{"peer replication", call{method: http.MethodPost, url: base + "/peerreplication/batch/", body: `{"replicationList":[]}`, contentType: "application/json", auth: tok}, http.StatusForbidden, gateway.ReasonPeersOnly},
	} {
		want(t, c.what, do(t, c.call), c.status, c.reason)
	}
	if n := g.upstream.Load() - before; n != 0 {
		t.Fatalf("%d bad requests reached Eureka", n)
	}
}

// A client outside the cluster writes, with the credentials of a Secret an
// EurekaAppPolicy binds to its app, that app only, and no markers.
func TestClient_WritesOnlyTheAppsItsSecretIsBoundTo(t *testing.T) {
	needsServers(t)
	g := startGateway(t, gwOptions{})
	app, other := newApp("vm"), newApp("other")
	clientSecret(t, "vm-"+strings.ToLower(app), "vm-user", "vm-password")
	grant(t, []string{app}, nil, []string{"vm-" + strings.ToLower(app)})
	auth := basic("vm-user", "vm-password")
	b := instanceBody{app: app, id: "vm-1:" + app + ":8080", host: "192.0.2.10", ip: "192.0.2.10", port: 8080}
	base := g.eurekaURL() + "/apps/"
	want(t, "register its app", do(t, call{method: http.MethodPost, url: base + strings.ToUpper(app), body: b.xml(), contentType: "application/xml", auth: auth}), http.StatusNoContent, "")
	want(t, "override its status", do(t, call{method: http.MethodPut, url: base + strings.ToUpper(app) + "/" + b.id + "/status?value=OUT_OF_SERVICE", auth: auth}), http.StatusOK, "")
	ob := b
	ob.app, ob.id = other, "vm-1:"+other+":8080"
	want(t, "register another app", do(t, call{method: http.MethodPost, url: base + strings.ToUpper(other), body: ob.json(), contentType: "application/json", auth: auth}), http.StatusForbidden, gateway.ReasonAppNotBound)
	mb := b
	mb.metadata = map[string]string{eureka.MetaManagedBy: eureka.ManagedByValue}
	want(t, "write Eurekube's markers", do(t, call{method: http.MethodPost, url: base + strings.ToUpper(app), body: mb.json(), contentType: "application/json", auth: auth}), http.StatusForbidden, gateway.ReasonForgedMarkers)
	want(t, "wrong password", do(t, call{method: http.MethodPut, url: base + strings.ToUpper(app) + "/" + b.id, auth: basic("vm-user", "vm-passwore")}), http.StatusUnauthorized, gateway.ReasonBadCredentials)
	want(t, "cancel", do(t, call{method: http.MethodDelete, url: base + strings.ToUpper(app) + "/" + b.id, auth: auth}), http.StatusOK, "")
}

// Audit mode lets every write through and records what enforce would have
// refused.
func TestAuditMode_LetsThroughAndRecords(t *testing.T) {
	needsServers(t)
	g := startGateway(t, gwOptions{mode: gateway.ModeAudit})
	app := newApp("audit")
	b := instanceBody{app: app, id: "anon:" + app + ":8080", host: "192.0.2.20", ip: "192.0.2.20", port: 8080}
	want(t, "anonymous register", do(t, call{method: http.MethodPost, url: g.eurekaURL() + "/apps/" + strings.ToUpper(app), body: b.json(), contentType: "application/json"}), http.StatusNoContent, "")
	if listed(t, strings.ToUpper(app), b.id) == "" {
		t.Fatal("audit mode: the write did not reach Eureka")
	}
	if !strings.Contains(g.log(), `"verdict":"audited"`) || !strings.Contains(g.log(), gateway.ReasonNoIdentity) {
		t.Fatalf("audit mode: no audit line naming the refusal")
	}
	do(t, call{method: http.MethodDelete, url: server.URL() + "/apps/" + strings.ToUpper(app) + "/" + b.id, auth: direct()})
}

// flakyReviewer is the real TokenReview, with an outage the test switches
// on: the API server cannot be made unreachable for one client alone.
type flakyReviewer struct {
	real gateway.TokenReviewer
	down atomic.Bool
}

func (f *flakyReviewer) Review(ctx context.Context, token string, aud []string) (authnv1.TokenReviewStatus, error) {
	if f.down.Load() {
		return authnv1.TokenReviewStatus{}, fmt.Errorf("dial tcp: connection refused")
	}
	return f.real.Review(ctx, token, aud)
}

// While TokenReview cannot be reached, identities verified before keep
// heartbeating and may cancel; new registrations wait, and say why.
func TestTokenReviewDown_VerifiedIdentitiesKeepTheirLeases(t *testing.T) {
	needsServers(t)
	r := &flakyReviewer{real: gateway.ClientReviewer{Client: k8s}}
	g := startGateway(t, gwOptions{reviewer: r, tokenTTL: time.Second})
	ns := newNamespace(t)
	app := newApp("outage")
	grant(t, []string{app}, []string{ns}, nil)
	p, q := newPod(t, ns, "known", nil), newPod(t, ns, "new", nil)
	pt, qt := bearer(p.token(t, gateway.DefaultAudience)), bearer(q.token(t, gateway.DefaultAudience))
	base := g.eurekaURL() + "/apps/" + strings.ToUpper(app)
	pb := instanceBody{app: app, id: p.instanceID(app, 8080), host: p.ip(), ip: p.ip(), port: 8080}
	want(t, "register before the outage", do(t, call{method: http.MethodPost, url: base, body: pb.json(), contentType: "application/json", auth: pt}), http.StatusNoContent, "")
	r.down.Store(true)
	// Past the verdict's second of freshness, the heartbeat is answered
	// from the identity verified before the outage.
	harnessEventually(t, "p's heartbeat through the outage, on the identity verified before", func() error {
		a := do(t, call{method: http.MethodPut, url: base + "/" + pb.id, auth: pt})
		if a.status != http.StatusOK {
			return fmt.Errorf("%d %s", a.status, a.body)
		}
		if !strings.Contains(g.log(), `"stale":true`) {
			return fmt.Errorf("not yet answered from the stale identity")
		}
		return nil
	})
	qb := instanceBody{app: app, id: q.instanceID(app, 8080), host: q.ip(), ip: q.ip(), port: 8080}
	want(t, "a new registration during the outage", do(t, call{method: http.MethodPost, url: g.eurekaURL() + "/apps/" + strings.ToUpper(app), body: qb.json(), contentType: "application/json", auth: qt}), http.StatusServiceUnavailable, gateway.ReasonReviewDown)
	want(t, "p registers again during the outage", do(t, call{method: http.MethodPost, url: g.eurekaURL() + "/apps/" + strings.ToUpper(app), body: pb.json(), contentType: "application/json", auth: pt}), http.StatusServiceUnavailable, gateway.ReasonReviewDown)
	want(t, "p cancels during the outage", do(t, call{method: http.MethodDelete, url: g.eurekaURL() + "/apps/" + strings.ToUpper(app) + "/" + pb.id, auth: pt}), http.StatusOK, "")
}

// stallingReviewer answers no TokenReview before its caller gives up: a
// review slower than the client's patience, which the real API server
// cannot be made to be on demand.
type stallingReviewer struct{}

func (stallingReviewer) Review(ctx context.Context, _ string, _ []string) (authnv1.TokenReviewStatus, error) {
	<-ctx.Done()
	return authnv1.TokenReviewStatus{}, ctx.Err()
}

// A write whose caller gives up while the gateway cannot yet decide is
// abandoned, not refused: its audit line says so, no refusal is
// recorded, and nothing reaches Eureka.
func TestAbandonedWrite_IsRecordedAsAbandonedNotRefused(t *testing.T) {
	needsServers(t)
	g := startGateway(t, gwOptions{reviewer: stallingReviewer{}})
	ns := newNamespace(t)
	app := newApp("abandoned")
	grant(t, []string{app}, []string{ns}, nil)
	p := newPod(t, ns, "impatient", nil)
	b := instanceBody{app: app, id: p.instanceID(app, 8080), host: p.ip(), ip: p.ip(), port: 8080}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, g.eurekaURL()+"/apps/"+strings.ToUpper(app), strings.NewReader(b.json()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", bearer(p.token(t, gateway.DefaultAudience)))
	if resp, err := http.DefaultClient.Do(req); err == nil {
		resp.Body.Close()
		t.Fatalf("the gateway answered %d before the caller gave up", resp.StatusCode)
	}
	harnessEventually(t, "the abandoned write's audit line", func() error {
		if !strings.Contains(g.log(), `"verdict":"abandoned"`) {
			return fmt.Errorf("no audit line with the verdict abandoned yet")
		}
		return nil
	})
	if strings.Contains(g.log(), `"verdict":"refused"`) {
		t.Fatal("a write its caller abandoned was recorded as refused")
	}
	if listed(t, strings.ToUpper(app), b.id) != "" {
		t.Fatal("the abandoned write reached Eureka")
	}
}

// The manager's pods write what the reconciler keeps, for any app: a
// Standby override on another namespace's instance, its removal, a cancel.
// Another ServiceAccount of the manager's namespace is not the manager.
func TestManager_WritesWhatTheReconcilerKeeps(t *testing.T) {
	needsServers(t)
	system := newNamespace(t)
	g := startGateway(t, gwOptions{manager: system + "/eurekube-manager"})
	ns := newNamespace(t)
	app := newApp("reconciled")
	grant(t, []string{app}, []string{ns}, nil)
	p := newPod(t, ns, "reconciled", nil)
	b := instanceBody{app: app, id: p.instanceID(app, 8080), host: p.ip(), ip: p.ip(), port: 8080}
	base := g.eurekaURL() + "/apps/" + strings.ToUpper(app)
	want(t, "the pod registers", do(t, call{method: http.MethodPost, url: base, body: b.json(), contentType: "application/json", auth: bearer(p.token(t, gateway.DefaultAudience))}), http.StatusNoContent, "")
	mgr := newPodAs(t, system, "eurekube-manager-1", "eurekube-manager", "10.245.0.1", nil)
	mt := bearer(mgr.token(t, gateway.DefaultAudience))
	want(t, "the manager holds it Standby", do(t, call{method: http.MethodPut, url: base + "/" + b.id + "/status?value=OUT_OF_SERVICE", auth: mt}), http.StatusOK, "")
	if !strings.Contains(listed(t, strings.ToUpper(app), b.id), `"status":"OUT_OF_SERVICE"`) {
		t.Fatalf("the manager's override did not reach Eureka")
	}
	other := newPodAs(t, system, "not-the-manager", "other", "10.245.0.2", nil)
	want(t, "another ServiceAccount of its namespace", do(t, call{method: http.MethodDelete, url: base + "/" + b.id + "/status", auth: bearer(other.token(t, gateway.DefaultAudience))}), http.StatusForbidden, ownership.ReasonNotGranted)
	want(t, "the manager removes the override", do(t, call{method: http.MethodDelete, url: base + "/" + b.id + "/status?value=UP", auth: mt}), http.StatusOK, "")
	want(t, "the manager cancels an orphan", do(t, call{method: http.MethodDelete, url: base + "/" + b.id, auth: mt}), http.StatusOK, "")
	if !strings.Contains(g.log(), `"who":"Eurekube's manager (pod `+system+`/eurekube-manager-1)"`) {
		t.Fatalf("no audit line naming the manager")
	}
}
