package cluster_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/eurekube/eurekube/api/v1alpha1"
	"github.com/eurekube/eurekube/controller"
	"github.com/eurekube/eurekube/eureka"
	"github.com/eurekube/eurekube/internal/builders"
	"github.com/eurekube/eurekube/tests/cluster"
	"github.com/eurekube/eurekube/tests/harness"
	"github.com/eurekube/eurekube/tests/node"
)

// A service that still runs on VMs, called by its Kubernetes name. BILLING
// runs on a "VM" (a Spring Boot app on the host, registered by Spring
// Cloud's own Eureka client); an EurekaImport makes it the Service billing
// of namespace import; a Go pod calls http://billing.import.svc/ ten times
// a second, each call resolved by the cluster's DNS (CoreDNS on the node)
// and routed by kube-proxy, as a caller that never heard of Eureka does.
//
// A second VM is added and, once its endpoint is ready (what a careful
// user waits for), the first is taken OUT_OF_SERVICE: the calls move, none
// fails. The first VM goes in and out a few more times, each change timed
// from Eureka to the slice. Then it is killed with SIGKILL (no cancel) and
// leaves the slice once Eureka evicts it (the suite's fast profile:
// eviction every second, the VM's 15 s lease). Deleting the import removes
// the Service and its slices.
func TestImport_AVMServiceCalledByItsKubernetesName_MovesWithNoFailedCall(t *testing.T) {
	story(t, 300*time.Second)
	ctx := context.Background()
	const ns, app, service = "import", "billing", "billing"
	if err := c.Node.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	record(t).Watch(ns)
	vm1 := startImportedVM(t, app, "vm-1")
	watched := watchSlices(t, ns, app)
	imp := &v1alpha1.EurekaImport{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: app},
		Spec: v1alpha1.EurekaImportSpec{App: app, Eureka: v1alpha1.EurekaServers{ServiceURLs: c.Peers.URLs()}}}
	if err := c.Node.Client.Create(ctx, imp); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.IgnoreNotFound(c.Node.Client.Delete(context.Background(), imp)) })
	watched.wait(t, 3*time.Minute, "vm-1's endpoint ready", ready(vm1.port))
	waitImport(t, ns, app, "the import Synced, 1/1 endpoints", func(st v1alpha1.EurekaImportStatus) error {
		if cond := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionSynced); cond == nil || cond.Status != metav1.ConditionTrue {
			return fmt.Errorf("Synced is %+v", cond)
		}
		if st.Endpoints != "1/1" || st.ServiceName != service {
			return fmt.Errorf("service %q, endpoints %q", st.ServiceName, st.Endpoints)
		}
		return nil
	})
	var svc corev1.Service
	if err := c.Node.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: service}, &svc); err != nil {
		t.Fatal(err)
	}
	name := service + "." + ns + ".svc." + node.ClusterDomain
	addrs, err := node.NodeResolver().LookupHost(ctx, name)
	if err != nil || !slices.Equal(addrs, []string{svc.Spec.ClusterIP}) {
		t.Fatalf("the cluster's DNS answers %v (%v) for %s, want the Service's ClusterIP %s", addrs, err, name, svc.Spec.ClusterIP)
	}

	caller := startCaller(t, ns, "http://"+service+"."+ns+".svc/")
	waitAnswered(t, caller, harness.SpringStats{}, []string{"vm-1"})
	var events eventsv1.EventList
	if err := c.Node.Client.List(ctx, &events, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	for _, e := range events.Items {
		if e.Reason == "MissingClusterDNS" {
			t.Errorf("the kubelet warned %s on %s: %s", e.Reason, e.Regarding.Name, e.Note)
		}
	}
	start := caller.statsT(t)
	t.Logf("the pod calls http://%s.%s.svc/ (ClusterIP %s): answered by vm-1", service, ns, svc.Spec.ClusterIP)

	// The cut: vm-2 ready and answering before vm-1 goes out.
	vm2 := startImportedVM(t, app, "vm-2")
	watched.wait(t, 3*time.Minute, "vm-2's endpoint ready", ready(vm2.port))
	waitAnswered(t, caller, caller.statsT(t), []string{"vm-2"})
	var changes []time.Duration
	eurekaClient := importEurekaClient(t)
	change := func(status eureka.Status) {
		t.Helper()
		// Made right after the previous change reached the slice, at one of
		// the manager's registry reads, every change would wait a whole
		// resync period: each comes after a random number of calls instead
		// (0 to 30 s of them), so the changes fall anywhere in the period,
		// as a user's do.
		afterCalls(t, caller, rand.Int64N(300))
		began := time.Now()
		var err error
		if status == eureka.StatusUp {
			err = eurekaClient.RemoveStatusOverride(ctx, app, vm1.instanceID, eureka.StatusUp)
		} else {
			err = eurekaClient.SetStatusOverride(ctx, app, vm1.instanceID, status)
		}
		if err != nil {
			t.Fatal(err)
		}
		at := watched.wait(t, 2*time.Minute, fmt.Sprintf("vm-1's endpoint %s", status), func(eps map[int32]bool) error {
			if isReady, listed := eps[vm1.port]; !listed || isReady != (status == eureka.StatusUp) {
				return fmt.Errorf("vm-1's endpoint (port %d): listed %t, ready %t", vm1.port, listed, isReady)
			}
			return nil
		})
		changes = append(changes, at.Sub(began))
	}
	change(eureka.StatusOutOfService)
	moved := callsWithout(t, caller, "vm-1", 100)
	t.Logf("vm-1 OUT_OF_SERVICE: in the slice %s later; then %d calls, all to %v", changes[0].Round(time.Millisecond), moved.OK, moved.ByInstance)
	// More changes, for the latency's spread; vm-1 ends out of service.
	for _, status := range []eureka.Status{eureka.StatusUp, eureka.StatusOutOfService, eureka.StatusUp, eureka.StatusOutOfService} {
		change(status)
	}
	p50, p99 := percentile(changes, 50), percentile(changes, 99)
	t.Logf("Eureka status change → EndpointSlice: p50 %s, p99 %s over %d changes (%v; the manager reads the registry once per resync)",
		p50.Round(time.Millisecond), p99.Round(time.Millisecond), len(changes), roundAll(changes))

	// vm-1, out of service and no longer called (what a user checks before
	// retiring a VM: kube-proxy's rules follow the slice a moment later), is
	// killed: no cancel, Eureka evicts it. The kill falls anywhere in the
	// manager's resync period too.
	callsWithout(t, caller, "vm-1", 100)
	afterCalls(t, caller, rand.Int64N(300))
	killed := time.Now()
	vm1.Kill()
	harness.Eventually(t, 3*time.Minute, "Eureka evicts vm-1", func() error {
		id, err := instanceOnPort(c.Peers.Servers[0], app, vm1.port)
		if err == nil && id != "" {
			err = fmt.Errorf("%s still listed", id)
		}
		return err
	})
	evicted := time.Since(killed)
	left := watched.wait(t, 3*time.Minute, "vm-1's endpoint gone", func(eps map[int32]bool) error {
		if _, listed := eps[vm1.port]; listed {
			return fmt.Errorf("vm-1's endpoint (port %d) still listed", vm1.port)
		}
		return nil
	}).Sub(killed)
	t.Logf("vm-1 killed with SIGKILL: evicted by Eureka %s later (fast profile: eviction every 1 s, lease %d s), gone from the slice %s after the kill",
		evicted.Round(time.Millisecond), 3*vmRenewalSeconds, left.Round(time.Millisecond))

	total := caller.statsT(t).Since(start)
	if total.Failed != 0 {
		t.Fatalf("%d of %d calls by name failed (last error: %s)", total.Failed, total.OK+total.Failed, total.LastError)
	}
	t.Logf("%d calls by name through the import, 0 failed; answered by %v", total.OK, total.ByInstance)

	// Deleting the import removes its Service and slices.
	deleted := time.Now()
	if err := c.Node.Client.Delete(ctx, imp); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, 2*time.Minute, "the import's Service and slices gone", func() error {
		var s corev1.Service
		if err := c.Node.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: service}, &s); !apierrors.IsNotFound(err) {
			return fmt.Errorf("Service %s: %v", service, err)
		}
		var list discoveryv1.EndpointSliceList
		if err := c.Node.Client.List(ctx, &list, client.InNamespace(ns), client.MatchingLabels{discoveryv1.LabelServiceName: service}); err != nil {
			return err
		}
		if len(list.Items) > 0 {
			return fmt.Errorf("%d slices left, such as %s", len(list.Items), list.Items[0].Name)
		}
		return client.IgnoreNotFound(c.Node.Client.Get(ctx, client.ObjectKeyFromObject(imp), imp))
	})
	t.Logf("import deleted: its Service and slices gone %s later", time.Since(deleted).Round(time.Millisecond))
}

