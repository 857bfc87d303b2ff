package cluster_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/eurekube/eurekube/api/v1alpha1"
	managerapp "github.com/eurekube/eurekube/manager"
	"github.com/eurekube/eurekube/tests/cluster"
	"github.com/eurekube/eurekube/tests/harness"
	"github.com/eurekube/eurekube/tests/node"
)

// clientCacheSeconds is the Spring client's registry fetch interval and
// LoadBalancer cache TTL; drainSeconds outlasts every cache (the package doc
// has the sum).
const (
	clientCacheSeconds = 2
	drainSeconds       = 10
)

// deploy creates the app's namespace, syncer and Deployment at once, as
// kubectl apply of one file does: the webhook must inject pods created a
// moment after their namespace and syncer, before the manager's cache has
// them (it then asks the API server).
func deploy(t *testing.T, a cluster.App, shape func(*appsv1.Deployment)) {
	t.Helper()
	record(t).Watch(a.Namespace)
	if err := c.Deploy(context.Background(), a, shape); err != nil {
		t.Fatal(err)
	}
}

// dropNamespace deletes a test's namespace, without waiting.
func dropNamespace(t *testing.T, ns string) {
	err := c.Node.Client.Delete(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	if err != nil && !apierrors.IsNotFound(err) {
		t.Errorf("delete namespace %s: %v", ns, err)
	}
}

// waitNamespaceGone waits until a deleted namespace is gone: its pods have
// drained and cancelled, and its syncer has detached.
func waitNamespaceGone(t *testing.T, name string) {
	t.Helper()
	harness.Eventually(t, 5*time.Minute, "namespace "+name+" gone", func() error {
		var ns corev1.Namespace
		err := c.Node.Client.Get(context.Background(), client.ObjectKey{Name: name}, &ns)
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err == nil {
			err = fmt.Errorf("namespace %s: %s", name, ns.Status.Phase)
		}
		return err
	})
}

// rolloutCalled rolls every pod of the app while sc calls it by name, waits
// until the new pods are the ones registered and each has answered, and
// returns the calls made since the rollout began, and when it began.
func rolloutCalled(t *testing.T, app cluster.App, sc *harness.SpringClient) (harness.SpringStats, time.Time) {
	t.Helper()
	return rolloutCalledAt(t, app, sc, c.Eureka)
}

// rolloutCalledAt is rolloutCalled for an app registered with peer.
func rolloutCalledAt(t *testing.T, app cluster.App, sc *harness.SpringClient, peer *harness.Eureka) (harness.SpringStats, time.Time) {
	t.Helper()
	before := sc.StatsT(t)
	began := time.Now()
	stamp := rollout(t, app)
	pods := waitRolledOutTo(t, app, peer, stamp, 3*time.Minute)
	waitAnswered(t, sc, before, pods)
	return sc.StatsT(t).Since(before), began
}

func scale(t *testing.T, a cluster.App, replicas int32) {
	t.Helper()
	scaleDeployment(t, a.Namespace, a.Name, replicas)
}

// syncer reads the app's EurekaSyncer.
func syncer(t *testing.T, a cluster.App) *v1alpha1.EurekaSyncer {
	t.Helper()
	var s v1alpha1.EurekaSyncer
	if err := c.Node.Client.Get(context.Background(), client.ObjectKey{Namespace: a.Namespace, Name: a.Name}, &s); err != nil {
		t.Fatal(err)
	}
	return &s
}

// waitEvent waits for an Event with reason on the app's syncer whose note
// contains each of words, and returns it.
func waitEvent(t *testing.T, a cluster.App, reason string, timeout time.Duration, words ...string) eventsv1.Event {
	t.Helper()
	var found eventsv1.Event
	harness.Eventually(t, timeout, fmt.Sprintf("a %s Event on syncer %s naming %v", reason, a.Name, words), func() error {
		var events eventsv1.EventList
		if err := c.Node.Client.List(context.Background(), &events, client.InNamespace(a.Namespace)); err != nil {
			return err
		}
		var seen []string
	next:
		for _, e := range events.Items {
			if e.Reason != reason || e.Regarding.Kind != "EurekaSyncer" || e.Regarding.Name != a.Name {
				continue
			}
			seen = append(seen, e.Note)
			for _, w := range words {
				if !strings.Contains(e.Note, w) {
					continue next
				}
			}
			found = e
			return nil
		}
		return fmt.Errorf("%d events, those of reason %s: %q", len(events.Items), reason, seen)
	})
	return found
}

// containerID is the ID the kubelet reports for the named container of a
// running pod, with its restart count.
func containerID(p *corev1.Pod, name string) (string, int32, error) {
	for _, s := range p.Status.ContainerStatuses {
		if s.Name == name && s.State.Running != nil && s.ContainerID != "" {
			return s.ContainerID, s.RestartCount, nil
		}
	}
	return "", 0, fmt.Errorf("pod %s: container %s is not running", p.Name, name)
}

// managerLease reads the manager's leader election Lease.
func managerLease(ctx context.Context) (*coordinationv1.Lease, error) {
	var l coordinationv1.Lease
	if err := c.Node.Client.Get(ctx, client.ObjectKey{Namespace: cluster.ManagerNamespace, Name: managerapp.LeaderElectionID}, &l); err != nil {
		return nil, err
	}
	return &l, nil
}

// leader waits until a manager pod holds the Lease and returns the holder's
// identity and its pod: controller-runtime names the holder
// "<hostname>_<uuid>", and a pod's hostname is its name.
func leader(t *testing.T) (string, *corev1.Pod) {
	t.Helper()
	var holder string
	var pod corev1.Pod
	harness.Eventually(t, time.Minute, "a manager pod holds the Lease "+managerapp.LeaderElectionID, func() error {
		ctx := context.Background()
		l, err := managerLease(ctx)
		if err != nil {
			return err
		}
		if l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity == "" {
			return fmt.Errorf("no holder")
		}
		holder = *l.Spec.HolderIdentity
		name, _, _ := strings.Cut(holder, "_")
		return c.Node.Client.Get(ctx, client.ObjectKey{Namespace: cluster.ManagerNamespace, Name: name}, &pod)
	})
	return holder, &pod
}

// recorder is an HTTP server on the node's address that records when each
// pod's own hook called it: /hook/<kind>, naming the pod in X-Pod (exec
// hooks through the test app) or by its source IP (httpGet hooks).
type recorder struct {
	port int
	mu   sync.Mutex
	seen map[string]time.Time // kind/who → first call
}

func startRecorder(t *testing.T) *recorder {
	t.Helper()
	ln, err := net.Listen("tcp", net.JoinHostPort(node.NodeIP, "0"))
	if err != nil {
		t.Fatal(err)
	}
	r := &recorder{port: ln.Addr().(*net.TCPAddr).Port, seen: map[string]time.Time{}}
	srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		kind := strings.TrimPrefix(req.URL.Path, "/hook/")
		who := req.Header.Get("X-Pod")
		if who == "" {
			who, _, _ = net.SplitHostPort(req.RemoteAddr)
		}
		r.mu.Lock()
		if _, ok := r.seen[kind+"/"+who]; !ok {
			r.seen[kind+"/"+who] = time.Now()
		}
		r.mu.Unlock()
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return r
}

func (r *recorder) url(kind string) string {
	return "http://" + net.JoinHostPort(node.NodeIP, strconv.Itoa(r.port)) + "/hook/" + kind
}

func (r *recorder) first(kind, who string) (time.Time, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	at, ok := r.seen[kind+"/"+who]
	return at, ok
}

// settle waits until Eureka lists exactly the app's ready pods.
func settle(t *testing.T, app cluster.App, timeout time.Duration) cluster.View {
	t.Helper()
	return settleAt(t, app, c.Eureka, timeout)
}

// settleAt is settle for an app registered with peer.
func settleAt(t *testing.T, app cluster.App, peer *harness.Eureka, timeout time.Duration) cluster.View {
	t.Helper()
	var v cluster.View
	harness.Eventually(t, timeout, fmt.Sprintf("Eureka lists exactly the %d ready pods of %s", app.Replicas, app.Name), func() error {
		var err error
		if v, err = c.LookThrough(context.Background(), app, peer); err != nil {
			return err
		}
		return v.Settled(int(app.Replicas))
	})
	return v
}

// rolledKey is a pod template annotation; changing it rolls every pod,
// as kubectl rollout restart does.
const rolledKey = "eurekube.test/rolled"

// rollout rolls every pod of the app and returns the new template's
// rolledKey stamp.
func rollout(t *testing.T, app cluster.App) string {
	t.Helper()
	stamp := time.Now().Format(time.RFC3339Nano)
	patch := fmt.Sprintf(`{"spec":{"template":{"metadata":{"annotations":{%q:%q}}}}}`, rolledKey, stamp)
	dep := &appsv1.Deployment{}
	dep.Name, dep.Namespace = app.Name, app.Namespace
	if err := c.Node.Client.Patch(context.Background(), dep, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
		t.Fatal(err)
	}
	return stamp
}

// newTemplate says whether pod p is of the template of rollout's stamp,
// or, when stamp is empty, of any rollout's.
func newTemplate(p *corev1.Pod, stamp string) bool {
	if stamp == "" {
		return p.Annotations[rolledKey] != ""
	}
	return p.Annotations[rolledKey] == stamp
}

// waitFirstRolled waits until the first pod of the new template exists.
func waitFirstRolled(t *testing.T, app cluster.App) {
	t.Helper()
	waitFirstRolledTo(t, app, "")
}

// waitFirstRolledTo waits until the first pod of the template of stamp
// (rollout) exists.
func waitFirstRolledTo(t *testing.T, app cluster.App, stamp string) {
	t.Helper()
	harness.Eventually(t, time.Minute, "the first pod of the new template exists", func() error {
		v, err := c.Look(context.Background(), app)
		if err != nil {
			return err
		}
		for _, p := range v.Pods {
			if newTemplate(&p, stamp) {
				return nil
			}
		}
		return fmt.Errorf("none among %d pods", len(v.Pods))
	})
}

// waitRolledOut waits until every pod of the app (terminating ones
// included) is of the new template and Eureka lists exactly the ready ones.
func waitRolledOut(t *testing.T, app cluster.App, timeout time.Duration) []string {
	t.Helper()
	return waitRolledOutAt(t, app, c.Eureka, timeout)
}

// waitRolledOutAt is waitRolledOut for an app registered with peer.
func waitRolledOutAt(t *testing.T, app cluster.App, peer *harness.Eureka, timeout time.Duration) []string {
	t.Helper()
	return waitRolledOutTo(t, app, peer, "", timeout)
}

// waitRolledOutTo is waitRolledOutAt for the template of stamp (rollout).
func waitRolledOutTo(t *testing.T, app cluster.App, peer *harness.Eureka, stamp string, timeout time.Duration) []string {
	t.Helper()
	var ready []string
	harness.Eventually(t, timeout, app.Name+" rolled out", func() error {
		v, err := c.LookThrough(context.Background(), app, peer)
		if err != nil {
			return err
		}
		for _, p := range v.Pods {
			if !newTemplate(&p, stamp) {
				return fmt.Errorf("pod %s is of an old template", p.Name)
			}
		}
		if err := v.Settled(int(app.Replicas)); err != nil {
			return err
		}
		ready = v.ReadyPods
		return nil
	})
	return ready
}

// startClient starts a caller of service by name (Spring, through the
// Eureka peers, clientCacheSeconds) for t, stopped when t ends. The
// stories' callers share one JVM (callers), each counting its own calls;
// when t fails, the JVM's log, where every failed call names its service,
// is kept as callers/spring-client-<service>.log.
func startClient(t *testing.T, service string) *harness.SpringClient {
	t.Helper()
	jvm, err := callers.get()
	if err != nil {
		t.Fatal(err)
	}
	sc, err := jvm.Call(context.Background(), service, "/", 0)
	if err != nil {
		t.Fatalf("%v (the shared client's log: %s)", err, jvm.LogTail())
	}
	t.Cleanup(func() {
		if err := sc.Stop(); err != nil {
			t.Error(err)
		}
	})
	keepProcessLog(t, "spring-client-"+service, sc.Process)
	return sc
}

// callers is the Spring client JVM that the stories' callers share
// (startClient): a JVM's start costs about 9 CPU-seconds, and the suite's
// stories called through a dozen. Started on first use and again if it
// ended; TestMain stops it.
var callers sharedClient

type sharedClient struct {
	mu     sync.Mutex
	client *harness.SpringClient
	dir    string
}

func (s *sharedClient) get() (*harness.SpringClient, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.client != nil && !s.client.Exited() {
		return s.client, nil
	}
	if s.dir == "" {
		dir, err := os.MkdirTemp("", "eurekube-cluster-callers-")
		if err != nil {
			return nil, err
		}
		s.dir = dir
	}
	sc, err := harness.StartSpringClient(context.Background(), harness.SpringClientOptions{
		EurekaURL: c.Peers.DefaultZone(), CacheSeconds: clientCacheSeconds, LogDir: s.dir,
	})
	if err != nil {
		return nil, fmt.Errorf("the stories' shared Spring client: %w", err)
	}
	s.client = sc
	return sc, nil
}

// stop stops the shared JVM and removes its logs.
func (s *sharedClient) stop() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var err error
	if s.client != nil {
		err = s.client.Stop()
	}
	if s.dir != "" {
		err = errors.Join(err, os.RemoveAll(s.dir))
	}
	return err
}

