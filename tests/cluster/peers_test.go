package cluster_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"k8s.io/utils/ptr"

	"github.com/eurekube/eurekube/tests/cluster"
	"github.com/eurekube/eurekube/tests/harness"
)

// Eureka runs as replicating peers, and the peer every registrar talks to
// (the first URL of the syncer's list) is killed with SIGKILL mid-rollout.
// Registrars fail over to the next peer within the same request, the
// Spring client to the next URL of its defaultZone: no call by name fails,
// and each live peer then lists exactly the new pods, once each, with no
// instance of an old pod left behind. The killed peer, started again,
// copies the registry from the others.
//
// Not parallel: every other test reads and writes through these peers.
func TestRollingUpdate_EurekaPeerKilledNoCallFails(t *testing.T) {
	ctx := context.Background()
	app := cluster.App{Namespace: "depot", Name: "parcels", Replicas: 3, DrainSeconds: ptr.To[int32](drainSeconds)}
	deploy(t, app, nil)
	v := settle(t, app, 3*time.Minute)
	sc := startClient(t, app.Name)
	waitAnswered(t, sc, harness.SpringStats{}, v.ReadyPods)

	first := c.Peers.Servers[0]
	before := sc.StatsT(t)
	began := time.Now()
	rollout(t, app)
	waitFirstRolled(t, app)
	first.Kill()
	t.Logf("killed the first Eureka peer %s %s after the rollout began", first.Addr(), time.Since(began).Round(time.Millisecond))
	restarted := false
	t.Cleanup(func() {
		if !restarted { // the next tests need every peer
			_ = first.Start(context.Background())
		}
	})

	pods := waitRolledOut(t, app, 4*time.Minute)
	t.Logf("rolled out %s after the rollout began", time.Since(began).Round(time.Second))
	for _, peer := range c.Peers.Servers[1:] {
		settledOn(t, app, peer, pods)
	}
	waitAnswered(t, sc, before, pods)
	d := sc.StatsT(t).Since(before)
	t.Logf("rollout with a Eureka peer killed: %d calls by name, %d failed, answered by %v", d.OK+d.Failed, d.Failed, d.ByInstance)
	if d.Failed != 0 {
		t.Errorf("%d of %d calls failed; last error: %s", d.Failed, d.OK+d.Failed, d.LastError)
	}

	sctx, cancel := context.WithTimeout(ctx, 6*time.Minute)
	defer cancel()
	if err := first.Start(sctx); err != nil {
		t.Fatal(err)
	}
	restarted = true
	settledOn(t, app, first, pods)
}

// settledOn waits until peer lists exactly pods UP, once each, and no
// other instance of this cluster.
func settledOn(t *testing.T, app cluster.App, peer *harness.Eureka, pods []string) {
	t.Helper()
	harness.Eventually(t, 2*time.Minute, fmt.Sprintf("peer %s lists exactly the pods %v UP", peer.Addr(), pods), func() error {
		v, err := c.LookThrough(context.Background(), app, peer)
		if err != nil {
			return err
		}
		if !slices.Equal(v.UP, pods) || len(v.Other) > 0 {
			return fmt.Errorf("UP %v, also %v", v.UP, v.Other)
		}
		return nil
	})
}
