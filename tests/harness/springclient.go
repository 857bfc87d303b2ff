package harness

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// SpringClientOptions configure StartSpringClient.
type SpringClientOptions struct {
	// EurekaURL is the server the client discovers through (Eureka.URL()).
	EurekaURL string
	// Service is the name the client calls, http://<service><Path>, such
	// as "orders" (Spring Cloud LoadBalancer resolves it through Eureka);
	// empty, it calls nothing until Call starts a caller.
	Service string
	Path    string
	// Interval between two calls (default 20 ms).
	Interval time.Duration
	// CacheSeconds is both the Eureka client's registry fetch interval and
	// the LoadBalancer cache TTL (default 30, Spring's default for both).
	CacheSeconds int
	// Args are extra Spring Boot arguments, such as
	// "--eureka.client.register-with-eureka=true".
	Args []string
	// LogDir receives spring-client.log.
	LogDir string
	// StartTimeout bounds the wait for /stats (default 5 min).
	StartTimeout time.Duration
	// TrustCAFile, a PEM CA certificate, becomes the JVM's trust store
	// (javax.net.ssl.trustStore), which the client's HTTPS calls verify
	// against: an instance with a secure port enabled is called over HTTPS.
	TrustCAFile string
}

// SpringClient is tests/spring-client running: a real Spring Cloud service
// (Eureka discovery, Spring Cloud LoadBalancer, a @LoadBalanced RestClient)
// calling a service by name at a steady rate.
type SpringClient struct {
	*Process
	host string
	port int
	// caller is the id of one of the JVM's callers (Call), "" for the
	// caller its arguments started.
	caller string
}

// SpringStats is what the client has seen since it started.
type SpringStats struct {
	OK        int64  `json:"ok"`
	Failed    int64  `json:"failed"`
	LastError string `json:"lastError"`
	// ByInstance counts successful calls by the body answered, which the
	// test app (tests/testapp) sets to its pod name.
	ByInstance map[string]int64 `json:"byInstance"`
}

// StartSpringClient builds (or finds cached) the client jar, starts it and
// waits until its /stats answers.
func StartSpringClient(ctx context.Context, o SpringClientOptions) (*SpringClient, error) {
	if o.EurekaURL == "" || o.LogDir == "" {
		return nil, errors.New("spring client: SpringClientOptions needs an EurekaURL and a LogDir")
	}
	o.Path, o.Interval = callDefaults(o.Path, o.Interval)
	if o.CacheSeconds == 0 {
		o.CacheSeconds = 30
	}
	var jvm []string
	if o.TrustCAFile != "" {
		var err error
		if jvm, err = javaTrustStore(o.TrustCAFile, o.LogDir); err != nil {
			return nil, fmt.Errorf("spring client: %w", err)
		}
	}
	return startSpring(ctx, "127.0.0.1", o.LogDir, o.StartTimeout, jvm, append([]string{
		"--eureka.client.service-url.defaultZone=" + o.EurekaURL,
		"--eurekube.client.service=" + o.Service,
		"--eurekube.client.path=" + o.Path,
		"--eurekube.client.interval-ms=" + strconv.FormatInt(o.Interval.Milliseconds(), 10),
		"--eurekube.client.cache-seconds=" + strconv.Itoa(o.CacheSeconds),
	}, o.Args...))
}

// SpringVMOptions configure StartSpringVM.
type SpringVMOptions struct {
	// EurekaURL is the server it registers with.
	EurekaURL string
	// App is the Eureka application (and VIP address) it registers as,
	// such as "orders".
	App string
	// Name is what GET / answers, as the test app answers its pod name.
	Name string
	// Host is the address it listens on and registers (hostName and
	// ipAddr), one callers can reach.
	Host string
	// RenewalSeconds between heartbeats (default 5; Spring's is 30).
	RenewalSeconds int
	// LogDir receives its log.
	LogDir string
	// StartTimeout bounds the wait for it to answer (default 5 min).
	StartTimeout time.Duration
}

