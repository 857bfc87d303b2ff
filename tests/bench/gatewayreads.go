package bench

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/eurekube/eurekube/gateway"
	"github.com/eurekube/eurekube/tests/harness"
)

// readRate is how many reads a server answered, with how many bytes, in
// how long, and the CPU its process spent meanwhile.
type readRate struct {
	reads, bytes int64
	cpu, wall    time.Duration
}

func (r *readRate) add(o readRate) {
	r.reads, r.bytes, r.cpu, r.wall = r.reads+o.reads, r.bytes+o.bytes, r.cpu+o.cpu, r.wall+o.wall
}

// perCore is reads per CPU-second of the server's process.
func (r readRate) perCore() float64 {
	if r.cpu <= 0 {
		return 0
	}
	return float64(r.reads) / r.cpu.Seconds()
}

func (r readRate) perSecond() float64 { return float64(r.reads) / r.wall.Seconds() }

// readsPerCore are the reads of each kind answered by Eureka directly and
// by the gateway.
type readsPerCore struct {
	eureka, gateway map[string]*readRate
}

// readLoad asks GET url (JSON, gzip, as Spring asks) from clients clients
// at once, each its next request as soon as the last is answered, for d,
// and reads pid's CPU time before and after.
func readLoad(ctx context.Context, hc *http.Client, url, auth string, clients int, d time.Duration, pid int) (readRate, error) {
	var res readRate
	var reads, size atomic.Int64
	var mu sync.Mutex
	var firstErr error
	cpu0, err := CPUTime(pid)
	if err != nil {
		return res, err
	}
	began := time.Now()
	deadline := began.Add(d)
	var wg sync.WaitGroup
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(deadline) && ctx.Err() == nil {
				n, err := getRead(ctx, hc, url, auth)
				if err != nil {
					mu.Lock()
					firstErr = cmpOr(firstErr, err)
					mu.Unlock()
					return
				}
				reads.Add(1)
				size.Add(n)
			}
		}()
	}
	wg.Wait()
	res.wall = time.Since(began)
	cpu1, err := CPUTime(pid)
	if err != nil {
		return res, err
	}
	res.reads, res.bytes, res.cpu = reads.Load(), size.Load(), cpu1-cpu0
	if firstErr == nil {
		firstErr = ctx.Err()
	}
	return res, firstErr
}

func cmpOr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

// getRead sends one polled read and returns the size of its answer, as it
// came (compressed).
func getRead(ctx context.Context, hc *http.Client, url, auth string) (int64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("Accept-Encoding", "gzip")
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, fmt.Errorf("GET %s: %w", url, err)
	}
	n, err := io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if err != nil {
		return 0, fmt.Errorf("GET %s: %w", url, err)
	}
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("GET %s: HTTP %d (%s)", url, resp.StatusCode, resp.Header.Get(gateway.RefusedHeader))
	}
	return n, nil
}

// measureReadsPerCore loads each server with each read in turn: a
// warm-up (the JVM compiles what it runs), then ReadRounds rounds of
// ReadDuration each, the order of the two servers swapped every round.
func measureReadsPerCore(ctx context.Context, o GatewayOptions, server *harness.Eureka, eurekaPID int, gw *gatewayProcess) (readsPerCore, error) {
	s := o.Sizes
	res := readsPerCore{eureka: map[string]*readRate{}, gateway: map[string]*readRate{}}
	newClient := func() *http.Client {
		return &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: s.ReadClients, DisableCompression: true}}
	}
	type target struct {
		rates map[string]*readRate
		base  string
		auth  string
		pid   int
		hc    *http.Client
	}
	targets := []target{
		{res.eureka, server.URL(), basicAuth(gatewayEurekaAuth), eurekaPID, newClient()},
		{res.gateway, gw.url, basicAuth(gatewayClientAuth), gw.Pid(), newClient()},
	}
	paths := map[string]string{opApps: "/apps", opDelta: "/apps/delta"}
	for _, op := range []string{opApps, opDelta} {
		for _, t := range targets {
			t.rates[op] = &readRate{}
			if _, err := readLoad(ctx, t.hc, t.base+paths[op], t.auth, s.ReadClients, s.ReadWarmup, t.pid); err != nil {
				return res, fmt.Errorf("warm-up: %w", err)
			}
		}
	}
	for round := range s.ReadRounds {
		for _, op := range []string{opApps, opDelta} {
			order := slices.Clone(targets)
			if round%2 == 1 {
				slices.Reverse(order)
			}
			for _, t := range order {
				rate, err := readLoad(ctx, t.hc, t.base+paths[op], t.auth, s.ReadClients, s.ReadDuration, t.pid)
				if err != nil {
					return res, err
				}
				t.rates[op].add(rate)
			}
		}
	}
	for _, t := range targets {
		t.hc.CloseIdleConnections()
	}
	o.Log.WithField("eureka_apps", res.eureka[opApps].perCore()).WithField("gateway_apps", res.gateway[opApps].perCore()).Info("gateway: reads per core")
	return res, nil
}

