package registrar_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/eurekube/eurekube/certs"
	"github.com/eurekube/eurekube/eureka"
	"github.com/eurekube/eurekube/sidecar"
	"github.com/eurekube/eurekube/tests/harness"
)

// mountedDir holds files as the kubelet keeps a mounted Secret or
// ConfigMap: each name a symlink through ..data to the current generation,
// and an update a new generation swapped in atomically.
type mountedDir struct {
	t   *testing.T
	dir string
	gen int
}

func mount(t *testing.T, files map[string][]byte) *mountedDir {
	t.Helper()
	m := &mountedDir{t: t, dir: t.TempDir()}
	m.update(files)
	for name := range files {
		if err := os.Symlink(filepath.Join("..data", name), filepath.Join(m.dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	return m
}

func (m *mountedDir) update(files map[string][]byte) {
	m.t.Helper()
	m.gen++
	gen := fmt.Sprintf("..gen-%d", m.gen)
	if err := os.Mkdir(filepath.Join(m.dir, gen), 0o755); err != nil {
		m.t.Fatal(err)
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(m.dir, gen, name), data, 0o444); err != nil {
			m.t.Fatal(err)
		}
	}
	tmp := filepath.Join(m.dir, "..data_tmp")
	if err := os.Symlink(gen, tmp); err != nil {
		m.t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(m.dir, "..data")); err != nil {
		m.t.Fatal(err)
	}
}

func (m *mountedDir) path(name string) string { return filepath.Join(m.dir, name) }

// A Eureka server serving HTTPS with a private CA and demanding client
// certificates (mutual TLS): the registrar trusting that CA, with its client
// certificate, registers; one given another CA keeps retrying, logs the
// x509 error and never exits; one without a client certificate is refused.
func TestRegistrar_RegistersOverMutualTLSTrustingOnlyThePrivateCA(t *testing.T) {
	ctx := context.Background()
	ca, err := certs.NewCA("corp eureka CA", 24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	other, err := certs.NewCA("some other CA", 24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	certPEM, keyPEM, err := harness.IssueClientCertificate(ca, "orders-registrar")
	if err != nil {
		t.Fatal(err)
	}
	own := harness.EurekaT(t, harness.EurekaOptions{TLS: &harness.EurekaTLS{CA: ca, ClientAuth: true}})
	if !strings.HasPrefix(own.URL(), "https://") {
		t.Fatalf("server URL %s, want https", own.URL())
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca.Cert)
	c, err := eureka.New(eureka.Options{URLs: []string{own.URL()}, RootCAs: roots, ClientCertificate: &pair, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}

	app := harness.AppT(t, true)
	files := mount(t, map[string][]byte{"ca.crt": ca.PEM, "tls.crt": certPEM, "tls.key": keyPEM})
	good := injectedSettings("ledger", app.Port, own.URL())
	good.CAFile, good.ClientCertFile, good.ClientKeyFile = files.path("ca.crt"), files.path("tls.crt"), files.path("tls.key")
	trusting := startRegistrar(t, envOf(good))

	wrongFiles := mount(t, map[string][]byte{"ca.crt": other.PEM, "tls.crt": certPEM, "tls.key": keyPEM})
	wrong := injectedSettings("ledger", app.Port, own.URL())
	wrong.CAFile, wrong.ClientCertFile, wrong.ClientKeyFile = wrongFiles.path("ca.crt"), wrongFiles.path("tls.crt"), wrongFiles.path("tls.key")
	distrusting := startRegistrar(t, envOf(wrong))

	anonymous := injectedSettings("ledger", app.Port, own.URL())
	anonymous.CAFile = files.path("ca.crt")
	noCert := startRegistrar(t, envOf(anonymous))

	harness.Eventually(t, 60*time.Second, "the registrar trusting the CA UP over HTTPS", statusIs(ctx, c, trusting, eureka.StatusUp))
	harness.Eventually(t, 60*time.Second, "the x509 error in the log of the registrar given another CA", func() error {
		if log := distrusting.Log(); !strings.Contains(log, "x509: certificate signed by unknown authority") {
			return fmt.Errorf("not yet:\n%s", log)
		}
		return nil
	})
	harness.Eventually(t, 60*time.Second, "a failed handshake in the log of the registrar without a client certificate", func() error {
		if log := noCert.Log(); !strings.Contains(log, "eureka unreachable") {
			return fmt.Errorf("not yet:\n%s", log)
		}
		return nil
	})
	// Both keep trying (their failed attempts count on) and neither exits
	// or gets in.
	harness.Eventually(t, 60*time.Second, "three failed attempts each", func() error {
		for _, p := range []*pod{distrusting, noCert} {
			if n := failedRequests(t, p.env[sidecar.EnvListenAddr]); n < 3 {
				return fmt.Errorf("%s: %v failed attempts", p.name, n)
			}
		}
		return nil
	})
	for _, p := range []*pod{distrusting, noCert} {
		if !p.running() {
			t.Fatalf("registrar %s exited:\n%s", p.name, p.Log())
		}
		if _, err := c.Instance(ctx, p.app, p.instanceID()); err == nil {
			t.Fatalf("registrar %s is registered without trusting the server or proving itself", p.name)
		}
	}
	t.Logf("given another CA: %s", lineWith(distrusting.Log(), "x509"))
	t.Logf("without a client certificate: %s", lineWith(noCert.Log(), "eureka unreachable"))
}

// The Eureka password rotates: the server restarts demanding the new one.
// A registrar reading its credentials from the mounted Secret's files is
// registered again within a lease of the file's change, without a restart;
// one of a pod injected before the files (credentials from env, read once)
// gets 401s and stays out: the outage this avoids.
func TestRegistrar_FollowsARotatedPasswordWithoutARestart(t *testing.T) {
	ctx := context.Background()
	own := harness.EurekaT(t, harness.EurekaOptions{Auth: &harness.EurekaAuth{Username: "eureka", Password: "first-password"}})
	app := harness.AppT(t, true)
	secret := mount(t, map[string][]byte{"username": []byte("eureka"), "password": []byte("first-password")})
	s := injectedSettings("payments", app.Port, own.URL())
	s.UsernameFile, s.PasswordFile = secret.path("username"), secret.path("password")
	fromFiles := startRegistrar(t, envOf(s))
	old := injectedSettings("payments", app.Port, own.URL())
	old.Username, old.Password = "eureka", "first-password"
	fromEnv := startRegistrar(t, envOf(old))

	reader := func(password string) *eureka.Client {
		c, err := eureka.New(eureka.Options{URLs: []string{own.URL()}, Username: "eureka", Password: password, Timeout: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	c := reader("first-password")
	if _, err := reader("a-guess").Instances(ctx, "payments"); eureka.StatusCode(err) != 401 {
		t.Fatalf("a read with a wrong password: %v, want HTTP 401: the server must demand the password", err)
	}
	harness.Eventually(t, 60*time.Second, "both registrars UP with the first password", func() error {
		for _, p := range []*pod{fromFiles, fromEnv} {
			if err := statusIs(ctx, c, p, eureka.StatusUp)(); err != nil {
				return fmt.Errorf("%s: %w", p.name, err)
			}
		}
		return nil
	})

	// The server takes the new password first (as a restarted server
	// does), then the kubelet updates the mounted Secret.
	own.SetAuth(&harness.EurekaAuth{Username: "eureka", Password: "second-password"})
	restartCtx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	if err := own.Restart(restartCtx); err != nil {
		t.Fatal(err)
	}
	c = reader("second-password")
	harness.Eventually(t, 60*time.Second, "the 401s in the log of the registrar reading files", func() error {
		if !strings.Contains(fromFiles.Log(), "HTTP 401") {
			return fmt.Errorf("no 401 yet:\n%s", fromFiles.Log())
		}
		return nil
	})
	secret.update(map[string][]byte{"username": []byte("eureka"), "password": []byte("second-password")})
	changed := time.Now()
	lease := 10 * time.Second // injectedSettings' lease duration
	harness.Eventually(t, lease, "registered again within a lease of the Secret's change", statusIs(ctx, c, fromFiles, eureka.StatusUp))
	t.Logf("registered again %s after the password file changed", time.Since(changed).Round(time.Millisecond))
	// And it stays: heartbeats with the new password keep the lease.
	begin := time.Now()
	for time.Since(begin) < 2*lease {
		if err := statusIs(ctx, c, fromFiles, eureka.StatusUp)(); err != nil {
			t.Fatalf("%s after the rotation: %v\n%s", time.Since(changed).Round(time.Millisecond), err, fromFiles.Log())
		}
		time.Sleep(time.Second)
	}

	// The pod injected before the files: 401s, never back.
	if _, err := c.Instance(ctx, fromEnv.app, fromEnv.instanceID()); err == nil {
		t.Fatal("the registrar with env credentials is registered, yet its password is the old one")
	}
	if !strings.Contains(fromEnv.Log(), "HTTP 401") || !strings.Contains(fromEnv.Log(), "eureka refused the credentials") || !fromEnv.running() {
		t.Fatalf("the registrar with env credentials: want 401s in its log and still running:\n%s", fromEnv.Log())
	}
	t.Logf("env credentials after the rotation: %s", lineWith(fromEnv.Log(), "HTTP 401"))
}

func lineWith(log, s string) string {
	for _, line := range strings.Split(log, "\n") {
		if strings.Contains(line, s) {
			return line
		}
	}
	return ""
}