// StartSpringVM starts tests/spring-client as a service running on a VM:
// a Spring Boot app that registers itself with Eureka the ordinary way
// (Spring Cloud Netflix's Eureka client, eureka.client.register-with-eureka)
// under App, and answers GET / with Name. It calls nothing.
func StartSpringVM(ctx context.Context, o SpringVMOptions) (*SpringClient, error) {
	if o.EurekaURL == "" || o.App == "" || o.Name == "" || o.Host == "" || o.LogDir == "" {
		return nil, errors.New("spring VM: SpringVMOptions needs an EurekaURL, an App, a Name, a Host and a LogDir")
	}
	if o.RenewalSeconds == 0 {
		o.RenewalSeconds = 5
	}
	renewal := strconv.Itoa(o.RenewalSeconds)
	return startSpring(ctx, o.Host, o.LogDir, o.StartTimeout, nil, []string{
		"--spring.application.name=" + o.App,
		"--eurekube.client.name=" + o.Name,
		"--eureka.client.service-url.defaultZone=" + o.EurekaURL,
		"--eureka.client.register-with-eureka=true",
		"--eureka.instance.hostname=" + o.Host,
		"--eureka.instance.ip-address=" + o.Host,
		"--eureka.instance.lease-renewal-interval-in-seconds=" + renewal,
		"--eureka.instance.lease-expiration-duration-in-seconds=" + strconv.Itoa(3*o.RenewalSeconds),
	})
}

// springJar is a Spring Boot jar of the repository that the harness runs.
type springJar struct {
	// name is the jar in errors and log file names, such as "spring client".
	name string
	// env names a built jar (BuildArtifact); script builds it otherwise.
	env, script string
	// ready is the path that answers 200 once the jar has started.
	ready string
}

var springClientJar = springJar{
	name: "spring client", env: "EUREKUBE_SPRING_CLIENT_JAR", script: "tests/spring-client/build.sh", ready: "/stats",
}

// startSpring starts the client jar listening on host with JVM options jvm
// and Spring Boot arguments args, and waits until its /stats answers.
func startSpring(ctx context.Context, host, logDir string, timeout time.Duration, jvm, args []string) (*SpringClient, error) {
	p, port, err := startSpringJar(ctx, springClientJar, host, logDir, timeout, jvm, args)
	if err != nil {
		return nil, err
	}
	return &SpringClient{Process: p, host: host, port: port}, nil
}

// startSpringJar starts j on host and a free port, with JVM options jvm and
// Spring Boot arguments args, its output in logDir, and waits until its
// ready path answers; it returns the process and the port.
func startSpringJar(ctx context.Context, j springJar, host, logDir string, timeout time.Duration, jvm, args []string) (*Process, int, error) {
	if timeout == 0 {
		// A JVM on a loaded two-core machine (load 27, two other test
		// runs beside) printed nothing in 90 s; the wait ends at once if
		// it exits.
		timeout = 5 * time.Minute
	}
	jar, err := BuildArtifact(j.env, j.script)
	if err != nil {
		return nil, 0, fmt.Errorf("%s: %w", j.name, err)
	}
	port, err := FreePort()
	if err != nil {
		return nil, 0, fmt.Errorf("%s: %w", j.name, err)
	}
	cmdLine := append(slices.Clone(jvmTestFlags), jvm...)
	cmdLine = append(append(cmdLine, JavaJar(jar)...), "--server.address="+host, "--server.port="+strconv.Itoa(port))
	args = append(cmdLine, args...)
	logPath := filepath.Join(logDir, strings.ReplaceAll(j.name, " ", "-")+"-"+strconv.Itoa(port)+".log")
	p, err := StartProcess(j.name, "java", args, nil, logPath)
	if err != nil {
		return nil, 0, err
	}
	ready := "http://" + net.JoinHostPort(host, strconv.Itoa(port)) + j.ready
	if err := p.WaitHTTP200(ctx, nil, ready, timeout); err != nil {
		if strings.Contains(err.Error(), "already in use") {
			return nil, 0, fmt.Errorf("%w%s", err, portHolder(port))
		}
		return nil, 0, err
	}
	return p, port, nil
}

// javaTrustStore imports the PEM CA in caFile into a new PKCS12 trust store
// in a directory under dir, with the keytool of the JDK whose java the
// harness runs, and returns the JVM options that make it the default trust
// store. The client's RestClient calls through HttpURLConnection
// (SimpleClientHttpRequestFactory), whose HTTPS verifies against the
// default SSLContext, which these system properties configure.
func javaTrustStore(caFile, dir string) ([]string, error) {
	java, err := exec.LookPath("java")
	if err != nil {
		return nil, fmt.Errorf("trust store: %w", err)
	}
	if java, err = filepath.EvalSymlinks(java); err != nil {
		return nil, fmt.Errorf("trust store: %w", err)
	}
	storeDir, err := os.MkdirTemp(dir, "truststore-")
	if err != nil {
		return nil, fmt.Errorf("trust store: %w", err)
	}
	// keytool refuses a password shorter than six characters; the store
	// holds only a public certificate.
	const password = "changeit"
	store := filepath.Join(storeDir, "truststore.p12")
	out, err := exec.Command(filepath.Join(filepath.Dir(java), "keytool"), "-importcert", "-noprompt",
		"-storetype", "PKCS12", "-keystore", store, "-storepass", password,
		"-alias", "eurekube-test-ca", "-file", caFile).CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("trust store: keytool -importcert %s: %w: %s", caFile, err, out)
	}
	return []string{"-Djavax.net.ssl.trustStore=" + store, "-Djavax.net.ssl.trustStorePassword=" + password, "-Djavax.net.ssl.trustStoreType=PKCS12"}, nil
}

