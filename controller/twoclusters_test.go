package controller_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/eurekube/eurekube/api/v1alpha1"
	"github.com/eurekube/eurekube/controller"
	"github.com/eurekube/eurekube/eureka"
	"github.com/eurekube/eurekube/sidecar"
	"github.com/eurekube/eurekube/tests/harness"
	"github.com/eurekube/eurekube/webhook"
)

// secondClusterID is the cluster id of the second cluster's manager.
const secondClusterID = "second-cluster"

// The same app runs in two clusters — the same namespace, syncer, app and
// pod names — registered in three replicating Eureka peers, each cluster with its own
// control plane and manager. While pods come and go in both (some stop
// cleanly, some are killed and leave their instance behind) and the second
// cluster switches between Standby and Serve, a caller of this cluster's
// app notices nothing of the second cluster's manager: none of this
// cluster's instances is ever cancelled, taken out of traffic or
// re-registered by it. Each manager removes the instances its own killed
// pods left, and only those; kubectl get esync in each cluster counts its
// own instances as REGISTERED and READY and the other cluster's as
// ELSEWHERE; and deleting the second cluster's syncer takes only that
// cluster's instances out of traffic.
func TestSecondCluster_NeverTouchesThisClustersInstances(t *testing.T) {
	const rounds = 3
	ctx := context.Background()
	began := time.Now()
	ns := newNamespace(t)
	// The clusters share three replicating Eureka peers, as production
	// runs Eureka: this cluster writes to the first, the second cluster to
	// the second, and the checks read through the third, so what they see
	// is what replication brought.
	peers := harness.EurekaPeersT(t, harness.EurekaOptions{}, 3)
	urls := peers.URLs()
	c := directClient(t, urls[2])
	second := startSecondCluster(t, secondClusterID)
	if err := second.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatalf("create namespace %s in the second cluster: %v", ns, err)
	}

	// One syncer, applied to both clusters.
	s := newSyncer(t, ns, "tickets", urls...)
	twin := &v1alpha1.EurekaSyncer{ObjectMeta: metav1.ObjectMeta{Name: s.Name, Namespace: s.Namespace}, Spec: *s.Spec.DeepCopy()}
	twin.Spec.Eureka.ServiceURLs = []string{urls[1], urls[2], urls[0]}
	if err := second.Create(ctx, twin); err != nil {
		t.Fatalf("create syncer %s/%s in the second cluster: %v", ns, s.Name, err)
	}
	var each []*eureka.Client
	for _, u := range urls {
		each = append(each, directClient(t, u))
	}
	here := &side{name: "this cluster", id: clusterID, k8s: k8s, writer: each[0], peers: each, net: 1, syncer: s, traffic: v1alpha1.TrafficServe,
		pods: map[string]*corev1.Pod{}, live: map[string]eureka.Instance{}}
	there := &side{name: "the second cluster", id: secondClusterID, k8s: second, writer: each[1], peers: each, net: 2, syncer: twin, traffic: v1alpha1.TrafficServe,
		pods: map[string]*corev1.Pod{}, live: map[string]eureka.Instance{}}

	g := watchInstances(t, c, s.EffectiveAppName())
	t.Cleanup(func() { // leave the server as found: the leases outlast the test
		for _, sd := range []*side{here, there} {
			for _, inst := range sd.live {
				if err := c.Cancel(context.Background(), inst.App, inst.InstanceID); err != nil && !errors.Is(err, eureka.ErrNotFound) {
					t.Logf("clean-up: cancel %s: %v", inst.InstanceID, err)
				}
			}
		}
	})

	// start runs the pod called name in both clusters (a StatefulSet, or a
	// Deployment whose pods got the same name by chance) and registers
	// each pod's instance as its registrar does.
	start := func(name string, i int) {
		t.Helper()
		pod := newPod(t, ns, s.Name, name, true, fmt.Sprintf("10.%d.0.%d", here.net, i))
		here.started(g, pod, replicated(t, c, registerAs(t, here.writer, here.id, s, pod)), true)
		pod = mirrorPod(t, second, pod, fmt.Sprintf("10.%d.0.%d", there.net, i))
		there.started(g, pod, replicated(t, c, registerAs(t, there.writer, there.id, twin, pod)), false)
	}
	var orphans []eureka.Instance // left by killed pods, of both clusters
	converged := func(what string) {
		t.Helper()
		// Two managers' reconciles, on a machine that runs two API servers
		// and a JVM besides.
		harness.Eventually(t, 2*patience, what, func() error {
			g.fatalOnViolation(t)
			for _, inst := range orphans {
				if _, err := c.Instance(ctx, inst.App, inst.InstanceID); !errors.Is(err, eureka.ErrNotFound) {
					return fmt.Errorf("orphan %s (cluster %s) still registered (%v)", inst.InstanceID, inst.Metadata[eureka.MetaCluster], err)
				}
			}
			// The second cluster's traffic, applied to its instances only
			// (this cluster's are the guard's).
			want := eureka.StatusUp
			if there.traffic == v1alpha1.TrafficStandby {
				want = eureka.StatusOutOfService
			}
			for pod, inst := range there.live {
				got, err := c.Instance(ctx, inst.App, inst.InstanceID)
				if err != nil || got.Status != want {
					return fmt.Errorf("the second cluster's pod %s: instance %s is %s (%v), want %s (%s)", pod, inst.InstanceID, got.Status, err, want, there.traffic)
				}
			}
			if err := here.counts(there); err != nil {
				return err
			}
			return there.counts(here)
		})
		t.Logf("%s: after %s", what, time.Since(began).Round(time.Second))
	}

	for i := range 2 { // run through the whole test in both clusters
		start(fmt.Sprintf("%s-%d", s.Name, i), i+1)
	}
	converged("each cluster counts its own 2 instances here and the other's 2 elsewhere")

	for round := 1; round <= rounds; round++ {
		// The second cluster cuts over (odd rounds) and back (even ones).
		there.traffic = v1alpha1.TrafficStandby
		if round%2 == 0 {
			there.traffic = v1alpha1.TrafficServe
		}
		patch := client.RawPatch(types.MergePatchType, []byte(fmt.Sprintf(`{"spec":{"traffic":%q}}`, there.traffic)))
		if err := second.Patch(ctx, twin.DeepCopy(), patch); err != nil {
			t.Fatalf("round %d: set traffic %s in the second cluster: %v", round, there.traffic, err)
		}
		stopping, killed := fmt.Sprintf("%s-%d", s.Name, 2*round), fmt.Sprintf("%s-%d", s.Name, 2*round+1)
		start(stopping, 2*round+1)
		start(killed, 2*round+2)
		converged(fmt.Sprintf("round %d: 4 instances in each cluster, the second one's %s", round, there.traffic))

		for _, sd := range []*side{here, there} {
			sd.stop(t, g, stopping, true)
			orphans = append(orphans, sd.stop(t, g, killed, false))
		}
		converged(fmt.Sprintf("round %d: each cluster removed the orphan of its own killed pod, %d in all", round, round))
	}

	// The second cluster detaches: its manager marks its instances DOWN
	// until their pods stop, then lets its syncer go.
	if err := second.Delete(ctx, twin); err != nil {
		t.Fatalf("delete the second cluster's syncer: %v", err)
	}
	harness.Eventually(t, 2*patience, "the second cluster's instances DOWN while it detaches", func() error {
		g.fatalOnViolation(t)
		for pod, inst := range there.live {
			if got, err := c.Instance(ctx, inst.App, inst.InstanceID); err != nil || got.Status != eureka.StatusDown {
				return fmt.Errorf("the second cluster's pod %s: instance %s is %s (%v), want DOWN", pod, inst.InstanceID, got.Status, err)
			}
		}
		return nil
	})
	for name := range there.pods {
		there.stop(t, g, name, true)
	}
	harness.Eventually(t, 2*patience, "the second cluster's syncer gone; this cluster's counts its 2 instances and nothing elsewhere", func() error {
		g.fatalOnViolation(t)
		if err := second.Get(ctx, client.ObjectKeyFromObject(twin), &v1alpha1.EurekaSyncer{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("the second cluster's syncer is still there (%v)", err)
		}
		return here.counts(there)
	})

	passes := g.finish(t)
	t.Logf("%d rounds of churn, %d reads of every running pod's instance by the guard, in %s", rounds, passes, time.Since(began).Round(time.Second))
}

