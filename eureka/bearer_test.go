package eureka_test

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/eurekube/eurekube/eureka"
)

// tokenServer answers 404 (an unknown instance: the request got through)
// to the current bearer token, 401 to any other, and records the
// Authorization header of every request.
type tokenServer struct {
	mu      sync.Mutex
	token   string
	headers []string
	refused atomic.Int32
}

func (s *tokenServer) set(token string) { s.mu.Lock(); s.token = token; s.mu.Unlock() }

func (s *tokenServer) seen() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.headers...)
}

func (s *tokenServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	want := s.token
	s.headers = append(s.headers, r.Header.Get("Authorization"))
	s.mu.Unlock()
	if r.Header.Get("Authorization") != "Bearer "+want {
		s.refused.Add(1)
		w.Header().Set("WWW-Authenticate", `Bearer realm="eurekube-gateway"`)
		http.Error(w, "the token is refused", http.StatusUnauthorized)
		return
	}
	http.NotFound(w, r)
}

// tokenSource is a token func whose value a test changes.
type tokenSource struct {
	mu    sync.Mutex
	token string
	err   error
	calls atomic.Int32
}

func (t *tokenSource) get() (string, error) {
	t.calls.Add(1)
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.token, t.err
}

// capturedLog is a logger whose lines, at every level, a test reads.
func capturedLog() (*logrus.Logger, *bytes.Buffer) {
	var buf bytes.Buffer
	l := logrus.New()
	l.SetOutput(&buf)
	l.SetLevel(logrus.DebugLevel)
	return l, &buf
}

func TestBearerToken_EveryRequestCarriesIt(t *testing.T) {
	srv := &tokenServer{token: "pod-token-1"}
	ts := httptest.NewServer(srv)
	defer ts.Close()
	src := &tokenSource{token: "pod-token-1"}
	c, err := eureka.New(eureka.Options{URLs: []string{ts.URL + "/eureka"}, BearerToken: src.get})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := c.Heartbeat(ctx, "app", "id", time.Time{}); !errors.Is(err, eureka.ErrNotFound) {
		t.Fatalf("heartbeat: %v, want the server's 404", err)
	}
	if err := c.Cancel(ctx, "app", "id"); !errors.Is(err, eureka.ErrNotFound) {
		t.Fatalf("cancel: %v, want the server's 404", err)
	}
	if _, err := c.Instances(ctx, "app"); err != nil {
		t.Fatalf("read: %v", err)
	}
	relayed, err := c.Relay(ctx, eureka.Relay{Op: "renew", Method: http.MethodPut, Path: "apps/APP/id"})
	if err != nil || relayed.Status != http.StatusNotFound {
		t.Fatalf("relay: %+v, %v; want the server's 404", relayed, err)
	}
	for i, h := range srv.seen() {
		if h != "Bearer pod-token-1" {
			t.Errorf("request %d: Authorization %q, want the bearer token", i, h)
		}
	}
	if got := src.calls.Load(); got != 4 {
		t.Errorf("token read %d times for 4 requests, want once per request", got)
	}
}

func TestBearerToken_BasicCredentialsWin(t *testing.T) {
	var got atomic.Value
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got.Store(r.Header.Get("Authorization"))
		http.NotFound(w, r)
	}))
	defer ts.Close()
	src := &tokenSource{token: "pod-token"}
	ctx := context.Background()

	for name, opts := range map[string]eureka.Options{
		"username and password": {Username: "eureka", Password: "secret"},
		"credentials func": {Credentials: func(bool) (eureka.Credentials, error) {
			return eureka.Credentials{Username: "eureka", Password: "secret"}, nil
		}},
	} {
		src.calls.Store(0)
		opts.URLs, opts.BearerToken = []string{ts.URL + "/eureka"}, src.get
		c, err := eureka.New(opts)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Heartbeat(ctx, "app", "id", time.Time{}); !errors.Is(err, eureka.ErrNotFound) {
			t.Fatalf("%s: %v", name, err)
		}
		if h, _ := got.Load().(string); !strings.HasPrefix(h, "Basic ") {
			t.Errorf("%s: Authorization %q, want the basic credentials", name, h)
		}
		if _, err := c.Relay(ctx, eureka.Relay{Op: "renew", Method: http.MethodPut, Path: "apps/APP/id"}); err != nil {
			t.Fatal(err)
		}
		if h, _ := got.Load().(string); !strings.HasPrefix(h, "Basic ") {
			t.Errorf("%s, relayed: Authorization %q, want the basic credentials", name, h)
		}
		if src.calls.Load() != 0 {
			t.Errorf("%s: the token was read %d times though credentials are sent", name, src.calls.Load())
		}
	}

	// A credentials func with no username (a syncer without a Secret)
	// leaves the request to the token.
	c, err := eureka.New(eureka.Options{URLs: []string{ts.URL + "/eureka"}, BearerToken: src.get,
		Credentials: func(bool) (eureka.Credentials, error) { return eureka.Credentials{}, nil }})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Heartbeat(ctx, "app", "id", time.Time{}); !errors.Is(err, eureka.ErrNotFound) {
		t.Fatal(err)
	}
	if h, _ := got.Load().(string); h != "Bearer pod-token" {
		t.Errorf("no username: Authorization %q, want the bearer token", h)
	}
}

