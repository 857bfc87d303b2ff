package gateway

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/sirupsen/logrus"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/eurekube/eurekube/eureka"
	"github.com/eurekube/eurekube/internal/ownership"
)

// Modes of the gateway.
const (
	// ModeEnforce refuses every write its rules refuse.
	ModeEnforce = "enforce"
	// ModeAudit lets every write through and records what enforce would
	// have refused: the weeks of a migration, while clients move to the
	// gateway and are given identities.
	ModeAudit = "audit"
)

// Defaults of Options.
const (
	DefaultAudience = "eurekube-gateway"
	DefaultReadTTL  = 5 * time.Second
	// DefaultTokenTTL covers four of a registrar's 30 s heartbeats: one
	// TokenReview per pod per two minutes (a thousand pods: about eight a
	// second), and a deleted pod's token is refused within two minutes
	// (its registration at once: the pod is read live).
	DefaultTokenTTL = 2 * time.Minute
	// DefaultStaleFor is how long an identity verified last this long ago
	// keeps heartbeating while TokenReview cannot be reached.
	DefaultStaleFor = 15 * time.Minute
	// maxWriteBody bounds a write's body: a registration is a few KiB.
	maxWriteBody = 1 << 20
)

// Options configure a Gateway.
type Options struct {
	// Eureka reaches the Eureka servers with the credentials only the
	// gateway holds.
	Eureka *eureka.Client
	// Mode is ModeEnforce or ModeAudit.
	Mode string
	// Audience of the pods' projected tokens (DefaultAudience).
	Audience string
	// Reviewer verifies tokens (TokenReview).
	Reviewer TokenReviewer
	// Cache reads EurekaAppPolicies, EurekaAppClaims, EurekaSyncers,
	// Namespaces and the Secrets of Namespace.
	Cache client.Reader
	// IndexedSyncers: Cache has the index ownership.IndexSyncers makes.
	IndexedSyncers bool
	// Pods reads pods from the API server itself.
	Pods client.Reader
	// ManagerServiceAccount is Eurekube's manager's ServiceAccount,
	// namespace/name: its pods' tokens write any app (what the reconciler
	// writes); empty: none.
	ManagerServiceAccount string
	// Namespace holds the Secrets that policies' clientSecrets name.
	Namespace string
	// ClusterID is this cluster's eurekube.io/cluster marker.
	ClusterID string
	// Events, when set, records refusals on pods.
	Events events.EventRecorder
	// ReadTTL, TokenTTL and StaleFor: see the defaults.
	ReadTTL, TokenTTL, StaleFor time.Duration
	Log                         logrus.FieldLogger
	// Now is the clock (time.Now).
	Now func() time.Time
}

// Gateway is an http.Handler that speaks Eureka's REST API in front of
// Eureka servers, and lets a write through only for its writer's apps and
// instances.
type Gateway struct {
	eureka  *eureka.Client
	enforce bool
	tokens  *tokens
	clients clients
	authz   authorizer
	reads   *reads
	audit   *auditor
	log     logrus.FieldLogger
	manager string
}

// New checks opts and returns a Gateway.
func New(opts Options) (*Gateway, error) {
	switch {
	case opts.Eureka == nil:
		return nil, errors.New("gateway: no Eureka client")
	case opts.Reviewer == nil || opts.Cache == nil || opts.Pods == nil:
		return nil, errors.New("gateway: a TokenReviewer, a cache and a pod reader are required")
	case opts.Mode != ModeEnforce && opts.Mode != ModeAudit:
		return nil, fmt.Errorf("gateway: mode %q: want %s or %s", opts.Mode, ModeEnforce, ModeAudit)
	}
	if opts.Audience == "" {
		opts.Audience = DefaultAudience
	}
	if opts.ReadTTL <= 0 {
		opts.ReadTTL = DefaultReadTTL
	}
	if opts.TokenTTL <= 0 {
		opts.TokenTTL = DefaultTokenTTL
	}
	if opts.StaleFor <= 0 {
		opts.StaleFor = DefaultStaleFor
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Log == nil {
		opts.Log = logrus.StandardLogger()
	}
	return &Gateway{
		eureka:  opts.Eureka,
		enforce: opts.Mode == ModeEnforce,
		tokens:  &tokens{reviewer: countingReviewer{opts.Reviewer}, audience: opts.Audience, ttl: opts.TokenTTL, staleFor: opts.StaleFor, now: opts.Now},
		clients: clients{reader: opts.Cache, namespace: opts.Namespace},
		authz: authorizer{
			cache: opts.Cache, pods: opts.Pods, clusterID: opts.ClusterID,
			// Never Writer: the gateway claims nothing (a dry run of the
			// ownership rule); claims are earned where pods are admitted.
			checker: ownership.Checker{Reader: opts.Cache, Indexed: opts.IndexedSyncers},
		},
		reads:   &reads{eureka: opts.Eureka, ttl: opts.ReadTTL, now: opts.Now},
		audit:   &auditor{log: opts.Log, events: opts.Events, now: opts.Now},
		log:     opts.Log,
		manager: opts.ManagerServiceAccount,
	}, nil
}

// RefusedHeader names the reason of an answer the gateway gave itself
// instead of Eureka.
const RefusedHeader = "X-Eurekube-Refused"

// ServeHTTP answers one request of Eureka's API.
func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	began := time.Now()
	rw := &statusWriter{ResponseWriter: w}
	op := g.serve(rw, r)
	requestSeconds.WithLabelValues(op, strconv.Itoa(rw.status)).Observe(time.Since(began).Seconds())
}

