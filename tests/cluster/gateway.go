package cluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/eurekube/eurekube/sidecar"
	"github.com/eurekube/eurekube/tests/harness"
	"github.com/eurekube/eurekube/tests/images"
)

// The gateway as manifests/gateway installs it (audit mode, a placeholder
// Eureka URL), and as the gateway stories and the sandbox run it:
// enforcing, in front of Eureka servers that demand basic auth, whose
// credentials only the gateway holds (the manager writes through the
// gateway with its own token).
const (
	GatewayDeployment   = "eurekube-gateway"
	GatewayService      = "eurekube-gateway"
	GatewayContainer    = "gateway"
	GatewayEurekaSecret = "eurekube-gateway-eureka"
	// GatewayAudience is the audience of the pods' projected tokens: the
	// gateway's --audience, the manager's --gateway-audience.
	GatewayAudience = "eurekube-gateway"
	GatewayPort     = 8761
	// GatewayURL is the gateway's service URL as pods and the manager name
	// it, through the cluster's DNS. The installed manager's --eureka-url
	// (applyDefault), so the webhook gives the registrars of the syncers
	// that name it a token for GatewayAudience, and the manager sends its
	// own there.
	GatewayURL = "http://" + GatewayService + "." + ManagerNamespace + ".svc:8761/eureka"
	// gatewayCredentialsDir is where the gateway mounts Secret
	// GatewayEurekaSecret (manifests/gateway/deployment.yaml).
	gatewayCredentialsDir = "/etc/eurekube/eureka"
)

// GatewayOptions say what the gateway enforces in front of.
type GatewayOptions struct {
	// EurekaURLs are the Eureka servers behind the gateway.
	EurekaURLs []string
	// Auth is what they demand: the gateway's credentials.
	Auth *harness.EurekaAuth
	// ReadTTL, when set, is the gateway's --read-ttl: how long one copy of
	// a polled read answers every client. The stories shorten it in step
	// with their other caches (doc.go); the sandbox keeps the default.
	ReadTTL time.Duration
}

// EnforceGateway makes the installed gateway enforce its rules in front of
// o.EurekaURLs with o.Auth: the Secret GatewayEurekaSecret, the two flags
// that read it (commented out in manifests/gateway), --mode=enforce. It
// waits until every replica runs the new arguments, and returns what puts
// the Deployment back as it was.
func (c *Cluster) EnforceGateway(ctx context.Context, o GatewayOptions) (restore func(context.Context) error, err error) {
	if len(o.EurekaURLs) == 0 || o.Auth == nil {
		return nil, errors.New("enforce the gateway: GatewayOptions needs EurekaURLs and Auth")
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ManagerNamespace, Name: GatewayEurekaSecret}}
	_, err = createOrUpdate(ctx, c.Node.Client, secret, func() {
		secret.Type = corev1.SecretTypeBasicAuth
		secret.Data = map[string][]byte{corev1.BasicAuthUsernameKey: []byte(o.Auth.Username), corev1.BasicAuthPasswordKey: []byte(o.Auth.Password)}
	})
	if err != nil {
		return nil, fmt.Errorf("enforce the gateway: Secret %s: %w", GatewayEurekaSecret, err)
	}
	installed, err := c.setGatewayArgs(ctx, func(args []string) []string { return enforcingArgs(args, o) })
	if err != nil {
		return nil, err
	}
	restore = func(ctx context.Context) error {
		_, err := c.setGatewayArgs(ctx, func([]string) []string { return installed })
		if derr := c.Node.Client.Delete(ctx, secret); client.IgnoreNotFound(derr) != nil {
			err = errors.Join(err, derr)
		}
		return err
	}
	if err := c.WaitGatewayRolledOut(ctx); err != nil {
		return restore, err
	}
	return restore, nil
}

