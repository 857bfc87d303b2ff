package registrar_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/eurekube/eurekube/api/v1alpha1"
	"github.com/eurekube/eurekube/eureka"
	"github.com/eurekube/eurekube/tests/harness"
)

// trafficFile is the pod's eurekube.io/traffic annotation as the kubelet
// writes it into the downward-API volume.
func trafficFile(t *testing.T, content string) string {
	t.Helper()
	file := filepath.Join(t.TempDir(), "traffic")
	setTraffic(t, file, content)
	return file
}

// listedWith reads the instance straight from the registry.
func listedWith(ctx context.Context, c *eureka.Client, p *pod, status, override eureka.Status) func() error {
	return func() error {
		inst, err := c.Instance(ctx, p.app, p.instanceID())
		if err != nil {
			return err
		}
		if inst.Status != status || inst.OverriddenStatus != override {
			return fmt.Errorf("listed %s with override %s, want %s with override %s", inst.Status, inst.OverriddenStatus, status, override)
		}
		return nil
	}
}

// A pod of a Standby syncer never takes traffic: its first registration
// carries the override, and so does every registration after Eureka lost
// it. Once the file says Serve and the override is removed (as the manager
// does), it registers UP.
func TestRegistrar_StandbyPodIsOutOfServiceFromItsFirstRegistration(t *testing.T) {
	ctx := context.Background()
	app := harness.AppT(t, true)
	s := injectedSettings("standby", app.Port, server.URL())
	s.TrafficFile = trafficFile(t, "Standby\n")
	p := startRegistrar(t, envOf(s))
	c := eurekaClient(t)

	// Every read from the start: never UP, the override from the first.
	deadline := time.Now().Add(30 * time.Second)
	var seen []string
	for {
		inst, err := c.Instance(ctx, p.app, p.instanceID())
		switch {
		case errors.Is(err, eureka.ErrNotFound):
		case err != nil:
			t.Fatal(err)
		case inst.Status == eureka.StatusUp || inst.OverriddenStatus != eureka.StatusOutOfService:
			t.Fatalf("listed %s with override %s (after %v): a Standby pod took traffic", inst.Status, inst.OverriddenStatus, seen)
		default:
			if len(seen) == 0 || seen[len(seen)-1] != string(inst.Status) {
				seen = append(seen, string(inst.Status))
			}
		}
		if len(seen) > 0 && seen[len(seen)-1] == string(eureka.StatusOutOfService) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not OUT_OF_SERVICE in 30 s (seen %v)", seen)
		}
		time.Sleep(20 * time.Millisecond)
	}

	// Eureka forgets it (a restart, a lost lease): it comes back out of
	// traffic.
	if err := c.Cancel(ctx, p.app, p.instanceID()); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, 30*time.Second, "registered again OUT_OF_SERVICE",
		listedWith(ctx, c, p, eureka.StatusOutOfService, eureka.StatusOutOfService))

	// Cut-over: the annotation says Serve, and the override is removed
	// without a value: the next heartbeat is refused and the registrar
	// registers again, UP, with no override.
	setTraffic(t, s.TrafficFile, "Serve")
	if err := c.RemoveStatusOverride(ctx, p.app, p.instanceID(), ""); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, 30*time.Second, "UP without override after the cut-over",
		listedWith(ctx, c, p, eureka.StatusUp, eureka.StatusUnknown))
}

// A pod injected before the traffic file existed registers as it always
// did.
func TestRegistrar_MissingTrafficFileRegistersWithoutOverride(t *testing.T) {
	ctx := context.Background()
	app := harness.AppT(t, true)
	s := injectedSettings("nofile", app.Port, server.URL())
	s.TrafficFile = filepath.Join(t.TempDir(), "traffic")
	p := startRegistrar(t, envOf(s))
	c := eurekaClient(t)
	harness.Eventually(t, 30*time.Second, "UP without override",
		listedWith(ctx, c, p, eureka.StatusUp, eureka.StatusUnknown))
}