func (g *Gateway) serve(w *statusWriter, r *http.Request) string {
	rt, rerr := parseRoute(r.Method, r.URL)
	if rerr != nil {
		g.answerSelf(w, rerr.status, rerr.reason, rerr.msg)
		return "unknown"
	}
	relay := eureka.Relay{
		Op: rt.op, Method: r.Method, Path: rt.upstream,
		Accept: r.Header.Get("Accept"), ContentType: r.Header.Get("Content-Type"),
		CachedRead: rt.cachedRead(),
	}
	if !rt.write() {
		g.read(w, r, rt, relay)
		return rt.op
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxWriteBody))
	if err != nil {
		g.answerSelf(w, http.StatusRequestEntityTooLarge, ReasonMalformedBody, fmt.Sprintf("the body is larger than %d bytes or cut short: %v", maxWriteBody, err))
		return rt.op
	}
	relay.Body = body
	if len(body) == 0 {
		relay.Body = nil
	}
	wr := write{route: rt, query: r.URL.Query()}
	if rt.op == OpRegister {
		if wr.inst, err = eureka.ParseRegistration(body, relay.ContentType); err != nil {
			// Eureka answers 400 to an instance it cannot read; a body
			// that is not one never reaches it.
			g.record(wr, Identity{Kind: KindNone}, verdict{status: http.StatusBadRequest, reason: ReasonMalformedBody, msg: err.Error()}, VerdictRefused)
			g.answerSelf(w, http.StatusBadRequest, ReasonMalformedBody, err.Error())
			return rt.op
		}
	}
	id, v := g.judge(r.Context(), r, wr)
	switch {
	case !v.allowed && v.status == http.StatusServiceUnavailable && r.Context().Err() != nil:
		// The caller gave up while what decides (TokenReview, the API
		// server's reads) had not answered: it hears nothing either way.
		g.record(wr, id, v, VerdictAbandoned)
		return rt.op
	case v.allowed:
		g.record(wr, id, v, VerdictAllowed)
	case !g.enforce:
		g.record(wr, id, v, VerdictAudited)
	default:
		g.record(wr, id, v, VerdictRefused)
		g.answerSelf(w, v.status, v.reason, v.msg)
		return rt.op
	}
	g.pass(w, r.Context(), relay)
	return rt.op
}

// judge establishes the identity of a write and decides it.
func (g *Gateway) judge(ctx context.Context, r *http.Request, w write) (Identity, verdict) {
	id, aerr := g.identify(ctx, r)
	if aerr != nil {
		return id, refuse(aerr.status, aerr.reason, aerr.msg)
	}
	id.Manager = id.Kind == KindPod && g.manager != "" && id.Namespace+"/"+id.ServiceAccount == g.manager
	if id.Stale && w.op != OpRenew && w.op != OpCancel {
		return id, refuse(http.StatusServiceUnavailable, ReasonReviewDown,
			fmt.Sprintf("%s was verified earlier, but TokenReview cannot be reached now: its heartbeats and cancel go through, its %s waits until the token can be verified again", id, w.op))
	}
	return id, g.authz.decide(ctx, id, w)
}

