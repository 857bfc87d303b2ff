package sidecar

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/eurekube/eurekube/eureka"
)

// Health check types.
const (
	HealthHTTP = "http"
	HealthTCP  = "tcp"
)

// HealthConfig is how the registrar probes the app.
type HealthConfig struct {
	Type             string // HealthHTTP or HealthTCP
	Scheme           string // "http" or "https", for HealthHTTP
	Path             string // for HealthHTTP
	Port             int
	Period           time.Duration
	Timeout          time.Duration
	FailureThreshold int
	SuccessThreshold int
}

// Config is everything the registrar needs, as the webhook resolves it.
type Config struct {
	PodName      string
	PodNamespace string
	PodUID       string
	PodIP        string
	NodeName     string

	AppName          string
	VIPAddress       string
	SecureVIPAddress string
	Port             int
	SecurePort       int // 0: none

	EurekaURLs []string
	Username   string
	Password   string
	Metadata   map[string]string
	ClusterID  string
	Syncer     string

	Health HealthConfig

	RenewalInterval time.Duration
	LeaseDuration   time.Duration
	RequestTimeout  time.Duration
	RetryMax        time.Duration
	ShutdownTimeout time.Duration

	ListenAddr string
	LogLevel   string
}

// ConfigError names the setting that is wrong and what is allowed.
type ConfigError struct {
	Name    string // the environment variable
	Value   string
	Allowed string
}

func (e *ConfigError) Error() string {
	return fmt.Sprintf("%s=%q: %s", e.Name, e.Value, e.Allowed)
}

// LoadEnv reads a Config from the environment variables of env.go through
// lookup (os.LookupEnv in the binary), applying defaults, and validates it.
// The first bad value is returned as a *ConfigError.
func LoadEnv(lookup func(string) (string, bool)) (Config, error) {
	p := envParser{lookup: lookup}
	cfg := Config{
		PodName:          p.required(EnvPodName),
		PodNamespace:     p.required(EnvPodNamespace),
		PodUID:           p.required(EnvPodUID),
		PodIP:            p.required(EnvPodIP),
		NodeName:         p.optional(EnvNodeName, ""),
		AppName:          p.required(EnvAppName),
		VIPAddress:       p.optional(EnvVIPAddress, ""),
		SecureVIPAddress: p.optional(EnvSecureVIPAddress, ""),
		Port:             p.port(EnvPort, true),
		SecurePort:       p.port(EnvSecurePort, false),
		EurekaURLs:       p.urls(EnvEurekaURLs),
		Username:         p.optional(EnvEurekaUsername, ""),
		Password:         p.optional(EnvEurekaPassword, ""),
		Metadata:         p.metadata(EnvMetadata),
		ClusterID:        p.optional(EnvClusterID, ""),
		Syncer:           p.optional(EnvSyncer, ""),
		Health: HealthConfig{
			Type:             strings.ToLower(p.optional(EnvHealthType, HealthTCP)),
			Scheme:           strings.ToLower(p.optional(EnvHealthScheme, "http")),
			Path:             p.optional(EnvHealthPath, ""),
			Port:             p.port(EnvHealthPort, false),
			Period:           p.duration(EnvHealthPeriod, 5*time.Second),
			Timeout:          p.duration(EnvHealthTimeout, time.Second),
			FailureThreshold: p.count(EnvHealthFailureThreshold, 3),
			SuccessThreshold: p.count(EnvHealthSuccessThreshold, 1),
		},
		RenewalInterval: p.duration(EnvLeaseRenewalInterval, 30*time.Second),
		LeaseDuration:   p.duration(EnvLeaseDuration, 90*time.Second),
		RequestTimeout:  p.duration(EnvRequestTimeout, eureka.DefaultTimeout),
		RetryMax:        p.duration(EnvRetryMax, 30*time.Second),
		ShutdownTimeout: p.duration(EnvShutdownTimeout, 2*time.Second),
		ListenAddr:      p.optional(EnvListenAddr, fmt.Sprintf(":%d", DefaultListenPort)),
		LogLevel:        p.optional(EnvLogLevel, "info"),
	}
	if p.err != nil {
		return Config{}, p.err
	}
	cfg.applyDefaults()
	return cfg, cfg.Validate()
}

