package controller

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/eurekube/eurekube/api/v1alpha1"
	"github.com/eurekube/eurekube/eureka"
	"github.com/eurekube/eurekube/internal/allowlist"
	"github.com/eurekube/eurekube/internal/ownership"
)

// clients keeps one registry cache (and its eureka.Client) per server set
// (eureka.ServerSet: every spelling of a server is one) with its
// credentials and TLS material: the syncers and imports of one Eureka
// server share its connections and one read of its registry per resync,
// however many they are and however they write its URL. Each cache holds
// a whole copy of its registry, so their number is capped (maxSets): a
// reader whose server set would be one more is refused and reads nothing.
// A cache lives while a reader uses it: a rotated Secret or CA bundle
// moves its readers to a new cache at the next reconcile that reads it
// (accessReads), and the old one goes with its last reader; a reader that
// is gone (release), or has not asked in unusedFor, uses none.
type clients struct {
	reads    *accessReads // the Secrets and ConfigMaps spec.eureka names
	grant    v1alpha1.ReadGrant
	defaults []string
	timeout  time.Duration
	// maxAge: the registry is read at most this often per server set.
	maxAge time.Duration
	// maxSets caps the caches held at once (--max-eureka-server-sets).
	maxSets  int
	log      logrus.FieldLogger
	observer eureka.Observer
	// bearer, when set, is the manager's token for Eurekube's gateway,
	// sent to the servers of defaults alone (bearerFor).
	bearer func() (string, error)

	mu    sync.Mutex
	byKey map[[32]byte]*registryCache
	// readers: the cache each syncer or import (importAsSyncer) last
	// asked for, and when.
	readers map[types.NamespacedName]reader
}

// registryCache is one cache and the server set it reads, for the gauges.
type registryCache struct {
	*eureka.RegistryCache
	servers string
}

// reader is what one syncer or import last read through.
type reader struct {
	key [32]byte
	at  time.Time
}

// unusedFor is how long a reader holds its cache without asking for it:
// many resyncs, so only a syncer that reads no more (deleted, refused)
// lets it go this way.
const unusedFor = 10 * time.Minute

// DefaultMaxServerSets is the default of --max-eureka-server-sets: the
// distinct Eureka server sets (with their credentials and TLS material)
// whose registries the manager holds at once.
const DefaultMaxServerSets = 32

// MaxServerSetsFlag is the manager flag that sets the cap.
const MaxServerSetsFlag = "--max-eureka-server-sets"

// reasonServerSetCap: the syncer's or import's server set would be one
// more than the manager reads.
const reasonServerSetCap = "EurekaServerSetCapReached"

// serverSetCapError refuses a reader whose server set would pass the cap.
type serverSetCapError struct {
	servers []string
	max     int
}

func (e *serverSetCapError) Error() string {
	return fmt.Sprintf("not read: the manager already reads %d distinct Eureka server sets (with their credentials and TLS material), its cap (%s=%d), and %s would be one more; "+
		"name the same servers (and Secret) as an existing syncer, or have the platform team raise %s (Helm value manager.maxEurekaServerSets)",
		e.max, MaxServerSetsFlag, e.max, strings.Join(e.servers, ", "), MaxServerSetsFlag)
}

// urls are the Eureka servers of a syncer: its own, else the manager's.
func (c *clients) urls(s *v1alpha1.EurekaSyncer) []string {
	if len(s.Spec.Eureka.ServiceURLs) > 0 {
		return s.Spec.Eureka.ServiceURLs
	}
	return c.defaults
}

