package podrunner

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/eurekube/eurekube/api/v1alpha1"
)

// Options configure a Runner.
type Options struct {
	// Config reaches the API server.
	Config *rest.Config
	// NodeName is the node the runner registers and binds pods to.
	NodeName string
	// RegistrarBin runs the registrar container; AppBin every other one.
	RegistrarBin string
	AppBin       string
	// LogDir receives one log file per container process.
	LogDir string
	Logger logrus.FieldLogger
}

// Runner runs the pods bound to its node as local processes.
type Runner struct {
	opts   Options
	client client.Client
	kube   kubernetes.Interface
	queue  workqueue.TypedRateLimitingInterface[types.NamespacedName]
	pods   cache.Indexer
	ips    *ipPool

	mu      sync.Mutex
	running map[types.UID]*podProcess
}

// New checks opts and connects to the API server.
func New(opts Options) (*Runner, error) {
	if opts.NodeName == "" {
		opts.NodeName = "eurekube-sandbox"
	}
	if opts.Logger == nil {
		opts.Logger = logrus.StandardLogger()
	}
	for _, bin := range []string{opts.RegistrarBin, opts.AppBin} {
		if _, err := os.Stat(bin); err != nil {
			return nil, fmt.Errorf("pod runner: %w", err)
		}
	}
	if err := os.MkdirAll(opts.LogDir, 0o755); err != nil {
		return nil, fmt.Errorf("pod runner: %w", err)
	}
	c, err := client.New(opts.Config, client.Options{})
	if err != nil {
		return nil, fmt.Errorf("pod runner: %w", err)
	}
	kube, err := kubernetes.NewForConfig(opts.Config)
	if err != nil {
		return nil, fmt.Errorf("pod runner: %w", err)
	}
	return &Runner{
		opts:    opts,
		client:  c,
		kube:    kube,
		queue:   workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[types.NamespacedName]()),
		ips:     newIPPool(),
		running: map[types.UID]*podProcess{},
	}, nil
}

// Run registers the node and runs pods until ctx ends; then it kills every
// process it started.
func (r *Runner) Run(ctx context.Context) error {
	if err := r.registerNode(ctx); err != nil {
		return err
	}
	factory := informers.NewSharedInformerFactory(r.kube, 0)
	informer := factory.Core().V1().Pods().Informer()
	enqueue := func(obj any) {
		if pod, ok := obj.(*corev1.Pod); ok {
			r.queue.Add(types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name})
		}
	}
	if _, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    enqueue,
		UpdateFunc: func(_, obj any) { enqueue(obj) },
		DeleteFunc: r.forget,
	}); err != nil {
		return err
	}
	r.pods = informer.GetIndexer()
	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), informer.HasSynced) {
		return errors.New("pod runner: pod cache did not sync")
	}
	go func() {
		<-ctx.Done()
		r.queue.ShutDown()
	}()
	const workers = 4
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r.processNext(ctx) {
			}
		}()
	}
	wg.Wait()
	r.killAll()
	return nil
}

func (r *Runner) processNext(ctx context.Context) bool {
	key, shutdown := r.queue.Get()
	if shutdown {
		return false
	}
	defer r.queue.Done(key)
	if err := r.sync(ctx, key); err != nil {
		if ctx.Err() == nil {
			r.opts.Logger.WithError(err).WithField("pod", key.String()).Warn("sync pod")
		}
		r.queue.AddRateLimited(key)
		return true
	}
	r.queue.Forget(key)
	return true
}

