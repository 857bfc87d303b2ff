package faults

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/eurekube/eurekube/api/v1alpha1"
	"github.com/eurekube/eurekube/tests/harness"
	"github.com/eurekube/eurekube/webhook"
)

// noEureka: the webhook does not need Eureka, and the reconciler reports it
// unreachable without harm.
const noEureka = "http://127.0.0.1:1/eureka"

// optIn creates the labelled namespace shop and the syncer orders, which
// selects app=orders and registers its "http" port.
func optIn(ctx context.Context, t *testing.T, c client.Client) {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shop", Labels: map[string]string{v1alpha1.NamespaceInjectionLabel: "enabled"}}}
	syncer := &v1alpha1.EurekaSyncer{
		ObjectMeta: metav1.ObjectMeta{Name: "orders", Namespace: "shop"},
		Spec: v1alpha1.EurekaSyncerSpec{
			Selector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "orders"}},
			Port:     intstr.FromString("http"),
		},
	}
	for _, obj := range []client.Object{ns, syncer} {
		if err := c.Create(ctx, obj); err != nil {
			t.Fatalf("create %T: %v", obj, err)
		}
	}
}

func ordersPodSpec() corev1.PodSpec {
	return corev1.PodSpec{Containers: []corev1.Container{{
		Name: "app", Image: "orders:1",
		Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}},
	}}}
}

// hasRegistrar is what "injected" means to an operator: the registrar
// container is there and the pod says so.
func hasRegistrar(p *corev1.Pod) bool {
	if p.Annotations[v1alpha1.StatusAnnotation] != v1alpha1.StatusInjected {
		return false
	}
	for _, c := range p.Spec.Containers {
		if c.Name == v1alpha1.RegistrarContainerName {
			return true
		}
	}
	return false
}

