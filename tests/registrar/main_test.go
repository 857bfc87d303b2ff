// Package registrar_test runs the real registrar binary beside a small test
// app against the real Spring Cloud Eureka server.
package registrar_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/eurekube/eurekube/eureka"
	"github.com/eurekube/eurekube/sidecar"
	"github.com/eurekube/eurekube/tests/harness"
)

var (
	registrarBin string
	server       *harness.Eureka
)

func TestMain(m *testing.M) {
	harness.SkipSuiteWhenShort("a Eureka server (a JVM)")
	os.Exit(func() int {
		bin, cleanup, err := harness.BuildTemp("./cmd/registrar")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer cleanup()
		registrarBin = bin
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		server, err = harness.StartEureka(ctx, harness.EurekaOptions{})
		cancel()
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer server.Stop()
		return m.Run()
	}())
}

// pod is one registrar process with the environment the webhook injects.
type pod struct {
	*harness.Process
	name, app string
	port      int
	env       map[string]string
}

var podSeq atomic.Int32

// injectedSettings are what the webhook gives the registrar, with the
// downward API resolved as the kubelet would, and short timings for tests.
func injectedSettings(app string, appPort int, urls ...string) sidecar.Config {
	n := podSeq.Add(1)
	listen, _ := harness.FreePort()
	s := sidecar.Defaults(app, appPort)
	s.PodName, s.PodNamespace, s.PodUID, s.PodIP, s.NodeName = fmt.Sprintf("%s-7d9f-%d", strings.ToLower(app), n), "shop", fmt.Sprintf("uid-%d", n), "127.0.0.1", "node-1"
	s.EurekaURLs = urls
	s.Metadata = map[string]string{"zone": "zone-a", "version": "1.4.2"}
	s.ClusterID, s.Syncer = "cluster-test", "orders"
	s.Health = sidecar.HealthConfig{Type: sidecar.HealthHTTP, Scheme: "http", Path: "/actuator/health", Port: appPort,
		Period: 200 * time.Millisecond, Timeout: 200 * time.Millisecond, FailureThreshold: 2, SuccessThreshold: 1}
	s.RenewalInterval, s.LeaseDuration = time.Second, 10*time.Second
	s.RequestTimeout, s.RetryMax = time.Second, 2*time.Second
	s.ListenAddr = "127.0.0.1:" + strconv.Itoa(listen)
	return s
}

// envOf is the environment s renders, by name, for tests that change one
// variable's text.
func envOf(s sidecar.Config) map[string]string {
	env := make(map[string]string)
	for _, e := range s.Env() {
		env[e.Name] = e.Value
	}
	return env
}

func startRegistrar(t testing.TB, env map[string]string) *pod {
	t.Helper()
	p := &pod{name: env[sidecar.EnvPodName], app: env[sidecar.EnvAppName], env: env}
	p.port, _ = strconv.Atoi(env[sidecar.EnvPort])
	vars := make([]string, 0, len(env))
	for k, v := range env {
		vars = append(vars, k+"="+v)
	}
	var err error
	if p.Process, err = harness.StartProcess("registrar "+p.name, registrarBin, nil, vars, filepath.Join(t.TempDir(), "registrar.log")); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		p.Kill()
		if t.Failed() {
			t.Logf("registrar %s output:\n%s", p.name, p.Log())
		}
	})
	return p
}

// instanceID is the id the registrar registers, from its one home.
func (p *pod) instanceID() string {
	cfg := sidecar.Config{PodName: p.name, PodNamespace: p.env[sidecar.EnvPodNamespace], PodUID: p.env[sidecar.EnvPodUID], AppName: p.app, Port: p.port}
	return cfg.InstanceID()
}

func (p *pod) running() bool { return !p.Exited() }

func eurekaClient(t testing.TB) *eureka.Client {
	t.Helper()
	c, err := eureka.New(eureka.Options{URLs: []string{server.URL()}, Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// statusIs reads the instance straight from the registry.
func statusIs(ctx context.Context, c *eureka.Client, p *pod, want eureka.Status) func() error {
	return func() error {
		inst, err := c.Instance(ctx, p.app, p.instanceID())
		if err != nil {
			return err
		}
		if inst.Status != want {
			return fmt.Errorf("status %s, want %s", inst.Status, want)
		}
		return nil
	}
}

// metric reads one sample from the registrar's /metrics; 0 when absent.
func metric(t testing.TB, p *pod, series string) float64 {
	t.Helper()
	addr, ok := p.env[sidecar.EnvListenAddr]
	if !ok {
		t.Fatal("no listen address")
	}
	return scrape(t, addr, series)
}

func failedRequests(t testing.TB, addr string) float64 {
	return scrape(t, addr, `eurekube_registrar_registrations_total{result="error"}`)
}

func scrape(t testing.TB, addr, series string) float64 {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(io.LimitReader(resp.Body, 1<<20))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), series+" "); ok {
			f, _ := strconv.ParseFloat(v, 64)
			return f
		}
	}
	return 0
}

func setTraffic(t *testing.T, file, content string) {
	t.Helper()
	// Written aside and renamed, as the kubelet swaps the volume's files.
	if err := os.WriteFile(file+".new", []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(file+".new", file); err != nil {
		t.Fatal(err)
	}
}
