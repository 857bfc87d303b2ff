package cluster_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/eurekube/eurekube/api/v1alpha1"
	"github.com/eurekube/eurekube/cli"
	"github.com/eurekube/eurekube/internal/builders"
	"github.com/eurekube/eurekube/tests/cluster"
	"github.com/eurekube/eurekube/tests/harness"
)

// Eurekube's neighbour in most clusters is a service mesh's injector. Here
// one (cluster.MeshInjector) runs after Eurekube's webhook, as a webhook
// whose configuration sorts later does, and puts a proxy in front of the
// app. What callers notice:
//
//   - A classic proxy container exits 5 s after its SIGTERM, so with no
//     drain of its own the pod refuses calls while callers' caches still
//     hold it. Eurekube, reinvoked because the mesh changed the pod, must
//     drain the proxy as it drains the app.
//   - A native sidecar proxy is stopped by the kubelet only after the app
//     containers, so it serves for the app's drain anyway.
//
// In both, a rollout by name costs no call, and every replaced pod answers
// through its proxy for the whole drain after its termination began (what
// a caller whose cache still holds it sees). A Job behind the mesh, which
// Eurekube skips, completes: Eurekube, reinvoked on the pod it annotated as
// skipped, admits it.
func TestNeighbour_MeshInjectorAfterEurekube(t *testing.T) {
	subs := storiesOf(t, 3)
	mesh, err := c.StartMeshInjector(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	// After every subtest: they run in parallel.
	t.Cleanup(func() {
		if err := mesh.Stop(context.Background()); err != nil {
			t.Error(err)
		}
	})
	rec := startRecorder(t)

	for _, tc := range []struct{ name, shape string }{
		{"RolloutBehindAClassicProxy_NoCallFails", cluster.MeshClassic},
		{"RolloutBehindANativeSidecarProxy_NoCallFails", cluster.MeshNative},
	} {
		t.Run(tc.name, func(t *testing.T) {
			subs.story(t, 45*time.Second)
			app := cluster.App{Namespace: "mesh-" + tc.shape, Name: "mesh" + tc.shape, Replicas: 2, DrainSeconds: ptr.To[int32](drainSeconds)}
			createNamespace(t, app.Namespace, map[string]string{cluster.MeshLabel: tc.shape})
			deploy(t, app, nil)
			v := settle(t, app, 3*time.Minute)
			for i := range v.Pods {
				behindTheProxy(t, &v.Pods[i], tc.shape)
			}
			sc := startClient(t, app.Name)
			waitAnswered(t, sc, harness.SpringStats{}, v.ReadyPods)

			answers := watchAnswers(t, v.Pods)
			d, began := rolloutCalled(t, app, sc)
			t.Logf("%s proxy: rollout in %s, %d calls by name, %d failed", tc.shape, time.Since(began).Round(time.Second), d.OK+d.Failed, d.Failed)
			if d.Failed != 0 {
				t.Errorf("%d of %d calls failed during the rollout; last error: %s", d.Failed, d.OK+d.Failed, d.LastError)
			}
			answers.check(t, drainSeconds*time.Second)
		})
	}

	t.Run("JobBehindTheMesh_Completes", func(t *testing.T) {
		subs.story(t, 15*time.Second)
		const namespace, name = "mesh-jobs", "meshjob"
		createNamespace(t, namespace, nil)
		createSyncer(t, namespace, name)
		// The pod's label, not its namespace's, asks for the mesh.
		var job batchv1.Job
		if err := yaml.Unmarshal(jobManifest(namespace, name, rec.url(name), map[string]string{cluster.MeshLabel: cluster.MeshNative}), &job); err != nil {
			t.Fatal(err)
		}
		if err := c.Node.Client.Create(context.Background(), &job); err != nil {
			t.Fatal(err)
		}
		pod := waitJobComplete(t, &job)
		skipped(t, pod, name, rec)
		if !slices.ContainsFunc(pod.Spec.InitContainers, func(c corev1.Container) bool { return c.Name == cluster.MeshProxy }) {
			t.Errorf("pod %s has no %s: the mesh injector did not change it, so Eurekube was not reinvoked", pod.Name, cluster.MeshProxy)
		}
	})
}

// `eurekube inject --from-cluster` annotates a Job's pod template as
// skipped, as the webhook would; the Job as it printed it, applied with the
// API, completes: the webhook admits the annotations it writes itself.
func TestNeighbour_JobFromInjectOutputCompletes(t *testing.T) {
	story(t, 6*time.Second)
	const namespace, name = "inject-jobs", "injectjob"
	rec := startRecorder(t)
	createNamespace(t, namespace, nil)
	createSyncer(t, namespace, name)
	manifest := filepath.Join(t.TempDir(), "job.yaml")
	if err := os.WriteFile(manifest, jobManifest(namespace, name, rec.url(name), nil), 0o600); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	code := cli.Main(context.Background(), []string{"eurekube", "inject", "-f", manifest, "--from-cluster", "--kubeconfig", c.Node.Kubeconfig},
		cli.Streams{In: strings.NewReader(""), Out: &out, Err: &errOut})
	if code != cli.ExitOK {
		t.Fatalf("eurekube inject --from-cluster exited %d:\n%s", code, errOut.String())
	}
	t.Logf("eurekube inject --from-cluster: %s", strings.TrimSpace(errOut.String()))
	var job batchv1.Job
	if err := yaml.UnmarshalStrict(out.Bytes(), &job); err != nil {
		t.Fatalf("the output is not one Job: %v\n%s", err, out.String())
	}
	if got := job.Spec.Template.Annotations[v1alpha1.StatusAnnotation]; got != v1alpha1.StatusSkipped {
		t.Fatalf("the output's pod template has %s %q, want %q:\n%s", v1alpha1.StatusAnnotation, got, v1alpha1.StatusSkipped, out.String())
	}
	if err := c.Node.Client.Create(context.Background(), &job); err != nil {
		t.Fatal(err)
	}
	skipped(t, waitJobComplete(t, &job), name, rec)
}

// createNamespace creates a namespace labelled for injection and with
// labels, before the test's pods exist: the API server picks the webhooks
// that see a pod by its namespace's labels.
func createNamespace(t *testing.T, name string, labels map[string]string) {
	t.Helper()
	all := map[string]string{v1alpha1.NamespaceInjectionLabel: "enabled"}
	maps.Copy(all, labels)
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: all}}
	if err := c.Node.Client.Create(context.Background(), ns); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