// The replica serving the API server's webhook connection is killed while
// ten Deployments create 500 pods. The webhook fails closed: a create
// either comes back injected or fails naming the webhook, and its
// ReplicaSet retries until all 500 exist, each with the registrar.
func TestWebhookReplicaKilledDuring500Creates_NoPodWithoutTheRegistrar(t *testing.T) {
	const deployments, replicas = 10, 50
	cp := harness.ControlPlaneT(t, harness.ControlPlaneOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	dir := t.TempDir()
	kcm, err := cp.StartControllerManager(ctx, dir+"/kcm.log")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = kcm.Stop() })
	ek, err := harness.StartEurekube(ctx, cp, harness.EurekubeOptions{Replicas: 2, BinDir: dir, Binary: managerBin, EurekaURLs: []string{noEureka}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ek.Stop)
	optIn(ctx, t, cp.Client)

	pods := func() ([]corev1.Pod, error) {
		var list corev1.PodList
		err := cp.Client.List(ctx, &list, client.InNamespace("shop"))
		return list.Items, err
	}
	began := time.Now()
	for i := range deployments {
		labels := map[string]string{"app": "orders", "shard": fmt.Sprint(i)}
		dep := &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("orders-%d", i), Namespace: "shop"},
			Spec: appsv1.DeploymentSpec{
				Replicas: ptr.To[int32](replicas),
				Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: ordersPodSpec()},
			},
		}
		if err := cp.Client.Create(ctx, dep); err != nil {
			t.Fatal(err)
		}
	}

	// Kill the replica the API server is talking to once 150 pods exist.
	harness.Eventually(t, 2*time.Minute, "150 pods created", func() error {
		list, err := pods()
		if err != nil {
			return err
		}
		if len(list) < 150 {
			return fmt.Errorf("%d pods", len(list))
		}
		return nil
	})
	serving, most := 0, -1.0
	for i, m := range ek.Managers {
		samples, err := harness.Metrics(ctx, m.MetricsURL())
		if err != nil {
			t.Fatal(err)
		}
		n := samples[`controller_runtime_webhook_requests_total{code="200",webhook="`+webhook.Path+`"}`]
		if n > most {
			serving, most = i, n
		}
	}
	ek.Managers[serving].Kill()
	killedAt := time.Now()
	t.Logf("killed replica %d after %s; it had answered %v admission requests", serving, killedAt.Sub(began).Round(time.Millisecond), most)

	harness.Eventually(t, 4*time.Minute, "500 pods, every one with the registrar", func() error {
		list, err := pods()
		if err != nil {
			return err
		}
		for i := range list {
			if !hasRegistrar(&list[i]) {
				t.Fatalf("pod %s exists without the registrar", list[i].Name)
			}
		}
		if len(list) != deployments*replicas {
			return fmt.Errorf("%d pods, want %d", len(list), deployments*replicas)
		}
		return nil
	})
	t.Logf("500 pods created in %s", time.Since(began).Round(time.Millisecond))
	if ek.Managers[1-serving].Exited() {
		t.Fatal("the surviving replica exited")
	}

	// The API server retries a webhook call whose connection was reset, so
	// a single replica's death may cost no create at all. With no replica
	// answering, creates fail naming the webhook, no pod is admitted
	// without the registrar, and the ReplicaSets retry until a replica is
	// back.
	ek.Managers[1-serving].Kill()
	for i := range deployments {
		dep := &appsv1.Deployment{}
		if err := cp.Client.Get(ctx, client.ObjectKey{Namespace: "shop", Name: fmt.Sprintf("orders-%d", i)}, dep); err != nil {
			t.Fatal(err)
		}
		dep.Spec.Replicas = ptr.To[int32](replicas + 10)
		if err := cp.Client.Update(ctx, dep); err != nil {
			t.Fatal(err)
		}
	}
	failedCreates := func() (int, []string, error) {
		var events corev1.EventList
		if err := cp.Client.List(ctx, &events, client.InNamespace("shop")); err != nil {
			return 0, nil, err
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
		return n, unclear, nil
	}
	harness.Eventually(t, time.Minute, "creates refused while no replica answers", func() error {
		list, err := pods()
		if err != nil {
			return err
		}
		for i := range list {
			if !hasRegistrar(&list[i]) {
				t.Fatalf("pod %s was admitted without the registrar while no replica answered", list[i].Name)
			}
		}
		n, _, err := failedCreates()
		if err != nil {
			return err
		}
		if n < deployments {
			return fmt.Errorf("%d failed creates reported", n)
		}
		return nil
	})
	if err := ek.Replace(ctx, serving); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, 2*time.Minute, "600 pods, every one with the registrar", func() error {
		list, err := pods()
		if err != nil {
			return err
		}
		for i := range list {
			if !hasRegistrar(&list[i]) {
				t.Fatalf("pod %s exists without the registrar", list[i].Name)
			}
		}
		if len(list) != deployments*(replicas+10) {
			return fmt.Errorf("%d pods, want %d", len(list), deployments*(replicas+10))
		}
		return nil
	})
	n, unclear, err := failedCreates()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d creates failed in all, each retried by its ReplicaSet", n)
	if len(unclear) > 0 {
		t.Fatalf("creates failed without naming the webhook: %v", unclear)
	}
	var events corev1.EventList
	if err := cp.Client.List(ctx, &events, client.InNamespace("shop")); err == nil {
		for _, e := range events.Items {
			if e.Reason == "FailedCreate" {
				t.Logf("as a ReplicaSet reports one: %s", e.Message)
				break
			}
		}
	}
}

