package cluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
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
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/yaml"

	"github.com/eurekube/eurekube/tests/harness"
)

// Recorder keeps what a failed test needs explaining, in its
// harness.Artifacts directory: for each namespace it watches (Watch), the
// timeline of its EndpointSlices and pods from the moment it was watched,
// its pods (as they are at the end), their containers' logs through the API
// server (a pod deleted during the test included: its log is followed from
// the moment it starts terminating until its containers exit), and the
// namespace's Events; for the whole test, the manager's and the gateway's
// pods' logs (their namespace is watched too) and kube-proxy's log since
// the test began.
//
// While the test passes it costs two watches per namespace and a log
// stream per container of a terminating pod, held in memory, and writes
// nothing.
type Recorder struct {
	t     testing.TB
	c     *Cluster
	a     *harness.Artifacts
	began time.Time
	// proxyOffset is kube-proxy's log's length when the test began.
	proxyOffset int64

	mu      sync.Mutex
	watched map[string]*namespaceRecord
}

// kubeProxyLog is kube-proxy's log, which tests/node writes to its log
// directory (one file per process).
func (c *Cluster) kubeProxyLog() string { return filepath.Join(c.Node.LogDir(), "kube-proxy.log") }

// Record starts t's Recorder; its artifacts go to suite's directory
// (harness.NewArtifacts). It watches the manager's namespace at once.
func (c *Cluster) Record(t testing.TB, suite string) *Recorder {
	t.Helper()
	r := &Recorder{t: t, c: c, a: harness.NewArtifacts(t, suite), began: time.Now(), watched: map[string]*namespaceRecord{}}
	if st, err := os.Stat(c.kubeProxyLog()); err == nil {
		r.proxyOffset = st.Size()
	}
	r.a.OnFailure(func(a *harness.Artifacts) {
		a.Write("README.txt", []byte(fmt.Sprintf("The test began at %s and ended at %s.\n%s", r.began.Format(time.RFC3339Nano), time.Now().Format(time.RFC3339Nano), artifactsReadme)))
		a.CopyFrom("kube-proxy.log", c.kubeProxyLog(), r.proxyOffset)
	})
	r.Watch(ManagerNamespace)
	return r
}

// artifactsReadme says what a failed test's directory holds.
const artifactsReadme = `
<namespace>/slices.txt     every EndpointSlice change seen by a watch from the moment the
                           namespace was watched: time, event, slice, its Service, each
                           endpoint with its pod and conditions
<namespace>/pods.txt       every pod change: time, event, pod, phase, IP, ready, deleting
<namespace>/pods.yaml      the pods as they were at the end
<namespace>/events.yaml    the namespace's Events
<namespace>/logs/          each container's log (timestamped by the kubelet), the previous
                           one's of a restarted container (.previous.log), and of pods
                           deleted during the test, followed from their termination
kube-proxy.log             kube-proxy's log since the test began
callers/                   the test's callers' logs: each failed call with when it began,
                           how long it took and its error or exception
`

// Artifacts is the test's artifacts directory, for the test's own keepers.
func (r *Recorder) Artifacts() *harness.Artifacts { return r.a }

