package v1alpha1

// Names shared by the webhook, the registrar and the reconciler.
const (
	// NamespaceInjectionLabel opts a namespace in: value "enabled".
	NamespaceInjectionLabel = "eurekube.io/injection"
	// InjectLabel (and the annotation of the same key) set to "false" opts a
	// single pod out.
	InjectLabel = "eurekube.io/inject"

	// AnnotationPrefix starts every Eurekube pod annotation; unknown keys
	// with this prefix deny the pod so that typos never pass silently.
	AnnotationPrefix = "eurekube.io/"
	// StatusAnnotation is set to StatusInjected on every injected pod.
	StatusAnnotation = "eurekube.io/status"
	StatusInjected   = "injected"
	// SyncerAnnotation names the syncer that injected the pod.
	SyncerAnnotation = "eurekube.io/syncer"

	// RegistrarContainerName is the name of the injected sidecar.
	RegistrarContainerName = "eurekube-registrar"

	// Finalizer keeps a deleted syncer until its instances are gone.
	Finalizer = "eurekube.io/finalizer"
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
)

// AdaptationsUnreadable is the adaptation reason the reconciler reports for
// a pod whose eurekube.io/adaptations annotation it cannot decode.
const AdaptationsUnreadable AdaptationReason = "AdaptationsUnreadable"
