// Package registrar_test runs the real registrar binary beside a small test
// app against the real Spring Cloud Eureka server.
package registrar_test

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
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
	os.Exit(func() int {
		dir, err := os.MkdirTemp("", "eurekube-registrar-")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer os.RemoveAll(dir)
		if registrarBin, err = harness.BuildBinary("./cmd/registrar", dir); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
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

// testApp is the app container: an HTTP server whose health can be flipped.
type testApp struct {
	port    int
	healthy atomic.Bool
	srv     *http.Server
}

func startApp(t testing.TB) *testApp {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	a := &testApp{port: ln.Addr().(*net.TCPAddr).Port}
	mux := http.NewServeMux()
	mux.HandleFunc("/actuator/health", func(w http.ResponseWriter, _ *http.Request) {
		if !a.healthy.Load() {
			http.Error(w, `{"status":"DOWN"}`, http.StatusServiceUnavailable)
			return
		}
		fmt.Fprint(w, `{"status":"UP"}`)
	})
	a.srv = &http.Server{Handler: mux}
	go a.srv.Serve(ln)
	t.Cleanup(func() { a.srv.Close() })
	return a
}

// pod is one registrar process with the environment the webhook injects.
type pod struct {
	name string
	app  string
	port int
	cmd  *exec.Cmd
	out  *syncBuffer
	done chan struct{}
	exit int
}

type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

var podSeq atomic.Int32

// injectedEnv is what the webhook gives the registrar, with the downward
// API resolved as the kubelet would, and short timings for tests.
func injectedEnv(app string, appPort int, urls ...string) map[string]string {
	n := podSeq.Add(1)
	name := fmt.Sprintf("%s-7d9f-%d", strings.ToLower(app), n)
	listen, _ := harness.FreePort()
	return map[string]string{
		sidecar.EnvPodName:                name,
		sidecar.EnvPodNamespace:           "shop",
		sidecar.EnvPodUID:                 fmt.Sprintf("uid-%d", n),
		sidecar.EnvPodIP:                  "127.0.0.1",
		sidecar.EnvNodeName:               "node-1",
		sidecar.EnvAppName:                app,
		sidecar.EnvPort:                   strconv.Itoa(appPort),
		sidecar.EnvEurekaURLs:             strings.Join(urls, ","),
		sidecar.EnvMetadata:               `{"zone":"zone-a","version":"1.4.2"}`,
		sidecar.EnvClusterID:              "cluster-test",
		sidecar.EnvSyncer:                 "orders",
		sidecar.EnvHealthType:             "http",
		sidecar.EnvHealthPath:             "/actuator/health",
		sidecar.EnvHealthPeriod:           "200ms",
		sidecar.EnvHealthTimeout:          "200ms",
		sidecar.EnvHealthFailureThreshold: "2",
		sidecar.EnvHealthSuccessThreshold: "1",
		sidecar.EnvLeaseRenewalInterval:   "1s",
		sidecar.EnvLeaseDuration:          "10s",
		sidecar.EnvRequestTimeout:         "1s",
		sidecar.EnvRetryMax:               "2s",
		sidecar.EnvListenAddr:             "127.0.0.1:" + strconv.Itoa(listen),
	}
}

func startRegistrar(t testing.TB, env map[string]string) *pod {
	t.Helper()
	p := &pod{name: env[sidecar.EnvPodName], app: env[sidecar.EnvAppName], out: &syncBuffer{}, done: make(chan struct{})}
	p.port, _ = strconv.Atoi(env[sidecar.EnvPort])
	p.cmd = exec.Command(registrarBin)
	p.cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
	for k, v := range env {
		p.cmd.Env = append(p.cmd.Env, k+"="+v)
	}
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		_ = p.cmd.Wait()
		p.exit = p.cmd.ProcessState.ExitCode()
		close(p.done)
	}()
	t.Cleanup(func() {
		_ = p.cmd.Process.Kill()
		<-p.done
		if t.Failed() {
			t.Logf("registrar %s output:\n%s", p.name, p.out.String())
		}
	})
	return p
}

func (p *pod) instanceID() string {
	return fmt.Sprintf("%s:%s:%d", p.name, strings.ToLower(p.app), p.port)
}

func (p *pod) running() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

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
