package webhook

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/sirupsen/logrus"
	"gomodules.xyz/jsonpatch/v2"
	evanphx "gopkg.in/evanphx/json-patch.v4"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	sigsjson "sigs.k8s.io/json"

	"github.com/eurekube/eurekube/api/v1alpha1"
	"github.com/eurekube/eurekube/internal/ownership"
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
	// GatewayAudience, when set, is the audience of the projected
	// ServiceAccount token the registrar is given for Eurekube's gateway
	// (--gateway-audience, gateway.go); empty: none.
	GatewayAudience string
	// Allowed are the images and hosts a syncer may name beyond the ones
	// above (allowlist.go).
	Allowed Allowlists
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
	// Defaults are the manager's registrar settings.
	Defaults Defaults
	// ExcludedNamespaces are never mutated: the manager's own namespace and
	// kube-system.
	ExcludedNamespaces []string
	// Ownership decides who may register which Eureka app, and claims an
	// unclaimed app for the first namespace that registers it (the pod's
	// creation is then a write, except in a dry run). Nil: no check, as for
	// `eurekube inject`, which writes nothing.
	Ownership *ownership.Checker
	// Registries answers, from the manager's registry reads, whether an
	// app whose policy says elsewhere: Refuse has instances elsewhere
	// (ownership.go). Nil: such apps are refused, as nothing can tell.
	Registries Registries
	// Secrets reads the metadata of the Secrets a syncer names, to check
	// their consent (consent.go); normally the manager's API reader, as
	// the manager may only get Secrets. Nil: LiveReader, else Reader.
	Secrets client.Reader
	// Grant is how a namespace lets the manager read its Secrets, printed
	// when it may not.
	Grant v1alpha1.ReadGrant
	// Logger receives one line per decision.
	Logger logrus.FieldLogger
}

// Handler is the pod mutating admission handler. It implements
// sigs.k8s.io/controller-runtime/pkg/webhook/admission.Handler.
type Handler struct {
	reader     client.Reader
	live       client.Reader
	secrets    client.Reader
	defaults   Defaults
	images     registrarImages
	excluded   map[string]bool
	ownership  *ownership.Checker
	registries Registries
	grant      v1alpha1.ReadGrant
	log        logrus.FieldLogger
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
		l.SetOutput(io.Discard)
		log = l
	}
	secrets := o.Secrets
	if secrets == nil {
		secrets = cmp.Or[client.Reader](o.LiveReader, o.Reader)
	}
	return &Handler{reader: o.Reader, live: o.LiveReader, secrets: secrets, defaults: o.Defaults, images: newRegistrarImages(o.Defaults),
		excluded: excluded, ownership: o.Ownership, registries: o.Registries, grant: o.Grant, log: log}
}

// Handle answers one admission request: it decodes the pod, reads the
// namespace and its syncers, and answers with what Inject made, unless the
// pod would register an app its namespace may not. Its only write is the
// claim of an app no namespace has claimed yet, never in a dry run.
func (h *Handler) Handle(ctx context.Context, req admission.Request) admission.Response {
	began := time.Now()
	resp, reason := h.handle(ctx, req)
	observe(resp, reason, time.Since(began))
	return resp
}

