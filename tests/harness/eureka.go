package harness

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Eureka server profiles of tests/eureka-server.
const (
	// ProfileFast: self-preservation off, eviction every second, no
	// read-only response cache.
	ProfileFast = "fast"
	// ProfileReal: self-preservation on and Eureka's default timings.
	ProfileReal = "real"
)

// EurekaOptions configure StartEureka.
type EurekaOptions struct {
	// Profile is ProfileFast (default) or ProfileReal.
	Profile string
	// Host is the address the server listens on (default 127.0.0.1); a
	// real node's pods reach it on the node's address.
	Host string
	// Port on Host; 0 picks a free one.
	Port int
	// Args are extra Spring Boot arguments, such as
	// "--eureka.server.eviction-interval-timer-in-ms=500".
	Args []string
	// StartTimeout bounds the wait for the server to answer (default 5 min:
	// a JVM's cold start on a two-core machine at load 20 took over 90 s;
	// the wait ends at once if the process exits).
	StartTimeout time.Duration
	// LogDir receives eureka.log (default: a new temporary directory).
	LogDir string
	// TLS, when set, serves HTTPS only (URL is https://).
	TLS *EurekaTLS
	// Auth, when set, demands HTTP basic auth.
	Auth *EurekaAuth
}

// Eureka is a running Spring Cloud Netflix Eureka server.
type Eureka struct {
	opts    EurekaOptions
	jar     string
	logPath string

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
	// http reaches the server when it serves HTTPS (nil: the default).
	http *http.Client
}

// harnessClient is the HTTP client of the harness's own checks.
func (e *Eureka) harnessClient() (*http.Client, error) {
	cfg, err := e.opts.TLS.clientConfig()
	if err != nil {
		return nil, fmt.Errorf("eureka server: %w", err)
	}
	return &http.Client{Transport: &http.Transport{TLSClientConfig: cfg}}, nil
}

// StartEureka builds (or finds cached) the server jar, starts it on
// opts.Host and waits until it answers GET /eureka/apps.
func StartEureka(ctx context.Context, opts EurekaOptions) (*Eureka, error) {
	e, err := newEureka(opts)
	if err != nil {
		return nil, err
	}
	if err := e.start(ctx); err != nil {
		return nil, err
	}
	return e, nil
}

// newEureka fills in opts' defaults, finds the jar, picks the port and the
// log file: a server ready to start, whose URL is known before it runs.
func newEureka(opts EurekaOptions) (*Eureka, error) {
	if opts.Profile == "" {
		opts.Profile = ProfileFast
	}
	if opts.Profile != ProfileFast && opts.Profile != ProfileReal {
		return nil, fmt.Errorf("eureka server: unknown profile %q: want %q or %q", opts.Profile, ProfileFast, ProfileReal)
	}
	if opts.StartTimeout == 0 {
		opts.StartTimeout = 5 * time.Minute
	}
	if opts.Host == "" {
		opts.Host = "127.0.0.1"
	}
	if _, err := exec.LookPath("java"); err != nil {
		return nil, errors.New("eureka server: java not found on PATH: install a JDK 17+ (make deps does it)")
	}
	jar, err := BuildArtifact("EUREKUBE_EUREKA_JAR", "tests/eureka-server/build.sh")
	if err != nil {
		return nil, fmt.Errorf("eureka server: %w", err)
	}
	if _, err := os.Stat(jar); err != nil {
		return nil, fmt.Errorf("eureka server: jar %s: %w", jar, err)
	}
	if opts.Port == 0 {
		if opts.Port, err = FreePort(); err != nil {
			return nil, fmt.Errorf("eureka server: %w", err)
		}
	}
	logDir := opts.LogDir
	if logDir == "" {
		if logDir, err = os.MkdirTemp("", "eurekube-eureka-"); err != nil {
			return nil, fmt.Errorf("eureka server: %w", err)
		}
	}
	return &Eureka{opts: opts, jar: jar, logPath: filepath.Join(logDir, "eureka.log")}, nil
}

// EurekaT starts a server for a test and stops it when the test ends.
func EurekaT(t testing.TB, opts EurekaOptions) *Eureka {
	t.Helper()
	SkipWhenShort(t, "a Eureka server (a JVM)")
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	e, err := StartEureka(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Stop() })
	return e
}

// URL is the server's service URL, as clients are configured with it.
func (e *Eureka) URL() string {
	scheme := "http"
	if e.opts.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + e.Addr() + "/eureka"
}

// Auth is the credentials the server demands (nil: none).
func (e *Eureka) Auth() *EurekaAuth {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.opts.Auth
}

// urlWithAuth is URL with the credentials the server demands as its
// userinfo, as a Eureka peer names the others in its service URLs
// (defaultZone) to replicate to them: Eureka's replication client and
// Spring's registry fetch send them as basic auth.
func (e *Eureka) urlWithAuth() string {
	auth := e.Auth()
	if auth == nil {
		return e.URL()
	}
	u, err := url.Parse(e.URL())
	if err != nil {
		return e.URL()
	}
	u.User = url.UserPassword(auth.Username, auth.Password)
	return u.String()
}