// Watch starts recording namespace ns (once per namespace) until the
// cleanups reach the point where Watch was called: register it before the
// cleanup that deletes the namespace or its pods (as Cluster.Deploy's
// callers do), and the namespace is kept before it goes.
func (r *Recorder) Watch(ns string) {
	r.mu.Lock()
	if _, ok := r.watched[ns]; ok {
		r.mu.Unlock()
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	n := &namespaceRecord{c: r.c, ns: ns, ctx: ctx, followed: map[string]*followedLog{}}
	r.watched[ns] = n
	r.mu.Unlock()
	go n.watch(ctx, "slices", n.listWatchSlices, n.sliceEvent)
	go n.watch(ctx, "pods", n.listWatchPods, n.podEvent)
	r.t.Cleanup(func() {
		if r.t.Failed() {
			n.keep(r.a)
		}
		cancel()
	})
}

// namespaceRecord is one watched namespace.
type namespaceRecord struct {
	c   *Cluster
	ns  string
	ctx context.Context

	mu       sync.Mutex
	slices   bytes.Buffer
	pods     bytes.Buffer
	followed map[string]*followedLog // pod/container → its log, followed
}

// maxTimeline bounds each timeline kept in memory; past it, the rest of the
// test's changes are dropped with a note.
const maxTimeline = 8 << 20

func (n *namespaceRecord) note(b *bytes.Buffer, line string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	switch {
	case b.Len() > maxTimeline:
	case b.Len()+len(line) > maxTimeline:
		b.WriteString("… the rest is dropped: the timeline outgrew its bound\n")
	default:
		b.WriteString(line)
	}
}

// watch lists, then watches from the list's resource version, again after
// each closed watch, and lists anew when the version is too old; each
// object and change goes to on. It ends with ctx.
func (n *namespaceRecord) watch(ctx context.Context, what string, listWatch func(context.Context, string) (string, []any, watch.Interface, error), on func(time.Time, watch.EventType, any)) {
	rv := ""
	for ctx.Err() == nil {
		newRV, items, w, err := listWatch(ctx, rv)
		if err != nil {
			if ctx.Err() == nil {
				n.note(n.timeline(what), fmt.Sprintf("%s watch: %v\n", stamp(time.Now()), err))
				rv = ""
				sleep(ctx, time.Second)
			}
			continue
		}
		for _, obj := range items {
			on(time.Now(), "LISTED", obj)
		}
		rv = newRV
		for ev := range w.ResultChan() {
			if ev.Type == watch.Error {
				rv = "" // too old, most likely: list again
				break
			}
			if ev.Type == watch.Bookmark {
				continue
			}
			if m, err := metaOf(ev.Object); err == nil {
				rv = m.GetResourceVersion()
			}
			on(time.Now(), ev.Type, ev.Object)
		}
		w.Stop()
	}
}

func (n *namespaceRecord) timeline(what string) *bytes.Buffer {
	if what == "slices" {
		return &n.slices
	}
	return &n.pods
}

func metaOf(obj any) (metav1.Object, error) {
	m, ok := obj.(metav1.Object)
	if !ok {
		return nil, fmt.Errorf("%T has no metadata", obj)
	}
	return m, nil
}

func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

func stamp(t time.Time) string { return t.UTC().Format("15:04:05.000000Z") }

// listWatchSlices lists the namespace's slices unless rv is set, and
// watches from there.
func (n *namespaceRecord) listWatchSlices(ctx context.Context, rv string) (string, []any, watch.Interface, error) {
	api := n.c.Clientset.DiscoveryV1().EndpointSlices(n.ns)
	return listWatch(ctx, rv, api.List, api.Watch)
}

// listWatchPods is listWatchSlices for the namespace's pods.
func (n *namespaceRecord) listWatchPods(ctx context.Context, rv string) (string, []any, watch.Interface, error) {
	api := n.c.Clientset.CoreV1().Pods(n.ns)
	return listWatch(ctx, rv, api.List, api.Watch)
}

// listWatch lists with list unless rv is set, and watches with watchFrom
// from the list's resource version (or rv); the items are pointers to the
// list's objects.
func listWatch[L runtime.Object](ctx context.Context, rv string, list func(context.Context, metav1.ListOptions) (L, error), watchFrom func(context.Context, metav1.ListOptions) (watch.Interface, error)) (string, []any, watch.Interface, error) {
	var items []any
	if rv == "" {
		l, err := list(ctx, metav1.ListOptions{})
		if err != nil {
			return "", nil, nil, err
		}
		objs, err := meta.ExtractList(l)
		if err != nil {
			return "", nil, nil, err
		}
		for _, o := range objs {
			items = append(items, o)
		}
		acc, err := meta.ListAccessor(l)
		if err != nil {
			return "", nil, nil, err
		}
		rv = acc.GetResourceVersion()
	}
	w, err := watchFrom(ctx, metav1.ListOptions{ResourceVersion: rv, AllowWatchBookmarks: true})
	return rv, items, w, err
}

// sliceEvent notes one slice: its Service, generation, ports and each
// endpoint with its pod (or hostname) and conditions, as kube-proxy reads
// them.
func (n *namespaceRecord) sliceEvent(at time.Time, typ watch.EventType, obj any) {
	s, ok := obj.(*discoveryv1.EndpointSlice)
	if !ok {
		return
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s %-8s %s service=%s generation=%d ports=", stamp(at), typ, s.Name, s.Labels[discoveryv1.LabelServiceName], s.Generation)
	for i, p := range s.Ports {
		if i > 0 {
			b.WriteByte(',')
		}
		if p.Name != nil && *p.Name != "" {
			b.WriteString(*p.Name + ":")
		}
		if p.Port != nil {
			fmt.Fprint(&b, *p.Port)
		}
	}
	fmt.Fprintf(&b, " endpoints=%d", len(s.Endpoints))
	for _, e := range s.Endpoints {
		who := ""
		switch {
		case e.TargetRef != nil:
			who = e.TargetRef.Name
		case e.Hostname != nil:
			who = *e.Hostname
		}
		fmt.Fprintf(&b, " [%s %s ready=%s serving=%s terminating=%s]", strings.Join(e.Addresses, ","), who,
			condition(e.Conditions.Ready), condition(e.Conditions.Serving), condition(e.Conditions.Terminating))
	}
	b.WriteByte('\n')
	n.note(&n.slices, b.String())
}

func condition(b *bool) string {
	if b == nil {
		return "-"
	}
	return fmt.Sprint(*b)
}

// podEvent notes one pod, and follows the logs of a pod that starts
// terminating: once it is gone, they are gone from the API.
func (n *namespaceRecord) podEvent(at time.Time, typ watch.EventType, obj any) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	deleting := "-"
	if p.DeletionTimestamp != nil {
		deleting = stamp(p.DeletionTimestamp.Time)
	}
	var containers []string
	for _, s := range slices.Concat(p.Status.InitContainerStatuses, p.Status.ContainerStatuses) {
		state := "waiting"
		switch {
		case s.State.Running != nil:
			state = "running"
		case s.State.Terminated != nil:
			state = fmt.Sprintf("exited(%d)", s.State.Terminated.ExitCode)
		}
		containers = append(containers, fmt.Sprintf("%s=%s/ready=%t/restarts=%d", s.Name, state, s.Ready, s.RestartCount))
	}
	n.note(&n.pods, fmt.Sprintf("%s %-8s %s phase=%s ip=%s ready=%t deleting=%s %s\n",
		stamp(at), typ, p.Name, p.Status.Phase, p.Status.PodIP, PodReady(p), deleting, strings.Join(containers, " ")))
	if p.DeletionTimestamp == nil || typ == watch.Deleted {
		return
	}
	for _, s := range slices.Concat(p.Status.InitContainerStatuses, p.Status.ContainerStatuses) {
		if s.State.Running != nil {
			n.follow(p, s.Name)
		}
	}
}

// followedLog is a container's log, followed through the API server.
type followedLog struct {
	mu   sync.Mutex
	data []byte
	err  error
}

// maxFollowed bounds a followed log in memory: past it, the first half is
// dropped.
const maxFollowed = 16 << 20

func (f *followedLog) Write(b []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.data = append(f.data, b...)
	if len(f.data) > maxFollowed {
		f.data = append([]byte("… (its start dropped: the log outgrew its bound)\n"), f.data[len(f.data)-maxFollowed/2:]...)
	}
	return len(b), nil
}

// follow streams the container's log, from its start, until it exits or
// the namespace's recording ends.
func (n *namespaceRecord) follow(p *corev1.Pod, container string) {
	key := p.Name + "." + container
	n.mu.Lock()
	if _, ok := n.followed[key]; ok {
		n.mu.Unlock()
		return
	}
	f := &followedLog{}
	n.followed[key] = f
	n.mu.Unlock()
	go func() {
		stream, err := n.c.Clientset.CoreV1().Pods(p.Namespace).GetLogs(p.Name, &corev1.PodLogOptions{
			Container: container, Follow: true, Timestamps: true}).Stream(n.ctx)
		if err == nil {
			_, err = io.Copy(f, stream)
			stream.Close()
		}
		if err != nil && n.ctx.Err() == nil && !errors.Is(err, io.EOF) {
			f.mu.Lock()
			f.err = err
			f.mu.Unlock()
		}
	}()
}

// keep writes the namespace's record into a, under the namespace's name.
func (n *namespaceRecord) keep(a *harness.Artifacts) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	n.mu.Lock()
	a.Write(filepath.Join(n.ns, "slices.txt"), slices.Clone(n.slices.Bytes()))
	a.Write(filepath.Join(n.ns, "pods.txt"), slices.Clone(n.pods.Bytes()))
	followed := make(map[string]*followedLog, len(n.followed))
	for k, v := range n.followed {
		followed[k] = v
	}
	n.mu.Unlock()

	core := n.c.Clientset.CoreV1()
	pods, err := core.Pods(n.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		a.Write(filepath.Join(n.ns, "pods.yaml"), []byte(err.Error()))
		pods = &corev1.PodList{}
	} else {
		a.Write(filepath.Join(n.ns, "pods.yaml"), yamlOf(pods))
	}
	events, err := n.c.Clientset.EventsV1().Events(n.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		a.Write(filepath.Join(n.ns, "events.yaml"), []byte(err.Error()))
	} else {
		slices.SortFunc(events.Items, func(x, y eventsv1.Event) int { return EventTime(x).Compare(EventTime(y)) })
		a.Write(filepath.Join(n.ns, "events.yaml"), yamlOf(events))
	}
	logs := filepath.Join(n.ns, "logs")
	for _, p := range pods.Items {
		statuses := slices.Concat(p.Status.InitContainerStatuses, p.Status.ContainerStatuses)
		for _, s := range statuses {
			key := p.Name + "." + s.Name
			if log, err := containerLog(ctx, n.c, &p, s.Name, false); err == nil {
				a.Write(filepath.Join(logs, key+".log"), log)
				delete(followed, key) // the whole log, read now
			} else if _, ok := followed[key]; !ok {
				a.Write(filepath.Join(logs, key+".log"), []byte(err.Error()))
			}
			if s.RestartCount > 0 {
				if log, err := containerLog(ctx, n.c, &p, s.Name, true); err == nil {
					a.Write(filepath.Join(logs, key+".previous.log"), log)
				}
			}
		}
	}
	for key, f := range followed {
		f.mu.Lock()
		data := slices.Clone(f.data)
		if f.err != nil {
			data = append(data, "\n… following the log: "+f.err.Error()+"\n"...)
		}
		f.mu.Unlock()
		a.Write(filepath.Join(logs, key+".log"), data)
	}
}

