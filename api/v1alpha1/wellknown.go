package v1alpha1

// Every eurekube.io/ label and annotation key, and the names shared by the
// webhook, the reconciler and the tests. The Eureka metadata markers the
// registrar writes (eurekube.io/managed-by, …) are in eureka/types.go: the
// registrar binary imports no Kubernetes package, this one included.
const (
	// NamespaceInjectionLabel opts a namespace in: value "enabled".
	NamespaceInjectionLabel = "eurekube.io/injection"
	// InjectLabel (and the annotation of the same key) set to "false" opts a
	// single pod out.
	InjectLabel = "eurekube.io/inject"

	// AnnotationPrefix starts every Eurekube pod annotation; unknown keys
	// with this prefix deny the pod so that typos never pass silently.
	AnnotationPrefix = "eurekube.io/"
	// StatusAnnotation is set to StatusInjected on every injected pod, and
	// to StatusSkipped on a pod a syncer selects but that stays without the
	// registrar on purpose.
	StatusAnnotation = "eurekube.io/status"
	StatusInjected   = "injected"
	// StatusSkipped marks a pod that a syncer selects but that the webhook
	// left without the registrar on purpose; its adaptations say why.
	StatusSkipped = "skipped"
	// SyncerAnnotation names the syncer that injected the pod.
	SyncerAnnotation = "eurekube.io/syncer"
	// AdaptationsAnnotation records on a pod what the webhook adapted or
	// could not do for it, as a JSON list of Adaptation. Admission warnings
	// never reach a human for pods made by controllers, so the reconciler
	// reads this annotation and reports it as Events, status and metrics on
	// the syncer.
	AdaptationsAnnotation = "eurekube.io/adaptations"
	// DrainAnnotation records the drain, in seconds, the webhook gave every
	// app container of an injected pod ("0": none). An injected pod without
	// it was injected before drains were recorded.
	DrainAnnotation = "eurekube.io/drain"
	// RegistrarImageAnnotation records the registrar image the webhook
	// injected, so the reconciler can count the pods an upgrade left on an
	// older registrar even where a policy engine later rewrote the
	// container's image (to a digest, say). An injected pod without it was
	// injected before images were recorded; its registrar container's image
	// stands in.
	RegistrarImageAnnotation = "eurekube.io/registrar-image"

	// TrafficAnnotation is the syncer's spec.traffic on an injected pod:
	// the webhook sets it at admission and the reconciler keeps it current,
	// and the registrar reads it (through a downward API file) before every
	// registration, so that a pod of a Standby syncer is OUT_OF_SERVICE from
	// its first registration.
	TrafficAnnotation = "eurekube.io/traffic"
	// TrafficDetached is the traffic annotation's value on the pods of a
	// deleted syncer, written by the reconciler: their registrars cancel
	// their registrations and register no more, so that deleting a syncer,
	// or uninstalling Eurekube, leaves nothing in Eureka while the apps run
	// on (the idle sidecar leaves at their next rollout). Never a value of
	// spec.traffic.
	TrafficDetached = "Detached"

	// ClaimHeldUntilAnnotation is on an EurekaAppClaim whose namespace
	// registers its app no more: the claim still belongs to that namespace,
	// which takes it up again by registering, until this time (RFC 3339);
	// then the manager deletes it and the next namespace to register the
	// app claims it. The manager writes it (--claim-hold after the last
	// use) and removes it when the namespace registers the app again.
	ClaimHeldUntilAnnotation = "eurekube.io/held-until"
	// ClaimRegisteredAnnotation is on an EurekaAppClaim the manager has
	// seen its namespace register the app under (RFC 3339, the first
	// time). Only such a claim is held once unused; one never registered
	// under (its pod refused by a later admission step, say) is deleted
	// after the grace, as it earned nothing.
	ClaimRegisteredAnnotation = "eurekube.io/registered-at"

	// Finalizer keeps a deleted syncer until its instances are gone.
	Finalizer = "eurekube.io/finalizer"
	// ImportFinalizer keeps a deleted import until the Service, Endpoints
	// and EndpointSlices it made are gone.
	ImportFinalizer = "eurekube.io/import"

	// RegistrarContainerName is the name of the injected sidecar.
	RegistrarContainerName = "eurekube-registrar"

	// EurekaAccessClusterRole lets the manager get the Secrets and
	// ConfigMaps that syncers' spec.eureka names (ReadObjects); a namespace
	// whose syncers name any binds it to the manager's ServiceAccount
	// (ReadGrant). Its name in manifests/rbac and the manager's default
	// --credentials-cluster-role; the Helm chart names it
	// <fullname>-eureka-credentials and passes that flag.
	EurekaAccessClusterRole = "eurekube-eureka-credentials"

	// EurekaCredentialsLabel, set to "true" on a Secret, is the Secret's
	// consent to serve the syncers of its namespace as Eureka credentials,
	// CA bundle or client certificate: the manager sends nothing of a
	// Secret without it to any Eureka server, and the syncer's
	// EurekaReachable condition says how to add it (SecretConsented,
	// SecretConsentCommand). Reading is not consent: the RBAC grant
	// (ReadGrant) lets the manager read a namespace's Secrets, and this
	// label picks the ones it may use. ConfigMaps need none.
	EurekaCredentialsLabel = "eurekube.io/eureka-credentials"
)

