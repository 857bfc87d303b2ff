package faults

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/eurekube/eurekube/eureka"
	"github.com/eurekube/eurekube/sidecar"
	"github.com/eurekube/eurekube/tests/harness"
)

// fleet is registrars started for one test, each with its pod's identity.
type fleet struct {
	t     *testing.T
	dir   string
	procs []*harness.Process
	// registrars are the settings of procs, one for one.
	registrars []sidecar.Config
}

// listenPort is the port every registrar serves /metrics on (TestMain).
var listenPort int

// registrarSettings are what the webhook gives pod i of appName, with the
// downward API resolved as the kubelet would and the given renewal
// interval. Each registrar serves /metrics on a loopback IP of its own, as
// each pod has its own IP, at listenPort.
func registrarSettings(appName string, i int, a *harness.App, renewal time.Duration, urls ...string) sidecar.Config {
	pod := fmt.Sprintf("%s-%03d", strings.ToLower(appName), i)
	s := sidecar.Defaults(appName, a.Port)
	s.PodName, s.PodNamespace, s.PodUID, s.PodIP, s.NodeName = pod, "shop", "uid-"+pod, "127.0.0.1", "node-1"
	s.EurekaURLs = urls
	s.Metadata = map[string]string{"zone": "zone-a"}
	s.ClusterID, s.Syncer = "cluster-faults", strings.ToLower(appName)
	s.Health = sidecar.HealthConfig{Type: sidecar.HealthHTTP, Scheme: "http", Path: "/actuator/health", Port: a.Port,
		Period: 500 * time.Millisecond, Timeout: 500 * time.Millisecond, FailureThreshold: 1, SuccessThreshold: 1}
	s.RenewalInterval, s.LeaseDuration = renewal, 3*renewal
	s.RequestTimeout = time.Second
	s.ListenAddr = fmt.Sprintf("127.0.%d.%d:%d", 10+i/250, 1+i%250, listenPort)
	return s
}

func (f *fleet) start(s sidecar.Config) {
	f.t.Helper()
	env := make(map[string]string)
	for _, e := range s.Env() {
		env[e.Name] = e.Value
	}
	p, err := harness.StartRegistrar(registrarBin, env, filepath.Join(f.dir, s.PodName+".log"))
	if err != nil {
		f.t.Fatal(err)
	}
	f.procs = append(f.procs, p)
	f.registrars = append(f.registrars, s)
}

func newFleet(t *testing.T) *fleet {
	f := &fleet{t: t, dir: t.TempDir()}
	t.Cleanup(func() {
		for _, p := range f.procs {
			p.Kill()
		}
	})
	return f
}

// running fails the test naming any registrar that exited.
func (f *fleet) running() {
	f.t.Helper()
	for i, p := range f.procs {
		if p.Exited() {
			f.t.Fatalf("registrar %s exited; log %s", f.registrars[i].PodName, p.LogPath())
		}
	}
}

// metrics scrapes every registrar's /metrics, in parallel.
func (f *fleet) metrics(ctx context.Context) ([]map[string]float64, error) {
	out := make([]map[string]float64, len(f.registrars))
	errs := make([]error, len(f.registrars))
	var wg sync.WaitGroup
	sem := make(chan struct{}, 16)
	for i, s := range f.registrars {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			out[i], errs[i] = harness.Metrics(ctx, "http://"+s.ListenAddr+"/metrics")
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			return nil, fmt.Errorf("registrar %s: %w", f.registrars[i].PodName, err)
		}
	}
	return out, nil
}

const (
	heartbeatsOK     = `eurekube_registrar_heartbeats_total{result="ok"}`
	heartbeatsFailed = `eurekube_registrar_heartbeats_total{result="error"}`
	registersFailed  = `eurekube_registrar_registrations_total{result="error"}`

	// Seconds each registrar spent waiting on Eureka, by outcome.
	heartbeatNotFoundSeconds = `eurekube_registrar_eureka_request_seconds_sum{op="heartbeat",result="not_found"}`
	registerOKSeconds        = `eurekube_registrar_eureka_request_seconds_sum{op="register",result="ok"}`
	registerFailedSeconds    = `eurekube_registrar_eureka_request_seconds_sum{op="register",result="error"}`
)

