package cluster_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/eurekube/eurekube/api/v1alpha1"
	"github.com/eurekube/eurekube/internal/builders"
	"github.com/eurekube/eurekube/tests/cluster"
	"github.com/eurekube/eurekube/tests/harness"
	"github.com/eurekube/eurekube/webhook"
)

// nowhere keeps a pod Pending: no node carries the label. The admission
// faults are about creates, and 600 running pods would only measure how
// fast two cores start containers.
var nowhere = map[string]string{"eurekube.io/test-node": "nowhere"}

// unscheduled deploys app with its pods kept off the node.
func unscheduled(t *testing.T, app cluster.App) {
	t.Helper()
	deploy(t, app, func(d *appsv1.Deployment) { d.Spec.Template.Spec.NodeSelector = nowhere })
}

// hasRegistrar is what "injected" means to an operator: the registrar
// container is there and the pod says so.
func hasRegistrar(p *corev1.Pod) bool {
	return v1alpha1.MarkedInjected(p) && v1alpha1.RunsRegistrar(p)
}

// managerReplicas sets the manager Deployment's replicas and waits until
// that many are ready.
func managerReplicas(t *testing.T, n int32) {
	t.Helper()
	ctx := context.Background()
	var dep appsv1.Deployment
	key := client.ObjectKey{Namespace: cluster.ManagerNamespace, Name: cluster.ManagerDeployment}
	if err := c.Node.Client.Get(ctx, key, &dep); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(dep.DeepCopy())
	dep.Spec.Replicas = ptr.To(n)
	if err := c.Node.Client.Patch(ctx, &dep, patch); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, 3*time.Minute, fmt.Sprintf("%d manager replicas ready", n), func() error {
		pods, err := c.ManagerPods(ctx)
		if err != nil {
			return err
		}
		ready := 0
		for i := range pods {
			if pods[i].DeletionTimestamp == nil && cluster.PodReady(&pods[i]) {
				ready++
			}
		}
		if ready != int(n) || len(pods) != int(n) {
			return fmt.Errorf("%d pods, %d ready", len(pods), ready)
		}
		return nil
	})
}