// SetAuth changes the credentials the server demands from its next start
// (Restart): how a team rotates a Eureka password.
func (e *Eureka) SetAuth(auth *EurekaAuth) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.opts.Auth = auth
}

// Addr is the server's host:port.
func (e *Eureka) Addr() string { return net.JoinHostPort(e.opts.Host, strconv.Itoa(e.opts.Port)) }

// LogPath is the file the server writes its output to.
func (e *Eureka) LogPath() string { return e.logPath }

func (e *Eureka) start(ctx context.Context) error {
	if l, err := net.Listen("tcp", e.Addr()); err != nil {
		return fmt.Errorf("eureka server: port %d is taken: %w%s", e.opts.Port, err, portHolder(e.opts.Port))
	} else {
		l.Close()
	}
	logFile, err := os.OpenFile(e.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("eureka server: %w", err)
	}
	args := append(slices.Clone(jvmTestFlags), JavaJar(e.jar)...)
	args = append(args,
		"--server.address="+e.opts.Host,
		"--server.port="+strconv.Itoa(e.opts.Port),
		"--spring.profiles.active="+e.opts.Profile,
	)
	e.mu.Lock()
	tlsOpts, auth := e.opts.TLS, e.opts.Auth
	e.mu.Unlock()
	if tlsOpts != nil {
		more, err := tlsOpts.args(e.opts.Host, filepath.Dir(e.logPath))
		if err != nil {
			logFile.Close()
			return err
		}
		args = append(args, more...)
		cl, err := e.harnessClient()
		if err != nil {
			logFile.Close()
			return err
		}
		e.mu.Lock()
		e.http = cl
		e.mu.Unlock()
	}
	if auth != nil {
		args = append(args, "--eurekube.auth.username="+auth.Username, "--eurekube.auth.password="+auth.Password)
	}
	args = append(args, e.opts.Args...)
	cmd := exec.Command("java", args...)
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	// Its own process group, killed with the test binary if that dies.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return fmt.Errorf("eureka server: start java: %w", err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		logFile.Close()
		close(done)
	}()
	e.mu.Lock()
	e.cmd, e.done = cmd, done
	e.mu.Unlock()

	ctx, cancel := context.WithTimeout(ctx, e.opts.StartTimeout)
	defer cancel()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		if e.answers(ctx) {
			return nil
		}
		select {
		case <-done:
			return fmt.Errorf("eureka server exited during start-up (log %s):\n%s", e.logPath, e.logTail())
		case <-ctx.Done():
			e.Kill()
			return fmt.Errorf("eureka server did not answer on %s within %s (log %s):\n%s", e.URL(), e.opts.StartTimeout, e.logPath, e.logTail())
		case <-tick.C:
		}
	}
}

// answers is true when the server answers a registry read. A server busy
// with hundreds of clients on a loaded machine may take seconds to: it
// still answers.
func (e *Eureka) answers(ctx context.Context) bool {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, e.URL()+"/apps", nil)
	if err != nil {
		return false
	}
	req.Header.Set("Accept", "application/json")
	e.mu.Lock()
	cl, auth := e.http, e.opts.Auth
	e.mu.Unlock()
	if cl == nil {
		cl = http.DefaultClient
	}
	if auth != nil {
		req.SetBasicAuth(auth.Username, auth.Password)
	}
	resp, err := cl.Do(req)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

func (e *Eureka) logTail() string {
	data, _ := os.ReadFile(e.logPath)
	return tail(string(data), 3000)
}

// Stop ends the server gracefully (SIGTERM, then SIGKILL after 10 s).
func (e *Eureka) Stop() error {
	return e.signal(syscall.SIGTERM, 10*time.Second)
}

// Kill ends the server at once, as a crash would.
func (e *Eureka) Kill() {
	_ = e.signal(syscall.SIGKILL, 10*time.Second)
}

func (e *Eureka) signal(sig syscall.Signal, wait time.Duration) error {
	e.mu.Lock()
	cmd, done := e.cmd, e.done
	e.mu.Unlock()
	if cmd == nil {
		return nil
	}
	select {
	case <-done:
		return nil
	default:
	}
	_ = syscall.Kill(-cmd.Process.Pid, sig)
	select {
	case <-done:
		return nil
	case <-time.After(wait):
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
		return fmt.Errorf("eureka server did not stop within %s of %v; killed", wait, sig)
	}
}

// Restart stops the server and starts it again on the same port with an
// empty registry, as a redeployed server comes back.
func (e *Eureka) Restart(ctx context.Context) error {
	if err := e.Stop(); err != nil {
		return err
	}
	return e.start(ctx)
}

// Start starts a killed or stopped server again on the same port, with an
// empty registry, and waits until it answers.
func (e *Eureka) Start(ctx context.Context) error {
	e.mu.Lock()
	done := e.done
	e.mu.Unlock()
	select {
	case <-done:
	default:
		return fmt.Errorf("eureka server on %s is still running", e.Addr())
	}
	return e.start(ctx)
}