// recorders are the running tests' Recorders (record).
var recorders sync.Map // *testing.T → *cluster.Recorder

// record is t's Recorder, started on first use (each story starts it as it
// enters): when t fails, what explains it is kept in
// bin/test-artifacts/cluster/<test>/ (cluster.Recorder says what).
func record(t *testing.T) *cluster.Recorder {
	if r, ok := recorders.Load(t); ok {
		return r.(*cluster.Recorder)
	}
	r := c.Record(t, "cluster")
	recorders.Store(t, r)
	t.Cleanup(func() { recorders.Delete(t) })
	return r
}

// keepPodLog keeps the logs of pod's containers in callers/ when t fails:
// register it after the cleanup that deletes the pod, which the
// namespace's recording would then miss.
func keepPodLog(t *testing.T, pod *corev1.Pod) {
	record(t).KeepPodLog(pod, "callers")
}

// keepProcessLog keeps a caller's log (a Spring process's: each failed call
// with when it began, how long it took and its exception) as
// callers/<name>.log when t fails. Register it after p's stop.
func keepProcessLog(t *testing.T, name string, p *harness.Process) {
	record(t).Artifacts().KeepLog(filepath.Join("callers", name+".log"), p)
}

// statsReader is a caller counting its calls: the Spring client on the
// host, or a pod's caller (import_test.go).
type statsReader interface {
	Stats(context.Context) (harness.SpringStats, error)
}

