package webhook

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/sirupsen/logrus"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/eurekube/eurekube/api/v1alpha1"
)

// Path is where the manager serves the handler; the
// MutatingWebhookConfiguration points at it.
const Path = "/mutate-v1-pod"

// Defaults are the manager's settings for every injected registrar; a
// syncer's spec and the pod's annotations override them.
type Defaults struct {
	// RegistrarImage is the registrar image (--registrar-image).
	RegistrarImage string
	// EurekaURLs are the Eureka servers used when a syncer names none
	// (--eureka-url, repeatable).
	EurekaURLs []string
	// PreStopSleepSeconds is the drain used when a syncer sets none
	// (--default-drain, 100).
	PreStopSleepSeconds int32
	// ClusterID marks every instance this cluster registers.
	ClusterID string
	// ExecSleepFallback drains every container through the drain helper
	// (an exec preStop) instead of the kubelet's sleep action, for kubelets
	// without the action (before Kubernetes 1.30).
	ExecSleepFallback bool
	// RegistrarResources are the registrar's requests and limits when a
	// syncer sets none.
	RegistrarResources corev1.ResourceRequirements
	// RegistrarPort is the registrar's own health and metrics port
	// (sidecar.DefaultListenPort).
	RegistrarPort int32
	// RegistrarLogLevel is the registrar's log level (debug, info, warn,
	// error).
	RegistrarLogLevel string
}

// Options configure NewHandler.
type Options struct {
	// Reader reads EurekaSyncers and Namespaces, normally the manager's
	// cache.
	Reader client.Reader
	// LiveReader reads from the API server itself (the manager's API
	// reader). When the cache says a pod's namespace is missing or not
	// opted in, or that no syncer selects the pod, the handler asks it
	// again before letting the pod through without the registrar: the API
	// server only calls the webhook for opted-in namespaces, so such an
	// answer usually means a namespace or syncer created a moment before
	// the pod (kubectl apply of one file) has not reached the cache yet.
	// Nil: the cache's answer stands.
	LiveReader client.Reader
	// Decoder decodes the pod of an admission request.
	Decoder admission.Decoder
	// Defaults are the manager's registrar settings.
	Defaults Defaults
	// ExcludedNamespaces are never mutated: the manager's own namespace and
	// kube-system.
	ExcludedNamespaces []string
	// Logger receives one line per decision.
	Logger logrus.FieldLogger
}

// Handler is the pod mutating admission handler. It implements
// sigs.k8s.io/controller-runtime/pkg/webhook/admission.Handler.
type Handler struct {
	reader   client.Reader
	live     client.Reader
	decoder  admission.Decoder
	defaults Defaults
	excluded map[string]bool
	log      logrus.FieldLogger
}

var _ admission.Handler = (*Handler)(nil)

// NewHandler returns the pod admission handler.
func NewHandler(o Options) *Handler {
	excluded := make(map[string]bool, len(o.ExcludedNamespaces))
	for _, ns := range o.ExcludedNamespaces {
		excluded[ns] = true
	}
	log := o.Logger
	if log == nil {
		l := logrus.New()
		l.SetOutput(discard{})
		log = l
	}
	return &Handler{reader: o.Reader, live: o.LiveReader, decoder: o.Decoder, defaults: o.Defaults, excluded: excluded, log: log}
}

// Handle answers one admission request: it decodes the pod, reads the
// namespace and its syncers, decides, mutates, and lets controller-runtime
// compute the JSON patch. It writes nothing, so dry-run requests are safe.
func (h *Handler) Handle(ctx context.Context, req admission.Request) admission.Response {
	began := time.Now()
	resp, reason := h.handle(ctx, req)
	observe(resp, reason, time.Since(began))
	return resp
}

