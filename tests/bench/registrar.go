package bench

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/eurekube/eurekube/eureka"
	"github.com/eurekube/eurekube/sidecar"
	"github.com/eurekube/eurekube/tests/harness"
)

// RegistrarOptions configure MeasureRegistrar.
type RegistrarOptions struct {
	Eureka  *harness.Eureka
	WorkDir string
	// Samples of healthy → UP and SIGTERM → gone.
	Samples int
	// Window over which requests, CPU and RSS are measured in steady state.
	Window time.Duration
	Log    logrus.FieldLogger
}

// registrarEnv is what the webhook injects for a Spring Boot pod whose
// readinessProbe checks /actuator/health every second, with the downward
// API resolved as the kubelet would, and the registrar's default lease.
func registrarEnv(name, eurekaURL string, appPort int) ([]string, error) {
	listen, err := harness.FreePort()
	if err != nil {
		return nil, err
	}
	s := registrarConfig(name, appPort)
	s.PodIP, s.NodeName = "127.0.0.1", "node-1"
	s.EurekaURLs = []string{eurekaURL}
	s.Metadata = map[string]string{"zone": "zone-a"}
	s.ClusterID, s.Syncer = "bench-cluster", "bench-registrar"
	s.Health = sidecar.HealthConfig{Type: sidecar.HealthHTTP, Scheme: "http", Path: "/actuator/health", Port: appPort,
		Period: time.Second, Timeout: time.Second, FailureThreshold: 3, SuccessThreshold: 1}
	s.ListenAddr = "127.0.0.1:" + strconv.Itoa(listen)
	return s.Environ(), nil
}

const registrarAppName = "BENCH-REGISTRAR"

// registrarConfig is the registrar of pod name: its defaults and identity.
func registrarConfig(name string, appPort int) sidecar.Config {
	s := sidecar.Defaults("bench-registrar", appPort)
	s.PodName, s.PodNamespace, s.PodUID = name, "bench", "uid-"+name
	return s
}

// registrarInstanceID is the id the registrar of pod name registers.
func registrarInstanceID(name string, appPort int) string {
	s := registrarConfig(name, appPort)
	return s.InstanceID()
}

// MeasureRegistrar adds the registrar's figures to r.
func MeasureRegistrar(ctx context.Context, o RegistrarOptions, r *Results) error {
	bin, err := harness.BuildBinary("./cmd/registrar", o.WorkDir)
	if err != nil {
		return err
	}
	info, err := os.Stat(bin)
	if err != nil {
		return fmt.Errorf("registrar binary: %w", err)
	}
	direct, err := eureka.New(eureka.Options{URLs: []string{o.Eureka.URL()}, Timeout: 2 * time.Second, Logger: o.Log})
	if err != nil {
		return err
	}
	up, gone, err := registrarLatencies(ctx, o, bin, direct)
	if err != nil {
		return err
	}
	r.Add(Figure{
		ID: "registrar.healthy_to_up_max", Section: SectionRegistrar, Name: "app healthy → UP on the server, slowest",
		Value: ms(up.Max()), Unit: "ms", Target: Max(1000),
		Anchor:   fmt.Sprintf("median %s ms over %d samples; the health period is 1 s", formatValue(ms(up.Percentile(50))), len(up)),
		Method:   "the app's /actuator/health turns 200 at a random moment of the registrar's 1 s probe period (health period 1 s, success threshold 1); the time until GET /eureka/apps/{APP}/{ID} on the server (fast profile: no response cache) says UP, polled every 2 ms.",
		IfMissed: "a health change is seen at the next probe, up to one 1 s period later, and the re-registration comes after it; the slowest sample is one full period plus the POST",
	})
	r.Add(Figure{
		ID: "registrar.sigterm_to_gone_max", Section: SectionRegistrar, Name: "SIGTERM → gone from the server, slowest",
		Value: ms(gone.Max()), Unit: "ms", Target: Max(200),
		Anchor: fmt.Sprintf("median %s ms over %d samples", formatValue(ms(gone.Percentile(50))), len(gone)),
		Method: "SIGTERM to the registrar process of a registered UP instance; the time until GET /eureka/apps/{APP}/{ID} answers 404, polled every millisecond.",
	})
	return registrarSteadyState(ctx, o, bin, info.Size(), r)
}