// waitAnswered waits until every one of pods has answered the client since
// the reading since.
func waitAnswered(t *testing.T, sc statsReader, since harness.SpringStats, pods []string) {
	t.Helper()
	harness.Eventually(t, time.Minute, fmt.Sprintf("the Spring client called each of %v by name", pods), func() error {
		s, err := sc.Stats(context.Background())
		if err != nil {
			return err
		}
		d := s.Since(since)
		for _, p := range pods {
			if d.ByInstance[p] == 0 {
				return fmt.Errorf("no call reached %s yet (answered: %v, failed %d)", p, d.ByInstance, d.Failed)
			}
		}
		return nil
	})
}

func scaleDeployment(t *testing.T, namespace, name string, replicas int32) {
	t.Helper()
	dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
	patch := fmt.Sprintf(`{"spec":{"replicas":%d}}`, replicas)
	if err := c.Node.Client.Patch(context.Background(), dep, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
		t.Fatal(err)
	}
}

// waitView waits until the syncer's status, as kubectl get esync shows it,
// describes the current spec and passes check.
func waitView(t *testing.T, app cluster.App, what string, check func(v1alpha1.EurekaSyncerStatus) error) {
	t.Helper()
	harness.Eventually(t, 3*time.Minute, what, func() error {
		var s v1alpha1.EurekaSyncer
		if err := c.Node.Client.Get(context.Background(), client.ObjectKey{Namespace: app.Namespace, Name: app.Name}, &s); err != nil {
			return err
		}
		if s.Status.ObservedGeneration != s.Generation {
			return fmt.Errorf("status of generation %d, spec is %d", s.Status.ObservedGeneration, s.Generation)
		}
		return check(s.Status)
	})
}

