package controller

import (
	"context"
	"sync"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/eurekube/eurekube/eureka"
)

// readFollowers has an import reconciled right after a read of the
// registry it imports from changed its app, whoever asked for that read (a
// syncer's reconcile, or another import's). The reads are shared (one per
// server set per resync, clients.forSyncer), so without this an import
// would see a read only at its own next resync: a status change could wait
// a read period and then a resync period more before it reached the
// slices. With it, a change reaches them within one registry read. An
// import whose app a read left unchanged (eureka.AppState) waits for its
// resync: a thousand imports cost a thousand reconciles per read only when
// the read is a whole one.
type readFollowers struct {
	mu    sync.Mutex
	queue workqueue.TypedRateLimitingInterface[reconcile.Request] // nil until the controller starts
	// byCache: the imports reading each server set's registry; cacheOf
	// the other way round, so an import that moves to other servers, or
	// is deleted, stops following the old ones.
	byCache map[*eureka.RegistryCache]map[types.NamespacedName]struct{}
	cacheOf map[types.NamespacedName]*eureka.RegistryCache
	// seen: the app and its state as each import last applied it (saw);
	// an import with none is queued after every read.
	seen map[types.NamespacedName]seenApp
}

type seenApp struct {
	app   string
	state eureka.AppState
}

func newReadFollowers() *readFollowers {
	return &readFollowers{
		byCache: map[*eureka.RegistryCache]map[types.NamespacedName]struct{}{},
		cacheOf: map[types.NamespacedName]*eureka.RegistryCache{},
		seen:    map[types.NamespacedName]seenApp{},
	}
}

// source is the controller's way in: it hands over the queue.
func (f *readFollowers) source() source.Source {
	return source.Func(func(_ context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.queue = q
		return nil
	})
}

// follow has key reconciled after each read of cache.
func (f *readFollowers) follow(cache *eureka.RegistryCache, key types.NamespacedName) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if old, ok := f.cacheOf[key]; ok {
		if old == cache {
			return
		}
		f.unfollow(old, key)
		delete(f.seen, key) // another server set's state
	}
	f.cacheOf[key] = cache
	keys, ok := f.byCache[cache]
	if !ok {
		keys = map[types.NamespacedName]struct{}{}
		f.byCache[cache] = keys
		cache.OnRead(func(reg *eureka.Registry, err error) { f.read(cache, reg, err) })
	}
	keys[key] = struct{}{}
}

// forget stops following for a deleted import.
func (f *readFollowers) forget(key types.NamespacedName) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if old, ok := f.cacheOf[key]; ok {
		f.unfollow(old, key)
		delete(f.cacheOf, key)
	}
	delete(f.seen, key)
}

// saw records that key applied app as reg holds it: a later read that
// leaves app as it is does not queue key.
func (f *readFollowers) saw(key types.NamespacedName, app string, reg *eureka.Registry) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.seen[key] = seenApp{app: app, state: reg.AppState(app)}
}

// unfollow drops key from cache's imports, and the cache once none is
// left: a cache the clients dropped is not kept alive here. (A cache
// followed again later gets its hook again; a second hook only queues a
// key twice, which the queue merges.)
func (f *readFollowers) unfollow(cache *eureka.RegistryCache, key types.NamespacedName) {
	delete(f.byCache[cache], key)
	if len(f.byCache[cache]) == 0 {
		delete(f.byCache, cache)
	}
}

// read queues the imports of cache whose app the read changed, and every
// one after a failed read (they say Eureka is unreachable); the queue
// merges a key already queued.
func (f *readFollowers) read(cache *eureka.RegistryCache, reg *eureka.Registry, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.queue == nil {
		return
	}
	for key := range f.byCache[cache] {
		if seen, ok := f.seen[key]; ok && err == nil && reg.AppState(seen.app) == seen.state {
			continue
		}
		f.queue.Add(reconcile.Request{NamespacedName: key})
	}
}