func TestBearerToken_RotatedTokenIsReadAgainOn401AndNeverShown(t *testing.T) {
	srv := &tokenServer{token: "pod-token-1"}
	ts := httptest.NewServer(srv)
	defer ts.Close()
	// queue: what successive reads of the token return, the last one
	// again and again; a read that returns the old token after a rotation
	// is a stat that has not noticed the kubelet's swap yet.
	var mu sync.Mutex
	queue := []string{"pod-token-1"}
	read := func(tokens ...string) { mu.Lock(); queue = tokens; mu.Unlock() }
	token := func() (string, error) {
		mu.Lock()
		defer mu.Unlock()
		tok := queue[0]
		if len(queue) > 1 {
			queue = queue[1:]
		}
		return tok, nil
	}
	log, logged := capturedLog()
	c, err := eureka.New(eureka.Options{URLs: []string{ts.URL + "/eureka"}, BearerToken: token, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := c.Heartbeat(ctx, "app", "id", time.Time{}); !errors.Is(err, eureka.ErrNotFound) {
		t.Fatalf("heartbeat with the current token: %v", err)
	}

	// The kubelet rotated the token: the 401 makes the client read it
	// again and send once more, so the caller never sees the refusal.
	srv.set("pod-token-2")
	read("pod-token-1", "pod-token-2")
	if err := c.Heartbeat(ctx, "app", "id", time.Time{}); !errors.Is(err, eureka.ErrNotFound) {
		t.Fatalf("heartbeat after the rotation: %v, want the server's 404 after one resend", err)
	}
	if srv.refused.Load() != 1 {
		t.Fatalf("refused %d requests, want the one with the old token", srv.refused.Load())
	}
	srv.set("pod-token-3")
	read("pod-token-2", "pod-token-3")
	relayed, err := c.Relay(ctx, eureka.Relay{Op: "renew", Method: http.MethodPut, Path: "apps/APP/id"})
	if err != nil || relayed.Status != http.StatusNotFound {
		t.Fatalf("relay after the rotation: %+v, %v; want the server's 404 after one resend", relayed, err)
	}

	// The server moves on, the token does not: one 401, no second send,
	// and neither the error nor the log quotes the token.
	srv.set("pod-token-4")
	before := len(srv.seen())
	err = c.Heartbeat(ctx, "app", "id", time.Time{})
	if eureka.StatusCode(err) != http.StatusUnauthorized || !errors.Is(err, eureka.ErrRejected) {
		t.Fatalf("heartbeat with a stale token: %v, want HTTP 401", err)
	}
	relayed, rerr := c.Relay(ctx, eureka.Relay{Op: "renew", Method: http.MethodPut, Path: "apps/APP/id"})
	if rerr != nil || relayed.Status != http.StatusUnauthorized {
		t.Fatalf("relay with a stale token: %+v, %v; want the 401", relayed, rerr)
	}
	if n := len(srv.seen()) - before; n != 2 {
		t.Fatalf("%d requests sent, want 2: an unchanged token is not sent again", n)
	}
	for _, shown := range []string{err.Error(), eureka.Redact(err.Error()), logged.String()} {
		if strings.Contains(shown, "pod-token") {
			t.Errorf("the token is shown: %s", shown)
		}
	}
	if !strings.Contains(logged.String(), "refused the bearer token") {
		t.Errorf("log %q: want the resend after the rotation logged", logged.String())
	}
}

func TestBearerToken_AnUnreadableTokenIsAnErrorWithoutARequest(t *testing.T) {
	srv := &tokenServer{token: "pod-token"}
	ts := httptest.NewServer(srv)
	defer ts.Close()
	src := &tokenSource{err: errors.New("open /var/run/secrets/eurekube.io/gateway/token: no such file or directory")}
	c, err := eureka.New(eureka.Options{URLs: []string{ts.URL + "/eureka"}, BearerToken: src.get})
	if err != nil {
		t.Fatal(err)
	}
	err = c.Heartbeat(context.Background(), "app", "id", time.Time{})
	if !errors.Is(err, eureka.ErrInvalid) || !strings.Contains(err.Error(), "bearer token") || !strings.Contains(err.Error(), "gateway/token") {
		t.Fatalf("err = %v, want ErrInvalid naming the token's file", err)
	}
	if _, err := c.Relay(context.Background(), eureka.Relay{Op: "renew", Method: http.MethodPut, Path: "apps/APP/id"}); !errors.Is(err, eureka.ErrInvalid) {
		t.Fatalf("relay: err = %v, want ErrInvalid", err)
	}
	if len(srv.seen()) != 0 {
		t.Fatal("a request was sent without the token")
	}

	// An empty token sends no header at all.
	src.mu.Lock()
	src.err = nil
	src.mu.Unlock()
	if err := c.Heartbeat(context.Background(), "app", "id", time.Time{}); eureka.StatusCode(err) != http.StatusUnauthorized {
		t.Fatalf("empty token: %v, want the server's 401", err)
	}
	if h := srv.seen(); len(h) != 1 || h[0] != "" {
		t.Fatalf("empty token: Authorization %q, want none", h)
	}
}
