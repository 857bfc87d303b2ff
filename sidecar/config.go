package sidecar

import (
	"encoding/json"
	"fmt"
	"math"
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

// Protocols of the registered port.
const (
	ProtocolHTTP = "http"
	ProtocolTCP  = "tcp"
)

// ProtocolFor is ProtocolTCP when tcp, else ProtocolHTTP.
func ProtocolFor(tcp bool) string {
	if tcp {
		return ProtocolTCP
	}
	return ProtocolHTTP
}

// DefaultManagementBasePath is where Spring Boot's actuator answers unless
// configured otherwise (management.endpoints.web.base-path).
const DefaultManagementBasePath = "/actuator"

// ManagementConfig is where an HTTP app's Spring Boot Actuator answers.
type ManagementConfig struct {
	Port     int
	Scheme   string // "http" or "https"
	BasePath string // such as /actuator; "/" for the root
}

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

// Config is the registrar's settings: everything it needs, as the webhook
// resolves it (Defaults, then the syncer, the pod and its annotations) and
// renders it (Env), and as the registrar reads it back (ParseEnv). Its
// environment variables are listed in env.go.
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
	// Username and Password come from environment variables in pods
	// injected before the credential files; UsernameFile and PasswordFile,
	// when set, win over them.
	Username  string
	Password  string
	Metadata  map[string]string
	ClusterID string
	Syncer    string

	// Files the registrar reads, and reads again when they change (see
	// files.go); empty: none.
	UsernameFile   string
	PasswordFile   string
	CAFile         string
	ClientCertFile string
	ClientKeyFile  string
	// GatewayTokenFile holds the pod's projected ServiceAccount token for
	// Eurekube's gateway, sent when no credentials are (TokenFromFile).
	GatewayTokenFile string

	// Protocol is what the registered port speaks: ProtocolHTTP or
	// ProtocolTCP. A TCP instance carries no URLs.
	Protocol   string
	Management ManagementConfig

	Health HealthConfig

	// ZoneFile holds the pod's topology.kubernetes.io/zone label, which
	// the registrar registers as metadata zone unless Metadata has one;
	// empty: no file.
	ZoneFile string

	// TrafficFile holds the pod's eurekube.io/traffic annotation, read
	// before every registration (see traffic.go); empty: no file, the
	// instance registers without a status override.
	TrafficFile string

	RenewalInterval time.Duration
	LeaseDuration   time.Duration
	RequestTimeout  time.Duration
	RetryMax        time.Duration
	ShutdownTimeout time.Duration

	ListenAddr string
	LogLevel   string
}

