package cluster

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strconv"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/eurekube/eurekube/certs"
	"github.com/eurekube/eurekube/tests/node"
)

// The mesh injector's names. MeshLabel on a pod, else on its namespace,
// selects the proxy's shape: MeshClassic or MeshNative.
const (
	MeshLabel = "eurekube.test/mesh"
	// MeshClassic is a proxy container appended to spec.containers, as
	// Istio and Linkerd inject it without native sidecars: the kubelet
	// stops it with the app's containers, and it exits MeshProxyDrain after
	// its SIGTERM.
	MeshClassic = "classic"
	// MeshNative is the same proxy as a native sidecar (an init container
	// with restartPolicy Always), which the kubelet stops only once every
	// app container has exited.
	MeshNative = "native"
	// MeshProxy is the proxy container's name.
	MeshProxy = "mesh-proxy"
	// MeshProxyDrain is how long the proxy serves after SIGTERM:
	// istio-proxy's default terminationDrainDuration.
	MeshProxyDrain = 5 * time.Second
	// MeshAppPortOffset moves the app: from its first port P to
	// 127.0.0.1:P+MeshAppPortOffset, while the proxy listens on P.
	MeshAppPortOffset = 10000
	// MeshWebhookConfig names the mesh's MutatingWebhookConfiguration. The
	// API server calls webhooks in the order of their configurations'
	// names, so the mesh runs after Eurekube (WebhookConfig) and changes
	// pods Eurekube has already seen: Eurekube sees the proxy only when it
	// is reinvoked.
	MeshWebhookConfig = "mesh-injector"
	meshPath          = "/inject"
)

// MeshInjector is a service mesh's sidecar injector, the neighbour
// Eurekube meets in clusters that run Istio or Linkerd: a mutating webhook
// served by the test process on the node's address, over TLS with a CA of
// its own, that puts a proxy in front of every app it selects. A real mesh
// redirects the app's port to its proxy with iptables; this one moves the
// app instead, through the test app's LISTEN_ADDR, so that the proxy is on
// every call to the pod's port and the pod refuses its callers once the
// proxy is gone. Like Eurekube's, its webhooks are reinvoked if a later one
// changes the pod (reinvocationPolicy IfNeeded), and it injects a pod once.
type MeshInjector struct {
	srv    *http.Server
	client client.Client
	image  string
}

// StartMeshInjector serves the mesh injector and registers its webhooks;
// Stop removes them. It injects the pods labelled MeshLabel, and every pod
// of a namespace so labelled.
func (c *Cluster) StartMeshInjector(ctx context.Context) (*MeshInjector, error) {
	if MeshWebhookConfig <= WebhookConfig {
		return nil, fmt.Errorf("mesh injector: its configuration %q would run before Eurekube's %q", MeshWebhookConfig, WebhookConfig)
	}
	ca, err := certs.NewCA("eurekube-test-mesh-ca", 0)
	if err != nil {
		return nil, fmt.Errorf("mesh injector: %w", err)
	}
	serving, err := ca.Issue(certs.ServingOptions{IPAddresses: []net.IP{net.ParseIP(node.NodeIP)}})
	if err != nil {
		return nil, fmt.Errorf("mesh injector: %w", err)
	}
	cert, err := tls.X509KeyPair(serving.CertPEM, serving.KeyPEM)
	if err != nil {
		return nil, fmt.Errorf("mesh injector: %w", err)
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(node.NodeIP, "0"))
	if err != nil {
		return nil, fmt.Errorf("mesh injector: %w", err)
	}
	m := &MeshInjector{client: c.Node.Client, image: c.Node.Image("testapp")}
	mux := http.NewServeMux()
	mux.Handle(meshPath, &admission.Webhook{Handler: admission.HandlerFunc(m.handle)})
	m.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second,
		TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}}
	go func() { _ = m.srv.ServeTLS(ln, "", "") }()

	url := "https://" + net.JoinHostPort(node.NodeIP, strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)) + meshPath
	if err := m.client.Create(ctx, meshWebhookConfiguration(url, ca.PEM)); err != nil {
		_ = m.srv.Close()
		return nil, fmt.Errorf("mesh injector: register its webhooks: %w", err)
	}
	return m, nil
}

// Stop unregisters the webhooks and stops serving them.
func (m *MeshInjector) Stop(ctx context.Context) error {
	cfg := &admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: MeshWebhookConfig}}
	err := m.client.Delete(ctx, cfg)
	if apierrors.IsNotFound(err) {
		err = nil
	}
	return errors.Join(err, m.srv.Close())
}

