package controller

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/eurekube/eurekube/api/v1alpha1"
	"github.com/eurekube/eurekube/eureka"
)

// clients keeps one registry cache (and its eureka.Client) per set of URLs,
// credentials and TLS material: the syncers of one Eureka server share its
// connections and one read of its registry per resync, however many they
// are. A rotated Secret or CA bundle makes a new cache at the next
// reconcile that reads it (accessReads); a cache no syncer asked for in
// unusedFor is dropped, so the old ones do not pile up.
type clients struct {
	reads    *accessReads // the Secrets and ConfigMaps spec.eureka names
	grant    v1alpha1.ReadGrant
	defaults []string
	timeout  time.Duration
	// maxAge: the registry is read at most this often per server set.
	maxAge   time.Duration
	log      logrus.FieldLogger
	observer eureka.Observer

	mu       sync.Mutex
	byKey    map[[32]byte]*eureka.RegistryCache
	lastUsed map[[32]byte]time.Time
}

// unusedFor is how long a cache lives without a syncer asking for it: many
// resyncs, so only a rotated or deleted syncer's cache goes.
const unusedFor = 10 * time.Minute

// urls are the Eureka servers of a syncer: its own, else the manager's.
func (c *clients) urls(s *v1alpha1.EurekaSyncer) []string {
	if len(s.Spec.Eureka.ServiceURLs) > 0 {
		return s.Spec.Eureka.ServiceURLs
	}
	return c.defaults
}

// forSyncer returns the registry cache of a syncer's servers, credentials
// and TLS material.
func (c *clients) forSyncer(ctx context.Context, s *v1alpha1.EurekaSyncer) (*eureka.RegistryCache, error) {
	urls := c.urls(s)
	access, err := readEurekaAccess(ctx, c.reads.forSyncer(s), c.grant, s)
	if err != nil {
		c.reads.unsettle(s)
		return nil, err
	}
	c.reads.settle(s)
	key := access.digest(urls)
	now := time.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.byKey == nil {
		c.byKey = map[[32]byte]*eureka.RegistryCache{}
	}
	if c.lastUsed == nil {
		c.lastUsed = map[[32]byte]time.Time{}
	}
	for k, cache := range c.byKey {
		if k != key && now.Sub(c.lastUsed[k]) > unusedFor {
			cache.Client().CloseIdleConnections()
			delete(c.byKey, k)
			delete(c.lastUsed, k)
		}
	}
	c.lastUsed[key] = now
	if cache, ok := c.byKey[key]; ok {
		return cache, nil
	}
	cl, err := eureka.New(eureka.Options{
		URLs: urls, Username: access.credentials.Username, Password: access.credentials.Password,
		RootCAs: access.roots, ClientCertificate: access.clientCert,
		Timeout: c.timeout, Logger: c.log, Observer: c.observer,
	})
	if err != nil {
		return nil, fmt.Errorf("client for Eureka at %v: %w", eureka.RedactAll(urls), err)
	}
	cache := eureka.NewRegistryCache(cl, c.maxAge)
	c.byKey[key] = cache
	return cache, nil
}