// registrarLatencies starts a registrar beside an unhealthy app, flips the
// app healthy and times UP on the server, then SIGTERMs it and times its
// removal, Samples times.
func registrarLatencies(ctx context.Context, o RegistrarOptions, bin string, c *eureka.Client) (up, gone Durations, err error) {
	for i := range o.Samples {
		app, err := harness.StartApp(false)
		if err != nil {
			return nil, nil, err
		}
		u, g, err := registrarSample(ctx, o, bin, c, app, fmt.Sprintf("latency-%d", i))
		_ = app.Close()
		if err != nil {
			return nil, nil, fmt.Errorf("sample %d: %w", i, err)
		}
		up, gone = append(up, u), append(gone, g)
	}
	o.Log.WithFields(logrus.Fields{"samples": len(up), "up_p50": up.Percentile(50), "up_max": up.Max(), "gone_p50": gone.Percentile(50), "gone_max": gone.Max()}).Info("registrar latencies")
	return up, gone, nil
}

func registrarSample(ctx context.Context, o RegistrarOptions, bin string, c *eureka.Client, app *harness.App, name string) (up, gone time.Duration, err error) {
	env, err := registrarEnv(name, o.Eureka.URL(), app.Port)
	if err != nil {
		return 0, 0, err
	}
	p, err := harness.StartProcess("registrar", bin, nil, env, filepath.Join(o.WorkDir, "registrar-"+name+".log"))
	if err != nil {
		return 0, 0, err
	}
	defer func() { _ = p.Stop() }()
	id := registrarInstanceID(name, app.Port)
	status := func(want eureka.Status) func() error {
		return func() error {
			inst, err := c.Instance(ctx, registrarAppName, id)
			if err != nil {
				return err
			}
			if want != "" && inst.Status != want {
				return fmt.Errorf("status %s, want %s", inst.Status, want)
			}
			return nil
		}
	}
	if err := harness.Poll(ctx, 15*time.Second, 10*time.Millisecond, "registrar "+name+" registered", status("")); err != nil {
		return 0, 0, err
	}
	// The flip lands at a random moment of the registrar's probe period,
	// so the samples cover the whole period rather than one phase of it.
	select {
	case <-time.After(time.Duration(rand.Int64N(int64(time.Second)))):
	case <-ctx.Done():
		return 0, 0, ctx.Err()
	}
	app.SetHealthy(true)
	start := time.Now()
	if err := harness.Poll(ctx, 10*time.Second, 2*time.Millisecond, "registrar "+name+" UP", status(eureka.StatusUp)); err != nil {
		return 0, 0, err
	}
	up = time.Since(start)
	if err := p.Signal(syscall.SIGTERM); err != nil {
		return 0, 0, err
	}
	start = time.Now()
	err = harness.Poll(ctx, 10*time.Second, time.Millisecond, "registrar "+name+" gone", func() error {
		if err := status("")(); !errors.Is(err, eureka.ErrNotFound) {
			return fmt.Errorf("still listed (%v)", err)
		}
		return nil
	})
	if err != nil {
		return 0, 0, err
	}
	gone = time.Since(start)
	select {
	case <-p.Done():
	case <-time.After(5 * time.Second):
		return 0, 0, fmt.Errorf("registrar %s did not exit within 5 s of SIGTERM (log %s)", name, p.LogPath())
	}
	return up, gone, nil
}

