package v1alpha1

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The other direction: a Eureka app served by VMs (or other clusters)
// becomes a Kubernetes Service of the import's namespace, whose
// EndpointSlices hold the app's instances, so that callers that discover
// through Kubernetes (DNS, kube-proxy, an Ingress, Spring Cloud Kubernetes)
// reach it by name.

// ImportServiceType is the kind of Service an import keeps.
// +kubebuilder:validation:Enum=ClusterIP;Headless
type ImportServiceType string

// Import Service types.
const (
	// ImportClusterIP: a virtual IP that kube-proxy balances over the ready
	// endpoints.
	ImportClusterIP ImportServiceType = "ClusterIP"
	// ImportHeadless: no virtual IP; DNS answers with the ready endpoints'
	// addresses.
	ImportHeadless ImportServiceType = "Headless"
)

// ImportPort is one port of the imported Service.
type ImportPort struct {
	// Name of the Service port; the EndpointSlices' port of the same name
	// carries the instances' port.
	// +kubebuilder:validation:MaxLength=15
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Name string `json:"name"`
	// Port the Service listens on.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	Port int32 `json:"port"`
	// InstancePort says which port of each instance the Service port
	// reaches: Port (the instance's port, default) or SecurePort (its
	// securePort, where enabled).
	// +optional
	// +kubebuilder:default=Port
	InstancePort InstancePort `json:"instancePort,omitempty"`
	// AppProtocol is the port's application protocol, as a Service
	// port's appProtocol (copied to the Service and its EndpointSlices):
	// an IANA name such as http or https, a Kubernetes name such as
	// kubernetes.io/h2c, or a domain-prefixed one such as
	// mesh.example.com/grpc. Meshes, Gateway API implementations and
	// Spring Cloud Kubernetes read it.
	// +optional
	// +kubebuilder:validation:MaxLength=317
	// +kubebuilder:validation:Pattern=`^([a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$`
	AppProtocol string `json:"appProtocol,omitempty"`
}

// InstancePort names a port of a Eureka instance.
// +kubebuilder:validation:Enum=Port;SecurePort
type InstancePort string

// Instance ports.
const (
	// InstancePortPlain is the instance's port.
	InstancePortPlain InstancePort = "Port"
	// InstancePortSecure is the instance's securePort.
	InstancePortSecure InstancePort = "SecurePort"
)

// LabelValue is a label's value: at most 63 characters, letters, digits,
// '-', '_' and '.', beginning and ending with a letter or digit.
// +kubebuilder:validation:MaxLength=63
// +kubebuilder:validation:Pattern=`^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?$`
type LabelValue string

// AnnotationValue is an annotation's value (at most 2 KiB here: 64 of
// them, with their keys and the record of what was applied, stay well
// within the 256 KiB the API server allows a Service's annotations).
// +kubebuilder:validation:MaxLength=2048
type AnnotationValue string