// enforcingArgs are the gateway's arguments args, enforcing in front of
// o's servers with the mounted credentials.
func enforcingArgs(args []string, o GatewayOptions) []string {
	out := make([]string, 0, len(args)+3)
	for _, a := range args {
		flag, _, _ := strings.Cut(a, "=")
		switch flag {
		case "--mode", "--eureka-url", "--eureka-username-file", "--eureka-password-file", "--read-ttl":
			continue
		}
		out = append(out, a)
	}
	out = append(out, "--mode=enforce", "--eureka-url="+strings.Join(o.EurekaURLs, ","),
		"--eureka-username-file="+gatewayCredentialsDir+"/"+corev1.BasicAuthUsernameKey,
		"--eureka-password-file="+gatewayCredentialsDir+"/"+corev1.BasicAuthPasswordKey)
	if o.ReadTTL > 0 {
		out = append(out, "--read-ttl="+o.ReadTTL.String())
	}
	return out
}

// setGatewayArgs sets the gateway container's arguments to change(its
// arguments) and returns those it had.
func (c *Cluster) setGatewayArgs(ctx context.Context, change func([]string) []string) ([]string, error) {
	var dep appsv1.Deployment
	if err := c.Node.Client.Get(ctx, client.ObjectKey{Namespace: ManagerNamespace, Name: GatewayDeployment}, &dep); err != nil {
		return nil, fmt.Errorf("the gateway's Deployment: %w", err)
	}
	i := slices.IndexFunc(dep.Spec.Template.Spec.Containers, func(c corev1.Container) bool { return c.Name == GatewayContainer })
	if i < 0 {
		return nil, fmt.Errorf("the gateway's Deployment has no container %s", GatewayContainer)
	}
	before := dep.DeepCopy()
	had := slices.Clone(dep.Spec.Template.Spec.Containers[i].Args)
	dep.Spec.Template.Spec.Containers[i].Args = change(slices.Clone(had))
	if slices.Equal(had, dep.Spec.Template.Spec.Containers[i].Args) {
		return had, nil
	}
	// Optimistic: a concurrent change of the Deployment fails the patch
	// rather than being undone by it.
	if err := c.Node.Client.Patch(ctx, &dep, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
		return nil, fmt.Errorf("patch the gateway's arguments: %w", err)
	}
	return had, nil
}

// WaitGatewayRolledOut waits until every replica of the gateway runs its
// Deployment's current template and is ready, and no other pod of it is
// left, as kubectl rollout status does.
func (c *Cluster) WaitGatewayRolledOut(ctx context.Context) error {
	return harness.Poll(ctx, 5*time.Minute, 500*time.Millisecond, "the gateway rolled out", func() error {
		var dep appsv1.Deployment
		if err := c.Node.Client.Get(ctx, client.ObjectKey{Namespace: ManagerNamespace, Name: GatewayDeployment}, &dep); err != nil {
			return err
		}
		want := ptr.Deref(dep.Spec.Replicas, 1)
		st := dep.Status
		if st.ObservedGeneration < dep.Generation || st.UpdatedReplicas != want || st.ReadyReplicas != want || st.AvailableReplicas != want || st.Replicas != want {
			return fmt.Errorf("deployment %s: generation %d observed %d, %d updated, %d ready, %d available, %d in all; want %d",
				GatewayDeployment, dep.Generation, st.ObservedGeneration, st.UpdatedReplicas, st.ReadyReplicas, st.AvailableReplicas, st.Replicas, want)
		}
		return nil
	})
}

// GatewayPods are the gateway's pods, as the kubelet last reported them.
func (c *Cluster) GatewayPods(ctx context.Context) ([]corev1.Pod, error) {
	var list corev1.PodList
	err := c.Node.Client.List(ctx, &list, client.InNamespace(ManagerNamespace),
		client.MatchingLabels{"app.kubernetes.io/name": "eurekube", managerComponentKey: "gateway"})
	if err != nil {
		return nil, fmt.Errorf("list gateway pods: %w", err)
	}
	return list.Items, nil
}

// GatewayHostURL is the gateway's service URL for a client on the host (a
// "VM"), which does not ask the cluster's DNS: its Service's ClusterIP,
// which kube-proxy routes from the host too.
func (c *Cluster) GatewayHostURL(ctx context.Context) (string, error) {
	var svc corev1.Service
	if err := c.Node.Client.Get(ctx, client.ObjectKey{Namespace: ManagerNamespace, Name: GatewayService}, &svc); err != nil {
		return "", fmt.Errorf("the gateway's Service: %w", err)
	}
	if svc.Spec.ClusterIP == "" || svc.Spec.ClusterIP == corev1.ClusterIPNone {
		return "", fmt.Errorf("the gateway's Service has no ClusterIP (%q)", svc.Spec.ClusterIP)
	}
	return "http://" + net.JoinHostPort(svc.Spec.ClusterIP, strconv.Itoa(GatewayPort)) + "/eureka", nil
}