// vmRenewalSeconds is the VMs' heartbeat (harness.StartSpringVM's default);
// their lease lasts three of them.
const vmRenewalSeconds = 5

// importedVM is a Spring Boot app on the host registered the VM way.
type importedVM struct {
	*harness.SpringClient
	port       int32
	instanceID string
}

// startImportedVM starts a VM of app on the node's address, answering GET /
// with name, and waits until Eureka lists it UP.
func startImportedVM(t *testing.T, app, name string) *importedVM {
	t.Helper()
	sc, err := harness.StartSpringVM(context.Background(), harness.SpringVMOptions{
		EurekaURL: c.Peers.DefaultZone(), App: app, Name: name, Host: node.NodeIP,
		RenewalSeconds: vmRenewalSeconds, LogDir: t.TempDir(),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sc.Stop() })
	keepProcessLog(t, "vm-"+app+"-"+name, sc.Process)
	u, err := url.Parse(sc.StatsURL())
	if err != nil {
		t.Fatal(err)
	}
	port, err := strconv.ParseInt(u.Port(), 10, 32)
	if err != nil {
		t.Fatal(err)
	}
	vm := &importedVM{SpringClient: sc, port: int32(port)}
	harness.Eventually(t, time.Minute, name+" listed by Eureka", func() error {
		id, err := instanceOnPort(c.Peers.Servers[0], app, vm.port)
		if err == nil && id == "" {
			err = fmt.Errorf("no instance of %s on port %d", app, port)
		}
		vm.instanceID = id
		return err
	})
	return vm
}