// side is one cluster: its API server, its syncer and what runs there.
type side struct {
	name string
	id   string // its manager's cluster id
	k8s  client.Client
	// writer is the Eureka peer its registrars talk to.
	writer *eureka.Client
	// peers read each Eureka peer alone.
	peers   []*eureka.Client
	net     int // its pods' addresses are 10.<net>.0.x
	syncer  *v1alpha1.EurekaSyncer
	traffic v1alpha1.Traffic
	pods    map[string]*corev1.Pod     // running, by name
	live    map[string]eureka.Instance // the instances of pods, by pod name
	orphans int64                      // instances left by its killed pods
}

// started records pod and its instance, and has g watch it: strict, it
// must stay as its registrar left it (this cluster's); else only
// registered (the second cluster's, whose traffic is its manager's).
func (sd *side) started(g *guard, pod *corev1.Pod, inst eureka.Instance, strict bool) {
	sd.pods[pod.Name], sd.live[pod.Name] = pod, inst
	g.add(inst, strict)
}

// stop ends a pod: clean, its registrar cancels its instance first (a
// SIGTERM); otherwise its instance stays behind (a SIGKILL, a lost node)
// for the manager to collect, and is returned.
func (sd *side) stop(t *testing.T, g *guard, name string, clean bool) eureka.Instance {
	t.Helper()
	ctx := context.Background()
	pod, inst := sd.pods[name], sd.live[name]
	g.forget(inst.InstanceID)
	delete(sd.pods, name)
	delete(sd.live, name)
	if clean {
		if err := sd.writer.Cancel(ctx, inst.App, inst.InstanceID); err != nil {
			t.Fatalf("%s: the registrar of %s cancels %s: %v", sd.name, name, inst.InstanceID, err)
		}
		// A terminating pod outlives its cancel by its drain, long after
		// every peer has the cancel; deleted at once, its pod could be
		// missed by a manager whose read predates the cancel, which would
		// then find a peer still holding the instance and remove it as an
		// orphan.
		harness.Eventually(t, patience, "the cancel of "+inst.InstanceID+" replicated to every peer", func() error {
			for i, peer := range sd.peers {
				if _, err := peer.Instance(ctx, inst.App, inst.InstanceID); !errors.Is(err, eureka.ErrNotFound) {
					return fmt.Errorf("peer %d: %v", i, err)
				}
			}
			return nil
		})
	} else {
		sd.orphans++
	}
	if err := sd.k8s.Delete(ctx, pod, &clientGrace0); err != nil {
		t.Fatalf("%s: delete pod %s: %v", sd.name, name, err)
	}
	return inst
}