// createSyncer creates a syncer selecting the pods labelled app=name.
func createSyncer(t *testing.T, namespace, name string) {
	t.Helper()
	s := builders.Syncer(namespace, name, builders.EurekaURLs(c.Peers.URLs()...))
	if err := c.Node.Client.Create(context.Background(), s); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

// jobManifest is a Job as a team writes it: its pod, labelled app=name
// and with labels, runs the test app's image with the suite's requests
// (cluster.PodRequests), declares the app's port, and
// reports its pod's name to reportURL once, then exits.
func jobManifest(namespace, name, reportURL string, labels map[string]string) []byte {
	requests := cluster.PodRequests().Requests
	var extra strings.Builder
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		fmt.Fprintf(&extra, "\n        %s: %s", k, labels[k])
	}
	return fmt.Appendf(nil, `apiVersion: batch/v1
kind: Job
metadata:
  name: %[1]s
  namespace: %[2]s
spec:
  backoffLimit: 0
  template:
    metadata:
      labels:
        app: %[1]s%[3]s
    spec:
      restartPolicy: Never
      securityContext:
        runAsNonRoot: true
        seccompProfile:
          type: RuntimeDefault
      containers:
      - name: app
        image: %[4]s
        imagePullPolicy: Never
        args: [hook, %[5]q]
        env:
        - name: POD_NAME
          valueFrom:
            fieldRef:
              fieldPath: metadata.name
        ports:
        - name: http
          containerPort: 8080
        resources:
          requests:
            cpu: %[6]s
            memory: %[7]s
        securityContext:
          allowPrivilegeEscalation: false
          readOnlyRootFilesystem: true
          capabilities:
            drop: [ALL]
`, name, namespace, extra.String(), c.Node.Image("testapp"), reportURL,
		requests.Cpu(), requests.Memory())
}