// instanceOnPort is the id of app's instance listening on port, as peer
// lists it ("" when it lists none).
func instanceOnPort(peer *harness.Eureka, app string, port int32) (string, error) {
	instances, err := peer.SpringRead(strings.ToUpper(app))
	if err != nil {
		return "", err
	}
	for _, in := range instances {
		if fmt.Sprint(in.Port["$"]) == strconv.Itoa(int(port)) {
			return in.InstanceID, nil
		}
	}
	return "", nil
}

// importEurekaClient reaches the Eureka peers as a deployment tool does.
func importEurekaClient(t *testing.T) *eureka.Client {
	t.Helper()
	ec, err := eureka.New(eureka.Options{URLs: c.Peers.URLs()})
	if err != nil {
		t.Fatal(err)
	}
	return ec
}

// waitImport waits until the import's status describes its spec and
// passes check.
func waitImport(t *testing.T, ns, name, what string, check func(v1alpha1.EurekaImportStatus) error) {
	t.Helper()
	harness.Eventually(t, 3*time.Minute, what, func() error {
		var imp v1alpha1.EurekaImport
		if err := c.Node.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &imp); err != nil {
			return err
		}
		if imp.Status.ObservedGeneration != imp.Generation {
			return fmt.Errorf("status of generation %d, spec is %d", imp.Status.ObservedGeneration, imp.Generation)
		}
		return check(imp.Status)
	})
}

// sliceWatch follows an import's EndpointSlices through a watch, so that
// the moment each change reached the API server's watchers is known.
type sliceWatch struct {
	mu      sync.Mutex
	slices  map[string]*discoveryv1.EndpointSlice
	at      time.Time     // when the current state arrived
	changed chan struct{} // closed at the next change
}