// counts checks sd's syncer status: its own running pods' instances here,
// the other cluster's elsewhere, its own orphans removed.
func (sd *side) counts(other *side) error {
	var got v1alpha1.EurekaSyncer
	if err := sd.k8s.Get(context.Background(), client.ObjectKeyFromObject(sd.syncer), &got); err != nil {
		return fmt.Errorf("%s: read syncer: %w", sd.name, err)
	}
	upOf := func(s *side) int32 {
		if s.traffic == v1alpha1.TrafficStandby {
			return 0
		}
		return int32(len(s.live))
	}
	st := got.Status
	mine, theirs := int32(len(sd.live)), int32(len(other.live))
	if st.SelectedPods != mine || st.RegisteredInstances != mine || st.UpInstances != upOf(sd) || st.OutOfServiceInstances != mine-upOf(sd) ||
		st.ElsewhereInstances != theirs || st.ElsewhereUpInstances != upOf(other) || st.OrphansRemoved != sd.orphans {
		return fmt.Errorf("%s (%s): status selected %d, registered %d (UP %d, OUT_OF_SERVICE %d), elsewhere %d (UP %d), orphans removed %d; "+
			"want %d, %d (%d, %d), %d (%d), %d", sd.name, sd.traffic, st.SelectedPods, st.RegisteredInstances, st.UpInstances, st.OutOfServiceInstances,
			st.ElsewhereInstances, st.ElsewhereUpInstances, st.OrphansRemoved, mine, mine, upOf(sd), mine-upOf(sd), theirs, upOf(other), sd.orphans)
	}
	return nil
}

// startSecondCluster starts another control plane and, on it, a manager
// running the reconciler with cluster id, as cmd/manager would there. Its
// syncers name their Eureka servers. Its log is shown if the test fails.
func startSecondCluster(t *testing.T, id string) client.Client {
	t.Helper()
	cp := harness.ControlPlaneT(t, harness.ControlPlaneOptions{})
	startManagerOn(t, cp, id, "the second cluster's manager")
	return cp.Client
}