// addReadsPerCoreFigures adds the gateway's reads per CPU-second of each
// kind, beside Eureka's own.
func addReadsPerCoreFigures(r *Results, s GatewaySizes, rd readsPerCore) {
	first := true
	for _, op := range []struct{ op, name string }{{opApps, "GET /apps"}, {opDelta, "GET /apps/delta"}} {
		g, e := rd.gateway[op.op], rd.eureka[op.op]
		f := Figure{
			ID: "gateway.reads_per_core." + op.op, Section: SectionGateway,
			Name:  op.name + " (JSON, gzip) answered per CPU-second of the gateway",
			Value: g.perCore(), Unit: "reads/s per core", TargetMin: Min(e.perCore()),
			Anchor: fmt.Sprintf("Eureka itself, the same reads directly: %s reads/s per core (target: at least as many), so gateway ÷ Eureka = %s ×; wall clock, %d clients on the machine's 2 shared cores: gateway %s reads/s, Eureka %s reads/s; answers of %s KiB compressed",
				formatValue(e.perCore()), formatValue(g.perCore()/e.perCore()), s.ReadClients, formatValue(g.perSecond()), formatValue(e.perSecond()), formatValue(float64(e.bytes)/float64(max(e.reads, 1))/1024)),
			IfMissed: "the gateway answers from its copy: what it spends per read is Go's HTTP server writing a body it already holds",
		}
		if first {
			f.Method = fmt.Sprintf("%d clients ask the same read over and over (each its next request when the last is answered; JSON, gzip, as Spring asks; the answer read as it comes, compressed) from Eureka directly and from the gateway, each for %s after a %s warm-up, in %d rounds that swap which comes first, on a registry of %d instances (filled just before: Eureka's delta holds every change of the last 3 minutes, so here it is about as large as the full registry). "+
				"Reads per CPU-second = the reads answered ÷ the user+system CPU time of the server's process over the same time, from /proc/PID/stat: the gateway's process (`manager gateway`), answering from its shared copy and fetching it from Eureka once per read TTL (%s; the JVM's CPU for those fetches is not counted), and the Eureka server's JVM, answering from its read-only response cache. "+
				"The clients run in the bench's own process, whose CPU is counted for neither.",
				s.ReadClients, s.ReadDuration, s.ReadWarmup, s.ReadRounds, s.Instances, gateway.DefaultReadTTL)
			first = false
		}
		r.Add(f)
	}
}

// gatewayPolls is what the polling clients measured: through the gateway
// and directly.
type gatewayPolls struct {
	through, direct pollerRun
}

// pollerRun is one run of the polling clients: their requests and those
// that reached Eureka, in the window.
type pollerRun struct {
	// sent: the clients' requests answered 200, by kind; failed: the others.
	sent   Counts
	failed int64
	// eureka: what reached the Eureka server, on the wire.
	eureka Counts
	window time.Duration
}

// measurePollers runs the Spring-like clients through a gateway whose
// Eureka URL is a counting proxy in front of the server, then the same
// clients directly through the proxy.
func measurePollers(ctx context.Context, o GatewayOptions, cp *harness.ControlPlane, server *harness.Eureka) (gatewayPolls, error) {
	var res gatewayPolls
	proxy, err := StartCountingProxy(server.Addr())
	if err != nil {
		return res, err
	}
	defer func() { _ = proxy.Close() }()
	gw, err := startGatewayProcess(ctx, o, cp, proxy.URL(), "gateway-counted")
	if err != nil {
		return res, err
	}
	defer func() { _ = gw.Stop() }()
	if res.through, err = runPollers(ctx, o.Sizes, gw.url, basicAuth(gatewayClientAuth), proxy); err != nil {
		return res, fmt.Errorf("through the gateway: %w", err)
	}
	if res.direct, err = runPollers(ctx, o.Sizes, proxy.URL(), basicAuth(gatewayEurekaAuth), proxy); err != nil {
		return res, fmt.Errorf("directly: %w", err)
	}
	o.Log.WithField("through", res.through.eureka).WithField("direct", res.direct.eureka).Info("gateway: Eureka requests of the polling clients")
	return res, nil
}