// meshWebhookConfiguration has two webhooks, so that a pod is sent by its
// own label or, without one, by its namespace's: a webhook's namespace and
// object selectors must both match. Like Istio's, they fail closed, so no
// selected pod ever runs without its proxy.
func meshWebhookConfiguration(url string, caBundle []byte) *admissionregistrationv1.MutatingWebhookConfiguration {
	labelled := func(op metav1.LabelSelectorOperator) *metav1.LabelSelector {
		return &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: MeshLabel, Operator: op}}}
	}
	webhook := func(name string, namespaces, objects *metav1.LabelSelector) admissionregistrationv1.MutatingWebhook {
		return admissionregistrationv1.MutatingWebhook{
			Name:                    name,
			AdmissionReviewVersions: []string{"v1"},
			ClientConfig:            admissionregistrationv1.WebhookClientConfig{URL: &url, CABundle: caBundle},
			Rules: []admissionregistrationv1.RuleWithOperations{{
				Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
				Rule: admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"},
					Resources: []string{"pods"}, Scope: ptr.To(admissionregistrationv1.NamespacedScope)},
			}},
			NamespaceSelector:  namespaces,
			ObjectSelector:     objects,
			FailurePolicy:      ptr.To(admissionregistrationv1.Fail),
			SideEffects:        ptr.To(admissionregistrationv1.SideEffectClassNone),
			TimeoutSeconds:     ptr.To[int32](10),
			ReinvocationPolicy: ptr.To(admissionregistrationv1.IfNeededReinvocationPolicy),
		}
	}
	return &admissionregistrationv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: MeshWebhookConfig},
		Webhooks: []admissionregistrationv1.MutatingWebhook{
			webhook("pod.mesh.eurekube.test", &metav1.LabelSelector{}, labelled(metav1.LabelSelectorOpExists)),
			webhook("namespace.mesh.eurekube.test", labelled(metav1.LabelSelectorOpExists), labelled(metav1.LabelSelectorOpDoesNotExist)),
		},
	}
}

// handle injects the proxy the pod's label, else its namespace's, asks for.
func (m *MeshInjector) handle(ctx context.Context, req admission.Request) admission.Response {
	var pod corev1.Pod
	if err := json.Unmarshal(req.Object.Raw, &pod); err != nil {
		return admission.Errored(http.StatusBadRequest, err)
	}
	shape, ok := pod.Labels[MeshLabel]
	if !ok {
		var ns corev1.Namespace
		if err := m.client.Get(ctx, client.ObjectKey{Name: req.Namespace}, &ns); err != nil {
			return admission.Errored(http.StatusInternalServerError, err)
		}
		shape = ns.Labels[MeshLabel]
	}
	if !meshInject(&pod, shape, m.image) {
		return admission.Allowed("no proxy to inject")
	}
	raw, err := json.Marshal(&pod)
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, err)
	}
	return admission.PatchResponseFromRaw(req.Object.Raw, raw)
}

// meshInject puts the proxy of shape in front of the first port of the
// pod's first container (8080, the test app's, when it declares none), and
// says whether it changed the pod: not when the pod has its proxy already
// (a reinvocation), nor for another shape.
func meshInject(pod *corev1.Pod, shape, image string) bool {
	if shape != MeshClassic && shape != MeshNative || len(pod.Spec.Containers) == 0 {
		return false
	}
	for _, c := range slices.Concat(pod.Spec.InitContainers, pod.Spec.Containers) {
		if c.Name == MeshProxy {
			return false
		}
	}
	app := &pod.Spec.Containers[0]
	port := int32(8080)
	if len(app.Ports) > 0 {
		port = app.Ports[0].ContainerPort
	}
	appAddr := net.JoinHostPort("127.0.0.1", strconv.Itoa(int(port+MeshAppPortOffset)))
	setEnv(app, "LISTEN_ADDR", appAddr)
	proxy := corev1.Container{
		Name:            MeshProxy,
		Image:           image,
		ImagePullPolicy: corev1.PullNever,
		Args: []string{"proxy", "-listen", ":" + strconv.Itoa(int(port)), "-to", appAddr,
			"-exit-after-sigterm", MeshProxyDrain.String()},
		Resources: PodRequests(),
		SecurityContext: &corev1.SecurityContext{
			AllowPrivilegeEscalation: ptr.To(false),
			ReadOnlyRootFilesystem:   ptr.To(true),
			RunAsNonRoot:             ptr.To(true),
			Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		},
	}
	if shape == MeshNative {
		proxy.RestartPolicy = ptr.To(corev1.ContainerRestartPolicyAlways)
		pod.Spec.InitContainers = append(pod.Spec.InitContainers, proxy)
	} else {
		pod.Spec.Containers = append(pod.Spec.Containers, proxy)
	}
	return true
}

// setEnv sets the container's variable name to value.
func setEnv(c *corev1.Container, name, value string) {
	for i := range c.Env {
		if c.Env[i].Name == name {
			c.Env[i] = corev1.EnvVar{Name: name, Value: value}
			return
		}
	}
	c.Env = append(c.Env, corev1.EnvVar{Name: name, Value: value})
}