// The manager replica that has answered the most admission requests is
// killed with SIGKILL while ten Deployments create 500 pods, and later
// every replica is gone. The webhook fails closed (failurePolicy Fail): a
// create comes back injected or fails naming the webhook, and its
// ReplicaSet retries, so no pod ever exists without the registrar.
func TestWebhookReplicaKilledDuring500Creates_NoPodWithoutTheRegistrar(t *testing.T) {
	const ns, deployments, replicas = "flood", 10, 50
	ctx := context.Background()
	t.Cleanup(func() { dropNamespace(t, ns) })
	// Whatever happens here, the next tests need both replicas.
	t.Cleanup(func() { managerReplicas(t, 2) })
	pods := func() []corev1.Pod {
		var list corev1.PodList
		if err := c.Node.Client.List(ctx, &list, client.InNamespace(ns)); err != nil {
			t.Fatal(err)
		}
		for i := range list.Items {
			if !hasRegistrar(&list.Items[i]) {
				t.Fatalf("pod %s exists without the registrar", list.Items[i].Name)
			}
		}
		return list.Items
	}
	allInjected := func(want int) func() error {
		return func() error {
			if n := len(pods()); n != want {
				return fmt.Errorf("%d pods", n)
			}
			return nil
		}
	}
	app := func(i int) cluster.App {
		return cluster.App{Namespace: ns, Name: fmt.Sprintf("orders-%d", i), Replicas: replicas}
	}

	began := time.Now()
	for i := range deployments {
		unscheduled(t, app(i))
	}
	harness.Eventually(t, 2*time.Minute, "150 pods created", func() error {
		if n := len(pods()); n < 150 {
			return fmt.Errorf("%d pods", n)
		}
		return nil
	})
	managers, err := c.ManagerPods(ctx)
	if err != nil {
		t.Fatal(err)
	}
	serving, most := -1, -1.0
	for i := range managers {
		samples, err := c.ManagerMetrics(ctx, &managers[i])
		if err != nil {
			t.Fatal(err)
		}
		n := samples[`controller_runtime_webhook_requests_total{code="200",webhook="`+webhook.Path+`"}`]
		if n > most {
			serving, most = i, n
		}
	}
	victim := &managers[serving]
	id, restarts, err := containerID(victim, "manager")
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Node.Signal(ctx, id, "SIGKILL"); err != nil {
		t.Fatal(err)
	}
	t.Logf("killed the manager container of %s with SIGKILL %s after the creates began; it had answered %v admission requests",
		victim.Name, time.Since(began).Round(time.Millisecond), most)
	harness.Eventually(t, 4*time.Minute, "500 pods, every one with the registrar", allInjected(deployments*replicas))
	t.Logf("500 pods created in %s", time.Since(began).Round(time.Millisecond))
	harness.Eventually(t, time.Minute, "the kubelet restarted the killed container", func() error {
		var p corev1.Pod
		if err := c.Node.Client.Get(ctx, client.ObjectKeyFromObject(victim), &p); err != nil {
			return err
		}
		if _, n, err := containerID(&p, "manager"); err != nil || n <= restarts {
			return fmt.Errorf("restarts %d (%v)", n, err)
		}
		return nil
	})

	// The API server retries a webhook call whose connection was reset, so
	// one replica's death may cost no create at all. With every replica
	// gone (a failed roll-out or an emptied node leaves it so), creates
	// fail naming the webhook, and the ReplicaSets retry until the
	// replicas are back.
	managerReplicas(t, 0)
	for i := range deployments {
		scale(t, app(i), replicas+10)
	}
	failedCreates := func() (int, []string) {
		var events corev1.EventList
		if err := c.Node.Client.List(ctx, &events, client.InNamespace(ns)); err != nil {
			t.Fatal(err)
		}
		n, unclear := 0, []string(nil)
		for _, e := range events.Items {
			if e.Reason != "FailedCreate" {
				continue
			}
			n += int(max(e.Count, 1))
			if !strings.Contains(e.Message, `failed calling webhook "inject.eurekube.io"`) {
				unclear = append(unclear, e.InvolvedObject.Name+": "+e.Message)
			}
		}
		return n, unclear
	}
	harness.Eventually(t, 2*time.Minute, "creates refused while no replica answers", func() error {
		pods()
		if n, _ := failedCreates(); n < deployments {
			return fmt.Errorf("%d failed creates reported", n)
		}
		return nil
	})
	managerReplicas(t, 2)
	// A ReplicaSet retries a failed create with its controller's
	// exponential backoff (5 ms doubling per failure, up to 1,000 s): after
	// minutes of refusals on a busy machine its next try may be over 10 min
	// away (two of ten were, in one run). When and how often Kubernetes
	// retries is not what this test is about: a change to a ReplicaSet
	// makes its controller sync it at once, as any change would.
	// The sync a touch starts may itself meet a webhook not yet reachable
	// through its Service (kube-proxy's rules follow the endpoints a moment
	// later on a busy node), and its failure backs the ReplicaSet off again
	// for minutes (one busy run ended 20 pods short): while pods are
	// missing, every ReplicaSet is touched again every 30 s.
	touchSets := func() {
		var sets appsv1.ReplicaSetList
		if err := c.Node.Client.List(ctx, &sets, client.InNamespace(ns)); err != nil {
			t.Fatal(err)
		}
		for i := range sets.Items {
			touch := client.RawPatch(types.MergePatchType, []byte(fmt.Sprintf(`{"metadata":{"annotations":{"eurekube.test/webhook-back":%q}}}`, time.Now().Format(time.RFC3339Nano))))
			if err := c.Node.Client.Patch(ctx, &sets.Items[i], touch); err != nil {
				t.Fatal(err)
			}
		}
	}
	touchSets()
	back := time.Now()
	touched := back
	all := allInjected(deployments * (replicas + 10))
	harness.Eventually(t, 4*time.Minute, "600 pods, every one with the registrar", func() error {
		err := all()
		if err != nil && time.Since(touched) > 30*time.Second {
			touchSets()
			touched = time.Now()
		}
		return err
	})
	t.Logf("600 pods %s after the replicas were back", time.Since(back).Round(time.Second))
	n, unclear := failedCreates()
	t.Logf("%d creates failed in all, each retried by its ReplicaSet", n)
	if len(unclear) > 0 {
		t.Fatalf("creates failed without naming the webhook: %v", unclear)
	}
}

// review is the AdmissionReview for creating pod.
func review(t *testing.T, uid string, pod *corev1.Pod) []byte {
	t.Helper()
	body, err := harness.PodCreateReview(uid, pod)
	if err != nil {
		t.Fatal(err)
	}
	return body
}

// unscheduledPod is a pod of app, with annotations, that stays Pending.
func unscheduledPod(app cluster.App, annotations map[string]string) *corev1.Pod {
	p := builders.Pod(app.Namespace, app.Name, builders.Image(c.Node.Image("testapp")), builders.Annotations(annotations))
	p.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}
	p.Spec.NodeSelector = nowhere
	return p
}

// malformedCase is one request and what its answer must say.
type malformedCase struct {
	name        string
	contentType string
	body        []byte
	// deniedFor, when set, is the annotation the answer must deny and name.
	deniedFor string
}

