package gateway

import (
	"context"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"

	"github.com/eurekube/eurekube/eureka"
)

// reads serves the reads every client polls (GET /apps, /apps/delta,
// /apps/{APP}, /vips, /svips) from one copy per distinct request for ttl,
// fetched once however many clients ask at the same time: Eureka sees at
// most one request per distinct read per ttl from each replica, whatever
// the number of clients behind the gateway. Bodies pass as Eureka wrote
// them, so a delta's apps__hashcode is the registry's and a client's
// reconciliation against it is Eureka's own. Eureka serves these reads from
// a cache itself, refreshed every 30 s: ttl, a few seconds, only adds that
// much to an age clients already live with. The reads Eureka serves live
// (one instance) pass through uncached.
type reads struct {
	eureka *eureka.Client
	ttl    time.Duration
	now    func() time.Time
	group  singleflight.Group
	mu     sync.Mutex
	copies map[string]readCopy
}

type readCopy struct {
	answer  *eureka.Relayed
	fetched time.Time
}

// Cache results, for the metric.
const (
	cacheHit    = "hit"
	cacheShared = "shared" // joined a fetch under way
	cacheMiss   = "miss"
)

// get answers r from a copy younger than ttl, else fetches it once for
// every client asking meanwhile.
func (c *reads) get(ctx context.Context, r eureka.Relay) (*eureka.Relayed, string, error) {
	key := readKey(r)
	now := c.now()
	c.mu.Lock()
	cp, ok := c.copies[key]
	c.mu.Unlock()
	if ok && now.Sub(cp.fetched) < c.ttl {
		return cp.answer, cacheHit, nil
	}
	v, err, shared := c.group.Do(key, func() (any, error) {
		// A fetch outlives the client that started it: the others wait on
		// it too.
		a, err := c.eureka.Relay(context.WithoutCancel(ctx), r)
		if err != nil {
			return nil, err
		}
		if a.Status == 200 || a.Status == 404 {
			c.mu.Lock()
			if c.copies == nil {
				c.copies = map[string]readCopy{}
			}
			c.copies[key] = readCopy{answer: a, fetched: c.now()}
			for k, old := range c.copies {
				if c.now().Sub(old.fetched) > 10*c.ttl {
					delete(c.copies, k)
				}
			}
			c.mu.Unlock()
		}
		return a, nil
	})
	if err != nil {
		return nil, cacheMiss, err
	}
	result := cacheMiss
	if shared {
		result = cacheShared
	}
	return v.(*eureka.Relayed), result, nil
}

// readKey is what tells two reads' answers apart: the path and query,
// JSON or XML (Eureka's cached reads answer JSON when Accept names json,
// else XML), compressed or not.
func readKey(r eureka.Relay) string {
	format := "xml"
	if strings.Contains(strings.ToLower(r.Accept), "json") {
		format = "json"
	}
	gz := ""
	if r.Gzip {
		gz = " gzip"
	}
	return r.Path + " " + format + gz
}
