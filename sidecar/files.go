package sidecar

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/eurekube/eurekube/eureka"
)

// The credentials and TLS material reach the registrar as files of a
// mounted Secret or ConfigMap, which the kubelet replaces when the object
// changes (a new directory behind a symlink, swapped atomically). The
// registrar notices a change with a stat of each file before each request,
// cheap enough for every heartbeat, and reads the files again only then,
// or when Eureka refuses the credentials (401): a rotated password or CA
// reaches running pods without a restart.

// fileStamps remembers what a stat of each file said, to tell a changed
// file from the one read last.
type fileStamps struct {
	paths []string
	last  []os.FileInfo // nil entry: not seen
}

func newFileStamps(paths ...string) *fileStamps {
	return &fileStamps{paths: paths, last: make([]os.FileInfo, len(paths))}
}

// changed stats every file and says whether any differs from the last
// call: another file (the kubelet's swap), another size or modification
// time, or one that appeared or went.
func (s *fileStamps) changed() bool {
	changed := false
	for i, p := range s.paths {
		fi, err := os.Stat(p)
		if err != nil {
			fi = nil
		}
		prev := s.last[i]
		switch {
		case (fi == nil) != (prev == nil):
			changed = true
		case fi != nil && (!os.SameFile(fi, prev) || !fi.ModTime().Equal(prev.ModTime()) || fi.Size() != prev.Size()):
			changed = true
		}
		s.last[i] = fi
	}
	return changed
}

// credentialsFunc is how the registrar's eureka.Client gets its
// credentials: from the files when cfg names them, read again when they
// change or when Eureka refused them; else the environment's (pods injected
// before the files), which never change; else none (nil).
func credentialsFunc(cfg Config, log logrus.FieldLogger) eureka.CredentialsFunc {
	if cfg.UsernameFile == "" {
		if cfg.Username == "" {
			return nil
		}
		static := eureka.Credentials{Username: cfg.Username, Password: cfg.Password}
		return func(bool) (eureka.Credentials, error) { return static, nil }
	}
	return CredentialsFromFiles(cfg.UsernameFile, cfg.PasswordFile, log)
}

// CredentialsFromFiles reads basic-auth credentials from two files (a
// mounted Secret's username and password), again when a stat shows either
// changed or when Eureka refused them.
func CredentialsFromFiles(usernameFile, passwordFile string, log logrus.FieldLogger) eureka.CredentialsFunc {
	var (
		mu      sync.Mutex
		stamps  = newFileStamps(usernameFile, passwordFile)
		current eureka.Credentials
		loaded  bool
	)
	return func(reload bool) (eureka.Credentials, error) {
		mu.Lock()
		defer mu.Unlock()
		if !stamps.changed() && loaded && !reload {
			return current, nil
		}
		user, err := os.ReadFile(usernameFile)
		if err != nil {
			loaded = false
			return eureka.Credentials{}, fmt.Errorf("read the Eureka username: %w", err)
		}
		pass, err := os.ReadFile(passwordFile)
		if err != nil {
			loaded = false
			return eureka.Credentials{}, fmt.Errorf("read the Eureka password: %w", err)
		}
		next := eureka.Credentials{Username: string(user), Password: string(pass)}
		if loaded && next != current {
			log.WithField("file", passwordFile).Info("eureka credentials changed; using the new ones")
		}
		current, loaded = next, true
		return current, nil
	}
}

// TokenFromFile is the eureka.Options.BearerToken of a projected
// ServiceAccount token mounted at path: the registrar's for Eurekube's
// gateway (EnvGatewayTokenFile), the manager's (--gateway-token-file).
// The kubelet writes a new token at 80 % of the old one's lifetime,
// swapping it in as it swaps a mounted Secret; a stat before each request
// notices the swap, and the file is read again only then. The token is
// trimmed of surrounding white space; an unreadable or empty file is an
// error of each request until it is fixed. No error quotes the token.
func TokenFromFile(path string) func() (string, error) {
	var (
		mu      sync.Mutex
		stamps  = newFileStamps(path)
		current string
		loaded  bool
	)
	return func() (string, error) {
		mu.Lock()
		defer mu.Unlock()
		if !stamps.changed() && loaded {
			return current, nil
		}
		raw, err := os.ReadFile(path)
		if err != nil {
			loaded = false
			return "", fmt.Errorf("read the gateway token: %w", err)
		}
		token := strings.TrimSpace(string(raw))
		if token == "" {
			loaded = false
			return "", fmt.Errorf("the gateway token file %s is empty", path)
		}
		current, loaded = token, true
		return current, nil
	}
}

