package eureka

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/sirupsen/logrus"
)

// DefaultTimeout bounds one HTTP request to one server.
const DefaultTimeout = 5 * time.Second

// maxBody caps how much of a response is read; a full registry of a large
// fleet fits comfortably.
const maxBody = 64 << 20

// Observer receives one call per HTTP request the client makes, for metrics.
// err is nil on success (including answers the caller expects, such as 404
// on a heartbeat, which are reported as ErrNotFound).
type Observer interface {
	ObserveRequest(op, url string, d time.Duration, err error)
}

// Options configure a Client.
type Options struct {
	// URLs of the Eureka servers, e.g. http://eureka:8761/eureka. Tried in
	// order, starting with the last one that answered; a URL that fails is
	// skipped for the rest of that request.
	URLs []string
	// Username and Password enable HTTP basic auth when Username is set.
	Username string
	Password string
	// Credentials, when set, gives the basic-auth credentials of every
	// request instead of Username and Password, so that a rotated password
	// is used from the next request on without a new Client.
	Credentials CredentialsFunc
	// BearerToken, when set, gives the token every request carries as
	// Authorization: Bearer, unless it carries basic-auth credentials
	// (Username, or Credentials with a username, win: a syncer that names
	// its own Eureka with credentials talks to that Eureka directly). A
	// pod's projected ServiceAccount token for Eurekube's gateway, which
	// the kubelet rotates: it is called once per request, so it must be
	// cheap (a stat of the token's file, not a read), and again after a
	// server refused the token (HTTP 401), the request then sent once more
	// when the token changed. An empty token sends none. The token is
	// never logged and no error quotes it.
	BearerToken func() (string, error)
	// Timeout bounds each HTTP request to one server (default 5 s).
	Timeout time.Duration
	// TLSConfig for https URLs; nil means the system defaults.
	TLSConfig *tls.Config
	// RootCAs, when set, are the only CAs trusted for https URLs (a
	// private CA), in place of the system's.
	RootCAs *x509.CertPool
	// ClientCertificate, when set, is presented to servers that ask for
	// one (mutual TLS).
	ClientCertificate *tls.Certificate
	// Logger receives the layer's log lines; nil means logrus' standard
	// logger.
	Logger logrus.FieldLogger
	// Observer, when set, sees every request.
	Observer Observer
}

// Credentials are HTTP basic-auth credentials; an empty Username sends
// none.
type Credentials struct {
	Username, Password string
}

// CredentialsFunc returns the credentials of the next request. It is called
// once per request, so it must be cheap (a stat of the files it reads, not
// a read). reload is true after a server refused the credentials it
// returned last (HTTP 401): it should then read them afresh from their
// source; when they changed, the request is sent once more with them.
type CredentialsFunc func(reload bool) (Credentials, error)

// auth is what one request authenticates with: basic-auth credentials, or
// else a bearer token; neither when both are empty.
type auth struct {
	basic  Credentials
	bearer string
}

// set adds a's Authorization header to req.
func (a auth) set(req *http.Request) {
	switch {
	case a.basic.Username != "":
		req.SetBasicAuth(a.basic.Username, a.basic.Password)
	case a.bearer != "":
		req.Header.Set("Authorization", "Bearer "+a.bearer)
	}
}

// Client talks to one Eureka cluster. It is safe for concurrent use.
type Client struct {
	urls        []string
	credentials CredentialsFunc        // nil: no basic auth
	bearer      func() (string, error) // nil: no bearer token
	timeout     time.Duration
	http        *http.Client
	log         logrus.FieldLogger
	observer    Observer
	// preferred is the index of the URL that answered last, so that steady
	// state talks to one server and failover sticks.
	preferred atomic.Int32
	// now is the clock reads are stamped with (time.Now; a test's fake
	// clock).
	now func() time.Time
}