// ImportService is the Service an import keeps.
type ImportService struct {
	// Name of the Service. Defaults to the lower-cased app name.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z]([-a-z0-9]*[a-z0-9])?$`
	Name string `json:"name,omitempty"`
	// Type is ClusterIP (default) or Headless.
	// +optional
	// +kubebuilder:default=ClusterIP
	Type ImportServiceType `json:"type,omitempty"`
	// Ports of the Service. Defaults to one port named http, 80, reaching
	// each instance's port.
	// +optional
	// +kubebuilder:validation:MaxItems=2
	// +listType=map
	// +listMapKey=name
	Ports []ImportPort `json:"ports,omitempty"`
	// Labels are put on the Service (Spring Cloud Kubernetes' discovery
	// client turns a Service's labels into its instances' metadata). Keys
	// of eurekube.io (and its subdomains) are Eurekube's, and those of
	// kubernetes.io, service.kubernetes.io and endpointslice.kubernetes.io
	// change how Kubernetes routes the Service (service-proxy-name,
	// headless, managed-by): they are refused here. The recommended
	// app.kubernetes.io labels are welcome.
	// +optional
	// +kubebuilder:validation:MaxProperties=64
	// +kubebuilder:validation:XValidation:rule="self.all(k, k.matches('^([a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$') && k.indexOf('/') <= 253)",message="a label key is a name of at most 63 characters (letters, digits, '-', '_', '.'), optionally prefixed by a DNS subdomain and '/'"
	// +kubebuilder:validation:XValidation:rule="self.all(k, !k.matches('^(([^/]*[.])?eurekube[.]io|service[.]kubernetes[.]io|endpointslice[.]kubernetes[.]io|kubernetes[.]io)/'))",message="keys of eurekube.io, kubernetes.io, service.kubernetes.io and endpointslice.kubernetes.io are Eurekube's, or change how Kubernetes routes the Service: choose another prefix"
	Labels map[string]LabelValue `json:"labels,omitempty"`
	// Annotations are put on the Service. The keys labels may not have
	// are refused here too (an annotation key's prefix may have capitals,
	// as Kubernetes allows).
	// +optional
	// +kubebuilder:validation:MaxProperties=64
	// +kubebuilder:validation:XValidation:rule="self.all(k, k.lowerAscii().matches('^([a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$') && k.indexOf('/') <= 253)",message="an annotation key is a name of at most 63 characters (letters, digits, '-', '_', '.'), optionally prefixed by a DNS subdomain and '/'"
	// +kubebuilder:validation:XValidation:rule="self.all(k, !k.matches('^(([^/]*[.])?eurekube[.]io|service[.]kubernetes[.]io|endpointslice[.]kubernetes[.]io|kubernetes[.]io)/'))",message="keys of eurekube.io, kubernetes.io, service.kubernetes.io and endpointslice.kubernetes.io are Eurekube's, or change how Kubernetes routes the Service: choose another prefix"
	Annotations map[string]AnnotationValue `json:"annotations,omitempty"`
	// SessionAffinity is None (default) or ClientIP: kube-proxy then sends
	// one client's connections to one endpoint, as a Service's
	// sessionAffinity (the Multi-Cluster Services API's name too).
	// +optional
	// +kubebuilder:default=None
	// +kubebuilder:validation:Enum=None;ClientIP
	SessionAffinity corev1.ServiceAffinity `json:"sessionAffinity,omitempty"`
	// SessionAffinityConfig is ClientIP affinity's timeout, as a
	// Service's (default 10800 s; 1 to 86400).
	// +optional
	// +kubebuilder:validation:XValidation:rule="!has(self.clientIP) || !has(self.clientIP.timeoutSeconds) || (self.clientIP.timeoutSeconds >= 1 && self.clientIP.timeoutSeconds <= 86400)",message="clientIP.timeoutSeconds is 1 to 86400, as a Service's"
	SessionAffinityConfig *corev1.SessionAffinityConfig `json:"sessionAffinityConfig,omitempty"`
	// TrafficDistribution opts into zone routing, as a Service's:
	// PreferClose (or its newer name PreferSameZone) has each endpoint
	// carry a hint for its own zone (the instance's zone metadata), and
	// kube-proxy then keeps a caller's traffic within its node's zone
	// where an endpoint of that zone is ready. Unset (the default): no
	// hints, and every caller reaches every zone. endpoint.zone is
	// written either way.
	// +optional
	// +kubebuilder:validation:Enum=PreferClose;PreferSameZone
	TrafficDistribution string `json:"trafficDistribution,omitempty"`
	// LegacyEndpoints keeps a core/v1 Endpoints beside the slices (true,
	// the default): Spring Cloud Kubernetes' DiscoveryClient reads
	// Endpoints, which Kubernetes deprecates from 1.33. false: only
	// EndpointSlices, and an Endpoints the import made goes.
	// +optional
	// +kubebuilder:default=true
	LegacyEndpoints *bool `json:"legacyEndpoints,omitempty"`
}

