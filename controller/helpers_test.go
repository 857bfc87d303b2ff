package controller_test

import (
	"context"
	"fmt"
	"os/exec"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/eurekube/eurekube/api/v1alpha1"
	"github.com/eurekube/eurekube/eureka"
	"github.com/eurekube/eurekube/internal/allowlist"
	"github.com/eurekube/eurekube/internal/builders"
	"github.com/eurekube/eurekube/tests/harness"
	"github.com/eurekube/eurekube/webhook"
	"github.com/eurekube/eurekube/webhook/webhooktest"
)

// The helpers of the suite (package controller_test): TestMain and the
// globals it sets are in main_test.go, the builders of the pure tests
// (package controller) in fixtures_test.go.

// In the API server: what the tests create, and what they play of the
// kubelet, the webhook and the controllers that do not run here.

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

// localEureka allows the suite's syncers to name every server of the
// suite, which listen on 127.0.0.1, as a platform team allows its Eureka
// servers with --allowed-eureka-host; the suite's attacker listens on
// another address (permitted_suite_test.go).
func localEureka() webhook.Allowlists {
	hosts, err := allowlist.ParseHosts([]string{"127.0.0.1"})
	if err != nil {
		panic(err)
	}
	return webhook.Allowlists{EurekaHosts: hosts}
}

func newSyncer(t testing.TB, ns, name string, urls ...string) *v1alpha1.EurekaSyncer {
	t.Helper()
	// By number: the pods podShape makes declare no port.
	s := builders.Syncer(ns, name, builders.Port(intstr.FromInt32(8080)), builders.EurekaURLs(urls...))
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
	return p.createIn(t, k8s)
}

// createIn creates the pod in the cluster of k8s.
func (p podShape) createIn(t testing.TB, k8s client.Client) *corev1.Pod {
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

// admitted creates the webhook's Spring Boot test pod (app=orders) as the
// webhook admits it under s, and sets its status as a kubelet would:
// running, ready.
func admitted(t *testing.T, s *v1alpha1.EurekaSyncer, name, ip string) *corev1.Pod {
	t.Helper()
	ctx := context.Background()
	pod, _, err := webhook.Mutate(webhooktest.SpringBootPod(s.Namespace, name), webhook.Config{Syncer: s, Defaults: webhook.Defaults{
		RegistrarImage: "eurekube/registrar:test", ClusterID: clusterID, PreStopSleepSeconds: 100, RegistrarPort: 9901,
		EurekaURLs: []string{"http://" + proxy.Addr() + "/eureka"}, // as the suite's manager gives
	}})
	if err != nil {
		t.Fatal(err)
	}
	if err := k8s.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	created := pod.DeepCopy()
	pod.Status.Phase, pod.Status.PodIP = corev1.PodRunning, ip
	pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Now()}}
	if err := k8s.Status().Patch(ctx, pod, client.MergeFrom(created)); err != nil {
		t.Fatal(err)
	}
	return pod
}

// newServiceSyncer creates a Service-mode syncer registering Service svc
// on its port 80, changed by edit.
func newServiceSyncer(t *testing.T, ns, name, svc string, edit func(*v1alpha1.EurekaSyncerSpec)) *v1alpha1.EurekaSyncer {
	t.Helper()
	s := builders.Syncer(ns, name, builders.ServiceMode(svc), builders.Port(intstr.FromInt32(80)), builders.Metadata(map[string]string{"zone": "k8s-1"}))
	if edit != nil {
		edit(&s.Spec)
	}
	if err := k8s.Create(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	return s
}

// newService creates a Service with port http 80 → 8080, and sets the load
// balancer's ingress as a cloud controller would when ingress is given.
func newService(t *testing.T, ns, name string, typ corev1.ServiceType, ingress ...corev1.LoadBalancerIngress) *corev1.Service {
	t.Helper()
	ctx := context.Background()
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: corev1.ServiceSpec{Type: typ, Selector: map[string]string{"app": name},
			Ports: []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080)}}},
	}
	if err := k8s.Create(ctx, svc); err != nil {
		t.Fatal(err)
	}
	if len(ingress) > 0 {
		svc.Status.LoadBalancer.Ingress = ingress
		if err := k8s.Status().Update(ctx, svc); err != nil {
			t.Fatal(err)
		}
	}
	return svc
}

