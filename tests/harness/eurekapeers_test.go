package harness_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/eurekube/eurekube/eureka"
	"github.com/eurekube/eurekube/tests/harness"
)

// peersReplicate bounds how long a change on one peer may take to reach
// the others, and a restarted peer to list its peers' instances: they take
// about a second, but the machine may be busy.
const peersReplicate = 60 * time.Second

const peersApp = "EUREKUBE-PEERS-TEST"

func peersInstance(id string) eureka.Instance {
	return eureka.Instance{
		App: peersApp, InstanceID: id, HostName: "10.0.0.7", IPAddr: "10.0.0.7", VIPAddress: "eurekube-peers-test",
		Status: eureka.StatusUp, Port: 8080, PortEnabled: true,
		// No heartbeats needed while a peer restarts on a busy machine:
		// what a peer lists after its restart must come from its peers.
		Duration: 10 * time.Minute,
	}
}

// peersClients are one client per peer, each talking to that peer alone.
func peersClients(t *testing.T, peers *harness.EurekaPeers) []*eureka.Client {
	t.Helper()
	clients := make([]*eureka.Client, len(peers.Servers))
	for i, url := range peers.URLs() {
		c, err := eureka.New(eureka.Options{URLs: []string{url}, Timeout: 15 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		clients[i] = c
	}
	return clients
}

// onPeers waits until cond holds on each of the peers (0-based indexes)
// and logs how long after since each first did.
func onPeers(t *testing.T, since time.Time, what string, peers []int, cond func(peer int) error) {
	t.Helper()
	took := map[int]time.Duration{}
	harness.Eventually(t, peersReplicate, what, func() error {
		var errs []error
		for _, p := range peers {
			if _, ok := took[p]; ok {
				continue
			}
			if err := cond(p); err != nil {
				errs = append(errs, fmt.Errorf("peer %d: %w", p+1, err))
				continue
			}
			took[p] = time.Since(since)
		}
		return errors.Join(errs...)
	})
	for _, p := range peers {
		t.Logf("%s: peer %d after %.2f s", what, p+1, took[p].Seconds())
	}
}

// listedWith is nil when the peer lists id with status.
func listedWith(t *testing.T, c *eureka.Client, id string, status eureka.Status) error {
	inst, err := c.Instance(t.Context(), peersApp, id)
	if err != nil {
		return err
	}
	if inst.Status != status {
		return fmt.Errorf("%s is %s, want %s", id, inst.Status, status)
	}
	return nil
}

// TestEurekaPeers_Replicate proves, with three real servers, that what a
// client does on one peer reaches the others, that the others serve and
// renew while one is down, and that a peer started again copies the
// registry from its peers (including an OUT_OF_SERVICE instance, which a
// peer's client would filter out by default, and with its first peer
// down).
func TestEurekaPeers_Replicate(t *testing.T) {
	started := time.Now()
	peers := harness.EurekaPeersT(t, harness.EurekaOptions{}, 3)
	t.Logf("3 peers answered after %.1f s: %s", time.Since(started).Seconds(), peers.DefaultZone())
	c := peersClients(t, peers)
	ctx := t.Context()

	// A registration on peer 1 reaches peers 2 and 3.
	a := peersInstance("peers-a")
	since := time.Now()
	if err := c[0].Register(ctx, a); err != nil {
		t.Fatal(err)
	}
	onPeers(t, since, "registration on peer 1 listed", []int{1, 2}, func(p int) error {
		return listedWith(t, c[p], a.InstanceID, eureka.StatusUp)
	})

	// A status change on peer 2 reaches peers 1 and 3.
	since = time.Now()
	if err := c[1].SetStatusOverride(ctx, peersApp, a.InstanceID, eureka.StatusOutOfService); err != nil {
		t.Fatal(err)
	}
	onPeers(t, since, "OUT_OF_SERVICE on peer 2 listed", []int{0, 2}, func(p int) error {
		return listedWith(t, c[p], a.InstanceID, eureka.StatusOutOfService)
	})

	// A cancel on peer 2 reaches peers 1 and 3.
	since = time.Now()
	if err := c[1].Cancel(ctx, peersApp, a.InstanceID); err != nil {
		t.Fatal(err)
	}
	onPeers(t, since, "cancel on peer 2 unlisted", []int{0, 2}, func(p int) error {
		_, err := c[p].Instance(ctx, peersApp, a.InstanceID)
		if errors.Is(err, eureka.ErrNotFound) {
			return nil
		}
		if err == nil {
			return fmt.Errorf("%s still listed", a.InstanceID)
		}
		return err
	})

	// Two instances on peer 1, one UP, one OUT_OF_SERVICE, on every peer;
	// no peer lists itself or the others as an app.
	b, o := peersInstance("peers-b"), peersInstance("peers-o")
	since = time.Now()
	for _, inst := range []eureka.Instance{b, o} {
		if err := c[0].Register(ctx, inst); err != nil {
			t.Fatal(err)
		}
	}
	if err := c[0].SetStatusOverride(ctx, peersApp, o.InstanceID, eureka.StatusOutOfService); err != nil {
		t.Fatal(err)
	}
	bothListed := func(p int) error {
		return errors.Join(listedWith(t, c[p], b.InstanceID, eureka.StatusUp),
			listedWith(t, c[p], o.InstanceID, eureka.StatusOutOfService))
	}
	onPeers(t, since, "UP and OUT_OF_SERVICE instances on peer 1 listed", []int{1, 2}, bothListed)
	onPeers(t, since, "registry holds exactly the 2 instances", []int{0, 1, 2}, func(p int) error {
		r, err := c[p].Applications(ctx)
		if err != nil {
			return err
		}
		if r.Len() != 2 || len(r.Instances(peersApp)) != 2 {
			return fmt.Errorf("%d instances, %d of %s, want 2 of %s alone", r.Len(), len(r.Instances(peersApp)), peersApp, peersApp)
		}
		return nil
	})

	// Peer 1 crashes: peers 2 and 3 still list both, and peer 2 renews.
	peers.Servers[0].Kill()
	for _, p := range []int{1, 2} {
		if err := bothListed(p); err != nil {
			t.Fatalf("peer %d with peer 1 down: %v", p+1, err)
		}
	}
	if err := c[1].Heartbeat(ctx, peersApp, b.InstanceID, time.Time{}); err != nil {
		t.Fatalf("heartbeat on peer 2 with peer 1 down: %v", err)
	}

	// Peer 3 restarts while peer 1, the first URL of its defaultZone, is
	// down: it starts, and copies the registry from peer 2. The
	// OUT_OF_SERVICE instance proves the copy: b may also come back through
	// peer 2 retrying the heartbeat's replication (404, so it registers b
	// again), but nothing renews o.
	since = time.Now()
	if err := peers.Servers[2].Restart(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("peer 3 restarted with peer 1 down, answered after %.1f s", time.Since(since).Seconds())
	onPeers(t, time.Now(), "peer 3 restarted with peer 1 down, its peers' instances listed (after answering)", []int{2}, bothListed)

	// Peer 1 starts again and copies the registry from its peers: nothing
	// else sends it the OUT_OF_SERVICE instance (no client renews it).
	since = time.Now()
	if err := peers.Servers[0].Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("peer 1 started again, answered after %.1f s", time.Since(since).Seconds())
	onPeers(t, time.Now(), "peer 1 started again, its peers' instances listed (after answering)", []int{0}, bothListed)

	// The restarted peer 1 replicates again: a cancel on it reaches 2 and 3.
	since = time.Now()
	if err := c[0].Cancel(ctx, peersApp, b.InstanceID); err != nil {
		t.Fatal(err)
	}
	onPeers(t, since, "cancel on restarted peer 1 unlisted", []int{1, 2}, func(p int) error {
		_, err := c[p].Instance(ctx, peersApp, b.InstanceID)
		if errors.Is(err, eureka.ErrNotFound) {
			return nil
		}
		if err == nil {
			return fmt.Errorf("%s still listed", b.InstanceID)
		}
		return err
	})
}

func TestEurekaPeers_OnePeerIsRefused(t *testing.T) {
	_, err := harness.StartEurekaPeers(t.Context(), harness.EurekaOptions{}, 1)
	if err == nil || !strings.Contains(err.Error(), "want 2 or more") {
		t.Fatalf("StartEurekaPeers with 1 peer: %v, want an error saying \"want 2 or more\"", err)
	}
}
