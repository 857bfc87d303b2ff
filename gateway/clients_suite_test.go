package gateway_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/eurekube/eurekube/eureka"
	"github.com/eurekube/eurekube/gateway"
	"github.com/eurekube/eurekube/sidecar"
	"github.com/eurekube/eurekube/tests/harness"
)

// hudl/fargo (behind package eureka: the manager's and the registrar's
// client) registers, renews, discovers and cancels through the gateway,
// with a client's credentials.
func TestFargo_WritesAndReadsThroughTheGateway(t *testing.T) {
	needsServers(t)
	g := startGateway(t, gwOptions{})
	app := newApp("fargo")
	secret := "fargo-" + strings.ToLower(app)
	clientSecret(t, secret, "fargo-vm", "fargo-password")
	grant(t, []string{app}, nil, []string{secret})
	c, err := eureka.New(eureka.Options{URLs: []string{g.eurekaURL()}, Username: "fargo-vm", Password: "fargo-password", Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	inst := eureka.Instance{App: app, InstanceID: "vm-1:" + app + ":8080", HostName: "192.0.2.40", IPAddr: "192.0.2.40", VIPAddress: strings.ToLower(app),
		Status: eureka.StatusUp, Port: 8080, PortEnabled: true, Metadata: map[string]string{"zone": "a"}}
	if err := c.Register(ctx, inst); err != nil {
		t.Fatalf("register through the gateway: %v", err)
	}
	if err := c.Heartbeat(ctx, app, inst.InstanceID, time.Time{}); err != nil {
		t.Fatalf("heartbeat through the gateway: %v", err)
	}
	got, err := c.Instances(ctx, app)
	if err != nil || len(got) != 1 || got[0].InstanceID != inst.InstanceID || got[0].Metadata["zone"] != "a" {
		t.Fatalf("discover through the gateway: %v %+v", err, got)
	}
	if err := c.Cancel(ctx, app, inst.InstanceID); err != nil {
		t.Fatalf("cancel through the gateway: %v", err)
	}
	if err := c.Heartbeat(ctx, app, inst.InstanceID, time.Time{}); eureka.StatusCode(err) != 404 {
		t.Fatalf("heartbeat after cancel: %v, want Eureka's 404", err)
	}
	// Another app's credentials: the gateway's 403 is final, with its reason.
	other := inst
	other.App, other.InstanceID = newApp("fargo-other"), "vm-1:other:8080"
	if err := c.Register(ctx, other); eureka.StatusCode(err) != 403 || !strings.Contains(err.Error(), gateway.ReasonAppNotBound) {
		t.Fatalf("register of an app not bound to the credentials: %v", err)
	}
}

// The registrar, as the webhook injects it with the gateway's token,
// registers its pod through the gateway, heartbeats, and cancels when the
// pod stops; the token file is read as the kubelet rotates it.
func TestRegistrar_RegistersItsPodThroughTheGateway(t *testing.T) {
	needsServers(t)
	g := startGateway(t, gwOptions{})
	bin, cleanup, err := harness.BuildTemp("./cmd/registrar")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cleanup)
	ns := newNamespace(t)
	app := newApp("registrar")
	grant(t, []string{app}, []string{ns}, nil)
	appSrv := harness.AppT(t, true)
	p := newPodAt(t, ns, strings.ToLower(app)+"-0", "127.0.0.1")
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte(p.token(t, gateway.DefaultAudience)), 0o600); err != nil {
		t.Fatal(err)
	}
	listen, _ := harness.FreePort()
	s := sidecar.Defaults(app, appSrv.Port)
	s.PodName, s.PodNamespace, s.PodUID, s.PodIP, s.NodeName = p.Name, p.Namespace, string(p.UID), "127.0.0.1", "node-1"
	s.EurekaURLs = []string{g.eurekaURL()}
	s.ClusterID, s.Syncer = clusterID, "registrar"
	s.GatewayTokenFile = tokenFile
	s.Health = sidecar.HealthConfig{Type: sidecar.HealthHTTP, Scheme: "http", Path: "/actuator/health", Port: appSrv.Port,
		Period: 200 * time.Millisecond, Timeout: 500 * time.Millisecond, FailureThreshold: 2, SuccessThreshold: 1}
	s.RenewalInterval, s.LeaseDuration = time.Second, 10*time.Second
	s.RequestTimeout, s.RetryMax = 2*time.Second, 2*time.Second
	s.ListenAddr = "127.0.0.1:" + strconv.Itoa(listen)
	env := map[string]string{}
	for _, e := range s.Env() {
		env[e.Name] = e.Value
	}
	proc, err := harness.StartRegistrar(bin, env, filepath.Join(dir, "registrar.log"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		proc.Kill()
		if t.Failed() {
			t.Logf("registrar output:\n%s", proc.Log())
		}
	})
	id := s.InstanceID()
	harnessEventually(t, "the registrar's instance UP in Eureka, registered through the gateway", func() error {
		if body := listed(t, strings.ToUpper(app), id); !strings.Contains(body, `"status":"UP"`) {
			return fmt.Errorf("not UP: %q", body)
		}
		return nil
	})
	harnessEventually(t, "its heartbeats allowed through the gateway", func() error {
		if n := strings.Count(g.log(), `"op":"renew"`); n < 2 {
			return fmt.Errorf("%d heartbeats audited", n)
		}
		return nil
	})
	// The kubelet writes a fresh token: the registrar sends it from its
	// next request on.
	if err := os.WriteFile(tokenFile+".new", []byte(p.token(t, gateway.DefaultAudience)), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tokenFile+".new", tokenFile); err != nil {
		t.Fatal(err)
	}
	if err := proc.Stop(); err != nil {
		t.Fatalf("registrar stop: %v", err)
	}
	harnessEventually(t, "the instance cancelled through the gateway", func() error {
		if body := listed(t, strings.ToUpper(app), id); body != "" {
			return fmt.Errorf("still listed")
		}
		return nil
	})
	if strings.Contains(g.log(), `"verdict":"refused"`) {
		t.Fatalf("a write of the registrar was refused")
	}
}