func (h *Handler) handle(ctx context.Context, req admission.Request) (admission.Response, Reason) {
	if req.UID == "" && req.Kind.Kind == "" && req.Operation == "" {
		h.log.Warn("empty admission request")
		return admission.Errored(http.StatusBadRequest, errors.New("malformed AdmissionReview: no request")), ReasonMalformed
	}
	if req.Kind.Kind != "Pod" || req.Operation != admissionv1.Create {
		return admission.Allowed("eurekube mutates only pod creations"), ReasonNotAPodCreate
	}
	if len(req.Object.Raw) == 0 {
		h.requestLog(req, nil).Warn("admission request without an object")
		return admission.Errored(http.StatusBadRequest, errors.New("admission request has no object")), ReasonMalformed
	}
	pod, err := decodePod(req.Object.Raw)
	if err != nil {
		h.requestLog(req, nil).WithError(err).Warn("cannot decode the pod of an admission request")
		return admission.Errored(http.StatusBadRequest, fmt.Errorf("decode pod: %w", err)), ReasonMalformed
	}
	namespace := cmp.Or(req.Namespace, pod.Namespace)
	if namespace == "" { // the API server always names it
		h.requestLog(req, pod).Warn("admission request for a pod without a namespace")
		return admission.Errored(http.StatusBadRequest, errors.New("admission request names no namespace for the pod")), ReasonMalformed
	}

	ns, syncers, err := h.read(ctx, h.reader, namespace)
	r := Inject(pod, ns, syncers, h.defaults)
	if h.live != nil && (err != nil && apierrors.IsNotFound(err) || err == nil && cacheMayLag(r.Reason)) {
		h.requestLog(req, pod).WithField("cached", r.Reason).Debug("asking the API server: the cache may not have the namespace or the syncer yet")
		ns, syncers, err = h.read(ctx, h.live, namespace)
		r = Inject(pod, ns, syncers, h.defaults)
	}
	if err != nil {
		h.requestLog(req, pod).WithError(err).Error("look up the namespace and its syncers")
		return admission.Errored(http.StatusInternalServerError, err), ReasonLookupFailed
	}
	if err := h.checkConsent(ctx, namespace, &r); err != nil {
		h.requestLog(req, pod).WithError(err).Error("check the consent of the syncer's Secrets")
		return admission.Errored(http.StatusInternalServerError, err), ReasonLookupFailed
	}
	if err := h.checkRegistrars(ctx, req, namespace, ns, &r); err != nil {
		h.requestLog(req, pod).WithError(err).Error("check the app's ownership")
		return admission.Errored(http.StatusInternalServerError, err), ReasonLookupFailed
	}
	h.logResult(req, pod, r)
	for _, a := range r.Adaptations {
		adapted.WithLabelValues(string(a.Reason)).Inc()
	}
	return response(r), r.Reason
}

// decodePod decodes the request's pod once, as the API server's own JSON
// serializer does (case-sensitive, integers kept as integers), without
// first scanning the object for its kind: the API server sends the pods of
// pod requests.
func decodePod(raw []byte) (*corev1.Pod, error) {
	pod := &corev1.Pod{}
	if err := sigsjson.UnmarshalCaseSensitivePreserveInts(raw, pod); err != nil {
		return nil, err
	}
	if pod.Kind != "" && pod.Kind != "Pod" || pod.APIVersion != "" && pod.APIVersion != "v1" {
		return nil, fmt.Errorf("object is a %s %s, not a v1 Pod", pod.APIVersion, pod.Kind)
	}
	return pod, nil
}

// response is the admission answer for r: a denial, the patch, or allowed
// untouched.
func response(r Result) admission.Response {
	switch {
	case r.Denied != "":
		return deny(r.Denied).WithWarnings(r.Warnings...)
	case len(r.Patch) > 0:
		patch, err := encodePatch(r.Patch)
		if err != nil {
			return admission.Errored(http.StatusInternalServerError, fmt.Errorf("encode the patch: %w", err))
		}
		resp := admission.Allowed(string(r.Reason)).WithWarnings(r.Warnings...)
		resp.Patch, resp.PatchType = patch, ptr.To(admissionv1.PatchTypeJSONPatch)
		return resp
	}
	return admission.Allowed(string(r.Reason)).WithWarnings(r.Warnings...)
}

// encodePatch is the JSON of ops, as Response.Complete would write it from
// Response.Patches, in one pass: through Operation.MarshalJSON every value
// is encoded, then scanned again by the outer encoder, a quarter of the
// handler's time for an injected pod.
func encodePatch(ops []jsonpatch.Operation) ([]byte, error) {
	buf := bytes.NewBuffer(make([]byte, 0, 4096)) // an injection's patch is about 3 KB
	enc := json.NewEncoder(buf)
	buf.WriteByte('[')
	for i, op := range ops {
		if i > 0 {
			buf.WriteByte(',')
		}
		buf.WriteString(`{"op":`)
		if err := encodeValue(buf, enc, op.Operation); err != nil {
			return nil, err
		}
		buf.WriteString(`,"path":`)
		if err := encodeValue(buf, enc, op.Path); err != nil {
			return nil, err
		}
		if op.Operation != "remove" {
			buf.WriteString(`,"value":`)
			if err := encodeValue(buf, enc, op.Value); err != nil {
				return nil, fmt.Errorf("%s: %w", op.Path, err)
			}
		}
		buf.WriteByte('}')
	}
	buf.WriteByte(']')
	return buf.Bytes(), nil
}