func (r *Runner) sync(ctx context.Context, key types.NamespacedName) error {
	obj, exists, err := r.pods.GetByKey(key.String())
	if err != nil || !exists {
		return err
	}
	pod := obj.(*corev1.Pod).DeepCopy()
	switch {
	case pod.Spec.NodeName == "":
		if pod.DeletionTimestamp != nil {
			return nil
		}
		return r.bind(ctx, pod)
	case pod.Spec.NodeName != r.opts.NodeName:
		return nil
	}
	r.mu.Lock()
	pp := r.running[pod.UID]
	r.mu.Unlock()
	switch {
	case pod.DeletionTimestamp != nil && pp == nil:
		return r.remove(ctx, pod)
	case pod.DeletionTimestamp != nil:
		pp.terminate(pod)
		return nil
	case pp == nil && pod.Status.Phase != corev1.PodSucceeded && pod.Status.Phase != corev1.PodFailed:
		return r.start(ctx, pod)
	}
	return nil
}

func (r *Runner) bind(ctx context.Context, pod *corev1.Pod) error {
	err := r.kube.CoreV1().Pods(pod.Namespace).Bind(ctx, &corev1.Binding{
		ObjectMeta: metav1.ObjectMeta{Name: pod.Name, Namespace: pod.Namespace, UID: pod.UID},
		Target:     corev1.ObjectReference{Kind: "Node", Name: r.opts.NodeName},
	}, metav1.CreateOptions{})
	if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

func (r *Runner) start(ctx context.Context, pod *corev1.Pod) error {
	ip, err := r.ips.take(pod.UID)
	if err != nil {
		return err
	}
	pod.Status.PodIP = ip
	pod.Status.PodIPs = []corev1.PodIP{{IP: ip}}
	if pod.Spec.HostNetwork {
		pod.Status.PodIP = "127.0.0.1"
		pod.Status.PodIPs = []corev1.PodIP{{IP: "127.0.0.1"}}
	}
	pod.Status.HostIP = "127.0.0.1"
	pod.Status.HostIPs = []corev1.HostIP{{IP: "127.0.0.1"}}
	pp := &podProcess{
		runner: r,
		key:    types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name},
		uid:    pod.UID,
		ip:     pod.Status.PodIP,
		log:    r.opts.Logger.WithField("pod", pod.Namespace+"/"+pod.Name),
		done:   make(chan struct{}),
	}
	for i := range pod.Spec.Containers {
		ctr := &pod.Spec.Containers[i]
		env, err := resolveEnv(ctx, r.client, pod, ctr)
		if err != nil {
			r.ips.release(pod.UID)
			return err
		}
		bin := r.opts.AppBin
		if ctr.Name == v1alpha1.RegistrarContainerName {
			bin = r.opts.RegistrarBin
			env = bindPodIP(env, pod.Status.PodIP)
		} else {
			env = append(env, "POD_NAME="+pod.Name, "LISTEN_ADDR="+net.JoinHostPort(pod.Status.PodIP, appPort(ctr)))
		}
		pp.containers = append(pp.containers, &container{
			spec:    ctr.DeepCopy(),
			bin:     bin,
			env:     env,
			logPath: filepath.Join(r.opts.LogDir, fmt.Sprintf("%s_%s_%s.log", pod.Namespace, pod.Name, ctr.Name)),
		})
	}
	r.mu.Lock()
	r.running[pod.UID] = pp
	r.mu.Unlock()
	pp.grace = int64(30)
	if pod.Spec.TerminationGracePeriodSeconds != nil {
		pp.grace = *pod.Spec.TerminationGracePeriodSeconds
	}
	if err := pp.startAll(); err != nil {
		return err
	}
	go pp.probeLoop(ctx)
	return nil
}

// remove deletes the pod object for good, as the kubelet does once every
// container has stopped, and frees its IP.
func (r *Runner) remove(ctx context.Context, pod *corev1.Pod) error {
	err := r.client.Delete(ctx, pod, client.GracePeriodSeconds(0), client.Preconditions{UID: &pod.UID})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		err = nil
	}
	if err == nil {
		r.ips.release(pod.UID)
		r.mu.Lock()
		delete(r.running, pod.UID)
		r.mu.Unlock()
	}
	return err
}