// loadTLS reads the CA bundle and the client certificate that cfg names;
// nil for what it names not.
func loadTLS(cfg Config) (*x509.CertPool, *tls.Certificate, error) {
	var pool *x509.CertPool
	if cfg.CAFile != "" {
		pem, err := os.ReadFile(cfg.CAFile)
		if err != nil {
			return nil, nil, fmt.Errorf("read the CA bundle trusted for Eureka: %w", err)
		}
		pool = x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, nil, fmt.Errorf("CA bundle %s: no PEM certificate in it", cfg.CAFile)
		}
	}
	var cert *tls.Certificate
	if cfg.ClientCertFile != "" {
		pair, err := tls.LoadX509KeyPair(cfg.ClientCertFile, cfg.ClientKeyFile)
		if err != nil {
			return nil, nil, fmt.Errorf("client certificate for Eureka (%s, %s): %w", cfg.ClientCertFile, cfg.ClientKeyFile, err)
		}
		cert = &pair
	}
	return pool, cert, nil
}

// Clients is the registrar's Registry: a eureka.Client built from cfg, built
// again when the CA bundle or the client certificate files change (a
// client's TLS settings are fixed), with credentials (or else the gateway
// token) read per request.
// Unreadable or bad TLS files are an error of each request until they are
// fixed, never the end of the registrar; once a client exists, a bad change
// keeps the previous one in use, logged.
type Clients struct {
	base   eureka.Options
	cfg    Config
	log    logrus.FieldLogger
	stamps *fileStamps // nil: no TLS files

	mu     sync.Mutex
	client *eureka.Client
}

// NewClients checks base (the URLs, the timeout, the logger, the observer)
// and returns the registrar's Clients for cfg.
func NewClients(cfg Config, base eureka.Options, log logrus.FieldLogger) (*Clients, error) {
	base.Credentials = credentialsFunc(cfg, log)
	base.Username, base.Password = "", ""
	if cfg.GatewayTokenFile != "" {
		base.BearerToken = TokenFromFile(cfg.GatewayTokenFile)
	}
	plain, err := eureka.New(base)
	if err != nil {
		return nil, err
	}
	c := &Clients{base: base, cfg: cfg, log: log}
	if cfg.CAFile == "" && cfg.ClientCertFile == "" {
		c.client = plain
		return c, nil
	}
	c.stamps = newFileStamps(cfg.CAFile, cfg.ClientCertFile, cfg.ClientKeyFile)
	return c, nil
}

// current returns the client for the TLS files as they are now.
func (c *Clients) current() (*eureka.Client, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stamps == nil {
		return c.client, nil
	}
	if !c.stamps.changed() && c.client != nil {
		return c.client, nil
	}
	pool, cert, err := loadTLS(c.cfg)
	if err != nil {
		if c.client == nil {
			return nil, err
		}
		c.log.WithError(err).Warn("the Eureka TLS files changed but cannot be used; keeping the previous ones")
		return c.client, nil
	}
	opts := c.base
	opts.RootCAs, opts.ClientCertificate = pool, cert
	next, err := eureka.New(opts)
	if err != nil {
		return nil, err
	}
	if c.client != nil {
		c.client.CloseIdleConnections()
		c.log.Info("the Eureka TLS files changed; using them from now on")
	}
	c.client = next
	return next, nil
}

// Register implements Registry.
func (c *Clients) Register(ctx context.Context, inst eureka.Instance) error {
	cl, err := c.current()
	if err != nil {
		return fmt.Errorf("register %s/%s: %w", inst.App, inst.InstanceID, err)
	}
	return cl.Register(ctx, inst)
}

// Heartbeat implements Registry.
func (c *Clients) Heartbeat(ctx context.Context, app, id string, lastDirty time.Time) error {
	cl, err := c.current()
	if err != nil {
		return fmt.Errorf("heartbeat %s/%s: %w", app, id, err)
	}
	return cl.Heartbeat(ctx, app, id, lastDirty)
}

// Cancel implements Registry.
func (c *Clients) Cancel(ctx context.Context, app, id string) error {
	cl, err := c.current()
	if err != nil {
		return fmt.Errorf("cancel %s/%s: %w", app, id, err)
	}
	return cl.Cancel(ctx, app, id)
}

var _ Registry = (*Clients)(nil)