// waitJobComplete waits until the Job is Complete and returns its one pod.
// A pod the webhooks refuse fails it at once, with the refusal: the Job
// controller would only retry it.
func waitJobComplete(t *testing.T, job *batchv1.Job) *corev1.Pod {
	t.Helper()
	ctx := context.Background()
	err := harness.Poll(ctx, 4*time.Minute, 500*time.Millisecond, fmt.Sprintf("Job %s/%s complete", job.Namespace, job.Name), func() error {
		var j batchv1.Job
		if err := c.Node.Client.Get(ctx, client.ObjectKeyFromObject(job), &j); err != nil {
			return err
		}
		for _, cond := range j.Status.Conditions {
			switch {
			case cond.Status != corev1.ConditionTrue:
			case cond.Type == batchv1.JobComplete:
				return nil
			case cond.Type == batchv1.JobFailed:
				t.Fatalf("Job %s failed: %s: %s", j.Name, cond.Reason, cond.Message)
			}
		}
		var events eventsv1.EventList
		if err := c.Node.Client.List(ctx, &events, client.InNamespace(j.Namespace)); err != nil {
			return err
		}
		for _, e := range events.Items {
			if e.Reason == "FailedCreate" && e.Regarding.Name == j.Name && strings.Contains(e.Note, "denied the request") {
				t.Fatalf("Job %s: its pod was refused: %s", j.Name, e.Note)
			}
		}
		return fmt.Errorf("active %d, succeeded %d, failed %d", j.Status.Active, j.Status.Succeeded, j.Status.Failed)
	})
	if err != nil {
		t.Fatal(err)
	}
	var pods corev1.PodList
	if err := c.Node.Client.List(ctx, &pods, client.InNamespace(job.Namespace), client.MatchingLabels{batchv1.JobNameLabel: job.Name}); err != nil {
		t.Fatal(err)
	}
	if len(pods.Items) != 1 {
		t.Fatalf("Job %s has %d pods, want the one that completed", job.Name, len(pods.Items))
	}
	return &pods.Items[0]
}

// skipped checks that a completed Job's pod ran its work (reported to rec
// as the syncer's name, jobManifest's reportURL), without the registrar,
// annotated as skipped by the syncer.
func skipped(t *testing.T, pod *corev1.Pod, syncer string, rec *recorder) {
	t.Helper()
	if _, ok := rec.first(syncer, pod.Name); !ok {
		t.Errorf("pod %s completed, but its work never reached the host", pod.Name)
	}
	if v1alpha1.RunsRegistrar(pod) {
		t.Errorf("pod %s of a Job runs the registrar", pod.Name)
	}
	if got, by := pod.Annotations[v1alpha1.StatusAnnotation], pod.Annotations[v1alpha1.SyncerAnnotation]; got != v1alpha1.StatusSkipped || by != syncer {
		t.Errorf("pod %s: %s %q by %s %q, want %q by %q", pod.Name, v1alpha1.StatusAnnotation, got, v1alpha1.SyncerAnnotation, by, v1alpha1.StatusSkipped, syncer)
	}
}

// behindTheProxy checks that the mesh put its proxy of shape into the pod
// after Eurekube injected it, and that the pod's port answers through the
// proxy: the test would prove nothing otherwise.
func behindTheProxy(t *testing.T, pod *corev1.Pod, shape string) {
	t.Helper()
	proxy := slices.IndexFunc(pod.Spec.Containers, func(c corev1.Container) bool { return c.Name == cluster.MeshProxy })
	registrar := slices.IndexFunc(pod.Spec.Containers, func(c corev1.Container) bool { return c.Name == v1alpha1.RegistrarContainerName })
	native := slices.IndexFunc(pod.Spec.InitContainers, func(c corev1.Container) bool {
		return c.Name == cluster.MeshProxy && ptr.Deref(c.RestartPolicy, "") == corev1.ContainerRestartPolicyAlways
	})
	switch {
	case registrar < 0:
		t.Fatalf("pod %s runs without the registrar", pod.Name)
	case shape == cluster.MeshClassic && proxy < registrar:
		t.Fatalf("pod %s: containers %v, want the mesh's %s appended after Eurekube's registrar", pod.Name, containerNames(pod.Spec.Containers), cluster.MeshProxy)
	case shape == cluster.MeshNative && (native < 0 || proxy >= 0):
		t.Fatalf("pod %s: init containers %v, containers %v; want the mesh's %s a native sidecar", pod.Name,
			containerNames(pod.Spec.InitContainers), containerNames(pod.Spec.Containers), cluster.MeshProxy)
	}
	port := pod.Spec.Containers[0].Ports[0].ContainerPort
	resp, body, err := call(pod.Status.PodIP, port)
	if err != nil {
		t.Fatalf("pod %s: %v", pod.Name, err)
	}
	if via := resp.Header.Get("Via"); body != pod.Name || via != meshVia {
		t.Fatalf("pod %s, port %d: answered %q with Via %q, want its name through the proxy (Via %q)", pod.Name, port, body, via, meshVia)
	}
}

// meshVia is what the test app's proxy adds to every answer (testapp.Via).
const meshVia = "1.1 mesh-proxy"

