package eureka

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"
)

// RegistryCache shares reads of one server set's registry among any number
// of readers: it reads the registry at most once per MaxAge, and readers
// that arrive while a read is under way wait for that read instead of
// starting their own. A thousand syncers of one server thus cost one
// request per resync, not a thousand. A failed read is shared the same
// way, so every reader of the server sees the failure, and an outage costs
// no more requests than steady state. It is safe for concurrent use.
type RegistryCache struct {
	client *Client
	maxAge time.Duration
	now    func() time.Time

	flight singleflight.Group
	mu     sync.Mutex
	last   *registryRead // nil before the first read
	// good is the last registry read, and when; only the flight in
	// progress changes them.
	good              *Registry
	goodAt, lastWhole time.Time
	// onRead are called after each read (OnRead).
	onRead []func(*Registry, error)
}

// Deltas: a read applies the server's recent changes to the last registry
// read (one small answer) instead of reading the whole registry again,
// when that registry is recent enough for the server to still hold every
// change since. Eureka keeps three minutes of changes and may answer from
// a response cache up to 30 s old, so deltas are used up to 90 s after the
// last good read. The whole registry is read again at least every
// wholeEvery, so that no change the apps__hashcode check cannot see (it
// counts instances per status) outlives it.
const (
	deltaWithin = 90 * time.Second
	wholeEvery  = 5 * time.Minute
)

// registryRead is the outcome of one read of the registry.
type registryRead struct {
	registry *Registry
	err      error
	at       time.Time // when it finished
}

// NewRegistryCache returns a cache reading through c at most once per
// maxAge.
func NewRegistryCache(c *Client, maxAge time.Duration) *RegistryCache {
	return &RegistryCache{client: c, maxAge: maxAge, now: time.Now}
}

// Client is the client the cache reads through, for writes.
func (rc *RegistryCache) Client() *Client { return rc.client }

// Registry returns the registry as last read if that read finished less
// than maxAge ago, its error included; otherwise it reads it, together
// with every reader that asks meanwhile. ctx bounds only this caller's
// wait: the read itself goes on for the others (each request bounded by
// the client's timeout).
func (rc *RegistryCache) Registry(ctx context.Context) (*Registry, error) {
	if last := rc.fresh(); last != nil {
		return last.registry, last.err
	}
	done := rc.flight.DoChan("registry", func() (any, error) {
		// A read that finished between fresh() above and this flight
		// starting serves this one too.
		if last := rc.fresh(); last != nil {
			return last, nil
		}
		reg, err := rc.read(context.WithoutCancel(ctx))
		read := &registryRead{registry: reg, err: err, at: rc.now()}
		if reg != nil {
			// Set before any reader sees it; read returns a new Registry
			// each time (a whole read, or a delta applied to a clone).
			reg.readAt = read.at
		}
		rc.mu.Lock()
		rc.last = read
		followers := slices.Clone(rc.onRead)
		rc.mu.Unlock()
		for _, fn := range followers {
			fn(read.registry, read.err)
		}
		return read, nil
	})
	select {
	case res := <-done:
		read := res.Val.(*registryRead)
		return read.registry, read.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// OnRead has fn called with the outcome of each read of the registry, a
// failed one too, once it is what Registry returns: a reader that keeps its
// own copy of what the registry says (an import's EndpointSlices) can
// follow every read, whoever asked for it, instead of waiting for its own
// next turn. fn runs inside the read, so it must not block, nor call
// Registry: that would wait for the read it is part of.
func (rc *RegistryCache) OnRead(fn func(*Registry, error)) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.onRead = append(rc.onRead, fn)
}

// fresh returns the last read if it is younger than maxAge.
func (rc *RegistryCache) fresh() *registryRead {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if rc.last != nil && rc.now().Sub(rc.last.at) < rc.maxAge {
		return rc.last
	}
	return nil
}

// read reads the registry: the changes since the last good read when they
// can be had, else the whole of it. Only the flight calls it.
func (rc *RegistryCache) read(ctx context.Context) (*Registry, error) {
	now := rc.now()
	if rc.good != nil && now.Sub(rc.goodAt) < deltaWithin && now.Sub(rc.lastWhole) < wholeEvery {
		next, ok, err := rc.client.applyDelta(ctx, rc.good)
		if errors.Is(err, ErrUnavailable) {
			return nil, err
		}
		// A server that refuses deltas (eureka.server.disable-delta, and
		// a server that is starting, answer 403) is read whole: the whole
		// read moves on past a server that is starting.
		if err == nil && ok {
			rc.good, rc.goodAt = next, rc.now()
			return next, nil
		}
		rc.client.log.WithError(err).WithField("urls", RedactAll(rc.client.urls)).Debug("the registry's changes do not add up to its hashcode, or were refused: reading it whole")
	}
	// A whole read needs nothing of the last registry, and readers
	// arriving meanwhile wait for this read: let it go before the next is
	// decoded, so that a large registry is not held twice.
	rc.good = nil
	rc.mu.Lock()
	rc.last = nil
	rc.mu.Unlock()
	reg, err := rc.client.Applications(ctx)
	if err != nil {
		return nil, err
	}
	rc.good, rc.goodAt, rc.lastWhole = reg, rc.now(), now
	return reg, nil
}