// registrarSteadyState runs one registrar with the webhook's defaults and a
// Spring Cloud app registered the ordinary way, each behind its own
// counting proxy, and measures requests, CPU and memory over the window.
func registrarSteadyState(ctx context.Context, o RegistrarOptions, bin string, binarySize int64, r *Results) error {
	regProxy, err := StartCountingProxy(o.Eureka.Addr())
	if err != nil {
		return err
	}
	defer regProxy.Close()
	springProxy, err := StartCountingProxy(o.Eureka.Addr())
	if err != nil {
		return err
	}
	defer springProxy.Close()

	app, err := harness.StartApp(false)
	if err != nil {
		return err
	}
	defer app.Close()
	app.SetHealthy(true)
	env, err := registrarEnv("steady", regProxy.URL(), app.Port)
	if err != nil {
		return err
	}
	steadyStart := time.Now()
	p, err := harness.StartProcess("registrar", bin, nil, env, filepath.Join(o.WorkDir, "registrar-steady.log"))
	if err != nil {
		return err
	}
	defer func() { _ = p.Stop() }()
	spring, err := harness.StartSpringClient(ctx, harness.SpringClientOptions{
		EurekaURL: springProxy.URL(),
		// It calls nothing that exists, once an hour: only its Eureka
		// client talks.
		Service:  "bench-nothing",
		Interval: time.Hour,
		Args:     []string{"--eureka.client.register-with-eureka=true", "--spring.application.name=bench-spring-app"},
		LogDir:   o.WorkDir,
	})
	if err != nil {
		return err
	}
	defer func() { _ = spring.Stop() }()

	c, err := eureka.New(eureka.Options{URLs: []string{o.Eureka.URL()}, Timeout: 2 * time.Second, Logger: o.Log})
	if err != nil {
		return err
	}
	if err := harness.Poll(ctx, 30*time.Second, 50*time.Millisecond, "steady registrar UP", func() error {
		inst, err := c.Instance(ctx, registrarAppName, registrarInstanceID("steady", app.Port))
		if err == nil && inst.Status != eureka.StatusUp {
			err = fmt.Errorf("status %s", inst.Status)
		}
		return err
	}); err != nil {
		return err
	}
	if err := harness.Poll(ctx, 2*time.Minute, 200*time.Millisecond, "Spring app registered UP", func() error {
		insts, err := c.Instances(ctx, "BENCH-SPRING-APP")
		if err == nil && (len(insts) == 0 || insts[0].Status != eureka.StatusUp) {
			err = fmt.Errorf("instances %+v", insts)
		}
		return err
	}); err != nil {
		return err
	}

	o.Log.WithField("window", o.Window).Info("registrar and Spring app registered; counting their Eureka requests")
	reg0, spr0 := regProxy.Counts(), springProxy.Counts()
	cpuReg0, err := CPUTime(p.Pid())
	if err != nil {
		return err
	}
	cpuSpr0, err := CPUTime(spring.Pid())
	if err != nil {
		return err
	}
	select {
	case <-time.After(o.Window): // the measurement window itself
	case <-ctx.Done():
		return ctx.Err()
	}
	reg, spr := regProxy.Counts().Sub(reg0), springProxy.Counts().Sub(spr0)
	cpuReg1, err := CPUTime(p.Pid())
	if err != nil {
		return err
	}
	cpuSpr1, err := CPUTime(spring.Pid())
	if err != nil {
		return err
	}
	measuredAt := time.Now()
	memReg, err := ReadMemory(p.Pid())
	if err != nil {
		return err
	}
	memSpr, err := ReadMemory(spring.Pid())
	if err != nil {
		return err
	}
	perMin := func(n int64) float64 { return float64(n) * float64(time.Minute) / float64(o.Window) }
	minutes := o.Window.Minutes()

	r.Add(Figure{
		ID: "registrar.requests_per_minute", Section: SectionRegistrar, Name: "Eureka requests per instance per minute",
		Value: perMin(reg.Total()), Unit: "req/min",
		Anchor: fmt.Sprintf("Spring Cloud Eureka client registered the ordinary way: %s req/min (%s); the registrar's: %s",
			formatValue(perMin(spr.Total())), describeCounts(spr, perMin), describeCounts(reg, perMin)),
		Method: fmt.Sprintf("steady state over %s after both were registered UP, each behind its own counting reverse proxy in front of the same Eureka server; both with default intervals (30 s renewal; the Spring app also fetches the registry every 30 s; tests/spring-client with --eureka.client.register-with-eureka=true).", o.Window),
	})
	fetches := reg[KindFetchFull] + reg[KindFetchDelta] + reg[KindReadApp]
	r.Add(Figure{
		ID: "registrar.registry_fetches", Section: SectionRegistrar, Name: "registry fetches by the registrar",
		Value: float64(fetches), Unit: "requests", Target: Max(0),
		Anchor:   fmt.Sprintf("Spring client: %d fetches in the same %s", spr[KindFetchFull]+spr[KindFetchDelta]+spr[KindReadApp], o.Window),
		Method:   "GET /apps, /apps/delta or /apps/{APP} seen by the registrar's counting proxy during the window.",
		IfMissed: "the registrar read the registry, which it has no use for",
	})
	r.Add(Figure{
		ID: "registrar.rss", Section: SectionRegistrar, Name: "RSS, registered and probing",
		Value: MiB(memReg.RSSKiB), Unit: "MiB", Target: Max(12),
		Anchor: fmt.Sprintf("of which %s MiB file-backed (the binary's mapped pages) and %s MiB anonymous (heap, stacks); peak %s MiB; the Spring app beside it (whole JVM app, -Xmx256m): %s MiB",
			formatValue(MiB(memReg.FileKiB)), formatValue(MiB(memReg.AnonKiB)), formatValue(MiB(memReg.HWMKiB)), formatValue(MiB(memSpr.RSSKiB))),
		Method: fmt.Sprintf("VmRSS (RssFile + RssAnon) from /proc/PID/status at the end of the %s window, %s after the registrar started (health probe every second, default 30 s renewal).", o.Window, measuredAt.Sub(steadyStart).Round(time.Second)),
		IfMissed: fmt.Sprintf("%s MiB are the static binary's own pages; the anonymous part is the probe's garbage (a new connection every second) between collections, which the registrar's default GOGC=25 keeps to about 1 MiB over a live heap under 1 MiB — check that the environment does not set a larger GOGC",
			formatValue(MiB(memReg.FileKiB))),
	})
	r.Add(Figure{
		ID: "registrar.cpu_per_minute", Section: SectionRegistrar, Name: "CPU per minute, registered and probing",
		Value: ms(cpuReg1-cpuReg0) / minutes, Unit: "ms/min",
		Anchor: fmt.Sprintf("Spring app: %s ms/min", formatValue(ms(cpuSpr1-cpuSpr0)/minutes)),
		Method: "user+system time from /proc/PID/stat over the window (10 ms resolution), per minute.",
	})
	r.Add(Figure{
		ID: "registrar.binary", Section: SectionRegistrar, Name: "binary size",
		Value: float64(binarySize) / (1 << 20), Unit: "MiB",
		Anchor: "static, CGO_ENABLED=0, -trimpath -ldflags='-s -w', as `make build` and the image build it",
		Method: "size of the built ./cmd/registrar.",
	})
	o.Log.WithFields(logrus.Fields{"registrar": reg, "spring": spr, "rss_mib": MiB(memReg.RSSKiB)}).Info("registrar steady state")
	return nil
}

// describeCounts lists the kinds of requests per minute, largest first.
func describeCounts(c Counts, perMin func(int64) float64) string {
	if len(c) == 0 {
		return "none"
	}
	kinds := []string{KindHeartbeat, KindRegister, KindFetchDelta, KindFetchFull, KindReadApp, KindReadInstance, KindStatus, KindCancel, KindOther}
	var parts []string
	for _, k := range kinds {
		if n := c[k]; n > 0 {
			parts = append(parts, fmt.Sprintf("%s %s", k, formatValue(perMin(n))))
		}
	}
	return strings.Join(parts, ", ")
}