// watchSlices follows the slices of the import named name in ns until the
// test ends.
func watchSlices(t *testing.T, ns, name string) *sliceWatch {
	t.Helper()
	w := &sliceWatch{slices: map[string]*discoveryv1.EndpointSlice{}, at: time.Now(), changed: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	api := c.Clientset.DiscoveryV1().EndpointSlices(ns)
	selector := controller.ImportLabel + "=" + name
	go func() {
		for ctx.Err() == nil {
			list, err := api.List(ctx, metav1.ListOptions{LabelSelector: selector})
			if err != nil {
				time.Sleep(100 * time.Millisecond) // the API server busy: again
				continue
			}
			w.update(func(m map[string]*discoveryv1.EndpointSlice) {
				clear(m)
				for i := range list.Items {
					m[list.Items[i].Name] = &list.Items[i]
				}
			})
			events, err := api.Watch(ctx, metav1.ListOptions{LabelSelector: selector, ResourceVersion: list.ResourceVersion})
			if err != nil {
				time.Sleep(100 * time.Millisecond)
				continue
			}
			for ev := range events.ResultChan() {
				s, ok := ev.Object.(*discoveryv1.EndpointSlice)
				if !ok {
					break // an error (the version expired): list again
				}
				w.update(func(m map[string]*discoveryv1.EndpointSlice) {
					if ev.Type == watch.Deleted {
						delete(m, s.Name)
					} else {
						m[s.Name] = s
					}
				})
			}
			events.Stop()
		}
	}()
	return w
}

func (w *sliceWatch) update(change func(map[string]*discoveryv1.EndpointSlice)) {
	w.mu.Lock()
	defer w.mu.Unlock()
	change(w.slices)
	w.at = time.Now()
	close(w.changed)
	w.changed = make(chan struct{})
}

// endpoints are the slices' endpoints on the node's address by port (the
// VMs all listen there), with their ready condition.
func (w *sliceWatch) endpoints() (map[int32]bool, time.Time, <-chan struct{}) {
	w.mu.Lock()
	defer w.mu.Unlock()
	eps := map[int32]bool{}
	for _, s := range w.slices {
		if len(s.Ports) != 1 || s.Ports[0].Port == nil {
			continue
		}
		for _, e := range s.Endpoints {
			if slices.Contains(e.Addresses, node.NodeIP) {
				eps[*s.Ports[0].Port] = ptr.Deref(e.Conditions.Ready, false)
			}
		}
	}
	return eps, w.at, w.changed
}

// wait waits until the endpoints pass cond and returns when the state that
// passed arrived.
func (w *sliceWatch) wait(t *testing.T, timeout time.Duration, what string, cond func(map[int32]bool) error) time.Time {
	t.Helper()
	deadline := time.After(timeout)
	for {
		eps, at, changed := w.endpoints()
		err := cond(eps)
		if err == nil {
			return at
		}
		select {
		case <-changed:
		case <-deadline:
			t.Fatalf("%s: not within %s: %v", what, timeout, err)
		}
	}
}

// ready is the condition that the endpoint on port is listed and ready.
func ready(port int32) func(map[int32]bool) error {
	return func(eps map[int32]bool) error {
		if !eps[port] {
			return fmt.Errorf("endpoint on port %d not ready (endpoints by port: %v)", port, eps)
		}
		return nil
	}
}

// podCaller is `testapp call` in a pod of the cluster: a caller that
// discovers through Kubernetes (DNS and kube-proxy), counting calls as the
// Spring client does.
type podCaller struct{ statsURL string }

// startCaller runs a pod calling target every 100 ms, and deletes it when
// the test ends.
func startCaller(t *testing.T, ns, target string) *podCaller {
	t.Helper()
	ctx := context.Background()
	pod := builders.Pod(ns, "caller", builders.Named("caller"), builders.Image(c.Node.Image("testapp")), builders.Restricted(),
		func(p *corev1.Pod) {
			p.Spec.TerminationGracePeriodSeconds = ptr.To[int64](1)
			ct := &p.Spec.Containers[0]
			ct.ImagePullPolicy = corev1.PullNever
			ct.Resources = cluster.PodRequests()
			// A call bounded by 10 s: routing to a dead or missing
			// endpoint fails at once (refused, reset, no route) and still
			// counts; a VM's JVM slow to answer on a loaded two-core
			// machine beside the other suites does not (2 s timed out once
			// in 4,088 calls of a fresh-clone run, with every routing
			// step right).
			ct.Args = []string{"call", "-url", target, "-listen", ":" + strconv.Itoa(int(builders.PortNumber)), "-timeout", "10s"}
			ct.ReadinessProbe = &corev1.Probe{PeriodSeconds: 1, ProbeHandler: corev1.ProbeHandler{
				HTTPGet: &corev1.HTTPGetAction{Path: "/stats", Port: intstr.FromString(builders.PortName)}}}
		})
	if err := c.Node.Client.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.Node.Client.Delete(context.Background(), pod, client.GracePeriodSeconds(0))
	})
	keepPodLog(t, pod)
	harness.Eventually(t, 2*time.Minute, "the caller pod ready", func() error {
		if err := c.Node.Client.Get(ctx, client.ObjectKeyFromObject(pod), pod); err != nil {
			return err
		}
		if pod.Status.PodIP == "" || !cluster.PodReady(pod) {
			return fmt.Errorf("phase %s, IP %q", pod.Status.Phase, pod.Status.PodIP)
		}
		return nil
	})
	return &podCaller{statsURL: "http://" + net.JoinHostPort(pod.Status.PodIP, strconv.Itoa(int(builders.PortNumber))) + "/stats"}
}

