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

// readFollowers has every import reconciled right after each read of the
// registry it imports from, whoever asked for that read (a syncer's
// reconcile, or another import's). The reads are shared (one per server
// set per resync, clients.forSyncer), so without this an import would see
// a read only at its own next resync: a status change could wait a read
// period and then a resync period more before it reached the slices. With
// it, a change reaches them within one registry read.
type readFollowers struct {
	mu    sync.Mutex
	queue workqueue.TypedRateLimitingInterface[reconcile.Request] // nil until the controller starts
	// byCache: the imports reading each server set's registry; cacheOf
	// the other way round, so an import that moves to other servers, or
	// is deleted, stops following the old ones.
	byCache map[*eureka.RegistryCache]map[types.NamespacedName]struct{}
	cacheOf map[types.NamespacedName]*eureka.RegistryCache
}

func newReadFollowers() *readFollowers {
	return &readFollowers{
		byCache: map[*eureka.RegistryCache]map[types.NamespacedName]struct{}{},
		cacheOf: map[types.NamespacedName]*eureka.RegistryCache{},
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
	}
	f.cacheOf[key] = cache
	keys, ok := f.byCache[cache]
	if !ok {
		keys = map[types.NamespacedName]struct{}{}
		f.byCache[cache] = keys
		cache.OnRead(func() { f.read(cache) })
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

// read queues the imports of cache; the queue merges a key already queued.
func (f *readFollowers) read(cache *eureka.RegistryCache) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.queue == nil {
		return
	}
	for key := range f.byCache[cache] {
		f.queue.Add(reconcile.Request{NamespacedName: key})
	}
}
