package harness

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"golang.org/x/sync/errgroup"
)

// EurekaPeers is a cluster of Eureka servers that replicate to each other,
// as real deployments run Eureka: what a client registers, changes or
// cancels on one peer, the peer replicates to the others, and a peer that
// starts again copies the registry from the others.
type EurekaPeers struct {
	// Servers are the peers in order; Servers[i]'s instance hostname is
	// PeerHostname(i).
	Servers []*Eureka
}

// PeerHostname is the eureka.instance.hostname of peer i (0-based) of a
// cluster StartEurekaPeers starts: "eureka-peer-1" for i 0.
func PeerHostname(i int) string { return fmt.Sprintf("eureka-peer-%d", i+1) }

// peerArgs are the Spring Boot arguments every peer gets on top of
// application.yml and its profile. application.yml already keeps
// register-with-eureka false (no peer lists itself or the others as an
// app, so tests can count instances) and wait-time-in-ms-when-sync-empty 0
// (a server whose start-up sync copied no instance, as on an empty cluster
// or with every other peer down, answers reads at once instead of 403 for
// 5 min, so StartEureka's wait for an answer holds for peers too).
var peerArgs = []string{
	// The server's own Eureka client fetches the registry from the other
	// peers while the server starts, and the server copies that registry
	// (syncUp): a restarted peer lists what the others have at once,
	// without waiting for their clients' next heartbeats.
	"--eureka.client.fetch-registry=true",
	// syncUp copies what the client fetched only registry-sync-retries
	// times, and Spring Cloud's default is 0: without this, a peer never
	// copies its peers' registry at start. 1 copies it once, with no wait
	// (more tries wait registry-sync-retry-wait-ms, 30 s, before each
	// retry while the copy is empty, as it always is on a new cluster).
	"--eureka.server.registry-sync-retries=1",
	// The client keeps only UP instances by default, so syncUp would drop
	// the OUT_OF_SERVICE, DOWN and STARTING ones: a peer must copy all.
	"--eureka.client.filter-only-up-instances=false",
	// Replication requests time out after 200 ms by default; on a busy
	// two-core machine a peer often takes longer, and a replication that
	// keeps timing out is dropped after max-time-for-replication (30 s).
	"--eureka.server.peer-node-connect-timeout-ms=5000",
	"--eureka.server.peer-node-read-timeout-ms=5000",
}

// StartEurekaPeers starts n (at least 2) Eureka servers on opts.Host, the
// first on opts.Port (0 picks a free one), the others each on a free port,
// concurrently, and waits until each answers. Each replicates to the
// others: its eureka.client.service-url.defaultZone lists the other peers'
// URLs (with opts.Auth's credentials in them when the peers demand basic
// auth, as Spring Cloud's docs tell peers behind Spring Security).
// opts.Args must not set the
// properties the peers are configured with (peerArgs, the defaultZone and
// eureka.instance.hostname). With opts.LogDir, peer i logs to
// LogDir/PeerHostname(i)/eureka.log. When a peer fails to start, the
// others are stopped.
//
// Eureka drops from a server's peers every URL whose host is the server's
// eureka.instance.hostname (PeerEurekaNodes.isThisMyUrl). The peers share
// one address, so each gets its own hostname, PeerHostname(i), that no URL
// has; a hostname equal to opts.Host, as a default hostname that resolves
// to no name can be, would drop every peer and replicate nothing.
func StartEurekaPeers(ctx context.Context, opts EurekaOptions, n int) (*EurekaPeers, error) {
	if n < 2 {
		return nil, fmt.Errorf("eureka peers: %d peers: want 2 or more (StartEureka starts one server)", n)
	}
	p := &EurekaPeers{Servers: make([]*Eureka, n)}
	used := map[int]bool{}
	for i := range n {
		o := opts
		if i > 0 {
			o.Port = 0
		}
		for o.Port == 0 || used[o.Port] {
			port, err := FreePort()
			if err != nil {
				return nil, fmt.Errorf("start eureka peer %d: %w", i+1, err)
			}
			o.Port = port
		}
		used[o.Port] = true
		if opts.LogDir != "" {
			o.LogDir = filepath.Join(opts.LogDir, PeerHostname(i))
			if err := os.MkdirAll(o.LogDir, 0o755); err != nil {
				return nil, fmt.Errorf("start eureka peer %d: %w", i+1, err)
			}
		}
		e, err := newEureka(o)
		if err != nil {
			return nil, fmt.Errorf("start eureka peer %d: %w", i+1, err)
		}
		p.Servers[i] = e
	}
	// With opts.Auth every peer demands the credentials, its peers'
	// replication included: each names the others with them.
	urls := make([]string, n)
	for i, e := range p.Servers {
		urls[i] = e.urlWithAuth()
	}
	for i, e := range p.Servers {
		others := slices.Delete(slices.Clone(urls), i, i+1)
		e.opts.Args = append(slices.Clone(opts.Args), peerArgs...)
		e.opts.Args = append(e.opts.Args,
			"--eureka.client.service-url.defaultZone="+strings.Join(others, ","),
			"--eureka.instance.hostname="+PeerHostname(i),
		)
	}
	g, gctx := errgroup.WithContext(ctx)
	for i, e := range p.Servers {
		g.Go(func() error {
			if err := e.start(gctx); err != nil {
				return fmt.Errorf("start eureka peer %d: %w", i+1, err)
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		_ = p.Stop()
		return nil, err
	}
	return p, nil
}

// EurekaPeersT starts n peers for a test (StartEurekaPeers) and stops them
// when the test ends.
func EurekaPeersT(t testing.TB, opts EurekaOptions, n int) *EurekaPeers {
	t.Helper()
	SkipWhenShort(t, "Eureka servers (JVMs)")
	// Each server's start is bounded by opts.StartTimeout.
	p, err := StartEurekaPeers(context.Background(), opts, n)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Stop() })
	return p
}

// URLs are the peers' service URLs, in order.
func (p *EurekaPeers) URLs() []string {
	urls := make([]string, len(p.Servers))
	for i, e := range p.Servers {
		urls[i] = e.URL()
	}
	return urls
}

// DefaultZone is every peer's URL, comma-separated, as a Spring client's
// eureka.client.service-url.defaultZone takes them.
func (p *EurekaPeers) DefaultZone() string { return strings.Join(p.URLs(), ",") }

// Stop stops every peer (Eureka.Stop), all at once.
func (p *EurekaPeers) Stop() error {
	errs := make([]error, len(p.Servers))
	var wg sync.WaitGroup
	for i, e := range p.Servers {
		wg.Go(func() {
			if err := e.Stop(); err != nil {
				errs[i] = fmt.Errorf("stop eureka peer %d: %w", i+1, err)
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}