// malformedCases builds, from a fixed seed, requests a broken or hostile
// client could send: random bytes, truncated reviews, reviews with fields
// of the wrong type, and pods of app whose eurekube.io annotations hold bad
// or random values.
func malformedCases(t *testing.T, app cluster.App) []malformedCase {
	rng := rand.New(rand.NewPCG(7, 11))
	valid := review(t, "valid", unscheduledPod(app, nil))
	var cases []malformedCase
	add := func(name string, body []byte) {
		cases = append(cases, malformedCase{name: name, contentType: "application/json", body: body})
	}
	for i := range 250 {
		b := make([]byte, rng.IntN(4096))
		for j := range b {
			b[j] = byte(rng.UintN(256))
		}
		add(fmt.Sprintf("random bytes %d", i), b)
	}
	for i := range 200 {
		add(fmt.Sprintf("truncated review %d", i), valid[:rng.IntN(len(valid))])
	}
	// Every field of the review, one at a time, replaced by a value of
	// another JSON type.
	var doc map[string]any
	if err := json.Unmarshal(valid, &doc); err != nil {
		t.Fatal(err)
	}
	wrong := []any{nil, 42, -1.5, "text", true, []any{1, "a"}, map[string]any{"x": map[string]any{}}, strings.Repeat("a", 100_000)}
	var paths [][]string
	var walk func(v any, path []string)
	walk = func(v any, path []string) {
		if m, ok := v.(map[string]any); ok {
			for k, child := range m {
				p := append(append([]string(nil), path...), k)
				paths = append(paths, p)
				walk(child, p)
			}
		}
	}
	walk(doc, nil)
	for _, p := range paths {
		for _, w := range wrong {
			body, err := json.Marshal(replaceAt(doc, p, w))
			if err != nil {
				t.Fatal(err)
			}
			add(fmt.Sprintf("%s = %.20v", strings.Join(p, "."), w), body)
		}
	}
	for _, c := range []struct{ name, body string }{
		{"empty", ""}, {"null", "null"}, {"array", "[]"}, {"no request", `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}`},
		{"deep nesting", strings.Repeat("[", 100_000)}, {"v1beta1", strings.Replace(string(valid), "admission.k8s.io/v1", "admission.k8s.io/v1beta1", 1)},
	} {
		add(c.name, []byte(c.body))
	}
	cases = append(cases, malformedCase{name: "text/plain", contentType: "text/plain", body: valid})

	// Annotation values: known-bad ones for every key, then random
	// strings; the webhook's own parser says which must be denied.
	bad := []string{"", " ", "-1", "0", "65536", "99999999999999999999", "1e3", "abc", "UDP", "grpc", "no-slash", "/with space",
		"/tab\there", "/nul\x00", "ünïcødé", "a,", ".a", "-a", strings.Repeat("x", 2000), "50M ", "-5Mi", "0m", "1/2", "true ", "yes",
		"${jndi:ldap://x}", "'; DROP TABLE", "\r\n", "3601", "1.5"}
	keys := []string{v1alpha1.AnnotationInject, v1alpha1.AnnotationAppName, v1alpha1.AnnotationVIPAddress, v1alpha1.AnnotationSecureVIPAddress,
		v1alpha1.AnnotationPort, v1alpha1.AnnotationSecurePort, v1alpha1.AnnotationPreStopSleep, v1alpha1.AnnotationHealthType,
		v1alpha1.AnnotationHealthScheme, v1alpha1.AnnotationHealthPath, v1alpha1.AnnotationHealthPort, v1alpha1.AnnotationSidecarCPU,
		v1alpha1.AnnotationSidecarMemory, v1alpha1.AnnotationMetadataPrefix + "zone", v1alpha1.AnnotationMetadataPrefix + "9bad key",
		v1alpha1.AnnotationPrefix + "unknown"}
	for _, key := range keys {
		values := append([]string(nil), bad...)
		for range 10 {
			b := make([]byte, 1+rng.IntN(40))
			for j := range b {
				b[j] = byte(0x20 + rng.UintN(0x5f))
			}
			values = append(values, string(b))
		}
		for _, v := range values {
			ann := map[string]string{key: v}
			c := malformedCase{name: fmt.Sprintf("%s=%.30q", key, v), contentType: "application/json", body: review(t, "ann", unscheduledPod(app, ann))}
			if _, err := webhook.ParseAnnotations(ann); err != nil {
				c.deniedFor = key
			}
			cases = append(cases, c)
		}
	}
	return cases
}

// replaceAt returns a deep copy of doc with the value at path replaced.
func replaceAt(doc map[string]any, path []string, v any) map[string]any {
	out := make(map[string]any, len(doc))
	for k, child := range doc {
		out[k] = child
	}
	if len(path) == 1 {
		out[path[0]] = v
		return out
	}
	child, _ := doc[path[0]].(map[string]any)
	out[path[0]] = replaceAt(child, path[1:], v)
	return out
}