// EurekaImportSpec says which Eureka app becomes which Service.
// +kubebuilder:validation:XValidation:rule="self.app == oldSelf.app",message="app cannot change: create another import (deleting this one removes the Service it made)",fieldPath=".app"
// +kubebuilder:validation:XValidation:rule="(has(self.service) && has(self.service.name)) || self.app.contains('*') || (size(self.app) <= 63 && self.app.lowerAscii().matches('^[a-z]([-a-z0-9]*[a-z0-9])?$'))",message="the app's name lower-cased is not a valid Service name (a letter first, then letters, digits and '-', at most 63): set service.name",fieldPath=".service"
// +kubebuilder:validation:XValidation:rule="!self.app.contains('*') || !has(self.service) || !has(self.service.name)",message="a pattern imports each matching app as a Service named after the app, lower-cased: leave service.name unset",fieldPath=".service.name"
type EurekaImportSpec struct {
	// App is the Eureka app to import (Eureka upper-cases it), or a
	// pattern of apps: '*' stands for any run of characters (PAYMENTS-*,
	// *-API, *), case-insensitive, as in an EurekaAppPolicy. A pattern
	// keeps one EurekaImport of its own per matching app, named after the
	// app lower-cased, in this namespace: see status.pattern.
	// +kubebuilder:validation:MaxLength=128
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9*]([A-Za-z0-9._*-]*[A-Za-z0-9*])?$`
	App string `json:"app"`
	// Eureka names the servers to read, as a syncer's eureka block does.
	// +optional
	Eureka EurekaServers `json:"eureka,omitempty"`
	// Service is the Service to keep; of a pattern, each app's (the name
	// is the app's, lower-cased).
	// +optional
	// +kubebuilder:default={}
	Service ImportService `json:"service,omitempty"`
	// IncludeThisCluster imports the instances this cluster's Eurekube
	// registered too. By default only those elsewhere (VMs, other
	// clusters) are: this cluster's pods already have Services. They are
	// taken only where the import's namespace may register the app itself
	// (an EurekaAppPolicy or its claim), and only from pods of namespaces
	// that may: an import never points into another namespace's pods.
	// +optional
	IncludeThisCluster bool `json:"includeThisCluster,omitempty"`
}

// EurekaImportStatus is what the manager measured and wrote.
type EurekaImportStatus struct {
	// ObservedGeneration is the generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// App is the upper-cased app name (of a pattern import, the pattern).
	// +optional
	App string `json:"app,omitempty"`
	// ServiceName is the Service kept (of a pattern import, how many its
	// apps' imports keep, such as "3 Services").
	// +optional
	ServiceName string `json:"serviceName,omitempty"`
	// Endpoints is ready/total endpoints, such as 2/3 (of a pattern
	// import, of all its apps' imports).
	// +optional
	Endpoints string `json:"endpoints,omitempty"`
	// ReadyEndpoints counts the endpoints ready (instances UP).
	// +optional
	ReadyEndpoints int32 `json:"readyEndpoints,omitempty"`
	// TotalEndpoints counts every endpoint.
	// +optional
	TotalEndpoints int32 `json:"totalEndpoints,omitempty"`
	// LastSyncTime is when the endpoints last matched a registry read.
	// +optional
	LastSyncTime *metav1.Time `json:"lastSyncTime,omitempty"`
	// Conditions: Synced, EurekaReachable, ServiceOwned, Permitted,
	// AddressesAllowed, InstancesServed. Of a pattern: Synced, EurekaReachable and
	// Permitted, summing up its apps' imports, and AppsWithinCap.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// Pattern is what a pattern import (spec.app with '*') found and
	// keeps. Then serviceName counts the Services, and the endpoints are
	// those of every app's import.
	// +optional
	Pattern *ImportPatternStatus `json:"pattern,omitempty"`
}

// ImportPatternStatus is what a pattern import found in Eureka and keeps.
type ImportPatternStatus struct {
	// Apps are the Eureka apps the pattern matches (upper-cased, sorted):
	// those with instances to import (unless includeThisCluster, an app
	// only this cluster's pods register is not one).
	// +optional
	Apps []string `json:"apps,omitempty"`
	// Imports are the EurekaImports kept, one per app, each with its own
	// status: its Service, endpoints, and whether the app is permitted.
	// +optional
	Imports []string `json:"imports,omitempty"`
	// Skipped are the matching apps that have no import of the pattern,
	// and why.
	// +optional
	Skipped []SkippedApp `json:"skipped,omitempty"`
}

// SkippedApp is an app a pattern matches but does not import.
type SkippedApp struct {
	// App is the Eureka app.
	App string `json:"app"`
	// Reason: InvalidName (the app lower-cased is no valid Service name)
	// or ImportNotOwned (an EurekaImport of its name is not the
	// pattern's).
	Reason string `json:"reason"`
	// Message says more.
	// +optional
	Message string `json:"message,omitempty"`
}

// EurekaImport keeps a selector-less Service of its namespace whose
// EndpointSlices are a Eureka app's instances: a service on VMs callable
// by its Kubernetes name.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=eimp,categories=eurekube
// +kubebuilder:printcolumn:name="App",type=string,JSONPath=`.status.app`
// +kubebuilder:printcolumn:name="Service",type=string,JSONPath=`.status.serviceName`
// +kubebuilder:printcolumn:name="Endpoints",type=string,JSONPath=`.status.endpoints`,description="Endpoints ready (instances UP) / total"
// +kubebuilder:printcolumn:name="Last-Sync",type=date,JSONPath=`.status.lastSyncTime`
// +kubebuilder:printcolumn:name="Permitted",type=string,JSONPath=`.status.conditions[?(@.type=="Permitted")].status`,description="The platform allows the import's app and Eureka servers; False: refused (REASON and the Permitted condition say why)"
// +kubebuilder:printcolumn:name="Synced",type=string,JSONPath=`.status.conditions[?(@.type=="Synced")].status`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Synced")].reason`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:validation:XValidation:rule="oldSelf.hasValue() || size(self.metadata.name) <= 63",optionalOldSelf=true,message="an import's name is at most 63 characters: it is the value of the label eurekube.io/import on what it makes"
type EurekaImport struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is what the user asks for.
	Spec EurekaImportSpec `json:"spec"`
	// Status is what the manager measured.
	// +optional
	Status EurekaImportStatus `json:"status,omitempty"`
}