// Stats reads the caller's counts from the host, which reaches pod IPs.
func (p *podCaller) Stats(ctx context.Context) (harness.SpringStats, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	var s harness.SpringStats
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.statsURL, nil)
	if err != nil {
		return s, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return s, fmt.Errorf("caller stats: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return s, fmt.Errorf("caller stats: GET %s: %s", p.statsURL, resp.Status)
	}
	return s, json.NewDecoder(resp.Body).Decode(&s)
}

func (p *podCaller) statsT(t *testing.T) harness.SpringStats {
	t.Helper()
	s, err := p.Stats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// callsWithout waits for a run of n calls none of which who answered, and
// returns it: calls still reaching who (caches, rules not yet updated)
// start the run again.
func callsWithout(t *testing.T, caller statsReader, who string, n int64) harness.SpringStats {
	t.Helper()
	from, err := caller.Stats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var run harness.SpringStats
	harness.Eventually(t, 2*time.Minute, fmt.Sprintf("a run of %d calls none of which %s answered", n, who), func() error {
		now, err := caller.Stats(context.Background())
		if err != nil {
			return err
		}
		run = now.Since(from)
		if run.ByInstance[who] > 0 {
			from = now
			return fmt.Errorf("%s still answered", who)
		}
		if run.OK < n {
			return fmt.Errorf("%d calls so far", run.OK)
		}
		return nil
	})
	return run
}

// afterCalls waits until the caller has made n more calls.
func afterCalls(t *testing.T, caller statsReader, n int64) {
	t.Helper()
	from, err := caller.Stats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, 2*time.Minute, fmt.Sprintf("%d more calls", n), func() error {
		now, err := caller.Stats(context.Background())
		if err != nil {
			return err
		}
		if made := now.Since(from); made.OK+made.Failed < n {
			return fmt.Errorf("%d calls of %d", made.OK+made.Failed, n)
		}
		return nil
	})
}

// percentile is the nearest-rank p-th percentile of ds.
func percentile(ds []time.Duration, p int) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	rank := (p*len(s) + 99) / 100
	return s[max(rank, 1)-1]
}

func roundAll(ds []time.Duration) []time.Duration {
	out := make([]time.Duration, len(ds))
	for i, d := range ds {
		out[i] = d.Round(time.Millisecond)
	}
	return out
}
