package controller

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
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

// TestReadFollowers_AReadThatLeavesTheAppAsItWasQueuesNothing: an import
// that applied its app is queued by a later read only when that read
// changed the app; a heartbeat-only read (an empty delta), and a delta
// that lists the instance again as it was (Eureka's lists every instance
// registered in its last three minutes), queue nothing.
func TestReadFollowers_AReadThatLeavesTheAppAsItWasQueuesNothing(t *testing.T) {
	instance := func(action, status string) string {
		return `{"instanceId":"orders-1","hostName":"10.0.0.1","app":"ORDERS","ipAddr":"10.0.0.1","status":"` + status + `","overriddenStatus":"UNKNOWN",` +
			`"port":{"$":8080,"@enabled":"true"},"securePort":{"$":443,"@enabled":"false"},` +
			`"dataCenterInfo":{"@class":"com.netflix.appinfo.InstanceInfo$DefaultDataCenterInfo","name":"MyOwn"},` +
			`"leaseInfo":{"renewalIntervalInSecs":30,"durationInSecs":90},"metadata":{},"vipAddress":"orders",` +
			`"lastUpdatedTimestamp":"1","lastDirtyTimestamp":"1","actionType":"` + action + `"}`
	}
	apps := func(hashcode string, insts ...string) string {
		list := ""
		if len(insts) > 0 {
			list = `{"name":"ORDERS","instance":[` + strings.Join(insts, ",") + `]}`
		}
		return `{"applications":{"versions__delta":"1","apps__hashcode":"` + hashcode + `","application":[` + list + `]}}`
	}
	var delta atomic.Pointer[string]
	empty := apps("UP_1_")
	delta.Store(&empty)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/eureka/apps":
			_, _ = w.Write([]byte(apps("UP_1_", instance("ADDED", "UP"))))
		case "/eureka/apps/delta":
			_, _ = w.Write([]byte(*delta.Load()))
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	c, err := eureka.New(eureka.Options{URLs: []string{srv.URL + "/eureka"}, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	cache := eureka.NewRegistryCache(c, 0) // every Registry call reads
	q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
	defer q.ShutDown()
	f := newReadFollowers()
	if err := f.source().Start(t.Context(), q); err != nil {
		t.Fatal(err)
	}
	key := types.NamespacedName{Namespace: "shop", Name: "orders"}
	f.follow(cache, key)
	reg, err := cache.Registry(context.Background()) // whole: queued, it has applied nothing yet
	if err != nil || len(reg.Instances("orders")) != 1 {
		t.Fatalf("read: %v, %d instances", err, len(reg.Instances("orders")))
	}
	drain := func() int {
		n := 0
		for q.Len() > 0 {
			req, _ := q.Get()
			q.Done(req)
			q.Forget(req)
			n++
		}
		return n
	}
	if n := drain(); n != 1 {
		t.Fatalf("the first read queued %d, want the import", n)
	}
	f.saw(key, "ORDERS", reg)
	if _, err := cache.Registry(context.Background()); err != nil { // an empty delta
		t.Fatal(err)
	}
	if n := drain(); n != 0 {
		t.Fatalf("a read that changed nothing queued %d", n)
	}
	again := apps("UP_1_", instance("ADDED", "UP"))
	delta.Store(&again)
	if _, err := cache.Registry(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := drain(); n != 0 {
		t.Fatalf("a delta listing the instance again as it was queued %d", n)
	}
	modified := apps("DOWN_1_", instance("MODIFIED", "DOWN"))
	delta.Store(&modified)
	reg, err = cache.Registry(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if got := reg.Instances("orders"); len(got) != 1 || got[0].Status != eureka.StatusDown {
		t.Fatalf("after the delta: %+v, want orders-1 DOWN", got)
	}
	if n := drain(); n != 1 {
		t.Fatalf("a read that changed ORDERS queued %d, want the import", n)
	}
}