func (c *SpringClient) url(path string) string {
	return "http://" + net.JoinHostPort(c.host, strconv.Itoa(c.port)) + path
}

// StatsURL serves the client's counters as JSON.
func (c *SpringClient) StatsURL() string {
	if c.caller != "" {
		return c.url("/callers/" + c.caller + "/stats")
	}
	return c.url("/stats")
}

// Call starts another caller in c's JVM: it calls service by name,
// http://<service><path>, every interval (0: 20 ms), on a thread of its
// own, through the same Eureka client and load balancer (c's
// CacheSeconds), and counts what happens apart from c's other callers.
// What it returns reads that caller's counters; its Stop stops that caller
// and leaves the JVM running. A suite whose stories call with the same
// settings starts one JVM for all of them, not one each (a JVM's start
// costs about 9 CPU-seconds); each call that fails is in the JVM's log
// with its service.
func (c *SpringClient) Call(ctx context.Context, service, path string, interval time.Duration) (*SpringClient, error) {
	path, interval = callDefaults(path, interval)
	q := url.Values{"service": {service}, "path": {path}, "interval-ms": {strconv.FormatInt(interval.Milliseconds(), 10)}}
	var started struct{ ID string }
	if err := doJSON(ctx, http.MethodPost, c.url("/callers?"+q.Encode()), &started); err != nil {
		return nil, fmt.Errorf("spring client: start a caller of %s: %w", service, err)
	}
	return &SpringClient{Process: c.Process, host: c.host, port: c.port, caller: started.ID}, nil
}

// callDefaults are a caller's path and interval with the defaults filled
// in: "/" and 20 ms.
func callDefaults(path string, interval time.Duration) (string, time.Duration) {
	if path == "" {
		path = "/"
	}
	if interval == 0 {
		interval = 20 * time.Millisecond
	}
	return path, interval
}

// Stop stops the client's JVM, or, for a caller that Call started, that
// caller only.
func (c *SpringClient) Stop() error {
	if c.caller == "" {
		return c.Process.Stop()
	}
	if c.Exited() {
		return nil
	}
	if err := doJSON(context.Background(), http.MethodDelete, c.url("/callers/"+c.caller), nil); err != nil {
		return fmt.Errorf("spring client: stop caller %s: %w", c.caller, err)
	}
	return nil
}

// Stats reads the client's counters.
func (c *SpringClient) Stats(ctx context.Context) (SpringStats, error) {
	var s SpringStats
	if err := getJSON(ctx, c.StatsURL(), &s); err != nil {
		return s, fmt.Errorf("spring client stats: %w", err)
	}
	return s, nil
}

// getJSON decodes into v what url answers 200 with, asking for JSON, within
// 5 s.
func getJSON(ctx context.Context, url string, v any) error {
	return doJSON(ctx, http.MethodGet, url, v)
}

// doJSON sends a request without a body and decodes into v (nil: ignores)
// what url answers 200 with, asking for JSON, within 5 s.
func doJSON(ctx context.Context, method, url string, v any) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, url, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("%s %s: %s: %s", method, url, resp.Status, strings.TrimSpace(string(body)))
	}
	if v == nil {
		return nil
	}
	return json.NewDecoder(resp.Body).Decode(v)
}

// Since is what happened between an earlier reading and this one.
func (s SpringStats) Since(before SpringStats) SpringStats {
	d := SpringStats{OK: s.OK - before.OK, Failed: s.Failed - before.Failed, LastError: s.LastError, ByInstance: map[string]int64{}}
	for k, v := range s.ByInstance {
		if n := v - before.ByInstance[k]; n > 0 {
			d.ByInstance[k] = n
		}
	}
	return d
}

// StatsT reads the client's counters for a test, failing it on error.
func (c *SpringClient) StatsT(t testing.TB) SpringStats {
	t.Helper()
	s, err := c.Stats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return s
}
