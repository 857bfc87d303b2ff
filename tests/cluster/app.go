package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/eurekube/eurekube/api/v1alpha1"
	"github.com/eurekube/eurekube/eureka"
	"github.com/eurekube/eurekube/internal/builders"
	"github.com/eurekube/eurekube/tests/harness"
)

// App is a service as a team deploys it with Eurekube: a namespace
// labelled for injection, an EurekaSyncer registering with the cluster's
// Eureka, and a Deployment whose pods run the test app's image (which
// answers with its pod name) on a container port named http, with a
// readiness probe, as Pod Security "restricted" requires.
type App struct {
	Namespace string
	// Name names the syncer and the Deployment and is the pods' app label;
	// Eureka lists the app upper-cased.
	Name     string
	Replicas int32
	// DrainSeconds is the syncer's drain; nil keeps the manager's default
	// (100 s).
	DrainSeconds *int32
	// Metadata goes into every instance's Eureka metadata.
	Metadata map[string]string
	// Port is the name of the container port the syncer registers (empty:
	// http, the test app's).
	Port string
	// PreStop is the app container's own preStop hook (nil: none), which the
	// webhook composes with the drain.
	PreStop *corev1.LifecycleHandler
	// Traffic is the syncer's spec.traffic (empty: the default, Serve).
	Traffic v1alpha1.Traffic
	// LoadBalancerIP, when set, makes the app a Service-mode one: a
	// LoadBalancer Service named Name (port http, 80 → the pods' http) is
	// created with this ingress IP in its status, as a cloud controller
	// would set it (kube-proxy then routes it to the pods), and the
	// syncer registers the Service (spec.mode Service), not the pods.
	LoadBalancerIP string
	// EurekaURLs are the syncer's spec.eureka.serviceURLs (nil: the
	// cluster's Eureka servers; GatewayURL: through the gateway).
	EurekaURLs []string
}

// ServicePort is the port of an app's Service (Service mode).
const ServicePort = 80

// objects are the app's namespace, syncer and Deployment.
func (a App) objects(image string, eurekaURLs []string) (*corev1.Namespace, *v1alpha1.EurekaSyncer, *appsv1.Deployment) {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name:   a.Namespace,
		Labels: map[string]string{v1alpha1.NamespaceInjectionLabel: "enabled"},
	}}
	opts := []builders.SyncerOption{builders.Metadata(a.Metadata), builders.EurekaURLs(eurekaURLs...), builders.Traffic(a.Traffic)}
	if a.Port != "" {
		opts = append(opts, builders.Port(intstr.FromString(a.Port)))
	}
	switch {
	case a.LoadBalancerIP != "":
		opts = append(opts, builders.ServiceMode(a.Name))
	case a.DrainSeconds != nil:
		opts = append(opts, builders.Drain(*a.DrainSeconds))
	}
	dep := builders.Deployment(a.Namespace, a.Name, a.Replicas, builders.Image(image), a.testApp)
	// One new pod at a time, never fewer ready pods than asked for.
	dep.Spec.Strategy = appsv1.DeploymentStrategy{
		Type: appsv1.RollingUpdateDeploymentStrategyType,
		RollingUpdate: &appsv1.RollingUpdateDeployment{
			MaxSurge:       ptr.To(intstr.FromInt32(1)),
			MaxUnavailable: ptr.To(intstr.FromInt32(0)),
		},
	}
	return ns, builders.Syncer(a.Namespace, a.Name, opts...), dep
}

// PodCPURequest is the CPU every container the suites run on the node
// requests (the test app, a pod's caller, a mesh's proxy, the Spring Cloud
// Kubernetes pod), with no limit. Without a request a container is
// BestEffort: on the node's cgroup v1 it gets cpu.shares 2 against the
// manager's 51 (50m), and a busy machine starved a test app's answers past a
// caller's 3 s timeout. 10m gives an app's pod 15 shares with its
// registrar's 5m, a third of a manager replica's.
//
// Why not more: the node's allocatable CPU is its 2 cores (no reserve), of
// which the manager's and the gateway's two replicas request 200m (50m each).
// Worst case, five stories run at once (storySlotsIdle in
// e2e_helpers_test.go), about 8 pods each with a rollout's surge and its
// draining pods, and 10 more still draining from stories just ended: 50
// pods × (10m + the registrar's 5m) + 4 mesh proxies × 10m + 200m + a
// gateway replica's surge (50m) = 1,040m of 2,000m. At 20m the same sum is
// 1,580m, too close for pods not to go Pending. The flood tests' 600 pods
// never run (faults_test.go keeps them off the node), so they take none.
const PodCPURequest = "10m"

