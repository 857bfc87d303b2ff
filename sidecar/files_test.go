package sidecar

import (
	"context"
	"crypto/tls"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/eurekube/eurekube/certs"
	"github.com/eurekube/eurekube/eureka"
)

// mountedFiles writes files the way the kubelet updates a mounted Secret:
// into a new directory, then an atomic swap of the ..data symlink that
// every file's own symlink goes through.
type mountedFiles struct {
	t   *testing.T
	dir string
	gen int
}

func newMountedFiles(t *testing.T, files map[string]string) *mountedFiles {
	m := &mountedFiles{t: t, dir: t.TempDir()}
	m.write(files)
	for name := range files {
		if err := os.Symlink(filepath.Join("..data", name), filepath.Join(m.dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	return m
}

func (m *mountedFiles) write(files map[string]string) {
	m.gen++
	gen := filepath.Join(m.dir, "..gen"+string(rune('0'+m.gen)))
	if err := os.Mkdir(gen, 0o755); err != nil {
		m.t.Fatal(err)
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(gen, name), []byte(data), 0o444); err != nil {
			m.t.Fatal(err)
		}
	}
	tmp := filepath.Join(m.dir, "..data_tmp")
	if err := os.Symlink(filepath.Base(gen), tmp); err != nil {
		m.t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(m.dir, "..data")); err != nil {
		m.t.Fatal(err)
	}
}

func (m *mountedFiles) path(name string) string { return filepath.Join(m.dir, name) }

func quietLog() logrus.FieldLogger {
	l := logrus.New()
	l.SetOutput(os.Stderr)
	l.SetLevel(logrus.WarnLevel)
	return l
}

func TestCredentialsFunc_FollowsTheMountedSecret(t *testing.T) {
	files := newMountedFiles(t, map[string]string{"username": "eureka", "password": "one"})
	get := credentialsFunc(Config{UsernameFile: files.path("username"), PasswordFile: files.path("password")}, quietLog())
	if c, err := get(false); err != nil || c != (eureka.Credentials{Username: "eureka", Password: "one"}) {
		t.Fatalf("first read: %+v, %v", c, err)
	}
	files.write(map[string]string{"username": "eureka", "password": "two"})
	if c, err := get(false); err != nil || c.Password != "two" {
		t.Fatalf("after the Secret changed: %+v, %v; want the new password", c, err)
	}
	files.write(map[string]string{"username": "eureka"})
	if _, err := get(true); err == nil || !strings.Contains(err.Error(), "password") {
		t.Fatalf("password file gone: err = %v, want one naming the password", err)
	}
}

func TestCredentialsFunc_PodsInjectedBeforeTheFilesKeepTheirEnvironment(t *testing.T) {
	get := credentialsFunc(Config{Username: "eureka", Password: "from-env"}, quietLog())
	if c, err := get(true); err != nil || c.Password != "from-env" {
		t.Fatalf("env credentials: %+v, %v", c, err)
	}
	if credentialsFunc(Config{}, quietLog()) != nil {
		t.Fatal("no credentials configured, yet a func that would send some")
	}
}

func TestClients_TrustTheMountedCAAndFollowItsRotation(t *testing.T) {
	ca, err := certs.NewCA("eureka CA", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	serving, err := ca.Issue(certs.LocalHosts())
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.X509KeyPair(serving.CertPEM, serving.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	var answered atomic.Int32
	ts := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		answered.Add(1)
		http.NotFound(w, r)
	}))
	ts.TLS = &tls.Config{Certificates: []tls.Certificate{pair}}
	ts.StartTLS()
	defer ts.Close()

	other, err := certs.NewCA("another CA", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	files := newMountedFiles(t, map[string]string{"ca.crt": "not a certificate"})
	cfg := Config{CAFile: files.path("ca.crt")}
	clients, err := NewClients(cfg, eureka.Options{URLs: []string{ts.URL + "/eureka"}, Logger: quietLog()}, quietLog())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := clients.Heartbeat(ctx, "app", "id", time.Time{}); err == nil || !strings.Contains(err.Error(), "no PEM certificate") {
		t.Fatalf("bad CA bundle: %v, want an error saying so", err)
	}
	files.write(map[string]string{"ca.crt": string(other.PEM)})
	if err := clients.Heartbeat(ctx, "app", "id", time.Time{}); !errors.Is(err, eureka.ErrUnavailable) || !strings.Contains(err.Error(), "x509") {
		t.Fatalf("the wrong CA: %v, want an x509 error", err)
	}
	files.write(map[string]string{"ca.crt": string(ca.PEM)})
	if err := clients.Heartbeat(ctx, "app", "id", time.Time{}); !errors.Is(err, eureka.ErrNotFound) {
		t.Fatalf("the server's CA: %v, want the server's 404", err)
	}
	// A broken update keeps the client that works.
	files.write(map[string]string{"ca.crt": ""})
	if err := clients.Heartbeat(ctx, "app", "id", time.Time{}); !errors.Is(err, eureka.ErrNotFound) {
		t.Fatalf("after a broken update: %v, want the previous CA kept", err)
	}
	if answered.Load() != 2 {
		t.Fatalf("server answered %d requests, want 2", answered.Load())
	}
}

func TestTokenFromFile_FollowsTheKubeletsRotation(t *testing.T) {
	files := newMountedFiles(t, map[string]string{"token": "token-one\n"})
	token := TokenFromFile(files.path("token"))
	if got, err := token(); err != nil || got != "token-one" {
		t.Fatalf("first read: %q, %v", got, err)
	}
	files.write(map[string]string{"token": "token-two"})
	if got, err := token(); err != nil || got != "token-two" {
		t.Fatalf("after the kubelet's swap: %q, %v; want the new token", got, err)
	}
	files.write(map[string]string{"token": ""})
	if got, err := token(); err == nil || !strings.Contains(err.Error(), "empty") {
		t.Fatalf("empty token file: %q, %v; want an error saying so", got, err)
	}
	files.write(map[string]string{"other": "x"})
	_, err := token()
	if err == nil || !strings.Contains(err.Error(), "gateway token") || strings.Contains(err.Error(), "token-two") {
		t.Fatalf("token file gone: err = %v, want one naming the gateway token and not quoting it", err)
	}
	files.write(map[string]string{"token": "token-three"})
	if got, err := token(); err != nil || got != "token-three" {
		t.Fatalf("token back: %q, %v", got, err)
	}
}

func TestTokenFromFile_ReadsOnlyWhenTheFileChanged(t *testing.T) {
	path := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(path, []byte("token-one"), 0o444); err != nil {
		t.Fatal(err)
	}
	token := TokenFromFile(path)
	if got, err := token(); err != nil || got != "token-one" {
		t.Fatalf("first read: %q, %v", got, err)
	}
	// Same size, same modification time, same file: a stat sees no change,
	// so the file is not read again.
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte("token-xxx"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(path, fi.ModTime(), fi.ModTime()); err != nil {
		t.Fatal(err)
	}
	if got, _ := token(); got != "token-one" {
		t.Fatalf("read %q though a stat shows no change, want the token read before", got)
	}
}

func TestClients_SendTheGatewayTokenUnlessCredentialsAreGiven(t *testing.T) {
	var got atomic.Value
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got.Store(r.Header.Get("Authorization"))
		http.NotFound(w, r)
	}))
	defer ts.Close()
	tokens := newMountedFiles(t, map[string]string{"token": "pod-token-1"})
	creds := newMountedFiles(t, map[string]string{"username": "eureka", "password": "secret"})
	ctx := context.Background()
	for name, tc := range map[string]struct {
		cfg  Config
		want string
	}{
		"token only": {Config{GatewayTokenFile: tokens.path("token")}, "Bearer pod-token-1"},
		"credentials win": {Config{GatewayTokenFile: tokens.path("token"), UsernameFile: creds.path("username"), PasswordFile: creds.path("password")},
			"Basic ZXVyZWthOnNlY3JldA=="},
		"neither": {Config{}, ""},
	} {
		clients, err := NewClients(tc.cfg, eureka.Options{URLs: []string{ts.URL + "/eureka"}, Logger: quietLog()}, quietLog())
		if err != nil {
			t.Fatal(err)
		}
		if err := clients.Heartbeat(ctx, "app", "id", time.Time{}); !errors.Is(err, eureka.ErrNotFound) {
			t.Fatalf("%s: %v, want the server's 404", name, err)
		}
		if h, _ := got.Load().(string); h != tc.want {
			t.Errorf("%s: Authorization %q, want %q", name, h, tc.want)
		}
	}
	clients, err := NewClients(Config{GatewayTokenFile: tokens.path("token")}, eureka.Options{URLs: []string{ts.URL + "/eureka"}, Logger: quietLog()}, quietLog())
	if err != nil {
		t.Fatal(err)
	}
	tokens.write(map[string]string{"token": "pod-token-2"})
	if err := clients.Cancel(ctx, "app", "id"); !errors.Is(err, eureka.ErrNotFound) {
		t.Fatal(err)
	}
	if h, _ := got.Load().(string); h != "Bearer pod-token-2" {
		t.Errorf("after the rotation: Authorization %q, want the new token", h)
	}
}