// forSyncer returns the registry cache of a syncer's servers, credentials
// and TLS material; a *serverSetCapError when it would be one more than
// the cap allows, before anything is read from the servers.
func (c *clients) forSyncer(ctx context.Context, s *v1alpha1.EurekaSyncer) (*eureka.RegistryCache, error) {
	servers, err := eureka.ServerSet(c.urls(s))
	if err != nil {
		return nil, fmt.Errorf("spec.eureka.serviceURLs: %w", err)
	}
	access, err := readEurekaAccess(ctx, c.reads.forSyncer(s), c.grant, s)
	if err != nil {
		c.reads.unsettle(s)
		return nil, err
	}
	c.reads.settle(s)
	key, who, now := access.digest(servers), types.NamespacedName{Namespace: s.Namespace, Name: s.Name}, time.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.byKey == nil {
		c.byKey = map[[32]byte]*registryCache{}
	}
	if c.readers == nil {
		c.readers = map[types.NamespacedName]reader{}
	}
	delete(c.readers, who)
	for r, last := range c.readers {
		if now.Sub(last.at) > unusedFor {
			delete(c.readers, r)
		}
	}
	c.dropUnused(key)
	cache, ok := c.byKey[key]
	if !ok && len(c.byKey) >= c.cap() {
		c.publish()
		return nil, &serverSetCapError{servers: servers, max: c.cap()}
	}
	c.readers[who] = reader{key: key, at: now}
	if !ok {
		cl, err := eureka.New(eureka.Options{
			URLs: servers, Username: access.credentials.Username, Password: access.credentials.Password,
			RootCAs: access.roots, ClientCertificate: access.clientCert, BearerToken: c.bearerFor(servers),
			Timeout: c.timeout, Logger: c.log, Observer: c.observer,
		})
		if err != nil {
			delete(c.readers, who)
			return nil, fmt.Errorf("client for Eureka at %v: %w", eureka.RedactAll(servers), err)
		}
		cache = &registryCache{RegistryCache: eureka.NewRegistryCache(cl, c.maxAge), servers: strings.Join(servers, ",")}
		c.byKey[key] = cache
	}
	c.publish()
	return cache.RegistryCache, nil
}

// bearerFor is the token the client of servers sends where no credentials
// are: the manager's gateway token, to the manager's own servers
// (--eureka-url, where the gateway answers) alone. The gateway lets the
// manager write any app, so the token goes to no server a syncer names
// besides them, which could hand it on.
func (c *clients) bearerFor(servers []string) func() (string, error) {
	if c.bearer == nil || len(servers) == 0 {
		return nil
	}
	own := allowlist.HostsOf(c.defaults)
	for _, s := range servers {
		if !own.AllowsURL(s) {
			return nil
		}
	}
	return c.bearer
}

// release lets go of what a reader read through (a syncer by its name, an
// import by its importAsSyncer's): it is gone, or reads nothing now. A
// cache no one else reads goes with it, and so frees its place under the
// cap.
func (c *clients) release(who types.NamespacedName) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.readers[who]; !ok {
		return
	}
	delete(c.readers, who)
	c.dropUnused([32]byte{})
	c.publish()
}

// cap is the number of caches held at most.
func (c *clients) cap() int {
	if c.maxSets <= 0 {
		return DefaultMaxServerSets
	}
	return c.maxSets
}

// dropUnused drops the caches no reader uses, but keep's. c.mu is held.
func (c *clients) dropUnused(keep [32]byte) {
	used := map[[32]byte]bool{keep: true}
	for _, r := range c.readers {
		used[r.key] = true
	}
	for k, cache := range c.byKey {
		if !used[k] {
			cache.Client().CloseIdleConnections()
			delete(c.byKey, k)
		}
	}
}

// publish sets the gauges of the caches held and their readers. c.mu is
// held.
func (c *clients) publish() {
	caches, readers := map[string]int{}, map[string]int{}
	for _, cache := range c.byKey {
		caches[cache.servers]++
	}
	for _, r := range c.readers {
		if cache, ok := c.byKey[r.key]; ok {
			readers[cache.servers]++
		}
	}
	setServerSetGauges(caches, readers)
}

// ownershipRefusesReading is the reason a live syncer reads nothing from
// Eureka: its namespace may not register the syncer's app. It is
// ownership's verdict as a dry run (nothing is claimed here;
// checkOwnership claims, and says so in the Permitted condition), taken
// before any read, so that a tenant's refused syncer costs neither a
// request nor a cache. "" when the namespace may, or when the syncer is
// being deleted: its detach reads what its pods left.
func (r *Reconciler) ownershipRefusesReading(ctx context.Context, s *v1alpha1.EurekaSyncer) (string, error) {
	if !s.DeletionTimestamp.IsZero() {
		return "", nil
	}
	var nsObj corev1.Namespace
	if err := r.client.Get(ctx, client.ObjectKey{Name: s.Namespace}, &nsObj); err != nil {
		return "", fmt.Errorf("read namespace %s: %w", s.Namespace, err)
	}
	checker := ownership.Checker{Reader: r.client, Indexed: r.appIndexed}
	v, err := checker.Check(ctx, s.EffectiveAppName(), ownership.Namespace{Name: s.Namespace, Labels: nsObj.Labels}, false)
	if err != nil {
		return "", fmt.Errorf("app ownership: %w", err)
	}
	if v.Allowed {
		return "", nil
	}
	return v.Reason, nil
}
