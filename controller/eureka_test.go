package controller

import (
	"context"
	"errors"
	"strings"
	"testing"

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