// WithCredentials is a service URL with user and password as its
// userinfo, as a Spring client's defaultZone carries them (Spring sends
// them as basic auth; a ':' in the password would silently drop them).
func WithCredentials(serviceURL, user, password string) string {
	scheme, rest, ok := strings.Cut(serviceURL, "://")
	if !ok {
		return serviceURL
	}
	return scheme + "://" + user + ":" + password + "@" + rest
}

// ClientSecret creates (or updates) a Secret of type
// kubernetes.io/basic-auth in the gateway's namespace: a client's
// identity, which an EurekaAppPolicy binds to apps with spec.clientSecrets.
func (c *Cluster) ClientSecret(ctx context.Context, name, user, password string) error {
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ManagerNamespace, Name: name}}
	_, err := createOrUpdate(ctx, c.Node.Client, s, func() {
		s.Type = corev1.SecretTypeBasicAuth
		s.Data = map[string][]byte{corev1.BasicAuthUsernameKey: []byte(user), corev1.BasicAuthPasswordKey: []byte(password)}
	})
	if err != nil {
		return fmt.Errorf("client Secret %s: %w", name, err)
	}
	return nil
}

func createOrUpdate(ctx context.Context, cl client.Client, obj client.Object, mutate func()) (bool, error) {
	key := client.ObjectKeyFromObject(obj)
	if err := cl.Get(ctx, key, obj); apierrors.IsNotFound(err) {
		mutate()
		return true, cl.Create(ctx, obj)
	} else if err != nil {
		return false, err
	}
	mutate()
	return false, cl.Update(ctx, obj)
}

// The rogue pod: what the strongest tenant can do against the gateway.
// Anyone with edit rights in a namespace can mount a projected token of
// its ServiceAccount for any audience, the gateway's included, and run a
// copy of the registrar's image under another name (which
// manifests/registrar-image-policy does not recognise; a namespace that
// never opted in is not the webhook's to check). So the pod registers
// another team's app through the gateway with its own, valid identity,
// and the gateway must refuse it by the ownership rules. A second copy of
// the registrar in the same pod talks to a Eureka server directly with the
// same token, which Eureka does not take.
const (
	// RogueRegistrarImage is the copy of the registrar's image.
	RogueRegistrarImage = "registry.tenant.example/tools/registrar:copy"
	// RogueViaGateway and RogueDirect are the rogue pod's registrar
	// containers: through the gateway, and at Eureka directly.
	RogueViaGateway = "via-gateway"
	RogueDirect     = "direct"
	rogueTokenDir   = "/var/run/secrets/tenant/gateway"
)

// RogueOptions describe the rogue pod.
type RogueOptions struct {
	// Namespace and Name of the pod; the namespace is created, labelled
	// with NamespaceLabels, never for injection.
	Namespace, Name string
	NamespaceLabels map[string]string
	// App is the victim's Eureka app that the pod registers as.
	App string
	// GatewayURL is the gateway's service URL (GatewayURL); EurekaURL a
	// Eureka server's, which the second registrar aims at directly.
	GatewayURL, EurekaURL string
}

// StartRoguePod creates the rogue pod (and its namespace) and waits until
// both its registrars run.
func (c *Cluster) StartRoguePod(ctx context.Context, o RogueOptions) (*corev1.Pod, error) {
	if err := c.importRegistrarCopy(ctx); err != nil {
		return nil, err
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: o.Namespace, Labels: o.NamespaceLabels}}
	if err := c.Node.Client.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("the rogue pod's namespace: %w", err)
	}
	pod := roguePod(o, c.Node.Image("testapp"))
	if err := c.Node.Client.Create(ctx, pod); err != nil {
		return nil, fmt.Errorf("create the rogue pod: %w", err)
	}
	err := harness.Poll(ctx, 3*time.Minute, 500*time.Millisecond, "the rogue pod's registrars running", func() error {
		if err := c.Node.Client.Get(ctx, client.ObjectKeyFromObject(pod), pod); err != nil {
			return err
		}
		running := 0
		for _, s := range pod.Status.ContainerStatuses {
			if s.State.Running != nil {
				running++
			}
		}
		if pod.Status.PodIP == "" || running != len(pod.Spec.Containers) {
			return fmt.Errorf("pod %s/%s: phase %s, IP %q, %d of %d containers running", pod.Namespace, pod.Name, pod.Status.Phase, pod.Status.PodIP, running, len(pod.Spec.Containers))
		}
		return nil
	})
	return pod, err
}

