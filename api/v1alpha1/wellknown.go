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

// Condition types of EurekaSyncerStatus.
const (
	// ConditionReady is true when every selected pod is injected and every
	// ready pod is registered UP.
	ConditionReady = "Ready"
	// ConditionEurekaReachable is false when no Eureka server answered; its
	// message names the URL and the error.
	ConditionEurekaReachable = "EurekaReachable"
	// ConditionPodsInjected is false when selected pods run without the
	// registrar; its message names some of them.
	ConditionPodsInjected = "PodsInjected"
)
