package registrar_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/eurekube/eurekube/certs"
	"github.com/eurekube/eurekube/eureka"
	"github.com/eurekube/eurekube/tests/harness"
)

// An app serving HTTP on its port and HTTPS on its secure port, registered
// with both: a real Spring Cloud client calling it by name
// (http://checkout/) is sent to https://127.0.0.1:<securePort>/ by Spring
// Cloud LoadBalancer, and every call it makes, once the first succeeds, is
// answered over HTTPS, none over plain HTTP and none failing.
func TestSecurePort_SpringCallersSwitchToHTTPS(t *testing.T) {
	ctx := context.Background()
	const plainName, secureName = "plain", "secure"
	ca, err := certs.NewCA("checkout app CA", 24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	app := harness.AppWithT(t, harness.AppOptions{Healthy: true, Name: plainName, TLS: &harness.AppTLS{CA: ca, Name: secureName}})

	settings := injectedSettings("checkout", app.Port, server.URL())
	settings.SecurePort = app.SecurePort
	p := startRegistrar(t, envOf(settings))
	c := eurekaClient(t)
	harness.Eventually(t, 30*time.Second, "registered UP", statusIs(ctx, c, p, eureka.StatusUp))
	inst, err := c.Instance(ctx, p.app, p.instanceID())
	if err != nil {
		t.Fatal(err)
	}
	if !inst.SecurePortEnabled || inst.SecurePort != app.SecurePort || inst.Port != app.Port {
		t.Fatalf("registered port %d, secure port %d (enabled %v); want %d and %d enabled",
			inst.Port, inst.SecurePort, inst.SecurePortEnabled, app.Port, app.SecurePort)
	}

	logDir := t.TempDir()
	caFile := filepath.Join(t.TempDir(), "ca.crt")
	if err := os.WriteFile(caFile, ca.PEM, 0o600); err != nil {
		t.Fatal(err)
	}
	spring, err := harness.StartSpringClient(ctx, harness.SpringClientOptions{
		EurekaURL: server.URL(), Service: settings.VIPAddress, CacheSeconds: 2, LogDir: logDir, TrustCAFile: caFile,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = spring.Stop()
		if t.Failed() {
			t.Logf("spring client output (tail):\n%s", spring.LogTail())
		}
	})

	// The client fails until its first registry fetch lists the instance;
	// from the first success on, nothing may fail.
	started := time.Now()
	var before harness.SpringStats
	harness.Eventually(t, 3*time.Minute, "a first successful call by name", func() error {
		s, err := spring.Stats(ctx)
		if err != nil {
			return err
		}
		if s.OK == 0 {
			return fmt.Errorf("no success yet (failed %d, last error %q)", s.Failed, s.LastError)
		}
		before = s
		return nil
	})
	firstOK := time.Since(started)
	const window = 100
	harness.Eventually(t, 3*time.Minute, fmt.Sprintf("%d more successful calls", window), func() error {
		s, err := spring.Stats(ctx)
		if err != nil {
			return err
		}
		if d := s.Since(before); d.OK < window {
			return fmt.Errorf("%d successful calls since the first (failed %d, last error %q)", d.OK, d.Failed, s.LastError)
		}
		return nil
	})
	after := spring.StatsT(t)
	d := after.Since(before)

	if d.Failed != 0 {
		t.Errorf("%d calls failed after the first success (last error %q)", d.Failed, after.LastError)
	}
	// Every successful call since the client started, not only the window.
	if len(after.ByInstance) != 1 || after.ByInstance[secureName] != after.OK {
		t.Errorf("answered by %v, want all %d calls by the %s listener", after.ByInstance, after.OK, secureName)
	}
	t.Logf("first success %s after the client answered (%d failed before it, last %q); then %d calls, %d failed, answered by %v; in all %d ok, by %v",
		firstOK.Round(time.Millisecond), before.Failed, before.LastError, d.OK, d.Failed, d.ByInstance, after.OK, after.ByInstance)
}
