package controller

import (
	"context"
	"slices"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/eurekube/eurekube/eureka"
)

// TestReadFollowers_QueueTheImportsOfEachRead: a read of a server set's
// registry, whoever made it, queues exactly the imports reading that set;
// an import that moved to other servers, or is gone, no longer follows.
func TestReadFollowers_QueueTheImportsOfEachRead(t *testing.T) {
	q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
	defer q.ShutDown()
	f := newReadFollowers()
	if err := f.source().Start(t.Context(), q); err != nil {
		t.Fatal(err)
	}
	// Nothing listens there: each read fails at once, and a failed read
	// is followed too.
	cache := func() *eureka.RegistryCache {
		c, err := eureka.New(eureka.Options{URLs: []string{"http://127.0.0.1:1/eureka"}, Timeout: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		return eureka.NewRegistryCache(c, 0)
	}
	a, b := cache(), cache()
	k := func(name string) types.NamespacedName { return types.NamespacedName{Namespace: "shop", Name: name} }
	queued := func() []string {
		var names []string
		for q.Len() > 0 {
			req, _ := q.Get()
			names = append(names, req.Name)
			q.Done(req)
			q.Forget(req)
		}
		slices.Sort(names)
		return names
	}
	read := func(c *eureka.RegistryCache) { _, _ = c.Registry(context.Background()) }

	f.follow(a, k("orders"))
	f.follow(a, k("billing"))
	f.follow(b, k("payments"))
	read(a)
	if got := queued(); !slices.Equal(got, []string{"billing", "orders"}) {
		t.Fatalf("a read of a queued %v, want billing and orders", got)
	}
	f.follow(b, k("billing")) // its servers changed
	f.forget(k("orders"))     // deleted
	read(a)
	if got := queued(); len(got) != 0 {
		t.Fatalf("a read of a queued %v, want nothing", got)
	}
	read(b)
	if got := queued(); !slices.Equal(got, []string{"billing", "payments"}) {
		t.Fatalf("a read of b queued %v, want billing and payments", got)
	}
}
