package registrar_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/eurekube/eurekube/eureka"
	"github.com/eurekube/eurekube/sidecar"
	"github.com/eurekube/eurekube/tests/harness"
)

func TestRegistrar_FollowsAppHealthAndLeavesOnSIGTERM(t *testing.T) {
	ctx := context.Background()
	app := harness.AppT(t, false)
	p := startRegistrar(t, envOf(injectedSettings("orders", app.Port, server.URL())))
	c := eurekaClient(t)

	harness.Eventually(t, 30*time.Second, "registered STARTING while the app is not healthy", statusIs(ctx, c, p, eureka.StatusStarting))

	// One 200 ms health period, plus the registration and the poll.
	app.SetHealthy(true)
	harness.Eventually(t, 30*time.Second, "UP once the app is healthy", statusIs(ctx, c, p, eureka.StatusUp))

	app.SetHealthy(false)
	harness.Eventually(t, 30*time.Second, "DOWN after the failure threshold", statusIs(ctx, c, p, eureka.StatusDown))

	app.SetHealthy(true)
	harness.Eventually(t, 30*time.Second, "UP again after recovery", statusIs(ctx, c, p, eureka.StatusUp))

	// What a Spring Cloud client reads from GET /eureka/apps/{APP}.
	inst := springRead(t, "ORDERS", p.instanceID())
	if inst.HostName != "127.0.0.1" || inst.IPAddr != "127.0.0.1" {
		t.Errorf("hostName/ipAddr = %s/%s, want the pod IP 127.0.0.1", inst.HostName, inst.IPAddr)
	}
	if fmt.Sprint(inst.Port["$"]) != fmt.Sprint(app.Port) || inst.Port["@enabled"] != "true" {
		t.Errorf("port = %v, want %d enabled", inst.Port, app.Port)
	}
	if inst.VIPAddress != "orders" {
		t.Errorf("vipAddress = %q, want orders", inst.VIPAddress)
	}
	wantMeta := map[string]string{
		"zone": "zone-a", "version": "1.4.2",
		eureka.MetaManagedBy: eureka.ManagedByValue, eureka.MetaCluster: "cluster-test",
		eureka.MetaNamespace: "shop", eureka.MetaPod: p.name, eureka.MetaSyncer: "orders",
	}
	for k, v := range wantMeta {
		if inst.Metadata[k] != v {
			t.Errorf("metadata %s = %q, want %q", k, inst.Metadata[k], v)
		}
	}

	if err := p.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, 30*time.Second, "gone from the server after SIGTERM", func() error {
		_, err := c.Instance(ctx, p.app, p.instanceID())
		if errors.Is(err, eureka.ErrNotFound) {
			return nil
		}
		return fmt.Errorf("still registered (err %v)", err)
	})
	select {
	case <-p.Done():
	case <-time.After(30 * time.Second):
		t.Fatal("registrar did not exit after SIGTERM")
	}
	if p.ExitCode() != 0 {
		t.Fatalf("exit code %d after SIGTERM, want 0", p.ExitCode())
	}
}

func TestRegistrar_RegistersAgainWithMetadataWhenTheLeaseIsDeleted(t *testing.T) {
	ctx := context.Background()
	app := harness.AppT(t, true)
	p := startRegistrar(t, envOf(injectedSettings("payments", app.Port, server.URL())))
	c := eurekaClient(t)
	harness.Eventually(t, 30*time.Second, "UP", statusIs(ctx, c, p, eureka.StatusUp))

	if err := c.Cancel(ctx, p.app, p.instanceID()); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, 30*time.Second, "registered again after its lease was deleted", func() error {
		inst, err := c.Instance(ctx, p.app, p.instanceID())
		if err != nil {
			return err
		}
		if inst.Status != eureka.StatusUp || inst.Metadata["zone"] != "zone-a" || inst.Metadata[eureka.MetaPodUID] == "" {
			return fmt.Errorf("re-registered as %s with metadata %v", inst.Status, inst.Metadata)
		}
		return nil
	})
}