// Pod annotations a user may set to override the syncer for one pod. The
// webhook validates each (webhook/annotations.go); a bad value denies the
// pod.
const (
	AnnotationInject           = InjectLabel // "true" or "false"
	AnnotationAppName          = AnnotationPrefix + "app-name"
	AnnotationVIPAddress       = AnnotationPrefix + "vip-address"
	AnnotationSecureVIPAddress = AnnotationPrefix + "secure-vip-address"
	AnnotationPort             = AnnotationPrefix + "port"
	AnnotationSecurePort       = AnnotationPrefix + "secure-port"
	AnnotationPreStopSleep     = AnnotationPrefix + "prestop-sleep"
	AnnotationHealthType       = AnnotationPrefix + "health-type"
	AnnotationHealthScheme     = AnnotationPrefix + "health-scheme"
	AnnotationHealthPath       = AnnotationPrefix + "health-path"
	AnnotationHealthPort       = AnnotationPrefix + "health-port"
	AnnotationProtocol         = AnnotationPrefix + "protocol"
	AnnotationManagementPort   = AnnotationPrefix + "management-port"
	AnnotationManagementPath   = AnnotationPrefix + "management-base-path"
	AnnotationSidecarCPU       = AnnotationPrefix + "sidecar-cpu"
	AnnotationSidecarMemory    = AnnotationPrefix + "sidecar-memory"
	// AnnotationMetadataPrefix starts one Eureka metadata entry per
	// annotation: eurekube.io/metadata.zone: eu-1.
	AnnotationMetadataPrefix = AnnotationPrefix + "metadata."
)

// Condition types of EurekaSyncerStatus. Each is named for what True
// means.
const (
	// ConditionSynced is true when Eureka agrees with Kubernetes: every
	// selected pod is injected, every ready pod has an instance UP and no
	// more instances are UP than pods are ready. It is never true while
	// pods are selected and no instance is UP. While the syncer is being
	// deleted it is false with reason Detaching.
	ConditionSynced = "Synced"
	// ConditionEurekaReachable is false when no Eureka server answered; its
	// message names the URL and the error.
	ConditionEurekaReachable = "EurekaReachable"
	// ConditionPodsInjected is false when selected pods run without the
	// registrar; its message names some of them.
	ConditionPodsInjected = "PodsInjected"
	// ConditionExclusive is false when pods this syncer's selector matches
	// were injected by another syncer; its message names the owners, some
	// pods, and how to resolve the overlap.
	ConditionExclusive = "Exclusive"
	// ConditionDrained is false when pods this syncer injected run without
	// a drain; its message names some of them and how to fix it.
	ConditionDrained = "Drained"
	// ConditionRegistrarCurrent is false when pods this syncer injected run
	// a registrar other than the one the webhook injects now (after an
	// upgrade of Eurekube, or a change of spec.sidecar.image; reason
	// OutdatedRegistrar), or were given other Eureka URLs, app name, port or
	// health check than the spec gives now (reason OutdatedSpec); its
	// message names some of them, what differs, and says that a rollout
	// picks the current ones up.
	ConditionRegistrarCurrent = "RegistrarCurrent"
	// ConditionRegistrarHealthy is false (reason RegistrarFailing) when the
	// registrars of selected pods exit, crash-loop or cannot start; its
	// message quotes what they last said and names up to three pods.
	ConditionRegistrarHealthy = "RegistrarHealthy"
	// ConditionServiceReachable (Service mode) is true when the Service
	// exists and has an address VMs can reach on the syncer's port; false
	// with reason ServiceNotFound, PortNotFound or NoReachableAddress and a
	// message naming the fix. Nothing is registered while it is false.
	ConditionServiceReachable = "ServiceReachable"
	// ConditionTrafficApplied is true when every instance of this syncer in
	// Eureka carries the status override spec.traffic asks for (none for
	// Serve, OUT_OF_SERVICE for Standby), a lost node's pods aside.
	ConditionTrafficApplied = "TrafficApplied"
	// ConditionLeaseSafe is false when spec.lease renews at another
	// interval than the Eureka servers expect
	// (spec.eureka.expectedRenewalIntervalSeconds): the servers'
	// self-preservation then miscounts, and its message says how.
	ConditionLeaseSafe = "LeaseSafe"
	// ConditionPermitted is true when the platform allows what this syncer
	// asks for: its registrar image and Eureka hosts (the manager's
	// allowlists) and its app name (app ownership). While it is false the
	// manager neither reads the syncer's Secrets nor contacts its Eureka
	// servers, and the webhook refuses the pods it selects; its message
	// names the field, the value, how the platform team would allow it,
	// and the pods injected before, which keep running as they are.
	ConditionPermitted = "Permitted"
)

// Reasons of the Permitted condition that the manager's allowlists give;
// the webhook's refusal of a pod carries the same one.
const (
	// ReasonPermitted: nothing the syncer asks for is refused.
	ReasonPermitted = "Permitted"
	// ReasonRegistrarImageNotAllowed: spec.sidecar.image names an image
	// that is neither the manager's --registrar-image nor allowed by its
	// --allowed-registrar-image.
	ReasonRegistrarImageNotAllowed = "RegistrarImageNotAllowed"
	// ReasonEurekaHostNotAllowed: spec.eureka.serviceURLs names a host that
	// is neither one of the manager's --eureka-url nor allowed by its
	// --allowed-eureka-host.
	ReasonEurekaHostNotAllowed = "EurekaHostNotAllowed"
)

// AdaptationsUnreadable is the adaptation reason the reconciler reports for
// a pod whose eurekube.io/adaptations annotation it cannot decode.
const AdaptationsUnreadable AdaptationReason = "AdaptationsUnreadable"