func trafficApplied(st v1alpha1.EurekaSyncerStatus, reason string) error {
	c := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionTrafficApplied)
	if c == nil || c.Status != "True" || c.Reason != reason {
		return fmt.Errorf("TrafficApplied is %+v, want True/%s", c, reason)
	}
	return nil
}

func readyPods(t *testing.T, app cluster.App) []string {
	t.Helper()
	v, err := c.Look(context.Background(), app)
	if err != nil {
		t.Fatal(err)
	}
	return v.ReadyPods
}

// waitManagerReady waits until both manager replicas are ready again: the
// tests that kill one or lose the node end with it, as the next tests need
// both.
func waitManagerReady(t *testing.T) {
	t.Helper()
	harness.Eventually(t, 3*time.Minute, "both manager replicas ready", func() error {
		var dep appsv1.Deployment
		if err := c.Node.Client.Get(context.Background(), client.ObjectKey{Namespace: cluster.ManagerNamespace, Name: cluster.ManagerDeployment}, &dep); err != nil {
			return err
		}
		if dep.Status.ReadyReplicas != 2 {
			return fmt.Errorf("%d ready", dep.Status.ReadyReplicas)
		}
		return nil
	})
}

func podsOf(t *testing.T, app cluster.App) []corev1.Pod {
	t.Helper()
	v, err := c.Look(context.Background(), app)
	if err != nil {
		t.Fatal(err)
	}
	return v.Pods
}