// runPollers starts Pollers clients, each with its own connection, as a
// Spring Cloud Eureka client fetches the registry: the full registry once,
// then the delta every PollInterval, the clients' schedules spread evenly
// over the interval. After two intervals (every client past its full
// fetch) it counts the clients' requests and those the proxy passed to
// Eureka for PollWindow.
func runPollers(ctx context.Context, s GatewaySizes, base, auth string, proxy *CountingProxy) (pollerRun, error) {
	ctx, cancel := context.WithCancel(ctx)
	var full, delta, failed atomic.Int64
	var mu sync.Mutex
	var firstErr error
	var wg sync.WaitGroup
	start := time.Now()
	for i := range s.Pollers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			hc := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 1, DisableCompression: true}}
			defer hc.CloseIdleConnections()
			next := start.Add(time.Duration(i) * s.PollInterval / time.Duration(s.Pollers))
			path, count := "/apps", &full
			timer := time.NewTimer(time.Until(next))
			defer timer.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-timer.C:
				}
				if _, err := getRead(ctx, hc, base+path, auth); err == nil {
					count.Add(1)
				} else if ctx.Err() == nil {
					failed.Add(1)
					mu.Lock()
					firstErr = cmpOr(firstErr, err)
					mu.Unlock()
				}
				path, count = "/apps/delta", &delta
				next = next.Add(s.PollInterval)
				timer.Reset(time.Until(next))
			}
		}()
	}
	defer func() {
		cancel()
		wg.Wait()
	}()
	snapshot := func() (Counts, int64) {
		return Counts{KindFetchFull: full.Load(), KindFetchDelta: delta.Load()}, failed.Load()
	}
	// Two intervals: every client's full fetch is answered, and any
	// client the start of a thousand connections held back has caught up.
	if err := sleepCtx(ctx, 2*s.PollInterval); err != nil {
		return pollerRun{}, err
	}
	sent0, failed0 := snapshot()
	eureka0 := proxy.Counts()
	began := time.Now()
	if err := sleepCtx(ctx, s.PollWindow); err != nil {
		return pollerRun{}, err
	}
	sent1, failed1 := snapshot()
	run := pollerRun{sent: sent1.Sub(sent0), failed: failed1 - failed0, eureka: proxy.Counts().Sub(eureka0), window: time.Since(began)}
	if run.failed*100 > run.sent.Total() {
		mu.Lock()
		defer mu.Unlock()
		return run, fmt.Errorf("%d of %d polls failed, the first: %w", run.failed, run.failed+run.sent.Total(), firstErr)
	}
	return run, nil
}

// sleepCtx waits d, or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// addPollerFigure adds the Eureka requests per minute of the polling
// clients through one gateway, beside the same clients' directly.
func addPollerFigure(r *Results, s GatewaySizes, p gatewayPolls) {
	through, direct := p.through, p.direct
	perMin := func(n int64, window time.Duration) float64 { return float64(n) / window.Minutes() }
	// The distinct reads the clients sent in the window: each kind is one
	// request (same path, JSON, gzip), one copy in the gateway.
	var reads []string
	for _, k := range []struct{ kind, read string }{{KindFetchFull, "GET /apps"}, {KindFetchDelta, "GET /apps/delta"}} {
		if through.sent[k.kind] > 0 {
			reads = append(reads, k.read)
		}
	}
	distinct := len(reads)
	scale := float64(springFetchInterval) / float64(s.PollInterval)
	ttl := gateway.DefaultReadTTL
	directPerMin := perMin(direct.eureka.Total(), direct.window)
	clients := addThousands(strconv.Itoa(s.Pollers))
	r.Add(Figure{
		ID: "gateway.polls.eureka_reads_per_min", Section: SectionGateway,
		Name:  fmt.Sprintf("Eureka requests per minute, %s clients polling through one gateway", clients),
		Value: perMin(through.eureka.Total(), through.window), Unit: "req/min",
		Target: Max(float64(distinct) * float64(time.Minute) / float64(ttl)),
		Anchor: fmt.Sprintf("the same clients directly: %s req/min at Spring's 30 s (%s clients × 2/min; %s req/min on the wire at their %s interval); through the gateway they sent %s req/min (%s at 30 s), every one answered from its copy; %d distinct read(s) (%s, JSON, gzip) at the %s read TTL; %d failed",
			formatValue(directPerMin/scale), clients, formatValue(directPerMin), s.PollInterval,
			formatValue(perMin(through.sent.Total(), through.window)), formatValue(perMin(through.sent.Total(), through.window)/scale), distinct, strings.Join(reads, ", "), ttl, through.failed+direct.failed),
		IfMissed: "the gateway fetches a read again only once its copy is a read TTL old, and once for every client asking meanwhile (singleflight)",
		Method: fmt.Sprintf("%s clients in the bench's process, each with its own connection, fetch as a Spring Cloud Eureka client does: the full registry (GET /apps) once, then the delta (GET /apps/delta, JSON, gzip) every interval, their schedules spread evenly over it. "+
			"Spring's 30 s interval is scaled down to %s (%s × the requests); after two intervals (every full fetch done) the requests that reach the Eureka server are counted on the wire, by a counting proxy in front of it, for %s: first with the clients reading through a gateway (`manager gateway`, default read TTL %s) whose Eureka URL is the proxy, then with the same clients reading through the proxy directly. "+
			"The direct count is scaled back to Spring's 30 s (÷ %s); the gateway's is not: it is bound by the read TTL, one fetch per distinct read per TTL as long as some client asks within each TTL, which %s clients do at 30 s too (%s requests a second), so it is the same per minute at either interval. Target: the distinct reads ÷ the read TTL, per gateway replica.",
			clients, s.PollInterval, formatValue(scale), s.PollWindow, ttl, formatValue(scale), clients, formatValue(float64(s.Pollers)/springFetchInterval.Seconds())),
	})
}