func containerNames(cs []corev1.Container) []string {
	names := make([]string, len(cs))
	for i, c := range cs {
		names[i] = c.Name
	}
	return names
}

// call is one call to a pod's port from the host, on a new connection, as a
// VM reaching pod IPs makes it.
func call(ip string, port int32) (*http.Response, string, error) {
	// A call made at once fails at once to a pod that is gone (refused,
	// reset, no route); the bound is for a live one slowed by a loaded
	// machine (1 s timed out at load 32 in a fresh-clone run).
	hc := &http.Client{Timeout: 3 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := hc.Get("http://" + net.JoinHostPort(ip, strconv.Itoa(int(port))) + "/")
	if err != nil {
		return nil, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("%s", resp.Status)
	}
	return resp, strings.TrimSpace(string(body)), err
}

// answers calls each of a set of pods from the host until it first fails
// to answer, and records how long after its termination began that was.
type answers struct {
	pods    []string
	mu      sync.Mutex
	results map[string]answered
	done    sync.WaitGroup
}

// answered is one pod's record.
type answered struct {
	// terminating is when the pod's termination began, zero if it had
	// not when it failed.
	terminating time.Time
	// failed is when the first call that went unanswered was made, and
	// why.
	failed time.Time
	err    error
}

// watchAnswers calls each pod every 100 ms until it fails to answer. A
// call answered by another pod (a new one given the IP) fails too.
func watchAnswers(t *testing.T, pods []corev1.Pod) *answers {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	a := &answers{results: map[string]answered{}}
	for _, p := range pods {
		a.pods = append(a.pods, p.Name)
		a.done.Add(1)
		go func() {
			defer a.done.Done()
			r := watchPod(ctx, p)
			a.mu.Lock()
			a.results[p.Name] = r
			a.mu.Unlock()
		}()
	}
	return a
}

func watchPod(ctx context.Context, p corev1.Pod) answered {
	var r answered
	port := p.Spec.Containers[0].Ports[0].ContainerPort
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	var read time.Time
	for {
		// Read the pod at most twice a second until its termination began:
		// deletionTimestamp is when its grace period ends.
		if r.terminating.IsZero() && time.Since(read) >= 500*time.Millisecond || !r.failed.IsZero() {
			read = time.Now()
			var now corev1.Pod
			if err := c.Node.Client.Get(ctx, client.ObjectKeyFromObject(&p), &now); err != nil && !apierrors.IsNotFound(err) {
				r.err = fmt.Errorf("read the pod: %w", err)
				return r
			}
			if now.DeletionTimestamp != nil && r.terminating.IsZero() {
				grace := time.Duration(ptr.Deref(now.DeletionGracePeriodSeconds, 0)) * time.Second
				r.terminating = now.DeletionTimestamp.Add(-grace)
			}
		}
		if !r.failed.IsZero() {
			return r
		}
		at := time.Now()
		if _, body, err := call(p.Status.PodIP, port); err != nil || body != p.Name {
			r.failed, r.err = at, err
			if err == nil {
				r.err = fmt.Errorf("answered by %q", body)
			}
			continue // once more, to read whether it was terminating
		}
		select {
		case <-ctx.Done():
			r.err = ctx.Err()
			return r
		case <-tick.C:
		}
	}
}

// check waits until every pod has stopped answering and fails the test
// for each that stopped sooner than drain after its termination began.
// deletionTimestamp has whole seconds and the kubelet learns of the
// deletion later, so the termination began no sooner than recorded.
func (a *answers) check(t *testing.T, drain time.Duration) {
	t.Helper()
	stopped := make(chan struct{})
	go func() { a.done.Wait(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(3 * time.Minute):
		t.Fatalf("some of the replaced pods %v still answer 3 min after the rollout", a.pods)
	}
	for _, name := range a.pods {
		r := a.results[name]
		switch {
		case r.terminating.IsZero():
			t.Errorf("pod %s stopped answering before its termination began: %v", name, r.err)
		case r.failed.Sub(r.terminating) < drain:
			t.Errorf("pod %s stopped answering %s after its termination began, before its %s drain ended: a caller whose cache still held it failed (%v)",
				name, r.failed.Sub(r.terminating).Round(100*time.Millisecond), drain, r.err)
		default:
			t.Logf("pod %s answered until %s after its termination began (%v)", name, r.failed.Sub(r.terminating).Round(100*time.Millisecond), r.err)
		}
	}
}
