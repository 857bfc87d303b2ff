package controller_test

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/eurekube/eurekube/api/v1alpha1"
	"github.com/eurekube/eurekube/controller"
	"github.com/eurekube/eurekube/eureka"
	"github.com/eurekube/eurekube/tests/harness"
	"github.com/eurekube/eurekube/webhook"
)

const (
	clusterID = "cluster-under-test"
	resync    = 2 * time.Second
	// patience bounds every wait for the reconciler: a resync or two on a
	// quiet machine, far more on a busy one; how fast it is belongs to
	// make bench.
	patience = time.Minute
	// detachTimeout: a deleted syncer's finalizer waits this long for
	// Eureka once no pod runs its registrar (the default's two minutes
	// would make its test wait that long).
	detachTimeout = 10 * time.Second
)

var (
	cp     *harness.ControlPlane
	mgr    ctrl.Manager
	server *harness.Eureka
	proxy  *harness.Proxy
	k8s    client.Client
)

// TestMain starts a real API server, a real Eureka server (reached through
// a fault proxy) and the reconciler in a manager, as cmd/manager runs it;
// in -short mode (make unit) it starts nothing, the pure tests run and
// the others skip (needsServers).
func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() {
		os.Exit(m.Run())
	}
	os.Exit(func() int {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		var err error
		if cp, err = harness.StartControlPlane(ctx, harness.ControlPlaneOptions{}); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer cp.Stop()
		if server, err = harness.StartEureka(ctx, harness.EurekaOptions{}); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer server.Stop()
		if proxy, err = harness.StartProxy(server.Addr()); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer proxy.Close()
		k8s = cp.Client
		ctrl.SetLogger(logr.Discard())
		mgr, err = ctrl.NewManager(cp.Config, ctrl.Options{Scheme: cp.Scheme, Metrics: metricsserver.Options{BindAddress: "0"}})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		log := logrus.New()
		log.SetOutput(io.Discard)
		if err := controller.Setup(mgr, controller.Options{
			ClusterID: clusterID, ResyncPeriod: resync, EurekaTimeout: time.Second, DetachTimeout: detachTimeout,
			Defaults: webhook.Defaults{EurekaURLs: []string{"http://" + proxy.Addr() + "/eureka"}, ClusterID: clusterID}, Logger: log,
		}); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		stopped := make(chan struct{})
		go func() { _ = mgr.Start(ctx); close(stopped) }()
		code := m.Run()
		cancel() // the manager stops before the servers it talks to
		<-stopped
		return code
	}())
}

// needsServers skips t in -short mode, where TestMain starts no server.
func needsServers(t testing.TB) {
	t.Helper()
	harness.SkipWhenShort(t, "a kube-apiserver, etcd and a Eureka server (a JVM)")
}

// newNamespace is where every test of the running reconciler starts, so
// it also skips them in -short mode.
func newNamespace(t testing.TB) string {
	t.Helper()
	needsServers(t)
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "shop-"}}
	if err := k8s.Create(context.Background(), ns); err != nil {
		t.Fatal(err)
	}
	return ns.Name
}

func newSyncer(t testing.TB, ns, name string, urls ...string) *v1alpha1.EurekaSyncer {
	t.Helper()
	s := &v1alpha1.EurekaSyncer{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: v1alpha1.EurekaSyncerSpec{
			Selector: metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
			Port:     intstr.FromInt32(8080),
			Eureka:   v1alpha1.EurekaServers{ServiceURLs: urls},
		},
	}
	if err := k8s.Create(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	return s
}

// newPod creates a pod as the webhook leaves it (with or without the
// registrar; injected with a 100 s drain) and sets its status as a kubelet
// would, ready.
func newPod(t testing.TB, ns, app, name string, injected bool, ip string) *corev1.Pod {
	t.Helper()
	p := podShape{ns: ns, app: app, name: name, ip: ip, ready: true}
	if injected {
		p.registrar = true
		p.annotations = map[string]string{v1alpha1.StatusAnnotation: v1alpha1.StatusInjected, v1alpha1.SyncerAnnotation: app, v1alpha1.DrainAnnotation: "100",
			v1alpha1.TrafficAnnotation: string(v1alpha1.TrafficServe)}
	}
	return p.create(t)
}

// podShape is what the reconciler looks at in a pod.
type podShape struct {
	ns, app, name, ip string
	registrar, ready  bool
	annotations       map[string]string
	node              string // spec.nodeName, when set
}

func (p podShape) create(t testing.TB) *corev1.Pod {
	t.Helper()
	ctx := context.Background()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: p.name, Namespace: p.ns, Labels: map[string]string{"app": p.app}, Annotations: p.annotations},
		Spec:       corev1.PodSpec{NodeName: p.node, Containers: []corev1.Container{{Name: "app", Image: "app:1"}}},
	}
	if p.registrar { // what the webhook adds, as far as the reconciler looks
		pod.Spec.Containers = append(pod.Spec.Containers, corev1.Container{Name: v1alpha1.RegistrarContainerName, Image: "eurekube/registrar:test"})
	}
	if err := k8s.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	ready := corev1.ConditionFalse
	if p.ready {
		ready = corev1.ConditionTrue
	}
	// A patch, as the kubelet's: the reconciler may have annotated the pod
	// since it was created.
	created := pod.DeepCopy()
	pod.Status.Phase = corev1.PodRunning
	pod.Status.PodIP = p.ip
	pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: ready, LastTransitionTime: metav1.Now()}}
	if err := k8s.Status().Patch(ctx, pod, client.MergeFrom(created)); err != nil {
		t.Fatal(err)
	}
	return pod
}