// EurekaImportList is a list of EurekaImports.
// +kubebuilder:object:root=true
type EurekaImportList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	// Items are the imports.
	Items []EurekaImport `json:"items"`
}

// DefaultImportPort is the Service port of an import that names none.
const DefaultImportPort = 80

// ImportPatternLabel names, on an import a pattern import keeps, the
// pattern import (its name, or for one longer than a label value allows,
// a shortened name with a hash).
const ImportPatternLabel = "eurekube.io/import-pattern"

// Reasons of an app a pattern skips (SkippedApp).
const (
	// ReasonInvalidName: the app lower-cased is not a valid Service name.
	ReasonInvalidName = "InvalidName"
	// ReasonImportNotOwned: an EurekaImport of the app's name exists that
	// the pattern import does not control; it is left alone.
	ReasonImportNotOwned = "ImportNotOwned"
)

// IsPattern is true when spec.app is a pattern of apps.
func (i *EurekaImport) IsPattern() bool { return strings.Contains(i.Spec.App, "*") }

// EffectiveApp is spec.app upper-cased, as Eureka stores it.
func (i *EurekaImport) EffectiveApp() string { return strings.ToUpper(i.Spec.App) }

// EffectiveServiceName is spec.service.name, else the lower-cased app.
func (i *EurekaImport) EffectiveServiceName() string {
	if i.Spec.Service.Name != "" {
		return i.Spec.Service.Name
	}
	return strings.ToLower(i.Spec.App)
}