// startManagerOn starts a manager of cluster id, named name in errors and
// logs, on cp (the suite's own runs the same controllers in this process),
// and returns what stops it; t's cleanup stops it too, before cp stops.
func startManagerOn(t *testing.T, cp *harness.ControlPlane, id, name string) (stop func()) {
	t.Helper()
	m, err := ctrl.NewManager(cp.Config, ctrl.Options{Scheme: cp.Scheme, Metrics: metricsserver.Options{BindAddress: "0"}, Cache: controller.CacheOptions(),
		// The suite's manager runs the same controller in this process.
		Controller: config.Controller{SkipNameValidation: ptr.To(true)}})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	logs := &lockedBuffer{}
	log := logrus.New()
	log.SetOutput(logs)
	if err := controller.Setup(m, controller.Options{ClusterID: id, ResyncPeriod: resync, EurekaTimeout: 5 * time.Second, Logger: log,
		Defaults: webhook.Defaults{Allowed: localEureka()}}); err != nil {
		t.Fatalf("%s's reconciler: %v", name, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan error, 1)
	go func() { stopped <- m.Start(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-stopped; err != nil {
				t.Errorf("%s: %v", name, err)
			}
			if t.Failed() {
				t.Logf("%s logged:\n%s", name, logs)
			}
		})
	}
	t.Cleanup(stop) // before the control plane stops
	return stop
}

// mirrorPod creates in cl the pod of the same workload in another cluster:
// pod's name, namespace, labels, annotations and spec (injected alike), a
// UID of its own, and pod's status with address ip, as its kubelet sets it.
func mirrorPod(t testing.TB, cl client.Client, pod *corev1.Pod, ip string) *corev1.Pod {
	t.Helper()
	ctx := context.Background()
	twin := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: pod.Name, Namespace: pod.Namespace, Labels: maps.Clone(pod.Labels), Annotations: maps.Clone(pod.Annotations)},
		Spec:       *pod.Spec.DeepCopy(),
	}
	if err := cl.Create(ctx, twin); err != nil {
		t.Fatalf("create pod %s in the other cluster: %v", pod.Name, err)
	}
	created := twin.DeepCopy()
	twin.Status = *pod.Status.DeepCopy()
	twin.Status.PodIP = ip
	if err := cl.Status().Patch(ctx, twin, client.MergeFrom(created)); err != nil {
		t.Fatalf("set the status of pod %s in the other cluster: %v", pod.Name, err)
	}
	return twin
}

// registerAs does what pod's registrar does in the cluster with id
// cluster: it registers the instance the sidecar package builds, UP. Its
// id carries the namespace and the UID's prefix, so that pods of one name
// in two clusters do not overwrite each other. Its lease outlasts the
// replicated waits until the peer c reads through lists inst, registered
// on another peer: from then on the guard holds it to stay.
func replicated(t *testing.T, c *eureka.Client, inst eureka.Instance) eureka.Instance {
	t.Helper()
	harness.Eventually(t, patience, "instance "+inst.InstanceID+" replicated to the peer the checks read", func() error {
		_, err := c.Instance(context.Background(), inst.App, inst.InstanceID)
		return err
	})
	return inst
}

// test: nothing needs to heartbeat.
func registerAs(t testing.TB, c *eureka.Client, cluster string, s *v1alpha1.EurekaSyncer, pod *corev1.Pod) eureka.Instance {
	t.Helper()
	cfg := sidecar.Config{PodName: pod.Name, PodNamespace: pod.Namespace, PodUID: string(pod.UID), PodIP: pod.Status.PodIP,
		AppName: s.EffectiveAppName(), VIPAddress: s.Name, Port: s.Spec.Port.IntValue(), ClusterID: cluster, Syncer: s.Name,
		RenewalInterval: 30 * time.Second, LeaseDuration: time.Hour}
	inst := cfg.Instance(eureka.StatusUp)
	if err := c.Register(context.Background(), inst); err != nil {
		t.Fatalf("the registrar of %s (cluster %s) registers: %v", pod.Name, cluster, err)
	}
	return inst
}