func (h *Handler) handle(ctx context.Context, req admission.Request) (admission.Response, Reason) {
	log := h.log.WithFields(logrus.Fields{"uid": req.UID, "namespace": req.Namespace, "name": req.Name})
	if req.UID == "" && req.Kind.Kind == "" && req.Operation == "" {
		log.Warn("empty admission request")
		return admission.Errored(http.StatusBadRequest, errors.New("malformed AdmissionReview: no request")), ReasonMalformed
	}
	if req.Kind.Kind != "Pod" || req.Operation != admissionv1.Create {
		return admission.Allowed("eurekube mutates only pod creations"), ReasonNotAPodCreate
	}
	if len(req.Object.Raw) == 0 {
		log.Warn("admission request without an object")
		return admission.Errored(http.StatusBadRequest, errors.New("admission request has no object")), ReasonMalformed
	}
	pod := &corev1.Pod{}
	if err := h.decoder.Decode(req, pod); err != nil {
		log.WithError(err).Warn("cannot decode the pod of an admission request")
		return admission.Errored(http.StatusBadRequest, fmt.Errorf("decode pod: %w", err)), ReasonMalformed
	}
	namespace := req.Namespace
	if namespace == "" {
		namespace = pod.Namespace
	}
	if pod.Name == "" && pod.GenerateName != "" {
		log = log.WithField("name", pod.GenerateName+"<generated>")
	}

	d, err := h.decide(ctx, h.reader, pod, namespace)
	if h.live != nil && (err != nil && apierrors.IsNotFound(err) || err == nil && cacheMayLag(d.Reason)) {
		log.WithField("cached", d.Reason).Debug("asking the API server: the cache may not have the namespace or the syncer yet")
		d, err = h.decide(ctx, h.live, pod, namespace)
	}
	if err != nil {
		log.WithError(err).Error("look up the namespace and its syncers")
		return admission.Errored(http.StatusInternalServerError, err), ReasonLookupFailed
	}
	log = log.WithField("reason", d.Reason)
	switch {
	case d.Reason == ReasonInvalidAnnotation:
		log.WithError(d.Err).Info("pod denied")
		return deny(d.Err.Error()).WithWarnings(d.Warnings...), d.Reason
	case d.Reason == ReasonMeantToFinish:
		log.WithField("syncer", d.Syncer.Name).Info("pod meant to finish: not injected")
		return patch(req, Skip(pod, d.Syncer.Name, *d.Skipped), d.Warnings), d.Reason
	case !d.Inject:
		log.Debug("pod not injected")
		return admission.Allowed(string(d.Reason)).WithWarnings(d.Warnings...), d.Reason
	}

	mutated, adaptations, err := Mutate(pod, Config{Syncer: d.Syncer, Overrides: d.Overrides, Defaults: h.defaults})
	if err != nil {
		log.WithError(err).Info("pod denied")
		return deny(fmt.Sprintf("EurekaSyncer %s cannot register this pod: %v", d.Syncer.Name, err)).WithWarnings(d.Warnings...), ReasonInvalidConfig
	}
	warnings := d.Warnings
	for _, a := range adaptations {
		warnings = append(warnings, a.Message)
		adapted.WithLabelValues(string(a.Reason)).Inc()
	}
	log.WithFields(logrus.Fields{"syncer": d.Syncer.Name, "adaptations": len(adaptations)}).Info("pod injected")
	return patch(req, mutated, warnings), d.Reason
}

// patch answers with the JSON patch from the request's pod to changed, which
// controller-runtime computes.
func patch(req admission.Request, changed *corev1.Pod, warnings []string) admission.Response {
	raw, err := json.Marshal(changed)
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, fmt.Errorf("encode mutated pod: %w", err))
	}
	return admission.PatchResponseFromRaw(req.Object.Raw, raw).WithWarnings(warnings...)
}

// decide reads the pod's namespace and its syncers through r and decides.
func (h *Handler) decide(ctx context.Context, r client.Reader, pod *corev1.Pod, namespace string) (Decision, error) {
	ns := Namespace{Excluded: h.excluded[namespace]}
	if !ns.Excluded {
		var obj corev1.Namespace
		if err := r.Get(ctx, client.ObjectKey{Name: namespace}, &obj); err != nil {
			return Decision{}, fmt.Errorf("read namespace %s: %w", namespace, err)
		}
		ns.Labels = obj.Labels
	}
	var syncers v1alpha1.EurekaSyncerList
	if !ns.Excluded && ns.Labels[v1alpha1.NamespaceInjectionLabel] == "enabled" {
		if err := r.List(ctx, &syncers, client.InNamespace(namespace)); err != nil {
			return Decision{}, fmt.Errorf("list EurekaSyncers of %s: %w", namespace, err)
		}
	}
	return Decide(pod, ns, syncers.Items), nil
}

// cacheMayLag is true for decisions that a cache behind the API server
// gives for a namespace or syncer created just before the pod.
func cacheMayLag(r Reason) bool {
	return r == ReasonNamespaceNotEnabled || r == ReasonNoMatchingSyncer
}

// deny refuses the pod as a bad request (HTTP 400 in the status), with a
// message naming what to fix: the annotation, the value and what is allowed.
func deny(message string) admission.Response {
	resp := admission.Denied(message)
	resp.Result.Code = http.StatusBadRequest
	resp.Result.Reason = metav1.StatusReasonBadRequest
	return resp
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }
