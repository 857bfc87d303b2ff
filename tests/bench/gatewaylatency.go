package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/eurekube/eurekube/eureka"
	"github.com/eurekube/eurekube/gateway"
	"github.com/eurekube/eurekube/tests/harness"
)

// The latency the gateway adds: each operation sent on three paths, one
// after the other and in turn, on connections kept alive as clients keep
// them: directly to Eureka with its credentials, through the gateway as a
// pod (its projected token, whose TokenReview the gateway keeps for the
// token TTL) and as a VM client (Basic, a Secret's credentials). What a
// path adds is its percentile less direct's, over the same run.

// Operations timed, in the order each path sends them.
const (
	opRegister = "register"
	opRenew    = "renew"
	opStatus   = "status"
	opCancel   = "cancel"
	opApps     = "apps"
	opDelta    = "delta"
	opApp      = "app"
)

// Paths of the timed requests.
const (
	pathDirect = "direct"
	pathPod    = "pod"
	pathClient = "client"
)

// gatewayPath is one way the operations reach Eureka.
type gatewayPath struct {
	name string
	// base is the Eureka service URL: the server's or the gateway's.
	base string
	// auth is the Authorization of its writes; statusAuth of its status
	// override (a pod may not set one: the manager's pod does).
	auth, statusAuth string
	// body registers instance id.
	id   string
	body []byte
	// reads: the path times the reads too (they need no identity).
	reads bool
	// statusMayBeRefused: a refusal (403) of its status override is
	// recorded rather than failing the phase.
	statusMayBeRefused bool
}

// gatewayLatency is what the latency samples measured.
type gatewayLatency struct {
	// samples by path, then operation.
	samples map[string]map[string]Durations
	// newToken: registrations through the gateway, each the first write of
	// a new token.
	newToken Durations
	// reviews: the TokenReviews the gateway made during the samples, and
	// during the new tokens' registrations.
	reviews, newReviews float64
	took                time.Duration
	// statusRefused is the gateway's refusal of the manager's status
	// override, when it refused it.
	statusRefused string
	// podGets: a GET of the pod from the API server, timed by the bench
	// once a round, as the gateway reads it for each pod's registration.
	podGets Durations
}

// basicAuth is the Authorization header of credentials.
func basicAuth(a harness.EurekaAuth) string {
	req, _ := http.NewRequest(http.MethodGet, "http://x", nil)
	req.SetBasicAuth(a.Username, a.Password)
	return req.Header.Get("Authorization")
}

// registrationJSON is a registration as a registrar or a Spring client
// sends it, in JSON.
func registrationJSON(id, ip string, metadata map[string]string) []byte {
	var meta []string
	for k, v := range metadata {
		meta = append(meta, fmt.Sprintf("%q:%q", k, v))
	}
	app := strings.ToUpper(gatewayApp)
	return fmt.Appendf(nil, `{"instance":{"instanceId":%q,"hostName":%q,"app":%q,"ipAddr":%q,"status":"UP","overriddenStatus":"UNKNOWN",`+
		`"port":{"$":%d,"@enabled":"true"},"securePort":{"$":443,"@enabled":"false"},"countryId":1,`+
		`"dataCenterInfo":{"@class":"com.netflix.appinfo.InstanceInfo$DefaultDataCenterInfo","name":"MyOwn"},`+
		`"leaseInfo":{"renewalIntervalInSecs":30,"durationInSecs":90},"metadata":{%s},`+
		`"homePageUrl":"http://%s:%d/","statusPageUrl":"http://%s:%d/actuator/info","healthCheckUrl":"http://%s:%d/actuator/health",`+
		`"vipAddress":%q,"secureVipAddress":%q,"isCoordinatingDiscoveryServer":"false"}}`,
		id, ip, app, ip, gatewayAppPort, strings.Join(meta, ","), ip, gatewayAppPort, ip, gatewayAppPort, ip, gatewayAppPort, gatewayApp, gatewayApp)
}

// gatewayPaths are the three paths: direct mirrors the pod's requests
// (its registration carries the same markers) under an id of its own.
func gatewayPaths(server *harness.Eureka, gw *gatewayProcess, fx *gatewayFixtures) []gatewayPath {
	pod := fx.pod
	markers := map[string]string{
		eureka.MetaManagedBy: eureka.ManagedByValue, eureka.MetaCluster: gatewayClusterID,
		eureka.MetaNamespace: pod.Namespace, eureka.MetaPod: pod.Name, eureka.MetaPodUID: string(pod.UID),
		"zone": "zone-a",
	}
	podIP := pod.Status.PodIP
	directID := "direct-" + podInstanceID(pod)
	clientID, clientIP := "192.0.2.10:"+gatewayApp+":8080", "192.0.2.10"
	eurekaAuth := basicAuth(gatewayEurekaAuth)
	return []gatewayPath{
		{name: pathDirect, base: server.URL(), auth: eurekaAuth, statusAuth: eurekaAuth, id: directID, body: registrationJSON(directID, "10.244.9.10", markers), reads: true},
		{name: pathPod, base: gw.url, auth: "Bearer " + fx.podToken, statusAuth: "Bearer " + fx.managerToken, id: podInstanceID(pod), body: registrationJSON(podInstanceID(pod), podIP, markers), reads: true, statusMayBeRefused: true},
		{name: pathClient, base: gw.url, auth: basicAuth(gatewayClientAuth), statusAuth: basicAuth(gatewayClientAuth), id: clientID, body: registrationJSON(clientID, clientIP, map[string]string{"zone": "zone-a"})},
	}
}

