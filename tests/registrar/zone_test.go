package registrar_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/eurekube/eurekube/eureka"
	"github.com/eurekube/eurekube/sidecar"
	"github.com/eurekube/eurekube/tests/harness"
)

// The zone Spring Cloud LoadBalancer's zone preference compares: the pod's
// zone label, as the kubelet shows it in a file, registered as metadata
// zone; registered again when the label comes or changes (the manager
// copies it where Kubernetes does not), and never over a zone the syncer
// set itself.
func TestRegistrar_RegistersThePodsZoneAndFollowsIt(t *testing.T) {
	ctx := context.Background()
	app := harness.AppT(t, true)
	c := eurekaClient(t)

	s := injectedSettings("zoned", app.Port, server.URL())
	delete(s.Metadata, sidecar.MetaZone)
	s.ZoneFile = filepath.Join(t.TempDir(), "zone")
	setTraffic(t, s.ZoneFile, "") // the label is not there yet
	p := startRegistrar(t, envOf(s))
	harness.Eventually(t, 30*time.Second, "UP without a zone", zoneIs(ctx, c, p, ""))

	setTraffic(t, s.ZoneFile, "zone-b")
	harness.Eventually(t, 30*time.Second, "registered again in zone-b", zoneIs(ctx, c, p, "zone-b"))

	set := injectedSettings("zoned", app.Port, server.URL()) // metadata zone-a
	set.ZoneFile = filepath.Join(t.TempDir(), "zone")
	setTraffic(t, set.ZoneFile, "zone-b")
	q := startRegistrar(t, envOf(set))
	harness.Eventually(t, 30*time.Second, "the syncer's zone-a kept", zoneIs(ctx, c, q, "zone-a"))
}

func zoneIs(ctx context.Context, c *eureka.Client, p *pod, want string) func() error {
	return func() error {
		inst, err := c.Instance(ctx, p.app, p.instanceID())
		if err != nil {
			return err
		}
		if inst.Status != eureka.StatusUp || inst.Metadata[sidecar.MetaZone] != want {
			return fmt.Errorf("%s in zone %q, want UP in %q", inst.Status, inst.Metadata[sidecar.MetaZone], want)
		}
		return nil
	}
}