// The server can end up holding an older version of the instance than the
// registrar last registered: a STARTING registration delayed in the network
// and processed after the UP one, or a peer replicating old data. The
// registrar's heartbeat carries the version it registered, the server
// answers 404, and the registrar registers again.
func TestRegistrar_ReplacesAnOlderCopyTheServerHolds(t *testing.T) {
	ctx := context.Background()
	app := harness.AppT(t, true)
	p := startRegistrar(t, envOf(injectedSettings("billing", app.Port, server.URL())))
	c := eurekaClient(t)
	harness.Eventually(t, 30*time.Second, "UP", statusIs(ctx, c, p, eureka.StatusUp))

	current, err := c.Instance(ctx, p.app, p.instanceID())
	if err != nil {
		t.Fatal(err)
	}
	stale := current
	stale.Status = eureka.StatusStarting
	stale.LastDirtyTimestamp = time.Now().Add(-time.Hour)
	// Replace the registrar's copy with the stale one; a heartbeat falling
	// between the two calls re-registers at once, so try again then.
	harness.Eventually(t, 30*time.Second, "the server holds the stale copy", func() error {
		if err := c.Cancel(ctx, p.app, p.instanceID()); err != nil && !errors.Is(err, eureka.ErrNotFound) {
			return err
		}
		if err := c.Register(ctx, stale); err != nil {
			return err
		}
		return statusIs(ctx, c, p, eureka.StatusStarting)()
	})
	harness.Eventually(t, 30*time.Second, "UP again within a heartbeat (1 s)", statusIs(ctx, c, p, eureka.StatusUp))
}

func TestRegistrar_RegistersAgainAfterTheServerRestarts(t *testing.T) {
	ctx := context.Background()
	own := harness.EurekaT(t, harness.EurekaOptions{})
	app := harness.AppT(t, true)
	p := startRegistrar(t, envOf(injectedSettings("inventory", app.Port, own.URL())))
	c, err := eureka.New(eureka.Options{URLs: []string{own.URL()}})
	if err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, 30*time.Second, "UP", statusIs(ctx, c, p, eureka.StatusUp))
	restartCtx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if err := own.Restart(restartCtx); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, 30*time.Second, "registered again on the restarted server", func() error {
		inst, err := c.Instance(ctx, p.app, p.instanceID())
		if err != nil {
			return err
		}
		if inst.Metadata["version"] != "1.4.2" || inst.Metadata[eureka.MetaCluster] != "cluster-test" {
			return fmt.Errorf("metadata %v", inst.Metadata)
		}
		return nil
	})
	if !p.running() {
		t.Fatal("registrar exited during the server restart")
	}
}

