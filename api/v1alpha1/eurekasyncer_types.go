package v1alpha1

import (
	"cmp"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// EurekaSyncerSpec says which pods (or which Service) of the namespace are
// registered in Eureka, and how.
// +kubebuilder:validation:XValidation:rule="!has(self.securePort) || self.securePort != self.port",message="securePort must differ from port",fieldPath=".securePort"
// +kubebuilder:validation:XValidation:rule="self.mode != 'Pod' || (has(self.selector) && ((has(self.selector.matchLabels) && size(self.selector.matchLabels) > 0) || (has(self.selector.matchExpressions) && size(self.selector.matchExpressions) > 0)))",message="selector must not be empty in Pod mode: set matchLabels or matchExpressions (an empty selector would register every pod of the namespace)",fieldPath=".selector"
// +kubebuilder:validation:XValidation:rule="self.mode == 'Service' ? has(self.service) : !has(self.service)",message="service is required in Service mode and not allowed in Pod mode",fieldPath=".service"
// +kubebuilder:validation:XValidation:rule="self.mode != 'Service' || !has(self.selector) || ((!has(self.selector.matchLabels) || size(self.selector.matchLabels) == 0) && (!has(self.selector.matchExpressions) || size(self.selector.matchExpressions) == 0))",message="selector is not allowed in Service mode: the Service's own selector picks the pods",fieldPath=".selector"
// +kubebuilder:validation:XValidation:rule="self.mode != 'Service' || (!has(self.healthCheck) && (!has(self.drain) || !has(self.drain.preStopSleepSeconds)) && (!has(self.sidecar) || (!has(self.sidecar.image) && !has(self.sidecar.resources))) && !has(self.securePort) && (!has(self.management) || !has(self.management.port)))",message="healthCheck, drain, sidecar, securePort and management.port apply to Pod mode only: in Service mode no sidecar is injected, health is the Service's ready endpoints, and only port is registered, the actuator answering on it"
// +kubebuilder:validation:XValidation:rule="self.mode == oldSelf.mode",message="mode cannot change: the pods of a Pod-mode syncer run registrars a Service-mode one would leave unattended; delete the syncer (it detaches cleanly) and create it again in the other mode",fieldPath=".mode"
type EurekaSyncerSpec struct {
	// Mode is what is registered: Pod (each selected pod, by the registrar
	// sidecar injected into it) or Service (the Service named by service,
	// by the manager, at an address VMs can reach).
	// +optional
	// +kubebuilder:default=Pod
	Mode Mode `json:"mode,omitempty"`

	// Traffic says whether this cluster's instances take traffic: Serve, or
	// Standby, which keeps them registered but OUT_OF_SERVICE (Eureka's
	// status override) so that callers stay on the instances elsewhere.
	// Switching back to Standby is the rollback.
	// +optional
	// +kubebuilder:default=Serve
	Traffic Traffic `json:"traffic,omitempty"`

	// Selector picks the pods of this namespace to register (Pod mode). It
	// must not be empty: an empty selector would register every pod of the
	// namespace. Not allowed in Service mode.
	// +optional
	Selector metav1.LabelSelector `json:"selector,omitempty"`

	// Service names the Service to register (Service mode only).
	// +optional
	Service *ServiceTarget `json:"service,omitempty"`

	// AppName is the Eureka application name (Eureka upper-cases it).
	// Defaults to the syncer's name.
	// +optional
	// +kubebuilder:validation:MaxLength=128
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?$`
	AppName string `json:"appName,omitempty"`

	// VIPAddress is the virtual address Spring Cloud clients discover the
	// service by. Defaults to the lower-cased application name.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9]([A-Za-z0-9._,-]*[A-Za-z0-9])?$`
	VIPAddress string `json:"vipAddress,omitempty"`

	// SecureVIPAddress is the virtual address for the secure port. Defaults
	// to the lower-cased application name.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9]([A-Za-z0-9._,-]*[A-Za-z0-9])?$`
	SecureVIPAddress string `json:"secureVipAddress,omitempty"`

	// Port is the container port to register, by number (1-65535) or by the
	// name of a container port of the pod. In Service mode it is the
	// Service's port, by number or name.
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:XValidation:rule="type(self) == int ? (self >= 1 && self <= 65535) : self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?$') && size(self) <= 15",message="port must be a number from 1 to 65535 or a container port name (lower-case letters, digits and '-', at most 15 characters)"
	Port intstr.IntOrString `json:"port"`

	// SecurePort is an optional TLS port to register beside Port, by number
	// or name. Spring clients use it only when it is registered enabled.
	// +optional
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:XValidation:rule="type(self) == int ? (self >= 1 && self <= 65535) : self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?$') && size(self) <= 15",message="securePort must be a number from 1 to 65535 or a container port name (lower-case letters, digits and '-', at most 15 characters)"
	SecurePort *intstr.IntOrString `json:"securePort,omitempty"`

	// Eureka says which Eureka servers to register with. Defaults come from
	// the manager's flags.
	// +optional
	Eureka EurekaServers `json:"eureka,omitempty"`

	// Metadata is copied into every instance's Eureka metadata (for example
	// zone or version). Keys starting with eurekube.io/ are reserved.
	// +optional
	// +kubebuilder:validation:MaxProperties=64
	// +kubebuilder:validation:XValidation:rule="self.all(k, k.matches('^[A-Za-z_][A-Za-z0-9_.-]*$') && size(k) <= 128)",message="metadata keys must start with a letter or '_' and hold only letters, digits, '_', '.' and '-' (at most 128 characters); eurekube.io/ keys are reserved"
	// +kubebuilder:validation:XValidation:rule="self.all(k, size(self[k]) <= 1024)",message="metadata values must be at most 1024 characters"
	Metadata map[string]string `json:"metadata,omitempty"`

	// HealthCheck decides UP and DOWN. Defaults to the app container's
	// readinessProbe (httpGet, tcpSocket, or a TCP check of a grpc probe's
	// port), else a TCP check of Port.
	// +optional
	HealthCheck *HealthCheck `json:"healthCheck,omitempty"`

	// Protocol is what the registered port speaks. HTTP instances carry
	// home page, status page and health check URLs, which Spring Boot Admin
	// and the Eureka dashboard follow; TCP instances (gRPC, databases, any
	// other protocol) carry none. Defaults to TCP when the registered
	// container port's name (in Service mode: the Service port's name or
	// appProtocol) is grpc, tcp or tls, or starts with one of them and '-'
	// (as Istio names ports), or when the app container's readinessProbe is
	// a gRPC one; else HTTP.
	// +optional
	Protocol Protocol `json:"protocol,omitempty"`

	// Management is where an HTTP app's Spring Boot Actuator answers: the
	// instances' status page URL is its /info and their health check URL
	// its /health, and, as Spring Cloud's own client registers them, their
	// metadata carries management.port and management.context-path when
	// the actuator has a port of its own. Defaults come from the health
	// check (the app container's readinessProbe, such as an httpGet of
	// /actuator/health/readiness on port management). In Service mode only
	// basePath applies: the actuator answers on the registered port.
	// +optional
	Management *Management `json:"management,omitempty"`

	// Lease is the heartbeat contract with Eureka.
	// +optional
	// +kubebuilder:default={}
	Lease Lease `json:"lease,omitempty"`

	// Drain is how the app leaves traffic when its pod terminates.
	// +optional
	Drain Drain `json:"drain,omitempty"`

	// Sidecar overrides the manager's defaults for the registrar container.
	// +optional
	Sidecar Sidecar `json:"sidecar,omitempty"`
}

// Protocol is what an instance's port speaks.
// +kubebuilder:validation:Enum=HTTP;TCP
type Protocol string

// Protocols.
const (
	ProtocolHTTP Protocol = "HTTP"
	ProtocolTCP  Protocol = "TCP"
)

// Management is where the app's Spring Boot Actuator answers.
type Management struct {
	// Port of the actuator, by number or container port name (Spring's
	// management.server.port). Defaults to the health check's port when
	// the health check is an HTTP one, else the registered port.
	// +optional
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:XValidation:rule="type(self) == int ? (self >= 1 && self <= 65535) : self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?$') && size(self) <= 15",message="management.port must be a number from 1 to 65535 or a container port name"
	Port *intstr.IntOrString `json:"port,omitempty"`

	// BasePath of the actuator's endpoints, such as /actuator (Spring's
	// management.server.base-path followed by
	// management.endpoints.web.base-path). Defaults to what precedes
	// /health in an HTTP health check's path (/actuator/health/readiness:
	// /actuator), else /actuator.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	// +kubebuilder:validation:Pattern=`^/[^\s?#]*$`
	BasePath string `json:"basePath,omitempty"`
}

// Mode is what a syncer registers.
// +kubebuilder:validation:Enum=Pod;Service
type Mode string

// Modes.
const (
	ModePod     Mode = "Pod"
	ModeService Mode = "Service"
)

// Traffic says whether a syncer's instances take traffic.
// +kubebuilder:validation:Enum=Serve;Standby
type Traffic string

// Traffic states.
const (
	TrafficServe   Traffic = "Serve"
	TrafficStandby Traffic = "Standby"
)

// ServiceAddressType is how VMs reach a Service.
// +kubebuilder:validation:Enum=Auto;LoadBalancer;NodePort;ClusterIP
type ServiceAddressType string

// Service address types.
const (
	// AddressAuto: the explicit address if set, else the load balancer's
	// ingress, else the NodePort on every ready node.
	AddressAuto         ServiceAddressType = "Auto"
	AddressLoadBalancer ServiceAddressType = "LoadBalancer"
	AddressNodePort     ServiceAddressType = "NodePort"
	// AddressClusterIP is for networks where VMs route to ClusterIPs; only
	// the user can know, so it is never chosen by Auto.
	AddressClusterIP ServiceAddressType = "ClusterIP"
)

// ServiceTarget names the Service a Service-mode syncer registers and how
// VMs reach it.
// +kubebuilder:validation:XValidation:rule="!has(self.address) || self.addressType == 'Auto'",message="address and addressType contradict each other: an explicit address is used as it is, so leave addressType Auto"
type ServiceTarget struct {
	// Name of a Service of this namespace.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z]([-a-z0-9]*[a-z0-9])?$`
	Name string `json:"name"`

	// AddressType says which of the Service's addresses is registered.
	// +optional
	// +kubebuilder:default=Auto
	AddressType ServiceAddressType `json:"addressType,omitempty"`

	// Address is an IP or DNS name VMs use to reach the Service (for
	// example an external load balancer's), registered with the Service's
	// port instead of any address the Service publishes.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9]([A-Za-z0-9.:-]*[A-Za-z0-9])?$`
	Address string `json:"address,omitempty"`
}

// EurekaServers names the Eureka servers and the credentials to use.
type EurekaServers struct {
	// ServiceURLs are the Eureka servers' base URLs, such as
	// http://eureka:8761/eureka. The registrar fails over across them in
	// order. Defaults to the manager's --eureka-url flags. A URL carries no
	// credentials (user:password@): they come from CredentialsSecretRef;
	// and no query (?) or fragment (#): requests are the URL followed by a
	// path. Spellings of one server (case, default port, trailing slash)
	// share one registry read.
	// +optional
	// +kubebuilder:validation:MaxItems=10
	// +kubebuilder:validation:items:MaxLength=2048
	// +kubebuilder:validation:XValidation:rule="self.all(u, isURL(u) && (url(u).getScheme() == 'http' || url(u).getScheme() == 'https') && url(u).getHostname() != '')",message="every serviceURL must be an absolute http:// or https:// URL with a host, such as http://eureka:8761/eureka"
	// +kubebuilder:validation:XValidation:rule="self.all(u, !u.matches('^[^:/?#]*://[^/?#]*@'))",message="serviceURLs must not carry credentials (user:password@): put them in a Secret named by spec.eureka.credentialsSecretRef"
	// +kubebuilder:validation:XValidation:rule="self.all(u, !u.contains(','))",message="serviceURLs must not contain a comma, which separates the registrar's URLs: write it %2C"
	// +kubebuilder:validation:XValidation:rule="self.all(u, !u.contains('?') && !u.contains('#'))",messageExpression="'serviceURL' + self.filter(u, u.contains('?') || u.contains('#')).map(u, u.contains('@') ? '' : ' ' + u)[0] + ' must not carry a query (?) or a fragment (#): requests are the base URL followed by a path, so write the base URL alone, such as http://eureka:8761/eureka'"
	ServiceURLs []string `json:"serviceURLs,omitempty"`

	// CredentialsSecretRef names a Secret of this namespace with the keys
	// username and password for HTTP basic auth. The Secret must consent
	// with the label eurekube.io/eureka-credentials=true, or the manager
	// sends nothing of it (the EurekaReachable condition says how to add
	// it). The registrar receives them as files of a volume mounted into it
	// alone, never as environment variables, and reads them again when the
	// Secret changes; the manager reads the Secret again within five
	// minutes, and at once after Eureka refuses it.
	// +optional
	CredentialsSecretRef *corev1.LocalObjectReference `json:"credentialsSecretRef,omitempty"`

	// TLS names the CA bundle trusted for https serviceURLs (a private CA)
	// and the client certificate for servers that demand mutual TLS. Both
	// reach the registrar as mounted files, read again when they change.
	// +optional
	TLS *EurekaTLS `json:"tls,omitempty"`

	// ExpectedRenewalIntervalSeconds is the renewal interval the Eureka
	// servers expect of their clients (the server's
	// eureka.server.expected-client-renewal-interval-seconds, 30 unless
	// changed there). Their self-preservation counts on it: the LeaseSafe
	// condition says when lease.renewalIntervalSeconds differs, and what
	// that does. Defaults to 30.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=300
	ExpectedRenewalIntervalSeconds int32 `json:"expectedRenewalIntervalSeconds,omitempty"`
}

// EurekaTLS is how the registrar and the manager trust the Eureka servers
// and prove who they are to them.
// +kubebuilder:validation:XValidation:rule="has(self.caBundleRef) || has(self.clientCertificateSecretRef)",message="tls needs caBundleRef, clientCertificateSecretRef or both"
type EurekaTLS struct {
	// CABundleRef names the PEM CA certificates trusted for https
	// serviceURLs, in place of the system's.
	// +optional
	CABundleRef *CABundleRef `json:"caBundleRef,omitempty"`

	// ClientCertificateSecretRef names a kubernetes.io/tls Secret of this
	// namespace (keys tls.crt and tls.key) presented to servers that ask
	// for a client certificate.
	// +optional
	ClientCertificateSecretRef *corev1.LocalObjectReference `json:"clientCertificateSecretRef,omitempty"`
}

// CABundleKind is the kind of object holding a CA bundle.
// +kubebuilder:validation:Enum=ConfigMap;Secret
type CABundleKind string

// CA bundle kinds.
const (
	CABundleConfigMap CABundleKind = "ConfigMap"
	CABundleSecret    CABundleKind = "Secret"
)

// DefaultCABundleKey is the key of a CA bundle when caBundleRef names none,
// as cert-manager and trust-manager write it.
const DefaultCABundleKey = "ca.crt"

// CABundleRef names one key of a ConfigMap or Secret of the syncer's
// namespace.
type CABundleRef struct {
	// Kind is ConfigMap or Secret.
	// +optional
	// +kubebuilder:default=ConfigMap
	Kind CABundleKind `json:"kind,omitempty"`

	// Name of the ConfigMap or Secret.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	Name string `json:"name"`

	// Key holding the PEM certificates.
	// +optional
	// +kubebuilder:default="ca.crt"
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[-._a-zA-Z0-9]+$`
	Key string `json:"key,omitempty"`
}

// EffectiveKey is the key of the bundle, ca.crt unless one is named.
func (r *CABundleRef) EffectiveKey() string {
	if r.Key == "" {
		return DefaultCABundleKey
	}
	return r.Key
}

// EffectiveKind is the kind of the bundle's object, ConfigMap unless one is
// named.
func (r *CABundleRef) EffectiveKind() CABundleKind {
	if r.Kind == "" {
		return CABundleConfigMap
	}
	return r.Kind
}

// ReadObject is a Secret or ConfigMap of a syncer's namespace that the
// manager reads for it.
// +kubebuilder:object:generate=false
type ReadObject struct {
	Kind     string // Secret or ConfigMap
	Resource string // secrets or configmaps, for an authorization check
	Name     string
	Field    string // the spec field that names it
}

// ReadObjects are the Secrets and ConfigMaps spec.eureka names, which the
// manager must be allowed to get in the syncer's namespace (ReadGrant).
func (e EurekaServers) ReadObjects() []ReadObject {
	var out []ReadObject
	secret := func(name, field string) {
		out = append(out, ReadObject{Kind: "Secret", Resource: "secrets", Name: name, Field: field})
	}
	if ref := e.CredentialsSecretRef; ref != nil && ref.Name != "" {
		secret(ref.Name, "spec.eureka.credentialsSecretRef")
	}
	if e.TLS == nil {
		return out
	}
	if ref := e.TLS.CABundleRef; ref != nil {
		if ref.EffectiveKind() == CABundleSecret {
			secret(ref.Name, "spec.eureka.tls.caBundleRef")
		} else {
			out = append(out, ReadObject{Kind: "ConfigMap", Resource: "configmaps", Name: ref.Name, Field: "spec.eureka.tls.caBundleRef"})
		}
	}
	if ref := e.TLS.ClientCertificateSecretRef; ref != nil && ref.Name != "" {
		secret(ref.Name, "spec.eureka.tls.clientCertificateSecretRef")
	}
	return out
}

// ReadGrant is how a namespace lets the manager get the objects ReadObjects
// lists there: a RoleBinding of the manager's credentials ClusterRole to its
// ServiceAccount. The manager and `eurekube check` both print it.
// +kubebuilder:object:generate=false
type ReadGrant struct {
	// ClusterRole is the manager's --credentials-cluster-role (default
	// EurekaAccessClusterRole; the Helm chart's follows the release name).
	ClusterRole string
	// ServiceAccountNamespace and ServiceAccountName are the manager's;
	// empty ones are printed as placeholders.
	ServiceAccountNamespace, ServiceAccountName string
}

// Command is the kubectl command that grants the read in namespace.
func (g ReadGrant) Command(namespace string) string {
	role := cmp.Or(g.ClusterRole, EurekaAccessClusterRole)
	return fmt.Sprintf("kubectl -n %s create rolebinding %[2]s --clusterrole=%[2]s --serviceaccount=%s:%s", namespace, role,
		cmp.Or(g.ServiceAccountNamespace, "<manager namespace>"), cmp.Or(g.ServiceAccountName, "<manager service account>"))
}

// HealthCheckType is how the registrar probes the app.
// +kubebuilder:validation:Enum=HTTP;TCP
type HealthCheckType string

// Health check types.
const (
	HealthCheckHTTP HealthCheckType = "HTTP"
	HealthCheckTCP  HealthCheckType = "TCP"
)

// HealthCheck is the probe the registrar runs against the app to decide
// whether the instance is UP or DOWN in Eureka.
// +kubebuilder:validation:XValidation:rule="self.type == 'HTTP' ? has(self.path) : !has(self.path)",message="path is required for an HTTP health check and not allowed for a TCP one"
type HealthCheck struct {
	// Type is HTTP (a GET that must answer 2xx or 3xx) or TCP (a connect).
	Type HealthCheckType `json:"type"`

	// Path of the HTTP GET, such as /actuator/health.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	// +kubebuilder:validation:Pattern=`^/`
	Path string `json:"path,omitempty"`

	// Port to probe, by number or container port name. Defaults to the
	// registered port.
	// +optional
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:XValidation:rule="type(self) == int ? (self >= 1 && self <= 65535) : self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?$') && size(self) <= 15",message="healthCheck.port must be a number from 1 to 65535 or a container port name"
	Port *intstr.IntOrString `json:"port,omitempty"`

	// Scheme of the HTTP GET.
	// +optional
	// +kubebuilder:validation:Enum=HTTP;HTTPS
	// +kubebuilder:default=HTTP
	Scheme string `json:"scheme,omitempty"`

	// PeriodSeconds between two probes.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=300
	// +kubebuilder:default=5
	PeriodSeconds int32 `json:"periodSeconds,omitempty"`

	// TimeoutSeconds of one probe.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=60
	// +kubebuilder:default=1
	TimeoutSeconds int32 `json:"timeoutSeconds,omitempty"`

	// FailureThreshold is how many consecutive failures mark the instance
	// DOWN.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	// +kubebuilder:default=3
	FailureThreshold int32 `json:"failureThreshold,omitempty"`

	// SuccessThreshold is how many consecutive successes mark it UP again.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	// +kubebuilder:default=1
	SuccessThreshold int32 `json:"successThreshold,omitempty"`
}

// Lease is how often the registrar renews and how long Eureka keeps an
// instance without renewal.
// +kubebuilder:validation:XValidation:rule="!has(self.durationSeconds) || !has(self.renewalIntervalSeconds) || self.durationSeconds > self.renewalIntervalSeconds",message="lease.durationSeconds must be greater than lease.renewalIntervalSeconds, or the lease would expire between two heartbeats"
type Lease struct {
	// RenewalIntervalSeconds between two heartbeats.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=300
	// +kubebuilder:default=30
	RenewalIntervalSeconds int32 `json:"renewalIntervalSeconds,omitempty"`

	// DurationSeconds Eureka keeps an instance without a heartbeat.
	// +optional
	// +kubebuilder:validation:Minimum=2
	// +kubebuilder:validation:Maximum=3600
	// +kubebuilder:default=90
	DurationSeconds int32 `json:"durationSeconds,omitempty"`
}

// Drain is how long the app keeps serving after its instance is cancelled,
// so that every client cache forgets it before the app stops.
type Drain struct {
	// PreStopSleepSeconds is the preStop sleep injected into the app
	// container; the pod's grace period grows by the same amount. 0 disables
	// the preStop. Defaults to the manager's --default-drain (100 s: server
	// cache 30 s + client fetch 30 s + LoadBalancer cache 35 s + margin).
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=3600
	PreStopSleepSeconds *int32 `json:"preStopSleepSeconds,omitempty"`
}

// Sidecar overrides the registrar container's defaults.
type Sidecar struct {
	// Image of the registrar. Defaults to the manager's --registrar-image.
	// +optional
	// +kubebuilder:validation:MaxLength=512
	Image string `json:"image,omitempty"`

	// Resources of the registrar. Defaults to small requests and limits.
	// +optional
	Resources *corev1.ResourceRequirements `json:"resources,omitempty"`
}

// EurekaSyncerStatus is what the reconciler measured.
type EurekaSyncerStatus struct {
	// ObservedGeneration is the spec generation this status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// AppName is the effective Eureka application name.
	// +optional
	AppName string `json:"appName,omitempty"`

	// Ready is "UP/SELECTED", read like a Deployment's READY: the
	// instances UP in Eureka out of the pods selected (upInstances /
	// selectedPods).
	// +optional
	Ready string `json:"ready,omitempty"`

	// SelectedPods is how many running pods this syncer registers: its
	// selector matches them, and they were injected by this syncer or by
	// none (created before injection was enabled, or opted out). Pods
	// another syncer injected (podsOwnedByOtherSyncers) and pods left
	// without the registrar on purpose (skippedPods) are not counted.
	// +optional
	// +kubebuilder:default=0
	SelectedPods int32 `json:"selectedPods"`

	// InjectedPods is how many selected pods run the registrar.
	// +optional
	// +kubebuilder:default=0
	InjectedPods int32 `json:"injectedPods"`

	// ReadyPods is how many selected pods are ready.
	// +optional
	// +kubebuilder:default=0
	ReadyPods int32 `json:"readyPods"`

	// SkippedPods is how many running pods the selector matches that the
	// webhook left without the registrar on purpose (annotation
	// eurekube.io/status: skipped), for example a Job's pods, which a
	// registrar would keep running forever. status.adaptations says why.
	// +optional
	// +kubebuilder:default=0
	SkippedPods int32 `json:"skippedPods"`

	// PodsOwnedByOtherSyncers is how many running pods the selector matches
	// that another syncer injected: they are registered under that syncer's
	// app, not this one's. The Exclusive condition names the owners.
	// +optional
	// +kubebuilder:default=0
	PodsOwnedByOtherSyncers int32 `json:"podsOwnedByOtherSyncers"`

	// PodsWithoutDrain is how many pods this syncer injected that keep no
	// drain (annotation eurekube.io/drain absent or "0"): they stop serving
	// while callers may still hold their instance. The Drained condition
	// names them.
	// +optional
	// +kubebuilder:default=0
	PodsWithoutDrain int32 `json:"podsWithoutDrain"`

	// OutdatedRegistrarPods is how many running pods this syncer injected
	// run a registrar other than the one the webhook would inject now: an
	// older image (annotation eurekube.io/registrar-image), pods an upgrade
	// of Eurekube left behind, or settings from an older spec (Eureka URLs,
	// app name, port, health check), pods a changed or re-created syncer
	// left behind, until their next rollout. The RegistrarCurrent condition
	// names some and what differs.
	// +optional
	// +kubebuilder:default=0
	OutdatedRegistrarPods int32 `json:"outdatedRegistrarPods"`

	// RegisteredInstances is how many of this cluster's instances of this
	// syncer Eureka lists, whatever their status.
	// +optional
	// +kubebuilder:default=0
	RegisteredInstances int32 `json:"registeredInstances"`

	// UpInstances is how many of those are UP.
	// +optional
	// +kubebuilder:default=0
	UpInstances int32 `json:"upInstances"`

	// DownInstances, OutOfServiceInstances and StartingInstances are how
	// many of registeredInstances Eureka lists with that status.
	// OUT_OF_SERVICE is what Standby (and a lost node) sets.
	// +optional
	// +kubebuilder:default=0
	DownInstances int32 `json:"downInstances"`
	// +optional
	// +kubebuilder:default=0
	OutOfServiceInstances int32 `json:"outOfServiceInstances"`
	// +optional
	// +kubebuilder:default=0
	StartingInstances int32 `json:"startingInstances"`

	// ElsewhereInstances is how many instances of the syncer's app Eureka
	// lists that no Eurekube of this cluster registered: VMs and other
	// clusters. ElsewhereUpInstances is how many of them are UP.
	// +optional
	// +kubebuilder:default=0
	ElsewhereInstances int32 `json:"elsewhereInstances"`
	// +optional
	// +kubebuilder:default=0
	ElsewhereUpInstances int32 `json:"elsewhereUpInstances"`
	// Elsewhere is "UP/TOTAL" of those, for kubectl get.
	// +optional
	Elsewhere string `json:"elsewhere,omitempty"`

	// OtherSyncersInstances counts the instances of the app that other
	// syncers of this cluster registered (namespaces an EurekaAppPolicy
	// shares the app with), whatever their status.
	// +optional
	OtherSyncersInstances int32 `json:"otherSyncersInstances,omitempty"`
	// OtherSyncersUpInstances counts those of OtherSyncersInstances UP.
	// +optional
	OtherSyncersUpInstances int32 `json:"otherSyncersUpInstances,omitempty"`
	// Apps are the Eureka apps this syncer's instances are registered
	// under, when its pods' eurekube.io/app-name annotations add any to
	// appName: the counts, the traffic switch, the hold of a lost node and
	// orphan collection cover them all.
	// +optional
	Apps []string `json:"apps,omitempty"`

	// TrafficTo is where callers' calls to the app go, read from which
	// instances are UP: Here (only this cluster's), Elsewhere (only VMs and
	// other clusters), Both, or Nowhere.
	// +optional
	TrafficTo TrafficTo `json:"trafficTo,omitempty"`

	// ServiceAddresses are the host:port pairs registered for the Service
	// (Service mode).
	// +optional
	ServiceAddresses []string `json:"serviceAddresses,omitempty"`

	// OrphansRemoved counts the instances removed from Eureka because their
	// pod no longer exists.
	// +optional
	OrphansRemoved int64 `json:"orphansRemoved,omitempty"`

	// LastSyncTime is when Eureka was last read successfully.
	// +optional
	LastSyncTime *metav1.Time `json:"lastSyncTime,omitempty"`

	// Adaptations are what the webhook adapted or could not do for the
	// running pods of this syncer (their eurekube.io/adaptations
	// annotation), one entry per reason, sorted by reason.
	// +optional
	// +listType=map
	// +listMapKey=reason
	Adaptations []PodAdaptations `json:"adaptations,omitempty"`

	// Conditions: Synced (Eureka agrees with Kubernetes), EurekaReachable,
	// PodsInjected, Exclusive (no selected pod belongs to another syncer)
	// and Drained (every injected pod keeps serving for a drain).
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// TrafficTo is where the calls to an app go.
type TrafficTo string

// Where calls go.
const (
	TrafficToHere      TrafficTo = "Here"
	TrafficToElsewhere TrafficTo = "Elsewhere"
	TrafficToBoth      TrafficTo = "Both"
	TrafficToNowhere   TrafficTo = "Nowhere"
)

// PodAdaptations is one kind of adaptation and the pods it was made for.
type PodAdaptations struct {
	// Reason is the cause (PreStopComposed, PreStopDropped, DrainDisabled,
	// RegistrarPortMoved, PortNotDeclared, HostNetwork, PodMeantToFinish,
	// or AdaptationsUnreadable when a pod's annotation could not be read).
	// It is also the reason of the syncer's Events and the label of the
	// eurekube_syncer_pod_adaptations metric.
	Reason AdaptationReason `json:"reason"`

	// Pods is how many running pods of this syncer carry it.
	Pods int32 `json:"pods"`

	// Message is what the webhook said for the first of ExamplePods.
	// +optional
	Message string `json:"message,omitempty"`

	// ExamplePods names up to five of those pods, sorted.
	// +optional
	ExamplePods []string `json:"examplePods,omitempty"`
}

// EurekaSyncer registers the selected pods of its namespace in Eureka.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=esync,categories=eurekube
// +kubebuilder:printcolumn:name="App",type=string,JSONPath=`.status.appName`
// +kubebuilder:printcolumn:name="Mode",type=string,JSONPath=`.spec.mode`,priority=1
// +kubebuilder:printcolumn:name="Traffic",type=string,JSONPath=`.spec.traffic`,description="Serve, or Standby (registered but OUT_OF_SERVICE)"
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.ready`,description="Instances UP in Eureka / pods selected"
// +kubebuilder:printcolumn:name="Elsewhere",type=string,JSONPath=`.status.elsewhere`,description="The app's instances UP / registered outside this cluster (VMs, other clusters)"
// +kubebuilder:printcolumn:name="Calls-To",type=string,JSONPath=`.status.trafficTo`,description="Where calls to the app go: Here, Elsewhere, Both or Nowhere"
// +kubebuilder:printcolumn:name="Registered",type=integer,JSONPath=`.status.registeredInstances`,description="This cluster's instances of the syncer in Eureka, whatever their status"
// +kubebuilder:printcolumn:name="Permitted",type=string,JSONPath=`.status.conditions[?(@.type=="Permitted")].status`,description="The platform allows the syncer's app, registrar image and Eureka hosts; False: refused (REASON of -o wide, and the Permitted condition, say why)"
// +kubebuilder:printcolumn:name="Synced",type=string,JSONPath=`.status.conditions[?(@.type=="Synced")].status`,description="Eureka agrees with Kubernetes"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Synced")].reason`,priority=1,description="Why Synced is what it is"
// +kubebuilder:printcolumn:name="Injected",type=integer,JSONPath=`.status.injectedPods`,priority=1
// +kubebuilder:printcolumn:name="Skipped",type=integer,JSONPath=`.status.skippedPods`,priority=1
// +kubebuilder:printcolumn:name="Other-Syncer",type=integer,JSONPath=`.status.podsOwnedByOtherSyncers`,priority=1,description="Selected pods another syncer injected"
// +kubebuilder:printcolumn:name="No-Drain",type=integer,JSONPath=`.status.podsWithoutDrain`,priority=1,description="Injected pods without a drain"
// +kubebuilder:printcolumn:name="Outdated",type=integer,JSONPath=`.status.outdatedRegistrarPods`,priority=1,description="Injected pods running an older registrar image or settings from an older spec (a rollout updates them)"
type EurekaSyncer struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is what the user asks for.
	Spec EurekaSyncerSpec `json:"spec"`
	// Status is what the reconciler measured.
	// +optional
	Status EurekaSyncerStatus `json:"status,omitempty"`
}

// EurekaSyncerList is a list of EurekaSyncers.
// +kubebuilder:object:root=true
type EurekaSyncerList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	// Items are the syncers.
	Items []EurekaSyncer `json:"items"`
}

