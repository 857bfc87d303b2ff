package sidecar

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	logtest "github.com/sirupsen/logrus/hooks/test"

	"github.com/eurekube/eurekube/eureka"
)

// slowServer is a registry that applies a registration a while after it
// arrives, whether or not the client is still waiting for the answer — as
// a loaded Eureka server does — and a cancel at once. That ordering is a
// fault the real server cannot be made to produce on demand.
type slowServer struct {
	delay   time.Duration
	started chan eureka.Status // each registration as it arrives

	mu      sync.Mutex
	holds   map[string]eureka.Status
	pending sync.WaitGroup
}

func (s *slowServer) Register(ctx context.Context, inst eureka.Instance) error {
	s.started <- inst.Status
	applied := make(chan struct{})
	s.pending.Go(func() {
		time.Sleep(s.delay)
		s.mu.Lock()
		s.holds[inst.InstanceID] = inst.Status
		s.mu.Unlock()
		close(applied)
	})
	select {
	case <-applied:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("register %s: %w", inst.InstanceID, ctx.Err())
	}
}

func (s *slowServer) Heartbeat(_ context.Context, _, id string, _ time.Time) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.holds[id]; !ok {
		return eureka.ErrNotFound
	}
	return nil
}

func (s *slowServer) Cancel(_ context.Context, _, id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.holds[id]; !ok {
		return eureka.ErrNotFound
	}
	delete(s.holds, id)
	return nil
}

func TestRegistrar_ARegistrationUnderWayAtShutdownCannotOutliveTheCancel(t *testing.T) {
	app, err := net.Listen("tcp", "127.0.0.1:0") // healthy by TCP from the start
	if err != nil {
		t.Fatal(err)
	}
	defer app.Close()
	cfg := Config{
		PodName: "orders-1", PodNamespace: "shop", PodUID: "uid-1", PodIP: "127.0.0.1",
		AppName: "ORDERS", VIPAddress: "orders", Port: 8080, EurekaURLs: []string{"http://unused/eureka"},
		Health: HealthConfig{
			Type: HealthTCP, Port: app.Addr().(*net.TCPAddr).Port,
			Period: 50 * time.Millisecond, Timeout: time.Second, FailureThreshold: 3, SuccessThreshold: 1,
		},
		RenewalInterval: 30 * time.Second, LeaseDuration: 90 * time.Second, RetryMax: time.Second,
		ShutdownTimeout: 2 * time.Second,
	}
	server := &slowServer{delay: 300 * time.Millisecond, started: make(chan eureka.Status, 8), holds: map[string]eureka.Status{}}
	log := logrus.New()
	log.SetOutput(io.Discard)
	r := New(cfg, server, log, nil)

	ctx, terminate := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- r.Run(ctx) }()
	// SIGTERM while the UP registration is on its way: the server has it
	// and will apply it 300 ms later, after the STARTING one it applied.
	for status := range server.started {
		if status == eureka.StatusUp {
			break
		}
	}
	terminate()
	select {
	case err := <-ran:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(3 * cfg.ShutdownTimeout):
		t.Fatal("the registrar did not stop")
	}
	server.pending.Wait() // every registration the server received is applied

	server.mu.Lock()
	defer server.mu.Unlock()
	if status, ok := server.holds[cfg.InstanceID()]; ok {
		t.Fatalf("after shutdown the registry still lists %s as %s: the registration landed after the cancel", cfg.InstanceID(), status)
	}
}

func TestBackoff_NeverWaitsPastOneRenewalInterval(t *testing.T) {
	for _, tc := range []struct{ renewal, retryMax time.Duration }{
		{30 * time.Second, 30 * time.Second},
		{5 * time.Second, 2 * time.Second},
		{time.Second, time.Minute},
	} {
		r := &Registrar{cfg: Config{RenewalInterval: tc.renewal, RetryMax: tc.retryMax}}
		b := r.newBackoff()
		longest := time.Duration(0)
		for range 50 {
			longest = max(longest, b.NextBackOff())
		}
		if limit := min(tc.retryMax*6/5, tc.renewal*9/10); longest > limit || longest < limit/2 {
			t.Errorf("renewal %s, retry max %s: longest wait %s, want up to %s", tc.renewal, tc.retryMax, longest, limit)
		}
	}
}

// A server restarted with a rotated password: first unreachable, then 401
// after 401. The log says both, once each: the refusal is news even in the
// middle of an outage, as its fix is the pod's credentials.
func TestOutageLog_SaysWhenEurekaStartsRefusingTheCredentials(t *testing.T) {
	log, hook := logtest.NewNullLogger()
	refused := &eureka.RequestError{Method: "PUT", URL: "http://eureka/eureka/apps/A/1", StatusCode: http.StatusUnauthorized}
	down := &eureka.RequestError{Method: "PUT", URL: "http://eureka/eureka/apps/A/1", Err: errors.New("connection refused")}
	var o outageLog
	for _, err := range []error{down, down, refused, refused, refused} {
		o.failed(log, err)
	}
	var got []string
	for _, e := range hook.AllEntries() {
		got = append(got, e.Message)
	}
	want := []string{"eureka unreachable; retrying with backoff", "eureka refused the credentials; retrying with backoff"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("logged %q, want %q", got, want)
	}
}
