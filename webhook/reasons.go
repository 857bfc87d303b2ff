package webhook

// Reason says why a pod was or was not injected. The same constant labels
// the metric, the log line and the response message.
type Reason string

// Reasons of a Decision.
const (
	// ReasonInjected: the pod gets the registrar.
	ReasonInjected Reason = "injected"
	// ReasonNamespaceExcluded: the manager's own namespace or kube-system.
	ReasonNamespaceExcluded Reason = "namespace-excluded"
	// ReasonNamespaceNotEnabled: the namespace lacks eurekube.io/injection=enabled.
	ReasonNamespaceNotEnabled Reason = "namespace-not-enabled"
	// ReasonOptedOut: label or annotation eurekube.io/inject=false.
	ReasonOptedOut Reason = "opted-out"
	// ReasonNoMatchingSyncer: no syncer of the namespace selects the pod.
	ReasonNoMatchingSyncer Reason = "no-matching-syncer"
	// ReasonAlreadyInjected: the registrar container or the status
	// annotation is present (a reinvocation, or a pod copied from an
	// injected one).
	ReasonAlreadyInjected Reason = "already-injected"
	// ReasonSyncerDeleting: only syncers being deleted select the pod.
	ReasonSyncerDeleting Reason = "syncer-deleting"
	// ReasonInvalidAnnotation: a eurekube.io/ annotation is unknown or bad;
	// the pod is denied.
	ReasonInvalidAnnotation Reason = "invalid-annotation"
	// ReasonMeantToFinish: the pod's restartPolicy is Never or OnFailure (a
	// Job's pod). The registrar, a regular container that runs until the pod
	// stops, would keep it from ever completing, so the pod is only
	// annotated as skipped, naming the syncer that selects it.
	ReasonMeantToFinish Reason = "meant-to-finish"
	// ReasonUnsupportedOS: the pod runs on Windows (spec.os.name); the
	// registrar and the drain are Linux containers, so it is skipped and
	// says so.
	ReasonUnsupportedOS Reason = "unsupported-os"
	// ReasonInvalidConfig: the syncer and the pod do not fit together (a
	// port name the pod does not declare, no Eureka URL, no image); the pod
	// is denied. Set by Inject when Mutate fails.
	ReasonInvalidConfig Reason = "invalid-config"
	// ReasonRegistrarImageNotAllowed: the syncer's spec.sidecar.image is
	// not allowed by the manager (--allowed-registrar-image); the pod is
	// denied (allowlist.go).
	ReasonRegistrarImageNotAllowed Reason = "registrar-image-not-allowed"
	// ReasonEurekaHostNotAllowed: the syncer's spec.eureka.serviceURLs name
	// a host the manager does not allow (--allowed-eureka-host); the pod is
	// denied (allowlist.go).
	ReasonEurekaHostNotAllowed Reason = "eureka-host-not-allowed"
	// ReasonAppNotPermitted: the pod would register a Eureka app that its
	// namespace may not (an EurekaAppPolicy grants it to others, or another
	// namespace claimed it first); the pod is denied naming the policy or
	// the owner.
	ReasonAppNotPermitted Reason = "app-not-permitted"
	// ReasonRegistrarUnreadable: a container runs the registrar (by image
	// or name) with settings the webhook cannot read as the kubelet will
	// run them (valueFrom, envFrom, $(VAR) of such a variable, command or
	// args), or with an identity that is not the pod's own; the pod is
	// denied naming the container and the variable (registrars.go).
	ReasonRegistrarUnreadable Reason = "registrar-unreadable"
	// ReasonSecretNotConsented: the syncer names a Secret that lacks the
	// consent label (or is missing, or unreadable to the manager); the pod
	// is denied and nothing is mounted (consent.go).
	ReasonSecretNotConsented Reason = "secret-not-consented"
	// ReasonRegistryNotRead: the app's granting policy says elsewhere:
	// Refuse and the manager has no read of the registrar's Eureka servers
	// to tell whether the app has instances elsewhere; the pod is denied
	// until it has (a retry passes).
	ReasonRegistryNotRead Reason = "registry-not-read"
)

// Reasons the handler gives requests that never reach Inject.
const (
	// ReasonNotAPodCreate: another kind or operation; allowed untouched.
	ReasonNotAPodCreate Reason = "not-a-pod-create"
	// ReasonMalformed: the request could not be decoded.
	ReasonMalformed Reason = "malformed-request"
	// ReasonLookupFailed: the namespace or the syncers could not be read.
	ReasonLookupFailed Reason = "lookup-failed"
)