// Over 1,000 malformed AdmissionReviews and annotation values, sent over
// HTTPS to one manager pod as the API server reaches it: every one is
// answered, bad annotations are denied naming the annotation, nothing
// panics or restarts, and the manager still injects afterwards.
func TestMalformedAdmissionRequests_EveryOneAnsweredNoPanic(t *testing.T) {
	story(t, 5*time.Second)
	ctx := context.Background()
	app := cluster.App{Namespace: "fuzz", Name: "malformed"}
	unscheduled(t, app)
	t.Cleanup(func() { dropNamespace(t, app.Namespace) })

	managers, err := c.ManagerPods(ctx)
	if err != nil {
		t.Fatal(err)
	}
	target := &managers[0]
	_, restarts, err := containerID(target, "manager")
	if err != nil {
		t.Fatal(err)
	}
	hc, err := c.WebhookClient(ctx)
	if err != nil {
		t.Fatal(err)
	}
	url := cluster.WebhookURL(target, webhook.Path)
	post := func(contentType string, body []byte) (admissionv1.AdmissionReview, int, error) {
		var out admissionv1.AdmissionReview
		resp, err := hc.Post(url, contentType, bytes.NewReader(body))
		if err != nil {
			return out, 0, err
		}
		defer resp.Body.Close()
		data, err := io.ReadAll(resp.Body)
		if err != nil {
			return out, resp.StatusCode, err
		}
		if resp.StatusCode == http.StatusOK {
			if err := json.Unmarshal(data, &out); err != nil {
				return out, resp.StatusCode, fmt.Errorf("answer is not an AdmissionReview: %w: %.200s", err, data)
			}
		}
		return out, resp.StatusCode, nil
	}
	valid := review(t, "valid", unscheduledPod(app, nil))
	harness.Eventually(t, time.Minute, "the webhook of "+target.Name+" injects", func() error {
		out, _, err := post("application/json", valid)
		if err != nil {
			return err
		}
		if out.Response == nil || out.Response.Patch == nil {
			return fmt.Errorf("no patch in %+v", out.Response)
		}
		return nil
	})

	cases := malformedCases(t, app)
	if len(cases) < 1000 {
		t.Fatalf("only %d cases", len(cases))
	}
	var (
		mu       sync.Mutex
		problems []string
		denied   int
		work     = make(chan malformedCase)
		wg       sync.WaitGroup
	)
	problem := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		problems = append(problems, fmt.Sprintf(format, args...))
	}
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for c := range work {
				out, code, err := post(c.contentType, c.body)
				switch {
				case err != nil:
					problem("%s: not answered: %v", c.name, err)
				case code >= 500:
					problem("%s: HTTP %d", c.name, code)
				case code != http.StatusOK:
					// An HTTP-level refusal is an answer too.
				case out.Response == nil:
					problem("%s: an AdmissionReview without a response", c.name)
				case !out.Response.Allowed && (out.Response.Result == nil || out.Response.Result.Message == ""):
					problem("%s: refused without saying why", c.name)
				case c.deniedFor != "" && (out.Response.Allowed || !strings.Contains(out.Response.Result.Message, c.deniedFor)):
					problem("%s: want denied naming %s, got allowed=%v %v", c.name, c.deniedFor, out.Response.Allowed, out.Response.Result)
				case c.deniedFor != "":
					mu.Lock()
					denied++
					mu.Unlock()
				}
			}
		}()
	}
	for _, c := range cases {
		work <- c
	}
	close(work)
	wg.Wait()
	t.Logf("%d malformed requests answered by %s, %d bad annotation values denied naming the annotation", len(cases), target.Name, denied)
	if len(problems) > 0 {
		t.Fatalf("%d of %d requests mishandled, for example:\n%s", len(problems), len(cases), strings.Join(problems[:min(len(problems), 10)], "\n"))
	}

	var now corev1.Pod
	if err := c.Node.Client.Get(ctx, client.ObjectKeyFromObject(target), &now); err != nil {
		t.Fatal(err)
	}
	if _, n, err := containerID(&now, "manager"); err != nil || n != restarts {
		t.Fatalf("the manager container of %s restarted (%d restarts, was %d; %v)", target.Name, n, restarts, err)
	}
	samples, err := c.ManagerMetrics(ctx, &now)
	if err != nil {
		t.Fatal(err)
	}
	if n := samples[`controller_runtime_webhook_panics_total`]; n != 0 {
		t.Fatalf("%v webhook panics", n)
	}
	log, err := c.ManagerLog(ctx, &now)
	if err != nil {
		t.Fatal(err)
	}
	if i := bytes.Index(log, []byte("panic")); i >= 0 {
		t.Fatalf("the manager's log mentions a panic: %.500s", log[i:])
	}
	// And it still injects through the API server.
	pod := unscheduledPod(app, nil)
	if err := c.Node.Client.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	if !hasRegistrar(pod) {
		t.Fatal("a valid pod created afterwards came back without the registrar")
	}
}