// New validates opts and returns a Client. It never exits or panics on bad
// input; it returns an error wrapping ErrInvalid.
func New(opts Options) (*Client, error) {
	if len(opts.URLs) == 0 {
		return nil, fmt.Errorf("%w: no Eureka server URL", ErrInvalid)
	}
	trimmed := make([]string, len(opts.URLs))
	for i, raw := range opts.URLs {
		trimmed[i] = strings.TrimSpace(raw)
	}
	// Requests are the canonical base URL followed by a path: every
	// spelling of a server sends the same requests.
	urls, err := ServerSet(trimmed)
	if err != nil {
		return nil, fmt.Errorf("%w: Eureka server %w", ErrInvalid, err)
	}
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	if opts.Logger == nil {
		opts.Logger = logrus.StandardLogger()
	}
	credentials := opts.Credentials
	if credentials == nil && opts.Username != "" {
		static := Credentials{Username: opts.Username, Password: opts.Password}
		credentials = func(bool) (Credentials, error) { return static, nil }
	}
	tlsConfig := opts.TLSConfig
	if opts.RootCAs != nil || opts.ClientCertificate != nil {
		if tlsConfig == nil {
			tlsConfig = &tls.Config{MinVersion: tls.VersionTLS12}
		} else {
			tlsConfig = tlsConfig.Clone()
		}
		if opts.RootCAs != nil {
			tlsConfig.RootCAs = opts.RootCAs
		}
		if opts.ClientCertificate != nil {
			tlsConfig.Certificates = []tls.Certificate{*opts.ClientCertificate}
		}
	}
	transport := &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           (&net.Dialer{Timeout: opts.Timeout, KeepAlive: 30 * time.Second}).DialContext,
		TLSClientConfig:       tlsConfig,
		TLSHandshakeTimeout:   opts.Timeout,
		ResponseHeaderTimeout: opts.Timeout,
		MaxIdleConnsPerHost:   4,
		IdleConnTimeout:       90 * time.Second,
	}
	return &Client{
		urls:        urls,
		credentials: credentials,
		bearer:      opts.BearerToken,
		timeout:     opts.Timeout,
		http:        &http.Client{Transport: transport},
		log:         opts.Logger,
		observer:    opts.Observer,
		now:         time.Now,
	}, nil
}

// URLs returns the server URLs in configured order.
func (c *Client) URLs() []string { return append([]string(nil), c.urls...) }

// CloseIdleConnections closes the connections kept for reuse: a client that
// is replaced (rotated credentials or certificates) holds none afterwards.
func (c *Client) CloseIdleConnections() { c.http.CloseIdleConnections() }

// Register sends inst with a POST (always, even when the server already has
// the instance), so changed data and every metadata key reach the server.
func (c *Client) Register(ctx context.Context, inst Instance) error {
	if err := validate(inst); err != nil {
		return err
	}
	body, err := encodeRegistration(inst)
	if err != nil {
		return fmt.Errorf("register %s: encode: %w", inst.InstanceID, err)
	}
	_, err = c.do(ctx, "register", http.MethodPost, "/apps/"+pathApp(inst.App), body)
	if err != nil {
		return fmt.Errorf("register %s/%s: %w", inst.App, inst.InstanceID, err)
	}
	return nil
}

// Heartbeat renews the lease of app/id. ErrNotFound means "register
// again": the server has no lease, or, when lastDirty is not zero, the
// server's copy is older than the version registered at lastDirty (the
// LastDirtyTimestamp it was sent with), as Eureka checks for its own client.
func (c *Client) Heartbeat(ctx context.Context, app, id string, lastDirty time.Time) error {
	if err := validateRef(app, id); err != nil {
		return err
	}
	path := "/apps/" + pathApp(app) + "/" + url.PathEscape(id)
	if !lastDirty.IsZero() {
		path += "?lastDirtyTimestamp=" + strconv.FormatInt(lastDirty.UnixMilli(), 10)
	}
	if _, err := c.do(ctx, "heartbeat", http.MethodPut, path, nil); err != nil {
		return fmt.Errorf("heartbeat %s/%s: %w", app, id, err)
	}
	return nil
}

// Cancel removes app/id from the registry. ErrNotFound when unknown.
func (c *Client) Cancel(ctx context.Context, app, id string) error {
	if err := validateRef(app, id); err != nil {
		return err
	}
	if _, err := c.do(ctx, "cancel", http.MethodDelete, "/apps/"+pathApp(app)+"/"+url.PathEscape(id), nil); err != nil {
		return fmt.Errorf("cancel %s/%s: %w", app, id, err)
	}
	return nil
}