// storySlots is how many stories run at once. They mostly wait on the
// node (drains, caches, Eureka's reads), so more than the machine's two
// cores; each brings pods and often a Spring client's JVM, so not many:
// four at once, beside make test's other suites, loaded a fresh-clone run
// to 32 and slowed pods past the callers' timeouts. So a fourth and a
// fifth start only while the cores have room: the machine was at least
// storyIdleFloor idle over the last storyIdleWindow, and the last story
// started at least that long ago (its pods and JVM are in the figure). On
// a busy machine the suite runs three at a time, as before.
const (
	storySlots      = 3
	storySlotsIdle  = 5
	storyIdleFloor  = 0.40
	storyIdleWindow = 30 * time.Second
)

// stories lets the suite's parallel tests run storySlots at a time, the
// longest first: once the tests that stop manager replicas are done, every
// story waits at the gate, and a slot always goes to the longest one still
// waiting, so the suite ends soon after its longest story. (Go's own
// -parallel starts them in whatever order they wake, and a long story
// started last made the suite wait for it alone.) The gate opens once every
// declared story has arrived: TestMain's sequential pass declares them all.
var stories = newStoryGate(storySlots, storySlotsIdle)

type storyGate struct {
	mu        sync.Mutex
	changed   *sync.Cond
	slots     int // always open
	idleSlots int // open while the machine has room
	running   int
	unarrived int                      // declared, not yet at the gate
	waiting   map[string]time.Duration // at the gate: name → expected length
	holds     map[string]string        // at the gate: name → what it holds once running
	held      map[string]bool          // what the running stories hold
	idle      float64                  // the cores' idle share over the last storyIdleWindow
	lastStart time.Time
	watching  bool
}

func newStoryGate(slots, idleSlots int) *storyGate {
	g := &storyGate{slots: slots, idleSlots: idleSlots, waiting: map[string]time.Duration{}, holds: map[string]string{}, held: map[string]bool{}}
	g.changed = sync.NewCond(&g.mu)
	return g
}

// watchIdle samples the machine's idle share every tenth of the window,
// over the window, and wakes the stories waiting at the gate: a slot
// beyond g.slots opens on a change no story makes. The samples stop with
// the test binary.
func (g *storyGate) watchIdle() {
	const every = storyIdleWindow / 10
	var samples []cpuTimes
	for range time.Tick(every) {
		now, err := readCPUTimes()
		if err != nil {
			return // no /proc/stat: the gate stays at g.slots
		}
		samples = append(samples, now)
		if len(samples) > 11 {
			samples = samples[1:]
		}
		g.mu.Lock()
		g.idle = samples[0].idleShareUntil(now)
		g.changed.Broadcast()
		g.mu.Unlock()
	}
}

// roomFor says whether one more story may start now.
func (g *storyGate) roomFor() bool {
	if g.running < g.slots {
		return true
	}
	return g.running < g.idleSlots && g.idle >= storyIdleFloor && time.Since(g.lastStart) >= storyIdleWindow
}

// cpuTimes is the machine's CPU time from /proc/stat: idle (idle and
// iowait, and what the other lanes' group used) and in all, in clock
// ticks.
type cpuTimes struct{ idle, total uint64 }

func readCPUTimes() (cpuTimes, error) {
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		return cpuTimes{}, err
	}
	line, _, _ := strings.Cut(string(data), "\n")
	fields := strings.Fields(line)
	if len(fields) < 6 || fields[0] != "cpu" {
		return cpuTimes{}, fmt.Errorf("/proc/stat: unexpected first line %q", line)
	}
	var t cpuTimes
	for i, f := range fields[1:] {
		v, err := strconv.ParseUint(f, 10, 64)
		if err != nil {
			return cpuTimes{}, fmt.Errorf("/proc/stat: %q: %w", line, err)
		}
		t.total += v
		if i == 3 || i == 4 { // idle, iowait
			t.idle += v
		}
	}
	if file := os.Getenv(harness.SpareCPUEnv); file != "" {
		used, err := laneUsage(file)
		if err != nil {
			return cpuTimes{}, err
		}
		t.idle += used
	}
	return t, nil
}