func TestRegistrar_WaitsOutAnUnreachableEurekaWithBoundedLogs(t *testing.T) {
	t.Parallel() // minutes long; the other tests run beside it
	ctx := context.Background()
	proxy, err := harness.StartProxy(server.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer proxy.Close()
	proxy.Block()
	app := harness.AppT(t, true)
	s := injectedSettings("billing", app.Port, "http://"+proxy.Addr()+"/eureka")
	// Long enough a renewal interval that the 2 s retry cap applies (it is
	// kept under three quarters of the interval).
	s.RenewalInterval = 5 * time.Second
	// The app stays healthy throughout: a probe slow on a busy machine must
	// not flap it and log a DOWN and an UP the outage did not cause.
	s.Health.Period, s.Health.Timeout, s.Health.FailureThreshold = time.Second, time.Second, 3
	p := startRegistrar(t, envOf(s))
	c := eurekaClient(t)

	// Let it fail for minutes: until it has made 70 attempts (over two
	// minutes with a 2 s backoff cap), as its metrics report.
	harness.Eventually(t, 5*time.Minute, "two minutes of failed attempts", func() error {
		if !p.running() {
			t.Fatalf("registrar exited while Eureka was unreachable:\n%s", p.Log())
		}
		n := failedRequests(t, s.ListenAddr)
		if n < 70 {
			return fmt.Errorf("%v failed attempts so far", n)
		}
		return nil
	})
	if !p.running() {
		t.Fatalf("registrar exited while Eureka was unreachable:\n%s", p.Log())
	}
	// Start-up lines, the first failure, then one line a minute.
	if lines := strings.Count(p.Log(), "\n"); lines > 6 {
		t.Fatalf("%d log lines during the outage, want a bounded few:\n%s", lines, p.Log())
	}

	proxy.Unblock()
	// One backoff step (2 s cap, ±20 % jitter) plus a request, on a quiet
	// machine; the deadline leaves room for a busy one.
	back := time.Now()
	harness.Eventually(t, 30*time.Second, "registered once Eureka is back", statusIs(ctx, c, p, eureka.StatusUp))
	t.Logf("UP in Eureka %s after it was reachable again", time.Since(back).Round(time.Millisecond))
}

func TestRegistrar_WorksThroughTheSecondURLWhenTheFirstIsDead(t *testing.T) {
	ctx := context.Background()
	dead, _ := harness.FreePort()
	app := harness.AppT(t, true)
	p := startRegistrar(t, envOf(injectedSettings("shipping", app.Port, fmt.Sprintf("http://127.0.0.1:%d/eureka", dead), server.URL())))
	c := eurekaClient(t)
	harness.Eventually(t, 30*time.Second, "UP through the second URL", statusIs(ctx, c, p, eureka.StatusUp))
	hb := func() float64 { return metric(t, p, `eurekube_registrar_heartbeats_total{result="ok"}`) }
	harness.Eventually(t, 30*time.Second, "heartbeats through the second URL", func() error {
		if hb() < 2 {
			return fmt.Errorf("%v heartbeats", hb())
		}
		return nil
	})
	if n := metric(t, p, `eurekube_registrar_heartbeats_total{result="error"}`); n != 0 {
		t.Fatalf("%v heartbeats failed with one URL dead, want 0", n)
	}
}

func TestRegistrar_BadConfigurationExitsNamingTheVariable(t *testing.T) {
	for _, tc := range []struct {
		name, env, value string
	}{
		{"no app name", sidecar.EnvAppName, ""},
		{"port 0", sidecar.EnvPort, "0"},
		{"port not a number", sidecar.EnvPort, "http"},
		{"malformed URL", sidecar.EnvEurekaURLs, "eureka:8761"},
		{"a password in a URL", sidecar.EnvEurekaURLs, "http://orders:s3cret@eureka:8761/eureka"},
		{"negative interval", sidecar.EnvLeaseRenewalInterval, "-5s"},
		{"bad metadata", sidecar.EnvMetadata, "zone=a"},
		{"unknown health type", sidecar.EnvHealthType, "grpc"},
		{"no pod IP", sidecar.EnvPodIP, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := envOf(injectedSettings("config", 8080, server.URL()))
			env[tc.env] = tc.value
			p := startRegistrar(t, env)
			select {
			case <-p.Done():
			case <-time.After(10 * time.Second):
				t.Fatal("registrar did not exit on bad configuration")
			}
			out := strings.TrimSpace(p.Log())
			if p.ExitCode() == 0 || !strings.Contains(out, tc.env) || strings.Count(out, "\n") > 0 {
				t.Fatalf("exit %d, output %q: want non-zero and one line naming %s", p.ExitCode(), out, tc.env)
			}
			if strings.Contains(out, "s3cret") {
				t.Fatalf("output %q shows the URL's password", out)
			}
		})
	}
}

// springRead finds one instance in what a Spring client reads.
func springRead(t *testing.T, app, id string) harness.SpringInstance {
	t.Helper()
	instances, err := server.SpringRead(app)
	if err != nil {
		t.Fatal(err)
	}
	for _, inst := range instances {
		if inst.InstanceID == id {
			return inst
		}
	}
	t.Fatalf("%s not in GET /apps/%s", id, app)
	return harness.SpringInstance{}
}