func (c *Config) applyDefaults() {
	if c.VIPAddress == "" {
		c.VIPAddress = strings.ToLower(c.AppName)
	}
	if c.SecureVIPAddress == "" {
		c.SecureVIPAddress = strings.ToLower(c.AppName)
	}
	if c.Health.Port == 0 {
		c.Health.Port = c.Port
	}
}

// Validate checks the values that LoadEnv cannot check one by one.
func (c *Config) Validate() error {
	switch {
	case c.Health.Type != HealthHTTP && c.Health.Type != HealthTCP:
		return &ConfigError{EnvHealthType, c.Health.Type, "want http or tcp"}
	case c.Health.Type == HealthHTTP && !strings.HasPrefix(c.Health.Path, "/"):
		return &ConfigError{EnvHealthPath, c.Health.Path, "an http health check needs a path starting with /"}
	case c.Health.Scheme != "http" && c.Health.Scheme != "https":
		return &ConfigError{EnvHealthScheme, c.Health.Scheme, "want HTTP or HTTPS"}
	case c.LeaseDuration <= c.RenewalInterval:
		return &ConfigError{EnvLeaseDuration, c.LeaseDuration.String(), "must be longer than " + EnvLeaseRenewalInterval + " (" + c.RenewalInterval.String() + ")"}
	case c.Health.Timeout > c.Health.Period:
		return &ConfigError{EnvHealthTimeout, c.Health.Timeout.String(), "must not exceed " + EnvHealthPeriod + " (" + c.Health.Period.String() + ")"}
	}
	return nil
}

// envParser reads variables and keeps the first error, so LoadEnv reads
// as a list of fields.
type envParser struct {
	lookup func(string) (string, bool)
	err    error
}

func (p *envParser) fail(name, value, allowed string) {
	if p.err == nil {
		p.err = &ConfigError{Name: name, Value: value, Allowed: allowed}
	}
}

func (p *envParser) optional(name, def string) string {
	if v, ok := p.lookup(name); ok && strings.TrimSpace(v) != "" {
		return strings.TrimSpace(v)
	}
	return def
}

func (p *envParser) required(name string) string {
	v := p.optional(name, "")
	if v == "" {
		p.fail(name, "", "is required")
	}
	return v
}

func (p *envParser) port(name string, required bool) int {
	v := p.optional(name, "")
	if v == "" {
		if required {
			p.fail(name, "", "is required: a port number from 1 to 65535")
		}
		return 0
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > 65535 {
		p.fail(name, v, "want a port number from 1 to 65535")
		return 0
	}
	return n
}

func (p *envParser) count(name string, def int) int {
	v := p.optional(name, "")
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > 1000 {
		p.fail(name, v, "want a whole number from 1 to 1000")
		return def
	}
	return n
}

// duration accepts a Go duration ("30s", "500ms") or whole seconds ("30").
func (p *envParser) duration(name string, def time.Duration) time.Duration {
	v := p.optional(name, "")
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		if secs, convErr := strconv.Atoi(v); convErr == nil {
			d, err = time.Duration(secs)*time.Second, nil
		}
	}
	if err != nil || d <= 0 {
		p.fail(name, v, "want a positive duration such as 30s or 500ms")
		return def
	}
	return d
}

func (p *envParser) urls(name string) []string {
	v := p.required(name)
	var out []string
	for _, raw := range strings.Split(v, ",") {
		raw = strings.TrimSpace(raw)
		if raw == "" {
			continue
		}
		u, err := url.Parse(raw)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			p.fail(name, raw, "want comma-separated absolute http:// or https:// URLs such as http://eureka:8761/eureka")
			return nil
		}
		out = append(out, raw)
	}
	if len(out) == 0 && v != "" {
		p.fail(name, v, "want at least one Eureka server URL")
	}
	return out
}

func (p *envParser) metadata(name string) map[string]string {
	v := p.optional(name, "")
	if v == "" {
		return nil
	}
	var m map[string]string
	if err := json.Unmarshal([]byte(v), &m); err != nil {
		p.fail(name, v, "want a JSON object of string values, such as {\"zone\":\"a\"}")
		return nil
	}
	return m
}