// Spring Cloud's own Eureka client, on a VM with its app's credentials in
// its service URL (as Spring sends them, Basic), registers, renews and
// cancels through the gateway, and a Spring Cloud client discovers it there
// and calls it; with another app's credentials, the VM is refused and
// never listed.
func TestSpring_VMAndClientThroughTheGateway(t *testing.T) {
	needsServers(t)
	g := startGateway(t, gwOptions{})
	app, stranger := newApp("springvm"), newApp("stranger")
	clientSecret(t, "spring-"+strings.ToLower(app), "spring-vm", "spring-vm-password")
	grant(t, []string{app}, nil, []string{"spring-" + strings.ToLower(app)})
	withCreds := strings.Replace(g.eurekaURL(), "http://", "http://spring-vm:spring-vm-password@", 1)
	logDir := t.TempDir()
	for _, d := range []string{"vm", "stranger", "caller"} {
		if err := os.MkdirAll(filepath.Join(logDir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	var vm, refused, caller *harness.SpringClient
	var errs [3]error
	wg.Add(3)
	go func() {
		defer wg.Done()
		vm, errs[0] = harness.StartSpringVM(ctx, harness.SpringVMOptions{EurekaURL: withCreds, App: app, Name: "vm-1", Host: "127.0.0.1", LogDir: filepath.Join(logDir, "vm")})
	}()
	go func() {
		defer wg.Done()
		refused, errs[1] = harness.StartSpringVM(ctx, harness.SpringVMOptions{EurekaURL: withCreds, App: stranger, Name: "vm-2", Host: "127.0.0.1", LogDir: filepath.Join(logDir, "stranger")})
	}()
	go func() {
		defer wg.Done()
		caller, errs[2] = harness.StartSpringClient(ctx, harness.SpringClientOptions{EurekaURL: g.eurekaURL(), Service: strings.ToLower(app), CacheSeconds: 2, LogDir: filepath.Join(logDir, "caller")})
	}()
	wg.Wait()
	for _, c := range []*harness.SpringClient{vm, refused, caller} {
		if c != nil {
			t.Cleanup(func() { _ = c.Stop() })
		}
	}
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	calls := func(n int64) harness.SpringStats {
		var got harness.SpringStats
		harnessEventually(t, fmt.Sprintf("%d calls of the Spring client answered by the VM it discovered through the gateway", n), func() error {
			s, err := caller.Stats(ctx)
			if err != nil {
				return err
			}
			if got = s; s.ByInstance["vm-1"] < n {
				return fmt.Errorf("%d calls answered by vm-1 (last error %q)", s.ByInstance["vm-1"], s.LastError)
			}
			return nil
		})
		return got
	}
	first, later := calls(1), calls(100)
	if later.Failed != first.Failed {
		t.Fatalf("%d calls failed once the VM was found (last %q)", later.Failed-first.Failed, later.LastError)
	}
	harnessEventually(t, "the stranger's registration refused", func() error {
		if !strings.Contains(g.log(), gateway.ReasonAppNotBound) {
			return fmt.Errorf("no refusal audited yet")
		}
		return nil
	})
	if body := appListed(t, stranger); body != "" {
		t.Fatalf("the stranger is listed: %s", body)
	}
	// The VM stops: Spring's client cancels through the gateway.
	if err := vm.Stop(); err != nil {
		t.Fatal(err)
	}
	harnessEventually(t, "the VM's cancel through the gateway", func() error {
		if !strings.Contains(g.log(), `"op":"cancel"`) {
			return fmt.Errorf("no cancel audited")
		}
		if body := appListed(t, app); strings.Contains(body, `"instanceId"`) {
			return fmt.Errorf("still listed: %s", body)
		}
		return nil
	})
}

// appListed reads the app from Eureka itself; "" when it has no instance.
func appListed(t testing.TB, app string) string {
	t.Helper()
	a := do(t, call{method: "GET", url: server.URL() + "/apps/" + strings.ToUpper(app), accept: "application/json", auth: direct()})
	if a.status == 404 {
		return ""
	}
	if a.status != 200 {
		t.Fatalf("read app %s from Eureka: %d %s", app, a.status, a.body)
	}
	return a.body
}

// A Eureka server down: the gateway moves on to the next, as the
// registrar does; with none answering, a client gets 503 and tries its
// next URL.
func TestEurekaPeerDown_TheGatewayFailsOver(t *testing.T) {
	needsServers(t)
	port, err := harness.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	dead := fmt.Sprintf("http://127.0.0.1:%d/eureka", port)
	g := startGatewayTo(t, []string{dead, server.URL()})
	app := newApp("failover")
	secret := "failover-" + strings.ToLower(app)
	clientSecret(t, secret, "failover-vm", "failover-password")
	grant(t, []string{app}, nil, []string{secret})
	auth := basic("failover-vm", "failover-password")
	b := instanceBody{app: app, id: "vm-1:" + app + ":8080", host: "192.0.2.50", ip: "192.0.2.50", port: 8080}
	want(t, "register with the first server down", do(t, call{method: "POST", url: g.eurekaURL() + "/apps/" + strings.ToUpper(app), body: b.json(), contentType: "application/json", auth: auth}), 204, "")
	want(t, "read with the first server down", do(t, call{method: "GET", url: g.eurekaURL() + "/apps/" + strings.ToUpper(app), accept: "application/json"}), 200, "")
	none := startGatewayTo(t, []string{dead})
	want(t, "read with every server down", do(t, call{method: "GET", url: none.eurekaURL() + "/apps", accept: "application/json"}), 503, "EurekaUnavailable")
	want(t, "cancel", do(t, call{method: "DELETE", url: g.eurekaURL() + "/apps/" + strings.ToUpper(app) + "/" + b.id, auth: auth}), 200, "")
}