// Once its syncer is deleted, the manager writes Detached on the pod: the
// registrar leaves Eureka and stays out while the app keeps running, so an
// uninstall leaves nothing behind. Recreated, it registers again.
func TestRegistrar_DetachedPodLeavesEurekaAndStaysOut(t *testing.T) {
	ctx := context.Background()
	app := harness.AppT(t, true)
	s := injectedSettings("detached", app.Port, server.URL())
	s.TrafficFile = trafficFile(t, "Serve\n")
	p := startRegistrar(t, envOf(s))
	c := eurekaClient(t)
	harness.Eventually(t, 30*time.Second, "UP", listedWith(ctx, c, p, eureka.StatusUp, eureka.StatusUnknown))

	setTraffic(t, s.TrafficFile, v1alpha1.TrafficDetached+"\n")
	harness.Eventually(t, time.Minute, "gone from Eureka", func() error {
		if _, err := c.Instance(ctx, p.app, p.instanceID()); !errors.Is(err, eureka.ErrNotFound) {
			return fmt.Errorf("still listed (err %v)", err)
		}
		return nil
	})
	// It stays out: three renewal intervals later, still not listed, and
	// the registrar still runs (the pod is not disturbed).
	for end := time.Now().Add(3 * s.RenewalInterval); time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
		if _, err := c.Instance(ctx, p.app, p.instanceID()); !errors.Is(err, eureka.ErrNotFound) {
			t.Fatalf("listed again while detached (err %v)", err)
		}
	}
	if p.Exited() {
		t.Fatalf("the registrar exited (%d) once detached; it must idle until the pod stops:\n%s", p.ExitCode(), p.LogTail())
	}

	setTraffic(t, s.TrafficFile, "Serve\n")
	harness.Eventually(t, time.Minute, "UP again once the syncer is back", listedWith(ctx, c, p, eureka.StatusUp, eureka.StatusUnknown))
}

// At the default renewal interval (30 s), a pod whose syncer is deleted
// leaves Eureka as soon as the kubelet writes Detached, not at its next
// heartbeat: namespace deletions and uninstalls wait for it. And it comes
// back as soon as the syncer does. Each deadline is half the time the
// next heartbeat would take (at least 27 s away, with its jitter).
func TestRegistrar_DetachedLeavesAndReturnsWithoutWaitingForAHeartbeat(t *testing.T) {
	ctx := context.Background()
	app := harness.AppT(t, true)
	s := injectedSettings("detachedsoon", app.Port, server.URL())
	s.RenewalInterval, s.LeaseDuration = 30*time.Second, 90*time.Second
	s.TrafficFile = trafficFile(t, "Serve\n")
	p := startRegistrar(t, envOf(s))
	c := eurekaClient(t)
	harness.Eventually(t, 30*time.Second, "UP", listedWith(ctx, c, p, eureka.StatusUp, eureka.StatusUnknown))

	setTraffic(t, s.TrafficFile, v1alpha1.TrafficDetached+"\n")
	detached := time.Now()
	harness.Eventually(t, 13*time.Second, "gone from Eureka before the next heartbeat", func() error {
		if _, err := c.Instance(ctx, p.app, p.instanceID()); !errors.Is(err, eureka.ErrNotFound) {
			return fmt.Errorf("still listed (err %v)", err)
		}
		return nil
	})
	t.Logf("gone from Eureka %s after the traffic file said Detached", time.Since(detached).Round(time.Millisecond))

	setTraffic(t, s.TrafficFile, "Serve\n")
	back := time.Now()
	harness.Eventually(t, 13*time.Second, "UP again before the next heartbeat", listedWith(ctx, c, p, eureka.StatusUp, eureka.StatusUnknown))
	t.Logf("UP again %s after the traffic file said Serve", time.Since(back).Round(time.Millisecond))
}
