package controller

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/eurekube/eurekube/eureka"
	"github.com/eurekube/eurekube/internal/builders"
)

// The manager's gateway token goes to the manager's own servers alone:
// the gateway lets the manager write any app, so a server a syncer names
// besides them is never handed it.
func TestClients_TheGatewayTokenGoesToTheManagersServersAlone(t *testing.T) {
	serve := func(got *atomic.Value) *httptest.Server {
		ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			got.Store(r.Header.Get("Authorization"))
			http.NotFound(w, r)
		}))
		t.Cleanup(ts.Close)
		return ts
	}
	var toGateway, toOther atomic.Value
	gateway, other := serve(&toGateway), serve(&toOther)
	c := &clients{reads: newAccessReads(nil), timeout: time.Second, maxAge: time.Minute, defaults: []string{gateway.URL + "/eureka"},
		bearer: func() (string, error) { return "manager-token", nil }}
	ctx := context.Background()
	for name, tc := range map[string]struct {
		urls []string
		got  *atomic.Value
		want string
	}{
		"the manager's servers":              {nil, &toGateway, "Bearer manager-token"},
		"the manager's servers, spelled out": {[]string{gateway.URL + "/eureka/"}, &toGateway, "Bearer manager-token"},
		"a server the syncer names":          {[]string{other.URL + "/eureka"}, &toOther, ""},
	} {
		var opts []builders.SyncerOption
		if tc.urls != nil {
			opts = append(opts, builders.EurekaURLs(tc.urls...))
		}
		cache, err := c.forSyncer(ctx, syncerFixture(opts...))
		if err != nil {
			t.Fatal(err)
		}
		tc.got.Store("unset")
		if err := cache.Client().Heartbeat(ctx, "orders", "id", time.Time{}); !errors.Is(err, eureka.ErrNotFound) {
			t.Fatalf("%s: %v, want the server's 404", name, err)
		}
		if h := tc.got.Load(); h != tc.want {
			t.Errorf("%s: Authorization %q, want %q", name, h, tc.want)
		}
	}
}