// Memory requests: the test app's resident set is a few MiB; the Spring
// Cloud Kubernetes pod's JVM runs with -Xmx256m.
const (
	podMemoryRequest = "16Mi"
	jvmMemoryRequest = "320Mi"
)

// PodRequests are the requests of a test app's container (PodCPURequest).
func PodRequests() corev1.ResourceRequirements {
	return requests(podMemoryRequest)
}

// JVMPodRequests are the requests of a container running a JVM: the same
// CPU as every other test container, memory for its heap.
func JVMPodRequests() corev1.ResourceRequirements {
	return requests(jvmMemoryRequest)
}

func requests(memory string) corev1.ResourceRequirements {
	return corev1.ResourceRequirements{Requests: corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse(PodCPURequest),
		corev1.ResourceMemory: resource.MustParse(memory),
	}}
}

// testApp shapes the app's pods as the test app runs: its image answers
// with the pod's name (POD_NAME) and is never pulled, it is ready once
// /ready answers, runs as Pod Security "restricted" asks, with the app's
// own preStop, requests PodRequests, and stops within 10 s of its SIGTERM.
func (a App) testApp(p *corev1.Pod) {
	p.Spec.TerminationGracePeriodSeconds = ptr.To[int64](10)
	p.Spec.SecurityContext = &corev1.PodSecurityContext{
		RunAsNonRoot:   ptr.To(true),
		SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
	c := &p.Spec.Containers[0]
	c.ImagePullPolicy = corev1.PullNever
	c.Resources = PodRequests()
	c.Env = []corev1.EnvVar{{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{
		FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}}}
	if a.PreStop != nil {
		c.Lifecycle = &corev1.Lifecycle{PreStop: a.PreStop}
	}
	c.ReadinessProbe = &corev1.Probe{
		ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/ready", Port: intstr.FromString(builders.PortName)}},
		PeriodSeconds: 1,
	}
	c.SecurityContext = &corev1.SecurityContext{
		AllowPrivilegeEscalation: ptr.To(false),
		ReadOnlyRootFilesystem:   ptr.To(true),
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
	}
}

// service is a Service-mode app's LoadBalancer Service.
func (a App) service() *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: a.Name, Namespace: a.Namespace},
		Spec: corev1.ServiceSpec{
			Type:     corev1.ServiceTypeLoadBalancer,
			Selector: map[string]string{"app": a.Name},
			Ports:    []corev1.ServicePort{{Name: "http", Port: ServicePort, TargetPort: intstr.FromString("http")}},
		},
	}
}

// Deploy creates the app's namespace, syncer and Deployment; those that
// exist already are kept. shape, when set, changes the Deployment before it
// is created (more containers, other hooks).
//
// Eureka apps are global: two tests deploying the same app name from two
// namespaces would see each other's instances, so that is refused.
func (c *Cluster) Deploy(ctx context.Context, app App, shape func(*appsv1.Deployment)) error {
	if owner, taken := c.apps.LoadOrStore(strings.ToUpper(app.Name), app.Namespace); taken && owner != app.Namespace {
		return fmt.Errorf("deploy %s/%s: the Eureka app %s is namespace %s's already: give the test's app another name",
			app.Namespace, app.Name, strings.ToUpper(app.Name), owner)
	}
	urls := app.EurekaURLs
	if urls == nil {
		urls = c.Peers.URLs()
	}
	ns, syncer, dep := app.objects(c.Node.Image("testapp"), urls)
	if shape != nil {
		shape(dep)
	}
	objs := []client.Object{ns, syncer, dep}
	if app.LoadBalancerIP != "" {
		objs = append(objs, app.service())
	}
	for _, obj := range objs {
		if err := c.Node.Client.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("deploy %s/%s: create %T %s: %w", app.Namespace, app.Name, obj, obj.GetName(), err)
		}
	}
	if app.LoadBalancerIP != "" {
		// What a cloud controller does once its load balancer is up.
		svc := app.service()
		patch := fmt.Sprintf(`{"status":{"loadBalancer":{"ingress":[{"ip":%q}]}}}`, app.LoadBalancerIP)
		if err := c.Node.Client.Status().Patch(ctx, svc, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
			return fmt.Errorf("deploy %s/%s: set the load balancer's ingress: %w", app.Namespace, app.Name, err)
		}
	}
	return nil
}