// EnvVar is one variable of the registrar's environment. The webhook turns
// it into a container's env entry; this package stays free of Kubernetes
// types, so the registrar binary stays small.
type EnvVar struct {
	Name, Value string
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

// Defaults of the settings the webhook and the registrar share. The webhook
// resolves a registrar's settings from them (Defaults), and ParseEnv fills an
// unset variable with them, so a hand-run registrar and an injected one agree.
const (
	DefaultHealthPeriod     = 5 * time.Second
	DefaultHealthTimeout    = time.Second
	DefaultFailureThreshold = 3
	DefaultSuccessThreshold = 1
	DefaultRenewalInterval  = 30 * time.Second
	DefaultLeaseDuration    = 90 * time.Second
	DefaultRequestTimeout   = eureka.DefaultTimeout
	DefaultRetryMax         = 30 * time.Second
	// DefaultShutdownTimeout bounds the cancel on SIGTERM: one whole Eureka
	// request (DefaultRequestTimeout), well inside the 30 s the kubelet
	// leaves after the drain.
	DefaultShutdownTimeout = 5 * time.Second
	DefaultLogLevel        = "info"
)

// DefaultListenAddr is the registrar's health and metrics address.
var DefaultListenAddr = ":" + strconv.Itoa(DefaultListenPort)

// Defaults are the settings of a registrar for app on port that nothing
// else configures: TCP health on the registered port, Eureka's lease, the
// VIP addresses named after the app.
func Defaults(app string, port int) Config {
	vip := strings.ToLower(app)
	return Config{
		AppName: app, Port: port, VIPAddress: vip, SecureVIPAddress: vip,
		Protocol:   ProtocolHTTP,
		Management: ManagementConfig{Port: port, Scheme: "http", BasePath: DefaultManagementBasePath},
		Health: HealthConfig{Type: HealthTCP, Port: port, Period: DefaultHealthPeriod, Timeout: DefaultHealthTimeout,
			FailureThreshold: DefaultFailureThreshold, SuccessThreshold: DefaultSuccessThreshold},
		RenewalInterval: DefaultRenewalInterval,
		LeaseDuration:   DefaultLeaseDuration,
		RequestTimeout:  DefaultRequestTimeout,
		RetryMax:        DefaultRetryMax,
		ShutdownTimeout: DefaultShutdownTimeout,
		ListenAddr:      DefaultListenAddr,
		LogLevel:        DefaultLogLevel,
	}
}

// ParseEnv reads a Config from the environment variables of env.go through
// lookup (os.LookupEnv in the binary), fills what is unset from Defaults,
// and validates it. The first bad value is returned as a *ConfigError.
// ParseEnv(LookupIn(c.Env())) is c for every c that ParseEnv returns.
func ParseEnv(lookup func(string) (string, bool)) (Config, error) {
	p := envParser{lookup: lookup}
	app, port := p.required(EnvAppName), p.port(EnvPort, true)
	d := Defaults(app, port)
	cfg := Config{
		PodName:          p.required(EnvPodName),
		PodNamespace:     p.required(EnvPodNamespace),
		PodUID:           p.required(EnvPodUID),
		PodIP:            p.required(EnvPodIP),
		NodeName:         p.optional(EnvNodeName, ""),
		AppName:          app,
		VIPAddress:       p.optional(EnvVIPAddress, d.VIPAddress),
		SecureVIPAddress: p.optional(EnvSecureVIPAddress, d.SecureVIPAddress),
		Port:             port,
		SecurePort:       p.port(EnvSecurePort, false),
		EurekaURLs:       p.urls(EnvEurekaURLs),
		Username:         p.optional(EnvEurekaUsername, ""),
		Password:         p.optional(EnvEurekaPassword, ""),
		Metadata:         p.metadata(EnvMetadata),
		ClusterID:        p.optional(EnvClusterID, ""),
		Syncer:           p.optional(EnvSyncer, ""),
		UsernameFile:     p.optional(EnvEurekaUsernameFile, ""),
		PasswordFile:     p.optional(EnvEurekaPasswordFile, ""),
		CAFile:           p.optional(EnvEurekaCAFile, ""),
		ClientCertFile:   p.optional(EnvEurekaClientCertFile, ""),
		ClientKeyFile:    p.optional(EnvEurekaClientKeyFile, ""),
		GatewayTokenFile: p.optional(EnvGatewayTokenFile, ""),
		Protocol:         strings.ToLower(p.optional(EnvProtocol, d.Protocol)),
		Management: ManagementConfig{
			Port:     p.port(EnvManagementPort, false),
			Scheme:   strings.ToLower(p.optional(EnvManagementScheme, d.Management.Scheme)),
			BasePath: p.optional(EnvManagementBasePath, d.Management.BasePath),
		},
		Health: HealthConfig{
			Type:             strings.ToLower(p.optional(EnvHealthType, d.Health.Type)),
			Scheme:           strings.ToLower(p.optional(EnvHealthScheme, "")),
			Path:             p.optional(EnvHealthPath, ""),
			Port:             p.port(EnvHealthPort, false),
			Period:           p.duration(EnvHealthPeriod, d.Health.Period),
			Timeout:          p.duration(EnvHealthTimeout, d.Health.Timeout),
			FailureThreshold: p.count(EnvHealthFailureThreshold, d.Health.FailureThreshold),
			SuccessThreshold: p.count(EnvHealthSuccessThreshold, d.Health.SuccessThreshold),
		},
		TrafficFile:     p.optional(EnvTrafficFile, ""),
		ZoneFile:        p.optional(EnvZoneFile, ""),
		RenewalInterval: p.duration(EnvLeaseRenewalInterval, d.RenewalInterval),
		LeaseDuration:   p.duration(EnvLeaseDuration, d.LeaseDuration),
		RequestTimeout:  p.duration(EnvRequestTimeout, d.RequestTimeout),
		RetryMax:        p.duration(EnvRetryMax, d.RetryMax),
		ShutdownTimeout: p.duration(EnvShutdownTimeout, d.ShutdownTimeout),
		ListenAddr:      p.optional(EnvListenAddr, d.ListenAddr),
		LogLevel:        p.optional(EnvLogLevel, d.LogLevel),
	}
	if p.err != nil {
		return Config{}, p.err
	}
	if cfg.Health.Port == 0 {
		cfg.Health.Port = cfg.Port
	}
	if cfg.Management.Port == 0 {
		cfg.Management.Port = cfg.Port
	}
	if cfg.Health.Type == HealthHTTP && cfg.Health.Scheme == "" {
		cfg.Health.Scheme = "http"
	}
	return cfg, cfg.Validate()
}

// identityPlaceholders stand in for the pod's identity, which the kubelet
// fills from the downward API when the registrar starts.
var identityPlaceholders = []EnvVar{
	{Name: EnvPodName, Value: "pod"},
	{Name: EnvPodNamespace, Value: "namespace"},
	{Name: EnvPodUID, Value: "uid"},
	{Name: EnvPodIP, Value: "192.0.2.1"},
}

// ParseInjected reads the settings a registrar is given before it runs:
// the literal variables of its container (the webhook's rendering), with
// placeholders for the pod's identity, which only the kubelet knows. The
// webhook checks what it renders with it, so that a setting the registrar
// would refuse never reaches a container; the reconciler reads running
// pods' settings with it.
func ParseInjected(literal []EnvVar) (Config, error) {
	env := make([]EnvVar, 0, len(identityPlaceholders)+len(literal))
	env = append(append(env, identityPlaceholders...), literal...) // the literal values, after them, win
	return ParseEnv(LookupIn(env))
}

// Env renders c as the registrar's environment, in the order of env.go,
// leaving out what is empty (zero): ParseEnv reads it back as c. The webhook
// leaves the pod's identity empty and adds it itself as downward-API
// variables; it sets the credentials as files, never as values.
func (c *Config) Env() []EnvVar {
	env := make([]EnvVar, 0, 32)
	add := func(name, value string) {
		if value != "" {
			env = append(env, EnvVar{Name: name, Value: value})
		}
	}
	number := func(n int) string {
		if n == 0 {
			return ""
		}
		return strconv.Itoa(n)
	}
	duration := func(d time.Duration) string {
		if d == 0 {
			return ""
		}
		return d.String()
	}
	add(EnvPodName, c.PodName)
	add(EnvPodNamespace, c.PodNamespace)
	add(EnvPodUID, c.PodUID)
	add(EnvPodIP, c.PodIP)
	add(EnvNodeName, c.NodeName)
	add(EnvAppName, c.AppName)
	add(EnvVIPAddress, c.VIPAddress)
	add(EnvPort, number(c.Port))
	add(EnvSecurePort, number(c.SecurePort))
	add(EnvSecureVIPAddress, c.SecureVIPAddress)
	add(EnvEurekaURLs, strings.Join(c.EurekaURLs, ","))
	add(EnvEurekaUsername, c.Username)
	add(EnvEurekaPassword, c.Password)
	if len(c.Metadata) > 0 {
		raw, err := json.Marshal(c.Metadata)
		if err != nil { // strings only: cannot happen
			panic(fmt.Sprintf("encode metadata: %v", err))
		}
		add(EnvMetadata, string(raw))
	}
	add(EnvClusterID, c.ClusterID)
	add(EnvSyncer, c.Syncer)
	add(EnvProtocol, c.Protocol)
	add(EnvManagementPort, number(c.Management.Port))
	add(EnvManagementScheme, c.Management.Scheme)
	add(EnvManagementBasePath, c.Management.BasePath)
	add(EnvEurekaUsernameFile, c.UsernameFile)
	add(EnvEurekaPasswordFile, c.PasswordFile)
	add(EnvEurekaCAFile, c.CAFile)
	add(EnvEurekaClientCertFile, c.ClientCertFile)
	add(EnvEurekaClientKeyFile, c.ClientKeyFile)
	add(EnvGatewayTokenFile, c.GatewayTokenFile)
	add(EnvHealthType, c.Health.Type)
	add(EnvHealthScheme, c.Health.Scheme)
	add(EnvHealthPath, c.Health.Path)
	add(EnvHealthPort, number(c.Health.Port))
	add(EnvHealthPeriod, duration(c.Health.Period))
	add(EnvHealthTimeout, duration(c.Health.Timeout))
	add(EnvHealthFailureThreshold, number(c.Health.FailureThreshold))
	add(EnvHealthSuccessThreshold, number(c.Health.SuccessThreshold))
	add(EnvTrafficFile, c.TrafficFile)
	add(EnvZoneFile, c.ZoneFile)
	add(EnvLeaseRenewalInterval, duration(c.RenewalInterval))
	add(EnvLeaseDuration, duration(c.LeaseDuration))
	add(EnvRequestTimeout, duration(c.RequestTimeout))
	add(EnvRetryMax, duration(c.RetryMax))
	add(EnvShutdownTimeout, duration(c.ShutdownTimeout))
	add(EnvLogLevel, c.LogLevel)
	add(EnvListenAddr, c.ListenAddr)
	return env
}

// Environ renders c for os/exec: NAME=value lines.
func (c *Config) Environ() []string {
	env := c.Env()
	out := make([]string, len(env))
	for i, e := range env {
		out[i] = e.Name + "=" + e.Value
	}
	return out
}

// LookupIn looks names up in env, the way os.LookupEnv looks them up in the
// process environment; the last of repeated names wins, as in a container.
func LookupIn(env []EnvVar) func(string) (string, bool) {
	return func(name string) (string, bool) {
		for i := len(env) - 1; i >= 0; i-- {
			if env[i].Name == name {
				return env[i].Value, true
			}
		}
		return "", false
	}
}

// Validate checks the values that ParseEnv cannot check one by one.
func (c *Config) Validate() error {
	switch {
	case c.Health.Type != HealthHTTP && c.Health.Type != HealthTCP:
		return &ConfigError{EnvHealthType, c.Health.Type, "want http or tcp"}
	case c.Health.Type == HealthHTTP && !strings.HasPrefix(c.Health.Path, "/"):
		return &ConfigError{EnvHealthPath, c.Health.Path, "an http health check needs a path starting with /"}
	case (c.Health.Type == HealthHTTP || c.Health.Scheme != "") && c.Health.Scheme != "http" && c.Health.Scheme != "https":
		return &ConfigError{EnvHealthScheme, c.Health.Scheme, "want HTTP or HTTPS"}
	case c.Protocol != ProtocolHTTP && c.Protocol != ProtocolTCP:
		return &ConfigError{EnvProtocol, c.Protocol, "want http or tcp"}
	case c.Management.Scheme != "http" && c.Management.Scheme != "https":
		return &ConfigError{EnvManagementScheme, c.Management.Scheme, "want http or https"}
	case !ValidManagementBasePath(c.Management.BasePath):
		return &ConfigError{EnvManagementBasePath, c.Management.BasePath, "want a URL path starting with /, such as /actuator"}
	case c.LeaseDuration <= c.RenewalInterval:
		return &ConfigError{EnvLeaseDuration, c.LeaseDuration.String(), "must be longer than " + EnvLeaseRenewalInterval + " (" + c.RenewalInterval.String() + ")"}
	case c.UsernameFile != "" && c.PasswordFile == "":
		return &ConfigError{EnvEurekaPasswordFile, "", "is required with " + EnvEurekaUsernameFile}
	case c.PasswordFile != "" && c.UsernameFile == "":
		return &ConfigError{EnvEurekaUsernameFile, "", "is required with " + EnvEurekaPasswordFile}
	case c.ClientCertFile != "" && c.ClientKeyFile == "":
		return &ConfigError{EnvEurekaClientKeyFile, "", "is required with " + EnvEurekaClientCertFile}
	case c.ClientKeyFile != "" && c.ClientCertFile == "":
		return &ConfigError{EnvEurekaClientCertFile, "", "is required with " + EnvEurekaClientKeyFile}
	}
	return nil
}

// ValidManagementBasePath is true for a URL path starting with / and
// without spaces, '?' or '#', which the registrar appends the actuator's
// endpoints to. The webhook checks the annotation with it and the CRD's
// pattern for spec.management.basePath says the same.
func ValidManagementBasePath(p string) bool {
	return strings.HasPrefix(p, "/") && !strings.ContainsAny(p, " ?#")
}

// envParser reads variables and keeps the first error, so ParseEnv reads
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
	if err != nil || n < 1 || n > math.MaxInt32 {
		p.fail(name, v, "want a whole number from 1 to 2147483647")
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
		if err := eureka.CheckServerURL(raw); err != nil {
			p.fail(name, eureka.Redact(raw), "comma-separated Eureka server URLs: "+err.Error())
			return nil
		}
		out = append(out, raw)
	}
	if len(out) == 0 && v != "" {
		p.fail(name, eureka.Redact(v), "want at least one Eureka server URL")
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
	if len(m) == 0 {
		return nil
	}
	return m
}
