package eureka_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/eurekube/eurekube/eureka"
	"github.com/eurekube/eurekube/tests/harness"
)

var (
	serverOnce sync.Once
	server     *harness.Eureka
	serverErr  error
)

// TestMain stops the real Eureka server if a test started it.
func TestMain(m *testing.M) {
	code := m.Run()
	if server != nil {
		_ = server.Stop()
	}
	os.Exit(code)
}

// realServer starts a real Eureka server the first time a test needs one,
// so that the tests that need only Go (go test -short, make unit) never
// start the JVM: in -short mode the tests that need it are skipped.
func realServer(t *testing.T) *harness.Eureka {
	t.Helper()
	harness.SkipWhenShort(t, "a Eureka server (a JVM)")
	serverOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		server, serverErr = harness.StartEureka(ctx, harness.EurekaOptions{Profile: harness.ProfileFast})
		if serverErr == nil {
			serverErr = warmUp(ctx, server.URL())
		}
	})
	if serverErr != nil {
		t.Fatal(serverErr)
	}
	return server
}

// warmUp registers, reads and cancels one instance with no per-request
// timeout but ctx's: a JVM that has just started answers its first writes
// slowly on a busy machine (a first registration took over 2 s at load 20),
// and the tests' clients should meet a server that answers as it will
// afterwards.
func warmUp(ctx context.Context, url string) error {
	c, err := eureka.New(eureka.Options{URLs: []string{url}, Timeout: time.Minute})
	if err != nil {
		return err
	}
	inst := testInstance("warm-up", "pod-warm")
	if err := c.Register(ctx, inst); err != nil {
		return fmt.Errorf("warm up %s: %w", url, err)
	}
	if _, err := c.Instance(ctx, inst.App, inst.InstanceID); err != nil {
		return fmt.Errorf("warm up %s: %w", url, err)
	}
	if err := c.Cancel(ctx, inst.App, inst.InstanceID); err != nil {
		return fmt.Errorf("warm up %s: %w", url, err)
	}
	return nil
}

// requestTimeout is the tests' per-request timeout: long enough for a real
// server on a busy machine, short enough that a test of failover is not
// slow.
const requestTimeout = 10 * time.Second

func newClient(t *testing.T, urls ...string) *eureka.Client {
	t.Helper()
	if len(urls) == 0 {
		urls = []string{realServer(t).URL()}
	}
	c, err := eureka.New(eureka.Options{URLs: urls, Timeout: requestTimeout})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func testInstance(app, pod string) eureka.Instance {
	return eureka.Instance{
		App:             app,
		InstanceID:      pod + ":" + strings.ToLower(app) + ":8080",
		HostName:        "10.1.2.3",
		IPAddr:          "10.1.2.3",
		VIPAddress:      strings.ToLower(app),
		Status:          eureka.StatusUp,
		Port:            8080,
		PortEnabled:     true,
		HomePageURL:     "http://10.1.2.3:8080/",
		StatusPageURL:   "http://10.1.2.3:8080/actuator/info",
		HealthCheckURL:  "http://10.1.2.3:8080/actuator/health",
		RenewalInterval: 30 * time.Second,
		Duration:        90 * time.Second,
		Metadata: map[string]string{
			"zone":               "zone-a",
			"version":            "1.2.3",
			"management.port":    "8081",
			eureka.MetaManagedBy: eureka.ManagedByValue,
			eureka.MetaCluster:   "cluster-1",
			eureka.MetaPodUID:    "uid-" + pod,
			eureka.MetaNamespace: "shop",
			eureka.MetaSyncer:    "orders",
			eureka.MetaPod:       pod,
		},
	}
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 3*requestTimeout)
	t.Cleanup(cancel)
	return c
}

func ids(insts []eureka.Instance) []string {
	var out []string
	for _, i := range insts {
		out = append(out, i.InstanceID)
	}
	return out
}

// closedPortURL is a URL on which nothing listens.
func closedPortURL(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return "http://" + addr + "/eureka"
}

// opCounter counts a client's requests by operation.
type opCounter struct {
	mu  sync.Mutex
	ops map[string]int
}

func (o *opCounter) ObserveRequest(op, _ string, _ time.Duration, _ error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.ops[op]++
}

// count is how many requests of op the client made.
func (o *opCounter) count(op string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.ops[op]
}

func (o *opCounter) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return fmt.Sprint(o.ops)
}
