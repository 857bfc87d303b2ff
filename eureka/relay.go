package eureka

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"
)

// Relay is one client's request that a gateway passes on to the Eureka
// servers as it came: the method, the path below the base URL with its
// query (apps/ORDERS/id?status=UP), the body and the headers that say what
// it is and what the client reads back. The gateway's own credentials
// replace the client's.
type Relay struct {
	// Op names the request in metrics and logs (register, renew, apps…).
	Op     string
	Method string
	// Path is below the base URL, without a leading slash, query included.
	Path string
	Body []byte
	// ContentType and Accept are the client's (Eureka answers XML to a
	// client that does not ask for JSON).
	ContentType, Accept string
	// Gzip asks the server for a compressed answer, passed on compressed.
	Gzip bool
	// CachedRead is true for the reads Eureka serves from its response
	// cache (GET /apps, /apps/delta, /apps/{APP}, /vips, /svips), which a
	// starting server refuses with 403: the next server is asked then.
	CachedRead bool
}

// Relayed is a server's answer to a Relay, whatever its status.
type Relayed struct {
	Status                       int
	ContentType, ContentEncoding string
	Body                         []byte
	// Server is the base URL that answered, without credentials.
	Server string
}

// Relay sends r to the servers in turn, starting with the one that
// answered last, and returns the first answer that is the server's own
// word on it. The next server is tried when one does not answer, answers
// 502, 503, 504 or 429 (a server going away, or a proxy in front of one
// that did), or refuses a cached read with 403 (a starting server, see
// movesOn). Every other answer, 4xx and 500 included, is Eureka's answer
// to the client and is returned as it is. The error is non-nil only when
// no server answered so; it wraps ErrUnavailable.
func (c *Client) Relay(ctx context.Context, r Relay) (*Relayed, error) {
	creds, err := c.auth(false)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	a, err := c.relayAs(ctx, r, creds)
	if err != nil || a.Status != http.StatusUnauthorized || !c.reloads(creds) {
		return a, err
	}
	fresh, rerr := c.auth(true)
	if rerr != nil || fresh == creds {
		return a, nil
	}
	c.log.WithField("op", r.Op).Info(creds.refused())
	return c.relayAs(ctx, r, fresh)
}

func (c *Client) relayAs(ctx context.Context, r Relay, creds auth) (*Relayed, error) {
	start := int(c.preferred.Load())
	var errs []error
	var last *Relayed
	for i := range c.urls {
		idx := (start + i) % len(c.urls)
		base := c.urls[idx]
		a, err := c.relayOnce(ctx, r, base, creds, len(c.urls)-i)
		if err == nil && !relayMovesOn(r, a.Status) {
			c.preferred.Store(int32(idx))
			return a, nil
		}
		if err == nil {
			last = a
			err = fmt.Errorf("%s %s: HTTP %d", r.Method, Redact(base), a.Status)
		}
		errs = append(errs, err)
		if ctx.Err() != nil {
			break
		}
	}
	if last != nil && len(errs) == len(c.urls) {
		// Every server answered, none as we hoped: the last one's answer
		// is still Eureka's (a 403 of every starting server, a 503).
		return last, nil
	}
	return nil, fmt.Errorf("%w: no Eureka server answered %s %s: %w", ErrUnavailable, r.Method, r.Path, errors.Join(errs...))
}

// relayMovesOn is true when status, one server's answer to r, sends r to
// the next server.
func relayMovesOn(r Relay, status int) bool {
	switch status {
	case http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout, http.StatusTooManyRequests:
		return true
	case http.StatusForbidden:
		return r.CachedRead && r.Op != opDelta
	}
	return false
}

func (c *Client) relayOnce(ctx context.Context, r Relay, base string, creds auth, left int) (*Relayed, error) {
	ctx, cancel := c.attempt(ctx, left)
	defer cancel()
	began := time.Now()
	a, err := c.relaySend(ctx, r, base, creds)
	if c.observer != nil {
		observed := err
		if err == nil && a.Status >= 500 {
			observed = &RequestError{Method: r.Method, URL: Redact(base), StatusCode: a.Status, kind: ErrUnavailable}
		}
		c.observer.ObserveRequest(r.Op, Redact(base), time.Since(began), observed)
	}
	return a, err
}

func (c *Client) relaySend(ctx context.Context, r Relay, base string, creds auth) (*Relayed, error) {
	var body io.Reader
	if r.Body != nil {
		body = bytes.NewReader(r.Body)
	}
	shown := Redact(base)
	req, err := http.NewRequestWithContext(ctx, r.Method, base+"/"+r.Path, body)
	if err != nil {
		return nil, &RequestError{Method: r.Method, URL: shown, Err: redactURLError(err), kind: ErrInvalid}
	}
	if r.Accept != "" {
		req.Header.Set("Accept", r.Accept)
	}
	if r.ContentType != "" {
		req.Header.Set("Content-Type", r.ContentType)
	}
	if r.Gzip {
		// Set by hand, so the transport leaves the answer compressed.
		req.Header.Set("Accept-Encoding", "gzip")
	}
	creds.set(req) // the gateway's own credentials or token, never the client's
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, &RequestError{Method: r.Method, URL: shown, Err: redactURLError(err), kind: ErrUnavailable}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	if err != nil {
		return nil, &RequestError{Method: r.Method, URL: shown, Err: err, kind: ErrUnavailable}
	}
	return &Relayed{
		Status:          resp.StatusCode,
		ContentType:     resp.Header.Get("Content-Type"),
		ContentEncoding: resp.Header.Get("Content-Encoding"),
		Body:            b,
		Server:          shown,
	}, nil
}