func (g *Gateway) identify(ctx context.Context, r *http.Request) (Identity, *authError) {
	h := r.Header.Get("Authorization")
	scheme, cred, _ := strings.Cut(h, " ")
	switch {
	case h == "":
		return Identity{Kind: KindNone}, nil
	case strings.EqualFold(scheme, "Bearer"):
		token := strings.TrimSpace(cred)
		if token == "" {
			return Identity{Kind: KindNone}, &authError{http.StatusUnauthorized, ReasonMalformedHeader, "Authorization: Bearer with no token"}
		}
		id, aerr := g.tokens.identify(ctx, token)
		if aerr != nil {
			id.Kind = KindPod
		}
		return id, aerr
	case strings.EqualFold(scheme, "Basic"):
		user, pass, ok := r.BasicAuth()
		if !ok {
			return Identity{Kind: KindNone}, &authError{http.StatusUnauthorized, ReasonMalformedHeader, "Authorization: Basic that is not base64 of user:password"}
		}
		id, aerr := g.clients.identify(ctx, user, pass)
		if aerr != nil {
			id.Kind = KindClient
		}
		return id, aerr
	}
	return Identity{Kind: KindNone}, &authError{http.StatusUnauthorized, ReasonMalformedHeader, fmt.Sprintf("Authorization scheme %q: the gateway takes Bearer (a pod's projected token) or Basic (a client's credentials)", scheme)}
}

func (g *Gateway) record(w write, id Identity, v verdict, outcome string) {
	g.audit.record(auditRecord{id: id, op: w.op, app: w.app, iid: w.instanceID(), verdict: outcome, reason: v.reason, msg: v.msg, status: v.status})
}

// read answers a read: a polled one from the shared copy, the others
// passed on.
func (g *Gateway) read(w *statusWriter, r *http.Request, rt route, relay eureka.Relay) {
	acceptsGzip := strings.Contains(r.Header.Get("Accept-Encoding"), "gzip")
	// Eureka compresses only these two, and only when asked.
	relay.Gzip = acceptsGzip && (rt.op == OpApps || rt.op == OpDelta)
	if !rt.cachedRead() {
		g.pass(w, r.Context(), relay)
		return
	}
	a, result, err := g.reads.get(r.Context(), relay)
	readsTotal.WithLabelValues(rt.op, result).Inc()
	if err != nil {
		g.unavailable(w, err)
		return
	}
	g.answer(w, a)
}

// pass sends a request on to Eureka and its answer back.
func (g *Gateway) pass(w *statusWriter, ctx context.Context, relay eureka.Relay) {
	a, err := g.eureka.Relay(ctx, relay)
	if err != nil {
		g.unavailable(w, err)
		return
	}
	g.answer(w, a)
}

func (g *Gateway) answer(w *statusWriter, a *eureka.Relayed) {
	h := w.Header()
	if a.ContentType != "" {
		h.Set("Content-Type", a.ContentType)
	}
	if a.ContentEncoding != "" {
		h.Set("Content-Encoding", a.ContentEncoding)
	}
	h.Set("Content-Length", strconv.Itoa(len(a.Body)))
	w.WriteHeader(a.Status)
	_, _ = w.Write(a.Body)
}

// unavailable answers 503 when no Eureka server answered: a Eureka client
// tries its next URL.
func (g *Gateway) unavailable(w *statusWriter, err error) {
	g.log.WithError(err).Warn("no Eureka server answered")
	g.answerSelf(w, http.StatusServiceUnavailable, "EurekaUnavailable", err.Error())
}

// answerSelf is an answer of the gateway's own: the status, the reason in
// RefusedHeader and a line of text naming it.
func (g *Gateway) answerSelf(w *statusWriter, status int, reason, msg string) {
	h := w.Header()
	h.Set("Content-Type", "text/plain; charset=utf-8")
	h.Set(RefusedHeader, reason)
	if status == http.StatusUnauthorized {
		h.Set("WWW-Authenticate", `Bearer realm="eureka", Basic realm="eureka"`)
	}
	w.WriteHeader(status)
	_, _ = io.WriteString(w, reason+": "+msg+"\n")
}

type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// countingReviewer counts TokenReviews for the metric.
type countingReviewer struct{ TokenReviewer }

func (c countingReviewer) Review(ctx context.Context, token string, audiences []string) (s authnStatus, err error) {
	s, err = c.TokenReviewer.Review(ctx, token, audiences)
	switch {
	case err != nil:
		tokenReviews.WithLabelValues("error").Inc()
	case s.Authenticated:
		tokenReviews.WithLabelValues("authenticated").Inc()
	default:
		tokenReviews.WithLabelValues("refused").Inc()
	}
	return s, err
}