func (r *Runner) registerNode(ctx context.Context) error {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: r.opts.NodeName, Labels: map[string]string{"kubernetes.io/hostname": r.opts.NodeName}}}
	if err := r.client.Create(ctx, node); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("pod runner: register node: %w", err)
	}
	if err := r.client.Get(ctx, client.ObjectKeyFromObject(node), node); err != nil {
		return fmt.Errorf("pod runner: read node: %w", err)
	}
	node.Status.Conditions = []corev1.NodeCondition{{
		Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "PodRunnerReady",
		LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now(),
	}}
	node.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "127.0.0.1"}}
	if err := r.client.Status().Update(ctx, node); err != nil {
		return fmt.Errorf("pod runner: node status: %w", err)
	}
	return nil
}

// forget kills the processes of a pod that vanished from the API server
// without passing through termination (deleted with grace period 0), as the
// kubelet does for a force-deleted pod.
func (r *Runner) forget(obj any) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	r.mu.Lock()
	pp := r.running[pod.UID]
	delete(r.running, pod.UID)
	r.mu.Unlock()
	if pp != nil {
		pp.mu.Lock()
		pp.crashed = true
		pp.mu.Unlock()
		pp.kill()
		r.ips.release(pod.UID)
	}
}

// Crash kills every container of a running pod with SIGKILL and keeps them
// down, as when the pod's node dies: nothing gets to run a preStop hook or
// to cancel the pod's Eureka registration. The pod object stays until it is
// deleted; deleting it then removes it at once.
func (r *Runner) Crash(key types.NamespacedName) error {
	obj, exists, err := r.pods.GetByKey(key.String())
	if err != nil || !exists {
		return fmt.Errorf("pod runner: crash %s: pod not found", key)
	}
	r.mu.Lock()
	pp := r.running[obj.(*corev1.Pod).UID]
	r.mu.Unlock()
	if pp == nil {
		return fmt.Errorf("pod runner: crash %s: the pod does not run here", key)
	}
	pp.mu.Lock()
	pp.crashed = true
	pp.mu.Unlock()
	pp.kill()
	return nil
}

func (r *Runner) killAll() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, pp := range r.running {
		pp.kill()
	}
}

// appPort is the first declared port of an app container, else 8080.
func appPort(ctr *corev1.Container) string {
	if len(ctr.Ports) > 0 {
		return fmt.Sprint(ctr.Ports[0].ContainerPort)
	}
	return "8080"
}

// bindPodIP gives a host-less registrar listen address the pod IP: the
// runner's stand-in for the pod's own network namespace.
func bindPodIP(env []string, ip string) []string {
	for i, kv := range env {
		if port, ok := strings.CutPrefix(kv, "EUREKUBE_LISTEN_ADDR=:"); ok {
			env[i] = "EUREKUBE_LISTEN_ADDR=" + net.JoinHostPort(ip, port)
		}
	}
	return env
}

// ipPool hands out 127.0.0.2 … 127.0.255.254, one per pod.
type ipPool struct {
	mu    sync.Mutex
	next  int
	byUID map[types.UID]string
	free  []string
}

func newIPPool() *ipPool { return &ipPool{next: 2, byUID: map[types.UID]string{}} }

func (p *ipPool) take(uid types.UID) (string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if ip, ok := p.byUID[uid]; ok {
		return ip, nil
	}
	var ip string
	switch {
	case p.next < 256*255:
		// Fresh addresses first, so a new pod never takes the address of
		// one whose clients may still call it.
		ip = fmt.Sprintf("127.0.%d.%d", p.next/255, p.next%255)
		p.next++
		if p.next%255 == 0 {
			p.next++
		}
	case len(p.free) > 0:
		ip, p.free = p.free[0], p.free[1:]
	default:
		return "", errors.New("pod runner: out of loopback addresses")
	}
	p.byUID[uid] = ip
	return ip, nil
}

func (p *ipPool) release(uid types.UID) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if ip, ok := p.byUID[uid]; ok {
		delete(p.byUID, uid)
		p.free = append(p.free, ip)
	}
}