// EffectiveAppName is the Eureka application name: spec.appName, else the
// syncer's name, upper-cased as Eureka stores it.
func (s *EurekaSyncer) EffectiveAppName() string {
	if s.Spec.AppName != "" {
		return strings.ToUpper(s.Spec.AppName)
	}
	return strings.ToUpper(s.Name)
}

// EffectiveMode is spec.mode, Pod when unset (a syncer stored before the
// field existed).
func (s *EurekaSyncer) EffectiveMode() Mode {
	if s.Spec.Mode == "" {
		return ModePod
	}
	return s.Spec.Mode
}

// EffectiveTraffic is spec.traffic, Serve when unset.
func (s *EurekaSyncer) EffectiveTraffic() Traffic {
	if s.Spec.Traffic == "" {
		return TrafficServe
	}
	return s.Spec.Traffic
}

// DefaultExpectedRenewalIntervalSeconds is the renewal interval a Eureka
// server expects of its clients unless configured otherwise
// (eureka.server.expected-client-renewal-interval-seconds).
const DefaultExpectedRenewalIntervalSeconds = 30

// EffectiveExpectedRenewalInterval is spec.eureka.expectedRenewalIntervalSeconds,
// DefaultExpectedRenewalIntervalSeconds when unset.
func (s *EurekaSyncer) EffectiveExpectedRenewalInterval() time.Duration {
	n := s.Spec.Eureka.ExpectedRenewalIntervalSeconds
	if n == 0 {
		n = DefaultExpectedRenewalIntervalSeconds
	}
	return time.Duration(n) * time.Second
}