// SetStatusOverride sets Eureka's sticky status override of app/id
// (PUT …/status?value=X): OUT_OF_SERVICE takes an instance out of traffic
// without deregistering it, as red/black deployment tools do. The server
// lists status at once and renews the lease. It stores no override when the
// instance is already listed with status (the PUT is then a no-op that
// answers 200). ErrNotFound when the instance is unknown; ErrInvalid, with
// nothing sent, for a status that is not one of Eureka's (the server would
// answer 500).
func (c *Client) SetStatusOverride(ctx context.Context, app, id string, status Status) error {
	if err := validateRef(app, id); err != nil {
		return err
	}
	if !status.known() {
		return fmt.Errorf("%w: override the status of %s/%s with %q: want UP, DOWN, STARTING, OUT_OF_SERVICE or UNKNOWN", ErrInvalid, app, id, status)
	}
	path := "/apps/" + pathApp(app) + "/" + url.PathEscape(id) + "/status?value=" + url.QueryEscape(string(status))
	if _, err := c.do(ctx, "set_status_override", http.MethodPut, path, nil); err != nil {
		return fmt.Errorf("override the status of %s/%s with %s: %w", app, id, status, err)
	}
	return nil
}

// RemoveStatusOverride removes the status override of app/id (DELETE
// …/status, with ?value=status unless status is empty) and renews the
// lease. When the instance has an override, the server lists it with
// status as given, not as its client last reported it:
//
//   - status UP on an instance listed OUT_OF_SERVICE makes it UP. So does
//     status UP on an instance whose client reported DOWN or STARTING: it is
//     listed UP until its client registers again (heartbeats keep it UP),
//     so give back the status the instance is listed with when that is DOWN
//     or STARTING, and UP only where the client is known to be UP.
//   - empty status (no value) leaves it UNKNOWN, out of traffic: its next
//     heartbeat gets 404 (ErrNotFound), and its client registers again with
//     its own status. This is the way back that never lists UP an instance
//     whose client is not, at the cost of up to one renewal interval out of
//     traffic.
//
// When the instance has no override, the call changes nothing (200).
// ErrNotFound when the instance is unknown; ErrInvalid, with nothing sent,
// for a status that is not one of Eureka's.
func (c *Client) RemoveStatusOverride(ctx context.Context, app, id string, status Status) error {
	if err := validateRef(app, id); err != nil {
		return err
	}
	path := "/apps/" + pathApp(app) + "/" + url.PathEscape(id) + "/status"
	if status != "" {
		if !status.known() {
			return fmt.Errorf("%w: remove the status override of %s/%s giving it %q: want UP, DOWN, STARTING, OUT_OF_SERVICE, UNKNOWN or none", ErrInvalid, app, id, status)
		}
		path += "?value=" + url.QueryEscape(string(status))
	}
	if _, err := c.do(ctx, "remove_status_override", http.MethodDelete, path, nil); err != nil {
		return fmt.Errorf("remove the status override of %s/%s: %w", app, id, err)
	}
	return nil
}

// Instance reads one instance straight from the registry (not from the
// server's response cache).
func (c *Client) Instance(ctx context.Context, app, id string) (Instance, error) {
	if err := validateRef(app, id); err != nil {
		return Instance{}, err
	}
	asked := c.now()
	body, err := c.do(ctx, "instance", http.MethodGet, "/apps/"+pathApp(app)+"/"+url.PathEscape(id), nil)
	if err != nil {
		return Instance{}, fmt.Errorf("read %s/%s: %w", app, id, err)
	}
	inst, err := decodeInstance(body, asked)
	if err != nil {
		return Instance{}, fmt.Errorf("read %s/%s: %w", app, id, err)
	}
	return inst, nil
}

// Instances lists the instances of app. An unknown app is an empty list,
// not an error.
func (c *Client) Instances(ctx context.Context, app string) ([]Instance, error) {
	if strings.TrimSpace(app) == "" {
		return nil, fmt.Errorf("%w: empty app name", ErrInvalid)
	}
	asked := c.now()
	body, err := c.do(ctx, "instances", http.MethodGet, "/apps/"+pathApp(app), nil)
	if errors.Is(err, ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", app, err)
	}
	insts, err := decodeApp(body, asked)
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", app, err)
	}
	return insts, nil
}