// guard reads, until finish, the instances of the running pods of both
// clusters straight from Eureka, over and over: none may be cancelled or
// re-registered by anyone but its registrar, and this cluster's must stay
// UP with no status override. Once the app's list has shown an instance,
// every later list must show it too.
type guard struct {
	c    *eureka.Client
	app  string
	stop chan struct{}
	done chan struct{}
	once sync.Once

	mu         sync.Mutex
	watched    map[string]*watched // by instance id
	violations []string
	passes     int
}

type watched struct {
	inst   eureka.Instance
	strict bool // this cluster's: UP, no override
	listed bool // shown by a list of the app
}

func watchInstances(t *testing.T, c *eureka.Client, app string) *guard {
	g := &guard{c: c, app: app, stop: make(chan struct{}), done: make(chan struct{}), watched: map[string]*watched{}}
	go g.run()
	t.Cleanup(g.halt)
	return g
}

func (g *guard) add(inst eureka.Instance, strict bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.watched[inst.InstanceID] = &watched{inst: inst, strict: strict}
}

// forget stops watching an instance, before its pod stops.
func (g *guard) forget(id string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.watched, id)
}

func (g *guard) run() {
	defer close(g.done)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		g.pass()
		select {
		case <-g.stop:
			return
		case <-tick.C:
		}
	}
}

func (g *guard) pass() {
	ctx := context.Background()
	g.mu.Lock()
	snapshot := make(map[string]watched, len(g.watched))
	for id, w := range g.watched {
		snapshot[id] = *w
	}
	g.mu.Unlock()
	list, listErr := g.c.Instances(ctx, g.app)
	inList := map[string]bool{}
	for _, inst := range list {
		inList[inst.InstanceID] = true
	}
	for id, w := range snapshot {
		got, err := g.c.Instance(ctx, w.inst.App, id)
		var problem string
		switch {
		case errors.Is(err, eureka.ErrNotFound):
			problem = "cancelled"
		case err != nil:
			continue // Eureka slow to answer on a busy machine: the next pass reads it
		case got.Metadata[eureka.MetaCluster] != w.inst.Metadata[eureka.MetaCluster] || got.Metadata[eureka.MetaPodUID] != w.inst.Metadata[eureka.MetaPodUID]:
			problem = fmt.Sprintf("re-registered as cluster %q pod UID %q", got.Metadata[eureka.MetaCluster], got.Metadata[eureka.MetaPodUID])
		case w.strict && got.Status != eureka.StatusUp:
			problem = fmt.Sprintf("status %s", got.Status)
		case w.strict && got.OverriddenStatus != "" && got.OverriddenStatus != eureka.StatusUnknown:
			problem = fmt.Sprintf("status override %s", got.OverriddenStatus)
		case listErr == nil && !inList[id] && w.listed:
			problem = "no longer in the app's list"
		}
		g.mu.Lock()
		// An instance forgotten meanwhile is its pod's to remove.
		if now, ok := g.watched[id]; ok {
			if problem != "" {
				g.violations = append(g.violations, fmt.Sprintf("%s: instance %s of pod %s in cluster %s: %s",
					time.Now().Format("15:04:05.000"), id, w.inst.Metadata[eureka.MetaPod], w.inst.Metadata[eureka.MetaCluster], problem))
			}
			now.listed = now.listed || (listErr == nil && inList[id])
		}
		g.mu.Unlock()
	}
	g.mu.Lock()
	g.passes++
	g.mu.Unlock()
}

// fatalOnViolation ends the test at the first violation seen.
func (g *guard) fatalOnViolation(t *testing.T) {
	t.Helper()
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.violations) > 0 {
		t.Fatalf("an instance was touched by a manager that does not own it:\n%s", strings.Join(g.violations, "\n"))
	}
}

func (g *guard) halt() {
	g.once.Do(func() { close(g.stop) })
	<-g.done
}

// finish stops the guard after a last pass, fails t on any violation, and
// returns how many passes it made.
func (g *guard) finish(t *testing.T) int {
	t.Helper()
	g.halt()
	g.pass()
	g.fatalOnViolation(t)
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.watched) != 2 {
		t.Fatalf("the guard watched %d instances at the end, want those of this cluster's 2 pods that ran throughout", len(g.watched))
	}
	return g.passes
}

// lockedBuffer is a log destination written from many goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