// setEndpoints writes the Service's EndpointSlice as the EndpointSlice
// controller would: one endpoint, ready or not.
func setEndpoints(t *testing.T, svc *corev1.Service, ready bool) {
	t.Helper()
	ctx := context.Background()
	es := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Name: svc.Name + "-abcde", Namespace: svc.Namespace,
		Labels: map[string]string{discoveryv1.LabelServiceName: svc.Name}}}
	err := k8s.Get(ctx, client.ObjectKeyFromObject(es), es)
	if err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	port, proto, name := int32(8080), corev1.ProtocolTCP, "http"
	es.AddressType = discoveryv1.AddressTypeIPv4
	es.Ports = []discoveryv1.EndpointPort{{Name: &name, Port: &port, Protocol: &proto}}
	es.Endpoints = []discoveryv1.Endpoint{{Addresses: []string{"10.244.0.7"}, Conditions: discoveryv1.EndpointConditions{Ready: &ready}}}
	if apierrors.IsNotFound(err) {
		err = k8s.Create(ctx, es)
	} else {
		err = k8s.Update(ctx, es)
	}
	if err != nil {
		t.Fatal(err)
	}
}

// newNode creates a node with an address, Ready or not, as a kubelet
// would register it.
func newNode(t *testing.T, addr corev1.NodeAddress, ready bool) *corev1.Node {
	t.Helper()
	ctx := context.Background()
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{GenerateName: "svc-node-"}}
	if err := k8s.Create(ctx, node); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), node) })
	node.Status.Addresses = []corev1.NodeAddress{addr}
	setNodeReady(t, node, ready)
	return node
}

func setNodeReady(t *testing.T, node *corev1.Node, ready bool) {
	t.Helper()
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	node.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: status, LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}}
	if err := k8s.Status().Update(context.Background(), node); err != nil {
		t.Fatal(err)
	}
}

func setTraffic(t *testing.T, s *v1alpha1.EurekaSyncer, traffic v1alpha1.Traffic) {
	t.Helper()
	patch := client.RawPatch(types.MergePatchType, []byte(fmt.Sprintf(`{"spec":{"traffic":%q}}`, traffic)))
	if err := k8s.Patch(context.Background(), s.DeepCopy(), patch); err != nil {
		t.Fatal(err)
	}
}

func getSyncer(s *v1alpha1.EurekaSyncer) (*v1alpha1.EurekaSyncer, error) {
	var got v1alpha1.EurekaSyncer
	err := k8s.Get(context.Background(), client.ObjectKeyFromObject(s), &got)
	return &got, err
}

var clientGrace0 = client.DeleteOptions{GracePeriodSeconds: new(int64)}

type clientInNamespace struct{ ns string }

func (c *clientInNamespace) ApplyToList(o *client.ListOptions) { o.Namespace = c.ns }

// In Eureka: registrations as the registrars make them, and reads.

func directClient(t testing.TB, url string) *eureka.Client {
	t.Helper()
	c, err := eureka.New(eureka.Options{URLs: []string{url}})
	if err != nil {
		t.Fatal(err)
	}
	return c
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

// statuses reads the instances' statuses straight from the registry.
func statuses(c *eureka.Client, insts ...eureka.Instance) (map[string]eureka.Status, error) {
	out := map[string]eureka.Status{}
	for _, inst := range insts {
		got, err := c.Instance(context.Background(), inst.App, inst.InstanceID)
		if err != nil {
			return nil, err
		}
		out[inst.InstanceID] = got.Status
	}
	return out, nil
}

func wantStatuses(c *eureka.Client, want map[string]eureka.Status, insts ...eureka.Instance) error {
	got, err := statuses(c, insts...)
	if err != nil {
		return err
	}
	for id, w := range want {
		if got[id] != w {
			return fmt.Errorf("Eureka lists %v, want %v", got, want)
		}
	}
	return nil
}

// serviceRegistrations reads this cluster's Service instances of the
// syncer straight from Eureka, by host:port.
func serviceRegistrations(c *eureka.Client, s *v1alpha1.EurekaSyncer) (map[string]eureka.Instance, error) {
	all, err := c.Instances(context.Background(), s.EffectiveAppName())
	if err != nil && !strings.Contains(err.Error(), eureka.ErrNotFound.Error()) {
		return nil, err
	}
	out := map[string]eureka.Instance{}
	for _, inst := range all {
		if inst.Metadata[eureka.MetaCluster] == clusterID && inst.Metadata[eureka.MetaNamespace] == s.Namespace && inst.Metadata[eureka.MetaService] != "" {
			out[inst.HostName+":"+strconv.Itoa(inst.Port)] = inst
		}
	}
	return out, nil
}

// otherClusterService registers what another cluster's Eurekube registers
// for the same app and Service: it must never be touched.
func otherClusterService(t *testing.T, c *eureka.Client, s *v1alpha1.EurekaSyncer, host string) {
	t.Helper()
	inst := eureka.Instance{App: s.EffectiveAppName(), InstanceID: host + ":" + strings.ToLower(s.EffectiveAppName()) + ":80:" + s.Spec.Service.Name + "." + s.Namespace + ".another",
		HostName: host, IPAddr: host, Status: eureka.StatusUp, Port: 80, PortEnabled: true,
		Metadata: map[string]string{eureka.MetaManagedBy: eureka.ManagedByValue, eureka.MetaCluster: "another-cluster",
			eureka.MetaNamespace: s.Namespace, eureka.MetaSyncer: s.Name, eureka.MetaService: s.Spec.Service.Name}}
	if err := c.Register(context.Background(), inst); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		got, err := c.Instance(context.Background(), inst.App, inst.InstanceID)
		if err != nil || got.Status != eureka.StatusUp {
			t.Errorf("another cluster's Service instance was touched: %+v %v", got, err)
		}
		_ = c.Cancel(context.Background(), inst.App, inst.InstanceID)
	})
}