// register does what the pod's registrar does.
func register(t testing.TB, c *eureka.Client, s *v1alpha1.EurekaSyncer, pod *corev1.Pod) eureka.Instance {
	t.Helper()
	inst := eureka.Instance{
		App: s.EffectiveAppName(), InstanceID: pod.Name + ":" + s.Name + ":8080",
		HostName: pod.Status.PodIP, IPAddr: pod.Status.PodIP, VIPAddress: s.Name,
		Status: eureka.StatusUp, Port: 8080, PortEnabled: true,
		Metadata: map[string]string{
			eureka.MetaManagedBy: eureka.ManagedByValue, eureka.MetaCluster: clusterID,
			eureka.MetaNamespace: pod.Namespace, eureka.MetaPod: pod.Name,
			eureka.MetaPodUID: string(pod.UID), eureka.MetaSyncer: s.Name,
		},
	}
	if err := c.Register(context.Background(), inst); err != nil {
		t.Fatal(err)
	}
	return inst
}

// foreign registers the instances Eurekube must never touch: a VM's (no
// marker) and another cluster's, both in the syncer's app.
func foreign(t testing.TB, c *eureka.Client, s *v1alpha1.EurekaSyncer) []eureka.Instance {
	t.Helper()
	vm := eureka.Instance{App: s.EffectiveAppName(), InstanceID: "vm-17:" + s.Name + ":8080", HostName: "10.9.9.17", IPAddr: "10.9.9.17",
		Status: eureka.StatusUp, Port: 8080, PortEnabled: true, Metadata: map[string]string{"zone": "dc1"}}
	other := vm
	other.InstanceID, other.HostName, other.IPAddr = "other-pod:"+s.Name+":8080", "10.8.0.3", "10.8.0.3"
	other.Metadata = map[string]string{
		eureka.MetaManagedBy: eureka.ManagedByValue, eureka.MetaCluster: "another-cluster",
		eureka.MetaNamespace: s.Namespace, eureka.MetaSyncer: s.Name, eureka.MetaPodUID: "uid-of-a-pod-elsewhere",
	}
	for _, inst := range []eureka.Instance{vm, other} {
		if err := c.Register(context.Background(), inst); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		for _, inst := range []eureka.Instance{vm, other} {
			if _, err := c.Instance(context.Background(), inst.App, inst.InstanceID); err != nil {
				t.Errorf("foreign instance %s was touched: %v", inst.InstanceID, err)
			}
		}
	})
	return []eureka.Instance{vm, other}
}

func directClient(t testing.TB, url string) *eureka.Client {
	t.Helper()
	c, err := eureka.New(eureka.Options{URLs: []string{url}})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func getSyncer(s *v1alpha1.EurekaSyncer) (*v1alpha1.EurekaSyncer, error) {
	var got v1alpha1.EurekaSyncer
	err := k8s.Get(context.Background(), client.ObjectKeyFromObject(s), &got)
	return &got, err
}

var clientGrace0 = client.DeleteOptions{GracePeriodSeconds: new(int64)}

type clientInNamespace struct{ ns string }

func (c *clientInNamespace) ApplyToList(o *client.ListOptions) { o.Namespace = c.ns }
