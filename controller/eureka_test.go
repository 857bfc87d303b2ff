package controller

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/eurekube/eurekube/internal/builders"
)

// Syncers that spell one server differently share one cache; a server set
// past the cap is refused naming the cap, the flag and the servers, until
// a reader of another set lets go of it.
func TestClients_OneCachePerServerSetAndACap(t *testing.T) {
	f := newReadsFixture()
	f.clients.maxSets = 2
	ctx := context.Background()
	spellings := []string{"http://eureka:8761/eureka", "HTTP://Eureka:8761/eureka/", "http://eureka:08761/eureka//", "http://eureka:8761/./eureka"}
	var first any
	for i, u := range spellings {
		s := builders.Syncer("shop", "orders-"+string(rune('a'+i)), builders.EurekaURLs(u, u))
		cache, err := f.clients.forSyncer(ctx, s)
		if err != nil {
			t.Fatalf("%s: %v", u, err)
		}
		if i == 0 {
			first = cache
		} else if any(cache) != first {
			t.Errorf("%s: a second cache for the same server", u)
		}
	}
	other := builders.Syncer("shop", "ledger", builders.EurekaURLs("http://eureka-2:8761/eureka"))
	if _, err := f.clients.forSyncer(ctx, other); err != nil {
		t.Fatal(err)
	}
	third := builders.Syncer("evil", "probe", builders.EurekaURLs("http://eureka-3:8761/eureka"))
	_, err := f.clients.forSyncer(ctx, third)
	var capped *serverSetCapError
	if !errors.As(err, &capped) || configReason(err) != reasonServerSetCap {
		t.Fatalf("a third server set: %v, want serverSetCapError", err)
	}
	for _, want := range []string{"cap (--max-eureka-server-sets=2)", "already reads 2", "http://eureka-3:8761/eureka", "raise --max-eureka-server-sets"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("refusal %q does not say %q", err, want)
		}
	}
	if len(f.clients.byKey) != 2 {
		t.Errorf("%d caches, want 2", len(f.clients.byKey))
	}
	// The second set's one reader goes: its cache with it, and the third
	// set takes its place.
	f.clients.release(types.NamespacedName{Namespace: other.Namespace, Name: other.Name})
	if _, err := f.clients.forSyncer(ctx, third); err != nil {
		t.Fatalf("after a release: %v", err)
	}
	// A reader that moves to another set lets go of its old one.
	moved := builders.Syncer("shop", "orders-a", builders.EurekaURLs("http://eureka-3:8761/eureka"))
	for _, name := range []string{"orders-b", "orders-c", "orders-d"} {
		f.clients.release(types.NamespacedName{Namespace: "shop", Name: name})
	}
	if _, err := f.clients.forSyncer(ctx, moved); err != nil {
		t.Fatal(err)
	}
	if len(f.clients.byKey) != 1 {
		t.Errorf("%d caches once every reader reads eureka-3, want 1", len(f.clients.byKey))
	}
}

// The manager reads its own servers' registry as it starts: a new
// leader's first reconcile of a syncer of those servers finds it read and
// asks the server nothing; a standby that is not elected lets it go.
func TestClients_WarmReadsTheManagersServersBeforeTheFirstReconcile(t *testing.T) {
	var fetches atomic.Int32
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasSuffix(r.URL.Path, "/apps/") && !strings.HasSuffix(r.URL.Path, "/apps") {
			http.NotFound(w, r)
			return
		}
		fetches.Add(1)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"applications":{"versions__delta":"1","apps__hashcode":"UP_1_","application":[{"name":"ORDERS","instance":[`+
			`{"instanceId":"vm-1","hostName":"vm-1","app":"ORDERS","ipAddr":"10.0.0.1","status":"UP","port":{"$":8080,"@enabled":"true"},"securePort":{"$":443,"@enabled":"false"},`+
			`"dataCenterInfo":{"@class":"com.netflix.appinfo.InstanceInfo$DefaultDataCenterInfo","name":"MyOwn"},"leaseInfo":{"renewalIntervalInSecs":30,"durationInSecs":90}}]}]}}`)
	}))
	defer server.Close()
	ctx := context.Background()

	f := newReadsFixture()
	f.clients.defaults = []string{server.URL + "/eureka"}
	elected := make(chan struct{})
	close(elected)
	f.clients.warm(ctx, elected, time.Hour)
	if got := fetches.Load(); got != 1 {
		t.Fatalf("%d registry reads as the manager started, want 1", got)
	}
	cache, err := f.clients.forSyncer(ctx, builders.Syncer("shop", "orders"))
	if err != nil {
		t.Fatal(err)
	}
	reg, err := cache.Registry(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(reg.Instances("ORDERS")); n != 1 || fetches.Load() != 1 {
		t.Errorf("the first reconcile: %d instances of ORDERS after %d reads of the server, want 1 instance and no read of its own", n, fetches.Load())
	}

	// A standby: never elected, it lets the read go after its hold.
	standby := newReadsFixture()
	standby.clients.defaults = f.clients.defaults
	standby.clients.warm(ctx, make(chan struct{}), time.Millisecond)
	if len(standby.clients.byKey) != 0 || len(standby.clients.readers) != 0 {
		t.Errorf("a standby not elected holds %d caches for %d readers, want none", len(standby.clients.byKey), len(standby.clients.readers))
	}
}