// review is an AdmissionReview for creating pod in namespace shop.
func review(t *testing.T, uid string, pod *corev1.Pod) []byte {
	t.Helper()
	raw, err := json.Marshal(pod)
	if err != nil {
		t.Fatal(err)
	}
	body, err := json.Marshal(admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{
			UID:       types.UID(uid),
			Kind:      metav1.GroupVersionKind{Version: "v1", Kind: "Pod"},
			Resource:  metav1.GroupVersionResource{Version: "v1", Resource: "pods"},
			Namespace: "shop",
			Operation: admissionv1.Create,
			Object:    runtime.RawExtension{Raw: raw},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	return body
}

func ordersPod(annotations map[string]string) *corev1.Pod {
	return &corev1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{GenerateName: "orders-", Namespace: "shop", Labels: map[string]string{"app": "orders"}, Annotations: annotations},
		Spec:       ordersPodSpec(),
	}
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
// of the wrong type, and pods whose eurekube.io annotations hold bad or
// random values.
func malformedCases(t *testing.T) []malformedCase {
	rng := rand.New(rand.NewPCG(7, 11))
	valid := review(t, "valid", ordersPod(nil))
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
			mutated := replaceAt(doc, p, w)
			body, err := json.Marshal(mutated)
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
	keys := []string{webhook.AnnotationInject, webhook.AnnotationAppName, webhook.AnnotationVIPAddress, webhook.AnnotationSecureVIPAddress,
		webhook.AnnotationPort, webhook.AnnotationSecurePort, webhook.AnnotationPreStopSleep, webhook.AnnotationHealthType,
		webhook.AnnotationHealthScheme, webhook.AnnotationHealthPath, webhook.AnnotationHealthPort, webhook.AnnotationSidecarCPU,
		webhook.AnnotationSidecarMemory, webhook.AnnotationMetadataPrefix + "zone", webhook.AnnotationMetadataPrefix + "9bad key",
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
			c := malformedCase{name: fmt.Sprintf("%s=%.30q", key, v), contentType: "application/json", body: review(t, "ann", ordersPod(ann))}
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
// HTTPS to the running manager: every one is answered, bad annotations are
// denied naming the annotation, nothing panics, and the manager still
// injects afterwards.
func TestMalformedAdmissionRequests_EveryOneAnsweredNoPanic(t *testing.T) {
	cp := harness.ControlPlaneT(t, harness.ControlPlaneOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	ek, err := harness.StartEurekube(ctx, cp, harness.EurekubeOptions{Replicas: 1, BinDir: t.TempDir(), Binary: managerBin, EurekaURLs: []string{noEureka}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ek.Stop)
	optIn(ctx, t, cp.Client)
	m := ek.Managers[0]

	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ek.CA.PEM)
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}, MaxIdleConnsPerHost: 8,
	}}
	url := "https://" + m.WebhookAddr() + webhook.Path
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
	valid := review(t, "valid", ordersPod(nil))
	harness.Eventually(t, 30*time.Second, "the webhook injects", func() error {
		out, _, err := post("application/json", valid)
		if err != nil {
			return err
		}
		if out.Response == nil || out.Response.Patch == nil {
			return fmt.Errorf("no patch in %+v", out.Response)
		}
		return nil
	})

	cases := malformedCases(t)
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
	t.Logf("%d malformed requests answered, %d bad annotation values denied naming the annotation", len(cases), denied)
	if len(problems) > 0 {
		t.Fatalf("%d of %d requests mishandled, for example:\n%s", len(problems), len(cases), strings.Join(problems[:min(len(problems), 10)], "\n"))
	}

	if m.Exited() {
		t.Fatalf("the manager exited; log %s", m.LogPath())
	}
	samples, err := harness.Metrics(ctx, m.MetricsURL())
	if err != nil {
		t.Fatal(err)
	}
	if n := samples[`controller_runtime_webhook_panics_total`]; n != 0 {
		t.Fatalf("%v webhook panics", n)
	}
	log, err := os.ReadFile(m.LogPath())
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(log, []byte("panic")) {
		t.Fatalf("the manager's log mentions a panic: %s", m.LogPath())
	}
	// And it still injects through the API server.
	pod := ordersPod(nil)
	if err := cp.Client.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	if !hasRegistrar(pod) {
		t.Fatal("a valid pod created afterwards came back without the registrar")
	}
}