// encodeValue writes v as JSON through enc, which writes to buf; a string
// of plain characters (printable ASCII but for what JSON or enc would
// escape: '"', '\\', '<', '>', '&'), as the operations, paths and
// annotations of a patch mostly are, it quotes itself, as enc would.
func encodeValue(buf *bytes.Buffer, enc *json.Encoder, v any) error {
	if s, ok := v.(string); ok && plainJSONString(s) {
		buf.WriteByte('"')
		buf.WriteString(s)
		buf.WriteByte('"')
		return nil
	}
	return enc.Encode(v)
}

// plainJSONString is true when s needs no escaping in JSON, HTML-safe
// (json.Encoder's default).
func plainJSONString(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			return false
		}
	}
	return true
}

// ApplyPatch applies ops to the JSON object raw as the API server applies
// a webhook's patch (the same encoding, the same JSON patch library):
// `eurekube inject` writes with it what the API server would admit.
func ApplyPatch(raw []byte, ops []jsonpatch.Operation) ([]byte, error) {
	encoded, err := encodePatch(ops)
	if err != nil {
		return nil, fmt.Errorf("encode the patch: %w", err)
	}
	patch, err := evanphx.DecodePatch(encoded)
	if err != nil {
		return nil, fmt.Errorf("decode the patch: %w", err)
	}
	patched, err := patch.Apply(raw)
	if err != nil {
		return nil, fmt.Errorf("apply the patch %s: %w", encoded, err)
	}
	return patched, nil
}

// logResult writes the one line per decision, its fields in one map.
func (h *Handler) logResult(req admission.Request, pod *corev1.Pod, r Result) {
	switch {
	case r.Denied != "":
		h.decisionLog(req, pod, r, 1).WithError(r.Err).Info("pod denied")
	case r.Skipped != nil:
		h.decisionLog(req, pod, r, 2).Info("pod skipped: " + string(r.Skipped.Reason))
	case r.Inject:
		h.decisionLog(req, pod, r, 3).Info("pod injected")
	default:
		h.decisionLog(req, pod, r, 1).Debug("pod not injected")
	}
}

// decisionLog is requestLog with the decision's fields: the reason, then
// the syncer, then the number of adaptations, as many as fields says.
func (h *Handler) decisionLog(req admission.Request, pod *corev1.Pod, r Result, fields int) *logrus.Entry {
	f := requestFields(req, pod, 3+fields)
	f["reason"] = r.Reason
	if fields > 1 {
		f["syncer"] = r.Syncer.Name
	}
	if fields > 2 {
		f["adaptations"] = len(r.Adaptations)
	}
	return h.log.WithFields(f)
}

// requestLog names the request in a log line; a generateName pod is named
// by its prefix.
func (h *Handler) requestLog(req admission.Request, pod *corev1.Pod) *logrus.Entry {
	return h.log.WithFields(requestFields(req, pod, 3))
}

// requestFields are requestLog's fields, in a map with room for size.
func requestFields(req admission.Request, pod *corev1.Pod, size int) logrus.Fields {
	name := req.Name
	if pod != nil && pod.Name == "" && pod.GenerateName != "" {
		name = pod.GenerateName + "<generated>"
	}
	f := make(logrus.Fields, size)
	f["uid"], f["namespace"], f["name"] = req.UID, req.Namespace, name
	return f
}

// read reads the pod's namespace and, when it is opted in, its syncers
// through r. The objects are the cache's own, not copies: Inject only reads
// them (Decide copies the syncer it picks).
func (h *Handler) read(ctx context.Context, r client.Reader, namespace string) (Namespace, []v1alpha1.EurekaSyncer, error) {
	ns := Namespace{Excluded: h.excluded[namespace]}
	if ns.Excluded {
		return ns, nil, nil
	}
	var obj corev1.Namespace
	if err := r.Get(ctx, client.ObjectKey{Name: namespace}, &obj, client.UnsafeDisableDeepCopy); err != nil {
		return ns, nil, fmt.Errorf("read namespace %s: %w", namespace, err)
	}
	ns.Labels = obj.Labels
	if !ns.OptedIn() {
		return ns, nil, nil
	}
	var syncers v1alpha1.EurekaSyncerList
	if err := r.List(ctx, &syncers, client.InNamespace(namespace), client.UnsafeDisableDeepCopy); err != nil {
		return ns, nil, fmt.Errorf("list EurekaSyncers of %s: %w", namespace, err)
	}
	return ns, syncers.Items, nil
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