// InstancesWithMetadata lists the instances of app whose metadata has every
// key of match with the same value.
func (c *Client) InstancesWithMetadata(ctx context.Context, app string, match map[string]string) ([]Instance, error) {
	all, err := c.Instances(ctx, app)
	if err != nil {
		return nil, err
	}
	out := all[:0]
	for _, inst := range all {
		if inst.HasMetadata(match) {
			out = append(out, inst)
		}
	}
	return out, nil
}

// do sends one request, failing over across the URLs: a network error, a
// timeout, a 5xx or 429, and for a read a 403 move on to the next URL
// (movesOn); any other answer is final.
// When ctx has a deadline, each URL gets at most an equal share of what is
// left of it, so a hanging server cannot spend the whole of a short budget
// (a cancel on shutdown) before a healthy one is tried.
func (c *Client) do(ctx context.Context, op, method, path string, body []byte) ([]byte, error) {
	var respBody []byte
	err := c.exchange(ctx, op, method, path, body, false, func(a answer) (err error) {
		respBody, err = io.ReadAll(a)
		return err
	})
	return respBody, err
}

// answer is the body of a 2xx; gzipped when the request accepted gzip and
// the server compressed it (it is then left compressed).
type answer struct {
	io.Reader
	gzipped bool
}

// exchange is do with the answer of a 2xx handed to read, within the
// request's timeout; read may be called once per URL tried, and the next
// URL is tried when it fails. With gzipOK the server may compress the
// answer (Eureka serves its registry from a cache of compressed answers)
// and read gets it as it came.
//
// With a CredentialsFunc or a bearer token, a request the server answers
// with 401 is sent once more when the credentials or the token, read
// afresh, changed: a rotated password or token is used at once rather than
// after the next change of the files is noticed.
func (c *Client) exchange(ctx context.Context, op, method, path string, body []byte, gzipOK bool, read func(answer) error) error {
	a, err := c.auth(false)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	err = c.exchangeAs(ctx, op, method, path, body, gzipOK, a, read)
	if StatusCode(err) != http.StatusUnauthorized || !c.reloads(a) {
		return err
	}
	fresh, rerr := c.auth(true)
	if rerr != nil {
		return fmt.Errorf("%w; reading them again: %v", err, rerr)
	}
	if fresh == a {
		return err
	}
	c.log.WithField("op", op).Info(a.refused())
	return c.exchangeAs(ctx, op, method, path, body, gzipOK, fresh, read)
}

// auth reads what the next request authenticates with: the credentials,
// else the bearer token (reload: a server refused the last ones). The
// error names which could not be read, never their value.
func (c *Client) auth(reload bool) (auth, error) {
	var a auth
	if c.credentials != nil {
		creds, err := c.credentials(reload)
		if err != nil {
			return auth{}, fmt.Errorf("basic-auth credentials: %v", err)
		}
		a.basic = creds
	}
	if a.basic.Username == "" && c.bearer != nil {
		token, err := c.bearer()
		if err != nil {
			return auth{}, fmt.Errorf("bearer token: %v", err)
		}
		a.bearer = token
	}
	return a, nil
}

// reloads is true when a refusal of a (401) is worth reading the
// credentials or the token again for.
func (c *Client) reloads(a auth) bool {
	return c.credentials != nil || a.bearer != ""
}

// refused is the log line of a request sent again after a refusal of a.
func (a auth) refused() string {
	if a.bearer != "" {
		return "eureka refused the bearer token; sending again with the one just read"
	}
	return "eureka refused the credentials; sending again with the ones just read"
}

func (c *Client) exchangeAs(ctx context.Context, op, method, path string, body []byte, gzipOK bool, creds auth, read func(answer) error) error {
	start := int(c.preferred.Load())
	var errs []error
	for i := range c.urls {
		idx := (start + i) % len(c.urls)
		base := c.urls[idx]
		err := c.once(ctx, op, method, base+path, body, gzipOK, creds, read, len(c.urls)-i)
		if err == nil || !movesOn(op, method, err) {
			c.preferred.Store(int32(idx))
			return err
		}
		errs = append(errs, err)
		c.log.WithError(err).WithField("url", Redact(base)).Debug("eureka server unavailable, or refusing reads while it starts: trying the next one")
		if ctx.Err() != nil {
			break
		}
	}
	joined := errors.Join(errs...)
	if len(errs) == len(c.urls) && !slices.ContainsFunc(errs, func(err error) bool { return StatusCode(err) != http.StatusForbidden }) {
		// Still a refusal (ErrRejected, StatusCode 403), saying why
		// each server may have refused.
		return fmt.Errorf("each Eureka server refused the read (HTTP 403: a server refuses registry reads while it starts and syncs from its peers, a gateway or Spring Security what it does not allow): %w", joined)
	}
	return joined
}

// movesOn is true when err, one server's failure of request op, should
// send the request to the next URL: no answer (a network error, a timeout,
// a body cut short), a 5xx or a 429; and for a read, a 403. A Eureka server
// answers 403 to the registry reads it serves from its response cache
// (GET /apps, /apps/delta, /apps/{APP}, /vips) while it is starting and
// has not yet synced from its peers (shouldAllowAccess, for up to
// waitTimeInMsWhenSyncEmpty, 5 minutes), and Eureka's own client moves on
// then (RetryableEurekaHttpClient, whose evaluator takes only 2xx, 302 and,
// for a delta, 403 or 404 as an answer).
//
// The delta's 403 is an answer, as for Eureka's client: it also means
// "deltas disabled" (eureka.server.disable-delta), and RegistryCache then
// reads the registry whole, which moves on past a server that is starting.
// Asking every URL for a delta that a cluster never serves would cost one
// request per URL on every read.
//
// A 403 to a write stays final. Eureka answers none to a write (a starting
// server takes registrations, heartbeats and cancels, and replicates them
// to its peers), so a 403 to one comes from what authorizes requests in
// front of the server or in it (a gateway, Spring Security): a refusal of
// this caller's write that sending it to the next URL should not try to
// get around, and that would only be repeated once per URL.
func movesOn(op, method string, err error) bool {
	if errors.Is(err, ErrUnavailable) {
		return true
	}
	return method == http.MethodGet && op != opDelta && StatusCode(err) == http.StatusForbidden
}

// attempt bounds one request to one server: the client's timeout, or an
// equal share of what is left of ctx among the left URLs still to try.
func (c *Client) attempt(ctx context.Context, left int) (context.Context, context.CancelFunc) {
	timeout := c.timeout
	if deadline, ok := ctx.Deadline(); ok && left > 1 {
		timeout = min(timeout, time.Until(deadline)/time.Duration(left))
	}
	return context.WithTimeout(ctx, timeout)
}

// once sends one request to one URL and maps the answer to an error; left
// is how many URLs, this one included, may still be tried.
func (c *Client) once(ctx context.Context, op, method, target string, body []byte, gzipOK bool, creds auth, read func(answer) error, left int) error {
	ctx, cancel := c.attempt(ctx, left)
	defer cancel()
	began := time.Now()
	err := c.send(ctx, method, target, body, gzipOK, creds, read)
	if c.observer != nil {
		c.observer.ObserveRequest(op, Redact(target), time.Since(began), err)
	}
	return err
}

func (c *Client) send(ctx context.Context, method, target string, body []byte, gzipOK bool, creds auth, read func(answer) error) error {
	var reader io.Reader
	if body != nil {
		reader = bytes.NewReader(body)
	}
	shown := Redact(target) // what errors say: the target with no password
	req, err := http.NewRequestWithContext(ctx, method, target, reader)
	if err != nil {
		return fmt.Errorf("%w: %s %s: %v", ErrInvalid, method, shown, redactURLError(err))
	}
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	creds.set(req)
	if gzipOK {
		// Set by hand, so the transport leaves the answer compressed.
		req.Header.Set("Accept-Encoding", "gzip")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return &RequestError{Method: method, URL: shown, Err: redactURLError(err), kind: ErrUnavailable}
	}
	defer resp.Body.Close()
	limited := io.LimitReader(resp.Body, maxBody)
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		if err := read(answer{Reader: limited, gzipped: gzipOK && resp.Header.Get("Content-Encoding") == "gzip"}); err != nil {
			return &RequestError{Method: method, URL: shown, Err: err, kind: ErrUnavailable}
		}
		return nil
	}
	respBody, err := io.ReadAll(limited)
	if err != nil {
		return &RequestError{Method: method, URL: shown, Err: err, kind: ErrUnavailable}
	}
	switch {
	case resp.StatusCode == http.StatusNotFound:
		return &RequestError{Method: method, URL: shown, StatusCode: resp.StatusCode, kind: ErrNotFound}
	case resp.StatusCode >= 500 || resp.StatusCode == http.StatusTooManyRequests:
		return &RequestError{Method: method, URL: shown, StatusCode: resp.StatusCode, Body: snippet(respBody), kind: ErrUnavailable}
	default:
		return &RequestError{Method: method, URL: shown, StatusCode: resp.StatusCode, Body: snippet(respBody), kind: ErrRejected}
	}
}

// RequestError is one failed request to one server. errors.Is matches it
// against ErrNotFound, ErrUnavailable or ErrRejected; StatusCode is 0 when
// no answer came.
type RequestError struct {
	Method string
	// URL is the request's, its password (if any) redacted.
	URL        string
	StatusCode int
	Body       string
	Err        error
	kind       error
}

func (e *RequestError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s: ", e.Method, e.URL)
	if e.StatusCode != 0 {
		fmt.Fprintf(&b, "HTTP %d", e.StatusCode)
		if e.Body != "" {
			fmt.Fprintf(&b, " (%s)", e.Body)
		}
	} else {
		b.WriteString(e.Err.Error())
	}
	return b.String()
}

// Is reports whether target is the kind of this error.
func (e *RequestError) Is(target error) bool { return target == e.kind }

// Unwrap returns the transport error, if any.
func (e *RequestError) Unwrap() error { return e.Err }

// StatusCode returns the HTTP status of the first RequestError in err's
// chain, or 0. Unlike fargo's, it sees through wrapping.
func StatusCode(err error) int {
	var re *RequestError
	if errors.As(err, &re) {
		return re.StatusCode
	}
	return 0
}

func snippet(b []byte) string {
	s := strings.TrimSpace(string(b))
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return s
}

// known is true for the statuses Eureka's server can parse; it answers 500
// to any other.
func (s Status) known() bool {
	switch s {
	case StatusUp, StatusDown, StatusStarting, StatusOutOfService, StatusUnknown:
		return true
	}
	return false
}

func pathApp(app string) string { return url.PathEscape(strings.ToUpper(app)) }

func validateRef(app, id string) error {
	if strings.TrimSpace(app) == "" {
		return fmt.Errorf("%w: empty app name", ErrInvalid)
	}
	if strings.TrimSpace(id) == "" {
		return fmt.Errorf("%w: empty instance id", ErrInvalid)
	}
	return nil
}

// validate checks what the server would refuse with a 400, so that the
// caller gets a clear error without a round trip.
func validate(inst Instance) error {
	if err := validateRef(inst.App, inst.InstanceID); err != nil {
		return err
	}
	if inst.HostName == "" {
		return fmt.Errorf("%w: instance %s has no hostName", ErrInvalid, inst.InstanceID)
	}
	if inst.IPAddr == "" {
		return fmt.Errorf("%w: instance %s has no ipAddr", ErrInvalid, inst.InstanceID)
	}
	if inst.Port < 0 || inst.Port > 65535 || inst.SecurePort < 0 || inst.SecurePort > 65535 {
		return fmt.Errorf("%w: instance %s ports %d/%d out of range", ErrInvalid, inst.InstanceID, inst.Port, inst.SecurePort)
	}
	if inst.OverriddenStatus != "" && !inst.OverriddenStatus.known() {
		return fmt.Errorf("%w: instance %s overridden status %q: want UP, DOWN, STARTING, OUT_OF_SERVICE or UNKNOWN", ErrInvalid, inst.InstanceID, inst.OverriddenStatus)
	}
	return nil
}