// laneUsage reads the file harness.SpareCPUEnv names, in /proc/stat's clock ticks (USER_HZ, 100 a
// second): cgroup v1's cpuacct.usage (nanoseconds) or v2's cpu.stat
// (usage_usec).
func laneUsage(file string) (uint64, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return 0, err
	}
	text := strings.TrimSpace(string(data))
	if rest, ok := strings.CutPrefix(text, "usage_usec "); ok {
		usec, err := strconv.ParseUint(strings.Fields(rest)[0], 10, 64)
		return usec / 10_000, err
	}
	ns, err := strconv.ParseUint(text, 10, 64)
	return ns / 10_000_000, err
}

// idleShareUntil is the idle share of the CPU time between t and later.
func (t cpuTimes) idleShareUntil(later cpuTimes) float64 {
	if later.total <= t.total {
		return 0
	}
	return float64(later.idle-t.idle) / float64(later.total-t.total)
}

// story makes t one of the stories: parallel, and started in its turn.
// expect is about how long it takes on a quiet machine; only the order of
// the stories' expectations matters.
func story(t *testing.T, expect time.Duration) {
	storyHolding(t, expect, "")
}

// storyHolding is story for a test that changes something of the node the
// other stories do not look at but one other story does (the node's zone
// label): it never runs beside a story holding the same thing.
func storyHolding(t *testing.T, expect time.Duration, holds string) {
	stories.declare(1)
	t.Parallel()
	stories.enter(t, expect, holds)
	record(t)
}

// nodeZoneLabel is what the stories that set the node's zone label hold.
const nodeZoneLabel = "the node's zone label"

// storyGroup is a test whose subtests are stories: it declares them while
// the suite declares its stories, and each subtest enters with
// group.story. Those it never ran (it failed first) are undeclared when
// it ends.
type storyGroup struct{ declared, entered int }

func storiesOf(t *testing.T, n int) *storyGroup {
	stories.declare(n)
	t.Parallel()
	g := &storyGroup{declared: n}
	t.Cleanup(func() { stories.declare(g.entered - g.declared) })
	return g
}

func (g *storyGroup) story(t *testing.T, expect time.Duration) {
	g.entered++ // by the group's test, before its subtests run
	t.Parallel()
	stories.enter(t, expect, "")
	record(t)
}

func (g *storyGate) declare(n int) {
	g.mu.Lock()
	g.unarrived += n
	g.changed.Broadcast()
	g.mu.Unlock()
}

// enter waits for t's turn, and frees its slot when t ends.
func (g *storyGate) enter(t *testing.T, expect time.Duration, holds string) {
	name, arrived := t.Name(), time.Now()
	g.mu.Lock()
	if !g.watching {
		g.watching = true
		go g.watchIdle()
	}
	g.unarrived--
	g.waiting[name] = expect
	g.holds[name] = holds
	g.changed.Broadcast()
	for g.unarrived > 0 || !g.roomFor() || g.blocked(name) || !g.longestWaiting(name) {
		g.changed.Wait()
	}
	delete(g.waiting, name)
	delete(g.holds, name)
	if holds != "" {
		g.held[holds] = true
	}
	g.running++
	g.lastStart = time.Now()
	running, idle := g.running, g.idle
	g.mu.Unlock()
	t.Logf("the story starts, after %s at the gate, %d running with it, the cores %.0f %% idle or the other lanes' over the last %s",
		time.Since(arrived).Round(time.Second), running-1, 100*idle, storyIdleWindow)
	t.Cleanup(func() {
		g.mu.Lock()
		g.running--
		delete(g.held, holds)
		g.changed.Broadcast()
		g.mu.Unlock()
	})
}

// blocked says whether the waiting story name holds what a running story
// holds.
func (g *storyGate) blocked(name string) bool {
	holds := g.holds[name]
	return holds != "" && g.held[holds]
}

// longestWaiting says whether name is the longest story waiting (by name
// among equals, so exactly one is).
func (g *storyGate) longestWaiting(name string) bool {
	mine := g.waiting[name]
	for other, d := range g.waiting {
		if g.blocked(other) {
			continue // it waits for a running story, not for a slot
		}
		if d > mine || d == mine && other < name {
			return false
		}
	}
	return true
}