// View is an app as Kubernetes and Eureka see it at one moment.
type View struct {
	// ReadyPods are the names of the pods that are Ready and not
	// terminating: the ones callers should reach.
	ReadyPods []string
	// Pods are all the app's pods, terminating ones included.
	Pods []corev1.Pod
	// UP are the pod names of the instances Eureka lists UP (from the
	// eurekube.io/pod metadata), as a Spring client reads them; Other are
	// its other instances as "instanceId status".
	UP    []string
	Other []string
	// Elsewhere are the app's instances Eurekube did not register (a VM's),
	// as "instanceId status".
	Elsewhere []string
}

// Look reads the app's pods and what Eureka lists for it, through c.Eureka.
func (c *Cluster) Look(ctx context.Context, a App) (View, error) {
	return c.LookThrough(ctx, a, c.Eureka)
}

// LookThrough is Look reading the registry through one peer.
func (c *Cluster) LookThrough(ctx context.Context, a App, peer *harness.Eureka) (View, error) {
	var v View
	var pods corev1.PodList
	if err := c.Node.Client.List(ctx, &pods, client.InNamespace(a.Namespace), client.MatchingLabels{"app": a.Name}); err != nil {
		return v, fmt.Errorf("list pods of %s/%s: %w", a.Namespace, a.Name, err)
	}
	v.Pods = pods.Items
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil && PodReady(&p) {
			v.ReadyPods = append(v.ReadyPods, p.Name)
		}
	}
	instances, err := ReadApp(ctx, peer, strings.ToUpper(a.Name))
	if err != nil {
		return v, err
	}
	for _, in := range instances {
		if in.Metadata[eureka.MetaManagedBy] != eureka.ManagedByValue {
			v.Elsewhere = append(v.Elsewhere, in.InstanceID+" "+in.Status)
			continue
		}
		if in.Status == "UP" {
			v.UP = append(v.UP, in.Metadata[eureka.MetaPod])
		} else {
			v.Other = append(v.Other, in.InstanceID+" "+in.Status)
		}
	}
	slices.Sort(v.ReadyPods)
	slices.Sort(v.UP)
	return v, nil
}

// ReadApp lists app's instances on peer as a Spring client fetches them
// (harness.Eureka.SpringRead), with the credentials the peer demands.
func ReadApp(ctx context.Context, peer *harness.Eureka, app string) ([]harness.SpringInstance, error) {
	auth := peer.Auth()
	if auth == nil {
		return peer.SpringRead(app)
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, peer.URL()+"/apps/"+app, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	req.SetBasicAuth(auth.Username, auth.Password)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("GET /apps/%s: %w", app, err)
	}
	defer resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusNotFound:
		return nil, nil
	case http.StatusOK:
	default:
		return nil, fmt.Errorf("GET /apps/%s: HTTP %d", app, resp.StatusCode)
	}
	var body struct {
		Application struct{ Instance []harness.SpringInstance }
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return nil, fmt.Errorf("GET /apps/%s: decode: %w", app, err)
	}
	return body.Application.Instance, nil
}

// Listed says whether peer's registry holds instance id of app, read
// live (GET /apps/{APP}/{id}, which no response cache delays), with the
// credentials the peer demands.
func Listed(ctx context.Context, peer *harness.Eureka, app, id string) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, peer.URL()+"/apps/"+app+"/"+url.PathEscape(id), nil)
	if err != nil {
		return false, err
	}
	req.Header.Set("Accept", "application/json")
	if auth := peer.Auth(); auth != nil {
		req.SetBasicAuth(auth.Username, auth.Password)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false, fmt.Errorf("GET /apps/%s/%s: %w", app, id, err)
	}
	defer resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusOK:
		return true, nil
	case http.StatusNotFound:
		return false, nil
	}
	return false, fmt.Errorf("GET /apps/%s/%s: HTTP %d", app, id, resp.StatusCode)
}

// Settled reports whether Eureka lists exactly the ready pods UP and
// nothing else of this cluster, and there are replicas ready pods.
func (v View) Settled(replicas int) error {
	switch {
	case len(v.ReadyPods) != replicas:
		return fmt.Errorf("%d ready pods %v, want %d", len(v.ReadyPods), v.ReadyPods, replicas)
	case !slices.Equal(v.UP, v.ReadyPods):
		return fmt.Errorf("the registry lists UP %v, ready pods are %v", v.UP, v.ReadyPods)
	case len(v.Other) > 0:
		return fmt.Errorf("the registry also lists %v", v.Other)
	}
	return nil
}

// PodReady says whether the kubelet reports p Ready.
func PodReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