// Eureka is killed (SIGKILL, as a crashed node) under 200 registrars and
// started again with an empty registry. Each registrar is left at the
// default retry cap (30 s): the cap is kept under the renewal interval,
// which is what brings every instance back within one interval.
func TestEurekaKilledAndRestarted_200RegistrarsBackWithoutDuplicates(t *testing.T) {
	const (
		registrars = 200
		renewal    = 5 * time.Second
		// backWithin bounds the wait for every instance after the return:
		// one interval by the registrar's schedule, the rest the slack a
		// busy machine needs to run 200 processes and a starting JVM.
		backWithin = 12 * renewal
	)
	ctx := context.Background()
	server := harness.EurekaT(t, harness.EurekaOptions{})
	c, err := eureka.New(eureka.Options{URLs: []string{server.URL()}, Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	a := harness.AppT(t, true)
	f := newFleet(t)
	want := map[string]string{} // instance id → pod UID
	for i := range registrars {
		s := registrarSettings("ORDERS", i, a, renewal, server.URL())
		// This test is about Eureka, not the app: the kubelet's default
		// failure threshold keeps a probe that times out while 200
		// processes share two cores from turning an instance DOWN.
		s.Health.Period, s.Health.Timeout, s.Health.FailureThreshold = time.Second, time.Second, 3
		f.start(s)
		want[s.InstanceID()] = s.PodUID
	}
	registered := func() (map[string]eureka.Instance, error) {
		list, err := c.Instances(ctx, "ORDERS")
		if err != nil {
			return nil, err
		}
		byID := map[string]eureka.Instance{}
		for _, inst := range list {
			if _, dup := byID[inst.InstanceID]; dup {
				t.Fatalf("instance %s is listed twice", inst.InstanceID)
			}
			byID[inst.InstanceID] = inst
		}
		return byID, nil
	}
	exactlyTheFleetUp := func() error {
		byID, err := registered()
		if err != nil {
			return err
		}
		up := 0
		var notUp []string
		for id, inst := range byID {
			uid, ok := want[id]
			if !ok {
				return fmt.Errorf("unexpected instance %s", id)
			}
			if inst.Metadata[eureka.MetaPodUID] != uid {
				return fmt.Errorf("instance %s carries pod UID %q, want %q", id, inst.Metadata[eureka.MetaPodUID], uid)
			}
			if inst.Status == eureka.StatusUp {
				up++
			} else {
				notUp = append(notUp, id+" "+string(inst.Status))
			}
		}
		if up != registrars || len(byID) != registrars {
			sort.Strings(notUp)
			return fmt.Errorf("%d instances, %d UP; want %d UP; not UP: %v", len(byID), up, registrars, notUp[:min(len(notUp), 10)])
		}
		return nil
	}
	harness.Eventually(t, 3*time.Minute, "200 registrars UP", func() error {
		f.running()
		return exactlyTheFleetUp()
	})

	before, err := f.metrics(ctx) // what failed before the kill
	if err != nil {
		t.Fatal(err)
	}
	server.Kill()
	// Every registrar has found Eureka gone before it comes back: a
	// heartbeat failed, or — for one that was still retrying a registration
	// the server had answered too late (200 processes share two cores) — a
	// registration failed.
	harness.Eventually(t, backWithin, "every registrar has seen a request to Eureka fail", func() error {
		all, err := f.metrics(ctx)
		if err != nil {
			return err
		}
		for i, m := range all {
			failed := m[heartbeatsFailed] + m[registersFailed] - before[i][heartbeatsFailed] - before[i][registersFailed]
			if failed < 1 {
				return fmt.Errorf("registrar %s has not failed a request yet", f.registrars[i].PodName)
			}
		}
		return nil
	})

	// Start the server again; returned is the first moment it answers,
	// polled every 20 ms beside the harness's own wait.
	startErr := make(chan error, 1)
	go func() {
		sctx, cancel := context.WithTimeout(ctx, 6*time.Minute)
		defer cancel()
		startErr <- server.Start(sctx)
	}()
	var returned time.Time
	for returned.IsZero() {
		select {
		case err := <-startErr:
			if err != nil {
				t.Fatal(err)
			}
			startErr <- nil
		case <-time.After(20 * time.Millisecond):
		}
		if _, err := c.Instances(ctx, "ORDERS"); err == nil {
			returned = time.Now()
		}
	}
	if err := <-startErr; err != nil {
		t.Fatal(err)
	}

	// When did each instance appear UP again? Every one must, and soon;
	// the deadline is generous because the clock here is a busy two-core
	// machine's, where a timer can fire seconds late while a JVM starts.
	// The promise of one heartbeat interval is the backoff's cap (kept
	// under the interval, sidecar.TestBackoff_NeverWaitsPastOneRenewalInterval);
	// what it came to on this run is logged below.
	back := map[string]time.Duration{}
	deadline := returned.Add(backWithin)
	for len(back) < registrars && time.Now().Before(deadline) {
		byID, err := registered()
		if err == nil {
			seen := time.Now()
			for id, inst := range byID {
				if _, ok := back[id]; !ok && inst.Status == eureka.StatusUp {
					// The server's own stamp of the registration (the
					// lease's last renewal, which is the registration
					// until the first heartbeat, 5 s later), not when
					// this poll of a busy machine happened to see it.
					at := seen
					if !inst.LastUpdated.IsZero() && inst.LastUpdated.Before(at) {
						at = inst.LastUpdated
					}
					back[id] = at.Sub(returned)
				}
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	// What the server takes to answer 200 registrations on a busy machine
	// is the server's, so each registrar's own wait for those answers (its
	// request histogram, which grew only after the return: nothing could
	// succeed or be "not found" while the server was down) is taken off
	// the server's stamp to tell when the registrar asked.
	after, err := f.metrics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	waited := map[string]time.Duration{}
	for i, r := range f.registrars {
		var sum float64
		for _, series := range []string{heartbeatNotFoundSeconds, registerOKSeconds, registerFailedSeconds} {
			sum += after[i][series] - before[i][series]
		}
		waited[r.InstanceID()] = time.Duration(sum * float64(time.Second))
	}
	var missing, late []string
	var delays, asked []time.Duration
	for id := range want {
		d, ok := back[id]
		if !ok {
			missing = append(missing, id)
			continue
		}
		delays = append(delays, d)
		asked = append(asked, d-waited[id])
		if d-waited[id] > renewal {
			late = append(late, fmt.Sprintf("%s (asked after %s, listed after %s)", id, (d-waited[id]).Round(time.Millisecond), d.Round(time.Millisecond)))
		}
	}
	slices.Sort(delays)
	slices.Sort(asked)
	sort.Strings(late)
	sort.Strings(missing)
	if len(delays) > 0 {
		t.Logf("after the server answered: registrars asked again after median %s, slowest %s (heartbeat interval %s; %d later than one interval on this machine's clock%s); the server listed them after median %s, slowest %s",
			asked[len(asked)/2].Round(time.Millisecond), asked[len(asked)-1].Round(time.Millisecond), renewal,
			len(late), strings.Join(append([]string{""}, late[:min(len(late), 5)]...), "; "),
			delays[len(delays)/2].Round(time.Millisecond), delays[len(delays)-1].Round(time.Millisecond))
	}
	if len(missing) > 0 {
		t.Fatalf("%d of %d registrars not UP again %s after Eureka's return: %v", len(missing), registrars, backWithin, missing[:min(len(missing), 10)])
	}
	if err := exactlyTheFleetUp(); err != nil {
		t.Fatalf("after the restart: %v", err)
	}
	f.running()
}

// blackHole accepts connections and never answers: a URL whose host is up
// and whose Eureka hangs.
func blackHole(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var held []net.Conn
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			held = append(held, conn)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range held {
			c.Close()
		}
	})
	return "http://" + ln.Addr().String() + "/eureka"
}

// With two Eureka URLs and one dead — refusing connections, hanging, or
// dying while in use — no registration and no heartbeat fails, through a
// health change that makes every registrar register again.
func TestOneOfTwoEurekaURLsDead_NoRegistrationOrHeartbeatFails(t *testing.T) {
	const renewal = 2 * time.Second
	ctx := context.Background()
	server := harness.EurekaT(t, harness.EurekaOptions{})
	live := server.URL()
	refusedPort, _ := harness.FreePort()
	refused := fmt.Sprintf("http://127.0.0.1:%d/eureka", refusedPort)
	hanging := blackHole(t)
	dying, err := harness.StartProxy(server.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dying.Close() })
	other, err := harness.StartProxy(server.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { other.Close() })

	a := harness.AppT(t, true)
	f := newFleet(t)
	shapes := []struct {
		name string
		urls []string
	}{
		{"first refuses", []string{refused, live}},
		{"first hangs", []string{hanging, live}},
		{"second refuses", []string{live, refused}},
		{"first dies in use", []string{"http://" + dying.Addr() + "/eureka", "http://" + other.Addr() + "/eureka"}},
	}
	for s, shape := range shapes {
		for i := range 5 {
			settings := registrarSettings("BILLING", s*10+i, a, renewal, shape.urls...)
			// The fault under test is the dead URL, not a live server
			// slowed past a timeout by a busy machine (at load 27 one took
			// longer than the default 5 s): a hanging first URL costs this
			// once per registrar, then the live one is preferred. The
			// kubelet's probe defaults keep a slow probe from flipping it.
			settings.RequestTimeout = 3 * sidecar.DefaultRequestTimeout
			settings.Health.Period, settings.Health.Timeout, settings.Health.FailureThreshold = time.Second, time.Second, 3
			f.start(settings)
		}
	}
	c, err := eureka.New(eureka.Options{URLs: []string{live}, Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	allStatus := func(want eureka.Status) func() error {
		return func() error {
			list, err := c.Instances(ctx, "BILLING")
			if err != nil {
				return err
			}
			n := 0
			for _, inst := range list {
				if inst.Status == want {
					n++
				}
			}
			if n != len(f.registrars) {
				return fmt.Errorf("%d of %d instances %s", n, len(f.registrars), want)
			}
			return nil
		}
	}
	harness.Eventually(t, 2*time.Minute, "every registrar UP", allStatus(eureka.StatusUp))

	// The first URL of the last group dies while in use; then the app
	// goes down and up, so every registrar registers twice more.
	dying.Block()
	a.SetHealthy(false)
	harness.Eventually(t, 2*time.Minute, "every registrar DOWN", allStatus(eureka.StatusDown))
	a.SetHealthy(true)
	harness.Eventually(t, 2*time.Minute, "every registrar UP again", allStatus(eureka.StatusUp))

	// Three more heartbeats each after the change.
	before, err := f.metrics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, time.Minute, "three heartbeats each", func() error {
		now, err := f.metrics(ctx)
		if err != nil {
			return err
		}
		for i := range now {
			if now[i][heartbeatsOK]-before[i][heartbeatsOK] < 3 {
				return fmt.Errorf("registrar %s: %v heartbeats since", f.registrars[i].PodName, now[i][heartbeatsOK]-before[i][heartbeatsOK])
			}
		}
		return nil
	})
	final, err := f.metrics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i, m := range final {
		shape := shapes[i/5].name
		if m[registersFailed] != 0 || m[heartbeatsFailed] != 0 {
			t.Errorf("%s (%s): %v registrations and %v heartbeats failed, want none", f.registrars[i].PodName, shape, m[registersFailed], m[heartbeatsFailed])
		}
	}
	f.running()
}