func containerLog(ctx context.Context, c *Cluster, p *corev1.Pod, container string, previous bool) ([]byte, error) {
	out, err := c.Clientset.CoreV1().Pods(p.Namespace).GetLogs(p.Name, &corev1.PodLogOptions{
		Container: container, Previous: previous, Timestamps: true}).DoRaw(ctx)
	if err != nil {
		if apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("logs of %s/%s: gone: %w", p.Name, container, err)
		}
		return nil, fmt.Errorf("logs of %s/%s: %w", p.Name, container, err)
	}
	return out, nil
}

// EventTime is when an Event last happened, whichever API wrote it: the
// events.k8s.io recorders set eventTime and series, the core/v1 ones
// (ReplicaSets) the deprecated timestamps.
func EventTime(e eventsv1.Event) time.Time {
	last := e.EventTime.Time
	for _, t := range []time.Time{e.DeprecatedLastTimestamp.Time, e.DeprecatedFirstTimestamp.Time} {
		if t.After(last) {
			last = t
		}
	}
	if e.Series != nil && e.Series.LastObservedTime.After(last) {
		last = e.Series.LastObservedTime.Time
	}
	return last
}

func yamlOf(v any) []byte {
	out, err := yaml.Marshal(v)
	if err != nil {
		return []byte(err.Error())
	}
	return out
}

// KeepPodLog keeps, once the test has failed, the logs of pod's containers
// in the directory dir of its artifacts. Register it after the cleanup that
// deletes the pod, so it runs before.
func (r *Recorder) KeepPodLog(pod *corev1.Pod, dir string) {
	r.a.OnFailure(func(a *harness.Artifacts) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		for _, ct := range slices.Concat(pod.Spec.InitContainers, pod.Spec.Containers) {
			log, err := containerLog(ctx, r.c, pod, ct.Name, false)
			if err != nil {
				log = []byte(err.Error())
			}
			a.Write(filepath.Join(dir, pod.Name+"."+ct.Name+".log"), log)
		}
	})
}