// Reading the outcome: conditions, annotations, metrics, Events.

// condition returns the syncer's condition of type typ, or an error.
func condition(s *v1alpha1.EurekaSyncer, typ string) (*metav1.Condition, *v1alpha1.EurekaSyncer, error) {
	got, err := getSyncer(s)
	if err != nil {
		return nil, nil, err
	}
	c := meta.FindStatusCondition(got.Status.Conditions, typ)
	if c == nil {
		return nil, nil, fmt.Errorf("no %s condition in %+v", typ, got.Status.Conditions)
	}
	return c, got, nil
}

// reachable waits for the syncer's EurekaReachable condition to have status
// and reason with a message mentioning each of mention.
func reachable(s *v1alpha1.EurekaSyncer, status metav1.ConditionStatus, reason string, mention ...string) func() error {
	return func() error {
		got, err := getSyncer(s)
		if err != nil {
			return err
		}
		c := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionEurekaReachable)
		if c == nil || c.Status != status || (reason != "" && c.Reason != reason) {
			return fmt.Errorf("condition %+v", c)
		}
		for _, m := range mention {
			if !strings.Contains(c.Message, m) {
				return fmt.Errorf("condition %+v does not mention %q", c, m)
			}
		}
		return nil
	}
}

// readsElsewhere: s's Eureka servers answered it (EurekaReachable True)
// and it counts n instances of its app elsewhere (VMs).
func readsElsewhere(s *v1alpha1.EurekaSyncer, n int32) func() error {
	return func() error {
		if err := reachable(s, metav1.ConditionTrue, "")(); err != nil {
			return err
		}
		got, err := getSyncer(s)
		if err != nil {
			return err
		}
		if got.Status.ElsewhereInstances != n {
			return fmt.Errorf("elsewhereInstances %d, want %d", got.Status.ElsewhereInstances, n)
		}
		return nil
	}
}

func trafficCondition(st v1alpha1.EurekaSyncerStatus, reason string) error {
	c := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionTrafficApplied)
	if c == nil || c.Status != metav1.ConditionTrue || c.Reason != reason {
		return fmt.Errorf("TrafficApplied %+v, want True/%s", c, reason)
	}
	return nil
}

func podTraffic(ns string, pods ...*corev1.Pod) (map[string]string, error) {
	out := map[string]string{}
	for _, p := range pods {
		var got corev1.Pod
		if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: p.Name}, &got); err != nil {
			return nil, err
		}
		out[p.Name] = got.Annotations[v1alpha1.TrafficAnnotation]
	}
	return out, nil
}

// instanceGauge reads eurekube_syncer_instances of one syncer, by
// "app location status".
func instanceGauge(ns, syncer string) (map[string]float64, error) {
	return gaugeSeries("eurekube_syncer_instances", func(l map[string]string) (string, bool) {
		return l["app"] + " " + l["location"] + " " + l["status"], l["namespace"] == ns && l["syncer"] == syncer
	})
}