// EffectivePorts are spec.service.ports, else one port named http, 80,
// reaching each instance's port.
func (i *EurekaImport) EffectivePorts() []ImportPort {
	if len(i.Spec.Service.Ports) == 0 {
		return []ImportPort{{Name: "http", Port: DefaultImportPort, InstancePort: InstancePortPlain}}
	}
	out := make([]ImportPort, len(i.Spec.Service.Ports))
	for n, p := range i.Spec.Service.Ports {
		if p.InstancePort == "" {
			p.InstancePort = InstancePortPlain
		}
		out[n] = p
	}
	return out
}

// Conditions and reasons of an import beyond a syncer's (ConditionSynced,
// ConditionEurekaReachable and ConditionPermitted mean the same there).
const (
	// ConditionServiceOwned is false (reason ServiceNotOwned) when the
	// Service's name is taken by a Service the import did not make; its
	// message names the owner, and nothing is written to that Service.
	ConditionServiceOwned = "ServiceOwned"
	// ReasonLeasesExpired, of a Synced condition still true, says that
	// Eureka lists instances past their lease: the server may be in
	// self-preservation, and they may be dead.
	ReasonLeasesExpired = "LeasesExpired"
	// ConditionAddressesAllowed is false (reason InClusterAddress) when
	// instances were left out because their address is inside this
	// cluster (its pod or Service ranges, a running pod's IP) and not
	// a pod of a namespace that may register the app; the message counts
	// and names them. An import never points into another namespace's
	// pods.
	ConditionAddressesAllowed = "AddressesAllowed"
	// ReasonInClusterAddress: see ConditionAddressesAllowed.
	ReasonInClusterAddress = "InClusterAddress"
	// ConditionInstancesServed is false when instances are no endpoint
	// because the Service cannot serve them: reason NoIPAddress (their
	// ipAddr is a host name, or an address a slice cannot hold),
	// PortMismatch (none of the Service's ports is enabled on them),
	// IPFamilyNotServed (the Service lacks their IP family), or
	// SeveralReasons; the message names each instance and why. The
	// others are imported all the same.
	ConditionInstancesServed = "InstancesServed"
	// ReasonNoIPAddress: see ConditionInstancesServed.
	ReasonNoIPAddress = "NoIPAddress"
	// ReasonPortMismatch: see ConditionInstancesServed.
	ReasonPortMismatch = "PortMismatch"
	// ReasonIPFamilyNotServed: see ConditionInstancesServed.
	ReasonIPFamilyNotServed = "IPFamilyNotServed"
	// ReasonRegistryEmptied, of a Synced condition false, says that a
	// registry read lists no instance of the app while its endpoints had
	// some: a Eureka server restarted empty lists them again as they
	// heartbeat, so the endpoints are kept, for at most the hold the
	// message names, before they are emptied.
	ReasonRegistryEmptied = "RegistryEmptied"
	// ConditionAppsWithinCap, of a pattern import, is false (reason
	// PatternCapReached) when the pattern matches more apps than the
	// manager's --max-pattern-apps: the message names the cap, the count
	// and the apps left out.
	ConditionAppsWithinCap = "AppsWithinCap"
	// ReasonPatternCapReached: see ConditionAppsWithinCap.
	ReasonPatternCapReached = "PatternCapReached"
)

// KeepsEndpoints is spec.service.legacyEndpoints, true unless set false.
func (i *EurekaImport) KeepsEndpoints() bool {
	return i.Spec.Service.LegacyEndpoints == nil || *i.Spec.Service.LegacyEndpoints
}

// WantsZoneHints is true when the import opts into zone routing
// (spec.service.trafficDistribution): only then do its endpoints carry
// hints, which kube-proxy follows on their own.
func (i *EurekaImport) WantsZoneHints() bool { return i.Spec.Service.TrafficDistribution != "" }
