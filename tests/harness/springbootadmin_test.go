package harness_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/eurekube/eurekube/eureka"
	"github.com/eurekube/eurekube/tests/harness"
)

// adminLists bounds how long Spring Boot Admin may take to list a new
// instance UP: a registry fetch and a health poll, seconds, on a machine
// that may be busy.
const adminLists = 2 * time.Minute

// actuatorV3 is the media type a Spring Boot 2.2+ actuator answers with.
// Spring Boot Admin reads a plain application/json answer as Spring Boot
// 1's, whose health had no "components": it would nest them one level
// deeper.
const actuatorV3 = "application/vnd.spring-boot.actuator.v3+json"

// actuatorT serves what Spring Boot Admin reads of a Spring Boot app's
// actuator on 127.0.0.1: its health with one component, and an empty info.
func actuatorT(t *testing.T) *httptest.Server {
	t.Helper()
	mux := http.NewServeMux()
	answer := func(body string) http.HandlerFunc {
		return func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", actuatorV3)
			_, _ = w.Write([]byte(body))
		}
	}
	mux.HandleFunc("/actuator/health", answer(`{"status":"UP","components":{"ping":{"status":"UP"}}}`))
	mux.HandleFunc("/actuator/info", answer(`{}`))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

// TestSpringBootAdmin_ListsAnEurekaInstanceUpWithItsHealth proves the real
// Spring Boot Admin server discovers through Eureka an instance registered
// with Eurekube's client, takes its health URL from the registration and
// its management URL from the metadata, and lists it UP with its health's
// components.
func TestSpringBootAdmin_ListsAnEurekaInstanceUpWithItsHealth(t *testing.T) {
	harness.SkipWhenShort(t, "a Eureka server and a Spring Boot Admin server (JVMs)")
	server := harness.EurekaT(t, harness.EurekaOptions{})
	actuator := actuatorT(t)
	port := actuator.Listener.Addr().(*net.TCPAddr).Port

	started := time.Now()
	ctx, cancel := context.WithTimeout(t.Context(), 6*time.Minute)
	defer cancel()
	admin, err := harness.StartSpringBootAdmin(ctx, harness.SpringBootAdminOptions{
		EurekaURL: server.URL(), CacheSeconds: 2, StatusInterval: 3 * time.Second, LogDir: t.TempDir(),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("spring boot admin log:\n%s", admin.LogTail())
		}
		_ = admin.Stop()
	})
	t.Logf("spring boot admin answered after %.1f s on %s", time.Since(started).Seconds(), admin.URL())

	client, err := eureka.New(eureka.Options{URLs: []string{server.URL()}, Timeout: 15 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	inst := eureka.Instance{
		App: "EUREKUBE-ADMIN-TEST", InstanceID: "admin-test-1", HostName: "127.0.0.1", IPAddr: "127.0.0.1",
		VIPAddress: "eurekube-admin-test", Status: eureka.StatusUp, Port: port, PortEnabled: true,
		HealthCheckURL: actuator.URL + "/actuator/health",
		Metadata:       map[string]string{"management.context-path": "/actuator"},
		// No heartbeats: the lease outlasts the test.
		Duration: 10 * time.Minute,
	}
	registered := time.Now()
	if err := client.Register(t.Context(), inst); err != nil {
		t.Fatal(err)
	}

	harness.Eventually(t, adminLists, "Spring Boot Admin lists the instance UP with its health's components", func() error {
		insts, err := admin.Instances(t.Context())
		if err != nil {
			return err
		}
		if len(insts) != 1 {
			return fmt.Errorf("%d instances listed, want 1: %+v", len(insts), insts)
		}
		got := insts[0]
		var errs []error
		if !strings.EqualFold(got.Name, inst.App) {
			errs = append(errs, fmt.Errorf("name %q, want %q", got.Name, inst.App))
		}
		if got.HealthURL != inst.HealthCheckURL {
			errs = append(errs, fmt.Errorf("health URL %q, want %q", got.HealthURL, inst.HealthCheckURL))
		}
		if want := actuator.URL + "/actuator"; got.ManagementURL != want {
			errs = append(errs, fmt.Errorf("management URL %q, want %q", got.ManagementURL, want))
		}
		if got.Status != "UP" {
			errs = append(errs, fmt.Errorf("status %q (details %v), want UP", got.Status, got.Details))
		} else if _, ok := got.Details["ping"]; !ok {
			errs = append(errs, fmt.Errorf("details %v, want the ping component", got.Details))
		}
		return errors.Join(errs...)
	})
	insts, err := admin.Instances(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("listed UP %.1f s after the registration: %+v", time.Since(registered).Seconds(), insts[0])
}