// gaugeSeries reads the manager's gauge name: the value of each series
// that series keeps, by the key it gives.
func gaugeSeries(name string, series func(labels map[string]string) (key string, keep bool)) (map[string]float64, error) {
	families, err := metrics.Registry.Gather()
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			l := map[string]string{}
			for _, p := range m.GetLabel() {
				l[p.GetName()] = p.GetValue()
			}
			if key, keep := series(l); keep {
				out[key] = m.GetGauge().GetValue()
			}
		}
	}
	return out, nil
}

// syncerEvents lists the Events about the syncer named name in ns.
func syncerEvents(ns, name string) ([]corev1.Event, error) {
	var list corev1.EventList
	if err := k8s.List(context.Background(), &list, &clientInNamespace{ns}); err != nil {
		return nil, err
	}
	var out []corev1.Event
	for _, e := range list.Items {
		if e.InvolvedObject.Kind == "EurekaSyncer" && e.InvolvedObject.Name == name {
			out = append(out, e)
		}
	}
	return out, nil
}

// getEsync is the syncer's row of kubectl get esync, fields joined by one
// space.
func getEsync(t *testing.T, ns, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command("kubectl", append([]string{"--kubeconfig", cp.Kubeconfig, "get", "esync", name, "-n", ns, "--no-headers"}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl get esync: %v\n%s", err, out)
	}
	return strings.Join(strings.Fields(string(out)), " ")
}

// waitFinalizer waits until the reconciler has put its finalizer on s, so
// that deleting s goes through detach.
func waitFinalizer(t *testing.T, s *v1alpha1.EurekaSyncer) {
	t.Helper()
	harness.Eventually(t, patience, "finalizer added", func() error {
		got, err := getSyncer(s)
		if err != nil || len(got.Finalizers) == 0 {
			return fmt.Errorf("finalizers %v, %v", got.Finalizers, err)
		}
		return nil
	})
}

// wantRegistered waits until Eureka holds exactly the addresses, each with
// the status, and the syncer's status agrees.
func wantRegistered(t *testing.T, c *eureka.Client, s *v1alpha1.EurekaSyncer, status eureka.Status, addrs ...string) map[string]eureka.Instance {
	t.Helper()
	sort.Strings(addrs)
	var got map[string]eureka.Instance
	harness.Eventually(t, patience, fmt.Sprintf("Eureka holds %v %s and the status says so", addrs, status), func() error {
		var err error
		if got, err = serviceRegistrations(c, s); err != nil {
			return err
		}
		var have []string
		for addr, inst := range got {
			if inst.Status != status {
				return fmt.Errorf("%s is %s", addr, inst.Status)
			}
			have = append(have, addr)
		}
		sort.Strings(have)
		if !slices.Equal(have, addrs) {
			return fmt.Errorf("Eureka holds %v", have)
		}
		st, err := getSyncer(s)
		if err != nil {
			return err
		}
		if !slices.Equal(st.Status.ServiceAddresses, addrs) {
			return fmt.Errorf("status.serviceAddresses %v", st.Status.ServiceAddresses)
		}
		if len(addrs) > 0 {
			if c := meta.FindStatusCondition(st.Status.Conditions, v1alpha1.ConditionServiceReachable); c == nil || c.Status != metav1.ConditionTrue {
				return fmt.Errorf("ServiceReachable %+v", c)
			}
		}
		return nil
	})
	return got
}

// wantUnreachable waits for ServiceReachable False with the reason, and
// nothing of the syncer's Service in Eureka.
func wantUnreachable(t *testing.T, c *eureka.Client, s *v1alpha1.EurekaSyncer, reason string) {
	t.Helper()
	harness.Eventually(t, patience, "ServiceReachable False/"+reason+", nothing registered", func() error {
		st, err := getSyncer(s)
		if err != nil {
			return err
		}
		cond := meta.FindStatusCondition(st.Status.Conditions, v1alpha1.ConditionServiceReachable)
		if cond == nil || cond.Status != metav1.ConditionFalse || cond.Reason != reason || cond.ObservedGeneration != st.Generation {
			return fmt.Errorf("ServiceReachable %+v", cond)
		}
		if !strings.Contains(cond.Message, s.Spec.Service.Name) {
			return fmt.Errorf("the message does not name the Service: %q", cond.Message)
		}
		if len(st.Status.ServiceAddresses) != 0 || st.Status.Ready != "0/0" {
			return fmt.Errorf("status says %v registered, READY %s", st.Status.ServiceAddresses, st.Status.Ready)
		}
		got, err := serviceRegistrations(c, s)
		if err != nil {
			return err
		}
		if len(got) != 0 {
			return fmt.Errorf("Eureka holds %v", got)
		}
		return nil
	})
}