// roguePod is the rogue pod: the test app as the "service", and two
// registrars of the copied image registering it as o.App, each with the
// pod's own projected token for the gateway's audience.
func roguePod(o RogueOptions, appImage string) *corev1.Pod {
	field := func(n, path string) corev1.EnvVar {
		return corev1.EnvVar{Name: n, ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: path}}}
	}
	registrar := func(name, eurekaURL, listen string) corev1.Container {
		return corev1.Container{
			Name: name, Image: RogueRegistrarImage, ImagePullPolicy: corev1.PullNever,
			Env: []corev1.EnvVar{
				field(sidecar.EnvPodName, "metadata.name"), field(sidecar.EnvPodNamespace, "metadata.namespace"),
				field(sidecar.EnvPodUID, "metadata.uid"), field(sidecar.EnvPodIP, "status.podIP"),
				{Name: sidecar.EnvAppName, Value: o.App}, {Name: sidecar.EnvPort, Value: "8080"},
				{Name: sidecar.EnvEurekaURLs, Value: eurekaURL},
				{Name: sidecar.EnvGatewayTokenFile, Value: rogueTokenDir + "/token"},
				{Name: sidecar.EnvHealthPath, Value: "/ready"},
				{Name: sidecar.EnvListenAddr, Value: listen},
				{Name: sidecar.EnvRetryMax, Value: "5s"},
			},
			VolumeMounts:    []corev1.VolumeMount{{Name: "gateway-token", MountPath: rogueTokenDir, ReadOnly: true}},
			Resources:       PodRequests(),
			SecurityContext: restrictedContainer(),
		}
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: o.Namespace, Name: o.Name, Labels: map[string]string{"app": o.Name}},
		Spec: corev1.PodSpec{
			TerminationGracePeriodSeconds: ptr.To[int64](2),
			SecurityContext: &corev1.PodSecurityContext{
				RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To[int64](65532), RunAsGroup: ptr.To[int64](65532),
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
			},
			Containers: []corev1.Container{
				{
					Name: "app", Image: appImage, ImagePullPolicy: corev1.PullNever,
					Env:             []corev1.EnvVar{field("POD_NAME", "metadata.name")},
					Ports:           []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}},
					ReadinessProbe:  &corev1.Probe{PeriodSeconds: 1, ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/ready", Port: intstr.FromString("http")}}},
					Resources:       PodRequests(),
					SecurityContext: restrictedContainer(),
				},
				registrar(RogueViaGateway, o.GatewayURL, ":9901"),
				registrar(RogueDirect, o.EurekaURL, ":9902"),
			},
			Volumes: []corev1.Volume{{Name: "gateway-token", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
				Sources: []corev1.VolumeProjection{{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{
					Audience: GatewayAudience, ExpirationSeconds: ptr.To[int64](600), Path: "token",
				}}},
			}}}},
		},
	}
}

func restrictedContainer() *corev1.SecurityContext {
	return &corev1.SecurityContext{
		AllowPrivilegeEscalation: ptr.To(false),
		ReadOnlyRootFilesystem:   ptr.To(true),
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
	}
}

// registrarCopy imports RogueRegistrarImage once per cluster.
type registrarCopy struct {
	sync.Mutex
	done bool
}

