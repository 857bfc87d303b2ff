package sidecar

// Environment variables of the registrar container. The webhook renders them
// with Config.Env and cmd/registrar reads them with ParseEnv (config.go);
// this list is the whole contract between the two. Durations are Go
// durations ("30s"); lists are comma-separated.
const (
	// From the downward API: the pod knows itself, the webhook never guesses.
	EnvPodName      = "EUREKUBE_POD_NAME"      // fieldRef metadata.name
	EnvPodNamespace = "EUREKUBE_POD_NAMESPACE" // fieldRef metadata.namespace
	EnvPodUID       = "EUREKUBE_POD_UID"       // fieldRef metadata.uid
	EnvPodIP        = "EUREKUBE_POD_IP"        // fieldRef status.podIP
	EnvNodeName     = "EUREKUBE_NODE_NAME"     // fieldRef spec.nodeName

	// Resolved by the webhook from the syncer, the pod annotations and the
	// manager's defaults.
	EnvAppName          = "EUREKUBE_APP_NAME"
	EnvVIPAddress       = "EUREKUBE_VIP_ADDRESS"
	EnvSecureVIPAddress = "EUREKUBE_SECURE_VIP_ADDRESS"
	EnvPort             = "EUREKUBE_PORT"        // number, 1-65535
	EnvSecurePort       = "EUREKUBE_SECURE_PORT" // number, optional
	EnvEurekaURLs       = "EUREKUBE_EUREKA_URLS"
	EnvEurekaUsername   = "EUREKUBE_EUREKA_USERNAME" // secretKeyRef; pods injected before the files
	EnvEurekaPassword   = "EUREKUBE_EUREKA_PASSWORD" // secretKeyRef; pods injected before the files
	EnvMetadata         = "EUREKUBE_METADATA"        // JSON object of strings
	EnvClusterID        = "EUREKUBE_CLUSTER_ID"
	EnvSyncer           = "EUREKUBE_SYNCER"

	// What the registered port speaks: "http" (home, status page and health
	// check URLs registered) or "tcp" (none).
	EnvProtocol = "EUREKUBE_PROTOCOL"
	// Where an HTTP app's actuator answers: the status page and health
	// check URLs point at it (see instance.go).
	EnvManagementPort     = "EUREKUBE_MANAGEMENT_PORT"      // number; default: the registered port
	EnvManagementScheme   = "EUREKUBE_MANAGEMENT_SCHEME"    // "http" or "https"
	EnvManagementBasePath = "EUREKUBE_MANAGEMENT_BASE_PATH" // default /actuator

	EnvHealthType             = "EUREKUBE_HEALTH_TYPE"   // "http" or "tcp"
	EnvHealthScheme           = "EUREKUBE_HEALTH_SCHEME" // "HTTP" or "HTTPS"
	EnvHealthPath             = "EUREKUBE_HEALTH_PATH"
	EnvHealthPort             = "EUREKUBE_HEALTH_PORT"
	EnvHealthPeriod           = "EUREKUBE_HEALTH_PERIOD"
	EnvHealthTimeout          = "EUREKUBE_HEALTH_TIMEOUT"
	EnvHealthFailureThreshold = "EUREKUBE_HEALTH_FAILURE_THRESHOLD"
	EnvHealthSuccessThreshold = "EUREKUBE_HEALTH_SUCCESS_THRESHOLD"

	// Files of a volume the webhook mounts into the registrar only (see
	// files.go): the basic-auth credentials, the CA bundle trusted for
	// https URLs, and a client certificate and its key for servers that
	// demand mutual TLS. Files, not variables, because the kubelet updates
	// a mounted Secret when it changes and the registrar reads it again:
	// a rotated password reaches running pods. When the username file is
	// set, EnvEurekaUsername and EnvEurekaPassword are not read.
	EnvEurekaUsernameFile   = "EUREKUBE_EUREKA_USERNAME_FILE"
	EnvEurekaPasswordFile   = "EUREKUBE_EUREKA_PASSWORD_FILE"
	EnvEurekaCAFile         = "EUREKUBE_EUREKA_CA_FILE"
	EnvEurekaClientCertFile = "EUREKUBE_EUREKA_CLIENT_CERT_FILE"
	EnvEurekaClientKeyFile  = "EUREKUBE_EUREKA_CLIENT_KEY_FILE"

	// A file holding the pod's projected ServiceAccount token for
	// Eurekube's gateway (its audience the manager's --gateway-audience),
	// sent as Authorization: Bearer with every request that carries no
	// basic-auth credentials. The kubelet rotates it (at 80 % of its
	// lifetime); the registrar reads it again when a stat shows it changed
	// (TokenFromFile, files.go).
	EnvGatewayTokenFile = "EUREKUBE_GATEWAY_TOKEN_FILE"

	// A file holding the pod's eurekube.io/traffic annotation (a
	// downward-API volume): Standby registers OUT_OF_SERVICE.
	EnvTrafficFile = "EUREKUBE_TRAFFIC_FILE"
	// A file holding the pod's topology.kubernetes.io/zone label (a
	// downward-API volume), registered as metadata zone; read before every
	// registration, the instance registered again when it changes.
	EnvZoneFile = "EUREKUBE_ZONE_FILE"

	EnvLeaseRenewalInterval = "EUREKUBE_LEASE_RENEWAL_INTERVAL"
	EnvLeaseDuration        = "EUREKUBE_LEASE_DURATION"

	// The registrar's own /healthz and /metrics, e.g. ":9901".
	EnvListenAddr = "EUREKUBE_LISTEN_ADDR"
	// How long the cancel on SIGTERM may take before the registrar exits.
	EnvShutdownTimeout = "EUREKUBE_SHUTDOWN_TIMEOUT"
	// Log level: debug, info, warn, error.
	EnvLogLevel = "EUREKUBE_LOG_LEVEL"
)

// DefaultListenPort is the registrar's health and metrics port.
const DefaultListenPort = 9901

// Tuning knobs that no syncer sets: the webhook renders their defaults.
const (
	// EnvRequestTimeout bounds one request to one Eureka server (default 5s).
	EnvRequestTimeout = "EUREKUBE_REQUEST_TIMEOUT"
	// EnvRetryMax caps the backoff between attempts while Eureka is
	// unreachable (default 30s).
	EnvRetryMax = "EUREKUBE_RETRY_MAX"
)

// EnvNames lists every variable above, for tools that map them to flags.
func EnvNames() []string {
	return []string{
		EnvPodName, EnvPodNamespace, EnvPodUID, EnvPodIP, EnvNodeName,
		EnvAppName, EnvVIPAddress, EnvSecureVIPAddress, EnvPort, EnvSecurePort,
		EnvEurekaURLs, EnvEurekaUsername, EnvEurekaPassword, EnvMetadata, EnvClusterID, EnvSyncer,
		EnvProtocol, EnvManagementPort, EnvManagementScheme, EnvManagementBasePath,
		EnvEurekaUsernameFile, EnvEurekaPasswordFile, EnvEurekaCAFile, EnvEurekaClientCertFile, EnvEurekaClientKeyFile, EnvGatewayTokenFile,
		EnvHealthType, EnvHealthScheme, EnvHealthPath, EnvHealthPort, EnvHealthPeriod, EnvHealthTimeout,
		EnvHealthFailureThreshold, EnvHealthSuccessThreshold, EnvTrafficFile, EnvZoneFile,
		EnvLeaseRenewalInterval, EnvLeaseDuration, EnvListenAddr, EnvShutdownTimeout, EnvLogLevel,
		EnvRequestTimeout, EnvRetryMax,
	}
}