// timedClient sends one request at a time and times it to the last byte
// of the answer.
type timedClient struct{ hc *http.Client }

func newTimedClient() timedClient {
	return timedClient{hc: &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 4, DisableCompression: true}}}
}

// call sends the request and returns how long its answer took, an error
// when its status is not want.
func (c timedClient) call(ctx context.Context, method, url, auth string, body []byte, want int) (time.Duration, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if method == http.MethodGet {
		// As a Spring client asks; the answer is read as it comes.
		req.Header.Set("Accept-Encoding", "gzip")
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	began := time.Now()
	resp, err := c.hc.Do(req)
	if err != nil {
		return 0, fmt.Errorf("%s %s: %w", method, url, err)
	}
	var answer bytes.Buffer
	_, err = answer.ReadFrom(resp.Body)
	took := time.Since(began)
	resp.Body.Close()
	if err != nil {
		return 0, fmt.Errorf("%s %s: %w", method, url, err)
	}
	if resp.StatusCode != want {
		return 0, &unexpectedAnswer{status: resp.StatusCode, msg: fmt.Sprintf("%s %s: HTTP %d (%s), want %d: %.300s", method, url, resp.StatusCode, resp.Header.Get(gateway.RefusedHeader), want, answer.String())}
	}
	return took, nil
}

// unexpectedAnswer is an answer with another status than the one wanted.
type unexpectedAnswer struct {
	status int
	msg    string
}

func (e *unexpectedAnswer) Error() string { return e.msg }

// timedStep is one timed request and the status it must answer.
type timedStep struct {
	op, method, url, auth string
	body                  []byte
	want                  int
}

// sample sends each operation once on p and records its time in into
// (nil: a warm-up, not recorded); a status override refused on a path
// whose override may be refused is recorded in refused instead.
func (p gatewayPath) sample(ctx context.Context, c timedClient, into map[string]Durations, refused *string) error {
	app := p.base + "/apps/" + strings.ToUpper(gatewayApp)
	steps := []timedStep{
		{opRegister, http.MethodPost, app, p.auth, p.body, http.StatusNoContent},
		{opRenew, http.MethodPut, app + "/" + p.id + "?status=UP", p.auth, nil, http.StatusOK},
		{opStatus, http.MethodPut, app + "/" + p.id + "/status?value=OUT_OF_SERVICE", p.statusAuth, nil, http.StatusOK},
		{opCancel, http.MethodDelete, app + "/" + p.id, p.auth, nil, http.StatusOK},
	}
	if p.reads {
		// Reads carry the same Authorization a client sends; the gateway
		// answers them to anyone.
		steps = append(steps,
			timedStep{opApps, http.MethodGet, p.base + "/apps", p.auth, nil, http.StatusOK},
			timedStep{opDelta, http.MethodGet, p.base + "/apps/delta", p.auth, nil, http.StatusOK},
			timedStep{opApp, http.MethodGet, p.base + "/apps/" + registryApp(0), p.auth, nil, http.StatusOK})
	}
	for _, s := range steps {
		took, err := c.call(ctx, s.method, s.url, s.auth, s.body, s.want)
		var ua *unexpectedAnswer
		if s.op == opStatus && p.statusMayBeRefused && errors.As(err, &ua) && ua.status == http.StatusForbidden {
			*refused = ua.msg
			continue
		}
		if err != nil {
			return fmt.Errorf("%s, %s: %w", p.name, s.op, err)
		}
		if into != nil {
			into[s.op] = append(into[s.op], took)
		}
	}
	return nil
}

// measureGatewayLatency times every operation on every path, Samples
// times after a tenth as many warm-up rounds, the paths in turn and each
// round starting with the next; then NewTokens registrations through the
// gateway, each with a token it has not seen.
func measureGatewayLatency(ctx context.Context, o GatewayOptions, server *harness.Eureka, gw *gatewayProcess, fx *gatewayFixtures) (gatewayLatency, error) {
	paths := gatewayPaths(server, gw, fx)
	res := gatewayLatency{samples: map[string]map[string]Durations{}}
	for _, p := range paths {
		res.samples[p.name] = map[string]Durations{}
	}
	c := newTimedClient()
	cfg := rest.CopyConfig(fx.cp.Config)
	cfg.QPS = -1 // as the gateway's: no client-side rate limit
	apiReader, err := client.New(cfg, client.Options{Scheme: fx.cp.Scheme})
	if err != nil {
		return res, fmt.Errorf("API reader: %w", err)
	}
	warmup := max(3, o.Sizes.Samples/10)
	var reviewsBefore float64
	var began time.Time
	for i := range warmup + o.Sizes.Samples {
		if i == warmup {
			var err error
			if reviewsBefore, err = gw.tokenReviews(); err != nil {
				return res, err
			}
			began = time.Now()
		}
		for k := range paths {
			p := paths[(i+k)%len(paths)]
			var into map[string]Durations
			if i >= warmup {
				into = res.samples[p.name]
			}
			if err := p.sample(ctx, c, into, &res.statusRefused); err != nil {
				return res, err
			}
		}
		get := time.Now()
		if err := apiReader.Get(ctx, client.ObjectKeyFromObject(fx.pod), &corev1.Pod{}); err != nil {
			return res, fmt.Errorf("GET the pod: %w", err)
		}
		if i >= warmup {
			res.podGets = append(res.podGets, time.Since(get))
		}
	}
	res.took = time.Since(began)
	reviewsAfter, err := gw.tokenReviews()
	if err != nil {
		return res, err
	}
	res.reviews = reviewsAfter - reviewsBefore

	pod := paths[1]
	app := pod.base + "/apps/" + strings.ToUpper(gatewayApp)
	for range o.Sizes.NewTokens {
		tok, err := fx.token(ctx, fx.pod)
		if err != nil {
			return res, err
		}
		took, err := c.call(ctx, http.MethodPost, app, "Bearer "+tok, pod.body, http.StatusNoContent)
		if err != nil {
			return res, fmt.Errorf("register with a new token: %w", err)
		}
		res.newToken = append(res.newToken, took)
		if _, err := c.call(ctx, http.MethodDelete, app+"/"+pod.id, "Bearer "+tok, nil, http.StatusOK); err != nil {
			return res, fmt.Errorf("cancel with a new token: %w", err)
		}
	}
	newAfter, err := gw.tokenReviews()
	if err != nil {
		return res, err
	}
	res.newReviews = newAfter - reviewsAfter
	o.Log.WithField("took", res.took.Round(time.Millisecond)).WithField("token_reviews", res.reviews).Info("gateway: latency samples")
	return res, nil
}

// addLatencyFigures adds, for each write and identity and for each read,
// what the gateway adds to direct's p50 and p99, and what a new token's
// first write costs.
func addLatencyFigures(r *Results, s GatewaySizes, lat gatewayLatency) {
	direct := lat.samples[pathDirect]
	method := fmt.Sprintf("each operation sent %d times on each of three paths, one request at a time on connections kept alive, the paths in turn and each round starting with the next (after %d warm-up rounds): "+
		"directly to the Eureka server (production timings: its read-only response cache) with the credentials only the gateway holds; through the gateway (`manager gateway`, its own process, enforce mode, defaults: read TTL %s, token TTL %s) as a pod, its projected token for the gateway's audience, whose TokenReview the gateway keeps for the token TTL; and as a VM client, the Basic credentials of a Secret an EurekaAppPolicy binds to the app. "+
		"Each round registers an instance (JSON, as a registrar does), renews it, sets its status override (OUT_OF_SERVICE: as the manager's pod, as pods may not set one) and cancels it; the direct path and the pod's then read GET /apps and /apps/delta (JSON, gzip, as Spring asks) and GET /apps/{APP} of a registry of %d instances in %d apps. "+
		"Timed from the request's first byte to the answer's last; added = the gateway path's percentile less direct's. The pod's writes made %.0f TokenReviews over the %s the samples took (a verdict is kept %s, so back-to-back writes review the token again once per TTL).",
		s.Samples, max(3, s.Samples/10), gateway.DefaultReadTTL, gateway.DefaultTokenTTL, s.Instances, (s.Instances+registryAppSize-1)/registryAppSize,
		lat.reviews, lat.took.Round(time.Second), gateway.DefaultTokenTTL)
	ops := []struct{ op, name string }{{opRegister, "register"}, {opRenew, "renew"}, {opCancel, "cancel"}, {opStatus, "status override"}}
	first := true
	for _, who := range []struct{ path, as string }{{pathPod, "a pod (Bearer, TokenReview cached)"}, {pathClient, "a client (Basic)"}} {
		for _, op := range ops {
			as := who.as
			if who.path == pathPod && op.op == opStatus {
				as = "the manager's pod (Bearer, cached)"
			}
			if len(lat.samples[who.path][op.op]) == 0 {
				continue // refused: MeasureGateway says so
			}
			for _, q := range []struct {
				p      float64
				name   string
				target float64
			}{{50, "p50", 2}, {99, "p99", 10}} {
				gw, d := lat.samples[who.path][op.op].Percentile(q.p), direct[op.op].Percentile(q.p)
				target := q.target
				anchor := fmt.Sprintf("direct %s %s ms, through the gateway %s ms; %d samples each", q.name, formatValue(ms(d)), formatValue(ms(gw)), len(direct[op.op]))
				if who.path == pathPod && op.op == opRegister {
					// The design reads the pod live at each registration:
					// that GET, measured in the same run, is the floor.
					get := ms(lat.podGets.Percentile(q.p))
					target += get
					anchor += fmt.Sprintf("; target %s ms + the live pod GET's %s, %s ms", formatValue(q.target), q.name, formatValue(get))
				}
				f := Figure{
					ID: fmt.Sprintf("gateway.%s.%s.%s_added", who.path, op.op, q.name), Section: SectionGateway,
					Name:  fmt.Sprintf("%s as %s, %s added", op.name, as, q.name),
					Value: ms(gw) - ms(d), Unit: "ms", Target: Max(target),
					Anchor: anchor,
				}
				if first {
					f.Method, first = method, false
				}
				switch {
				case who.path == pathPod && op.op == opRegister:
					f.IfMissed = fmt.Sprintf("a pod's registration reads its pod from the API server itself (not the gateway's cache), for its IPs and traffic annotation: one GET per registration, which took %s ms at the median and %s ms at p99 when the bench sent it alone once a round (the rest of the added time is the gateway's own, as in a client's registration)",
						formatValue(ms(lat.podGets.Percentile(50))), formatValue(ms(lat.podGets.Percentile(99))))
				case who.path == pathPod:
					f.IfMissed = fmt.Sprintf("the token's verdict is kept %s: one write in each TTL reviews it again (%.0f TokenReviews during the samples)", gateway.DefaultTokenTTL, lat.reviews)
				}
				r.Add(f)
			}
		}
	}
	for _, op := range []struct{ op, name string }{{opApps, "GET /apps (JSON, gzip)"}, {opDelta, "GET /apps/delta (JSON, gzip)"}, {opApp, "GET /apps/{APP} (JSON)"}} {
		for _, q := range []struct {
			p    float64
			name string
		}{{50, "p50"}, {99, "p99"}} {
			gw, d := lat.samples[pathPod][op.op].Percentile(q.p), direct[op.op].Percentile(q.p)
			r.Add(Figure{
				ID: fmt.Sprintf("gateway.read.%s.%s_added", op.op, q.name), Section: SectionGateway,
				Name:  fmt.Sprintf("%s, %s added", op.name, q.name),
				Value: ms(gw) - ms(d), Unit: "ms",
				Anchor: fmt.Sprintf("direct %s %s ms, through the gateway %s ms (its shared copy, fetched from Eureka once per %s read TTL); %d samples each",
					q.name, formatValue(ms(d)), formatValue(ms(gw)), gateway.DefaultReadTTL, len(direct[op.op])),
			})
		}
	}
	if len(lat.newToken) == 0 {
		return
	}
	cached := lat.samples[pathPod][opRegister]
	for _, q := range []struct {
		p    float64
		name string
	}{{50, "p50"}, {99, "p99"}} {
		nt, c, d := lat.newToken.Percentile(q.p), cached.Percentile(q.p), direct[opRegister].Percentile(q.p)
		f := Figure{
			ID: "gateway.pod.register_new_token." + q.name + "_added", Section: SectionGateway,
			Name:  fmt.Sprintf("register as a pod, the first write of a new token (one TokenReview), %s added", q.name),
			Value: ms(nt) - ms(d), Unit: "ms",
		}
		cost := ""
		if q.p == 50 {
			cost = fmt.Sprintf(", so the TokenReview costs about %s ms", formatValue(ms(nt)-ms(c)))
		}
		f.Anchor = fmt.Sprintf("%s %s ms against direct's %s ms; with the token's verdict cached: %s ms (added %s ms)%s; %d new tokens, %.0f TokenReviews",
			q.name, formatValue(ms(nt)), formatValue(ms(d)), formatValue(ms(c)), formatValue(ms(c)-ms(d)), cost, len(lat.newToken), lat.newReviews)
		if q.p == 50 {
			f.Method = fmt.Sprintf("after the samples, %d registrations through the gateway each with a new projected token of the same pod (TokenRequest, not timed), each cancelled after; added = against the direct registrations' percentile above. A registrar's first write is its registration, and its token is rotated by the kubelet about every hour.", len(lat.newToken))
		}
		r.Add(f)
	}
}