// importRegistrarCopy builds the registrar's image from the working tree,
// as the node's images are built, tags it RogueRegistrarImage and imports
// it into the node's containerd.
func (c *Cluster) importRegistrarCopy(ctx context.Context) error {
	c.registrarCopy.Lock()
	defer c.registrarCopy.Unlock()
	if c.registrarCopy.done {
		return nil
	}
	root, err := harness.RepoRoot()
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "eurekube-registrar-copy-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if err := images.Compile(root, dir, []images.Spec{images.Registrar}); err != nil {
		return fmt.Errorf("the registrar's copy: %w", err)
	}
	binary, err := os.ReadFile(filepath.Join(dir, images.Registrar.Name))
	if err != nil {
		return err
	}
	ca, err := os.ReadFile(images.DefaultCABundle)
	if err != nil {
		return fmt.Errorf("the registrar's copy: CA bundle: %w", err)
	}
	img, err := images.Build(images.Registrar, binary, images.Metadata{Version: "copy", Created: time.Unix(0, 0).UTC(), CABundle: ca})
	if err != nil {
		return fmt.Errorf("the registrar's copy: %w", err)
	}
	tag, err := name.NewTag(RogueRegistrarImage)
	if err != nil {
		return err
	}
	archive := filepath.Join(dir, "registrar-copy.tar")
	if err := tarball.WriteToFile(archive, tag, img); err != nil {
		return fmt.Errorf("the registrar's copy: %w", err)
	}
	if err := c.Node.ImportImage(ctx, archive); err != nil {
		return err
	}
	c.registrarCopy.done = true
	return nil
}

// RogueInstanceID is the instance the rogue pod's registrars register, as
// the registrar names its own (sidecar.InstanceIDPrefix).
func RogueInstanceID(pod *corev1.Pod, app string) string {
	return sidecar.InstanceIDPrefix(pod.Name, pod.Namespace, string(pod.UID)) + strings.ToLower(app) + ":8080"
}

// WaitRefusal waits until the gateway has recorded an Event of reason
// EurekaWriteRefused on pod, naming op (a Eureka operation: register) in
// its note, and returns it.
func (c *Cluster) WaitRefusal(ctx context.Context, pod *corev1.Pod, op string, timeout time.Duration) (eventsv1.Event, error) {
	var found eventsv1.Event
	err := harness.Poll(ctx, timeout, 500*time.Millisecond, "the gateway's EurekaWriteRefused Event on pod "+pod.Namespace+"/"+pod.Name, func() error {
		var events eventsv1.EventList
		if err := c.Node.Client.List(ctx, &events, client.InNamespace(pod.Namespace)); err != nil {
			return err
		}
		var seen []string
		for _, e := range events.Items {
			if e.Regarding.Kind != "Pod" || e.Regarding.Name != pod.Name {
				continue
			}
			seen = append(seen, e.Reason+": "+e.Note)
			if e.Reason == "EurekaWriteRefused" && strings.Contains(e.Note, "Eureka "+op+" ") {
				found = e
				return nil
			}
		}
		return fmt.Errorf("the pod's Events: %q", seen)
	})
	return found, err
}

// ContainerLog is what container of pod has written since it last
// started, as kubectl logs shows it.
func (c *Cluster) ContainerLog(ctx context.Context, pod *corev1.Pod, container string) (string, error) {
	out, err := c.Clientset.CoreV1().Pods(pod.Namespace).GetLogs(pod.Name, &corev1.PodLogOptions{Container: container}).DoRaw(ctx)
	if err != nil {
		return "", fmt.Errorf("logs of %s/%s %s: %w", pod.Namespace, pod.Name, container, err)
	}
	return string(out), nil
}

// WaitEurekaRefused waits until the rogue pod's registrar that talks to
// Eureka directly has logged Eureka's 401, and returns that line.
func (c *Cluster) WaitEurekaRefused(ctx context.Context, pod *corev1.Pod, timeout time.Duration) (string, error) {
	var line string
	err := harness.Poll(ctx, timeout, time.Second, "Eureka refusing the rogue pod's direct registrar (401)", func() error {
		log, err := c.ContainerLog(ctx, pod, RogueDirect)
		if err != nil {
			return err
		}
		for l := range strings.SplitSeq(log, "\n") {
			if strings.Contains(l, "401") {
				line = l
				return nil
			}
		}
		return fmt.Errorf("no 401 in its log yet:\n%s", tail(log, 1500))
	})
	return line, err
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}
