package webhook

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/eurekube/eurekube/api/v1alpha1"
	"github.com/eurekube/eurekube/webhook/webhooktest"
)

// The closure properties (DESIGN.md, principle 3), over generated syncers,
// pods and later webhooks' changes. Each fuzz target runs its seeds in
// every go test and is fuzzed by make test's fuzz phase.

// gen turns fuzz bytes into choices; out of bytes, every choice is the
// first.
type gen struct{ data []byte }

func (g *gen) uint32() uint32 {
	if len(g.data) < 4 {
		g.data = nil
		return 0
	}
	v := binary.LittleEndian.Uint32(g.data)
	g.data = g.data[4:]
	return v
}

func (g *gen) intn(n int) int { return int(g.uint32() % uint32(n)) }
func (g *gen) bool() bool     { return g.intn(2) == 1 }

// int32In is a value from lo to hi, often an edge.
func (g *gen) int32In(lo, hi int32) int32 {
	switch g.intn(4) {
	case 0:
		return lo
	case 1:
		return hi
	}
	return lo + int32(g.uint32()%uint32(int64(hi)-int64(lo)+1))
}

// unset or within [lo, hi], and sometimes just outside it (the API server
// refuses those).
func (g *gen) optional(lo, hi int32) int32 {
	switch g.intn(6) {
	case 0:
		return 0
	case 1:
		return hi + 1
	}
	return g.int32In(lo, hi)
}

func (g *gen) pick(values ...string) string { return values[g.intn(len(values))] }

func (g *gen) path() string {
	return g.pick("/", "/ready", "/actuator/health", "/m?x", "/a#b", "/a b", "ready", "/health/liveness", "/x/", "")
}

// syncerFor is a generated Pod-mode syncer selecting the Spring pod.
func (g *gen) syncer() v1alpha1.EurekaSyncer {
	s := syncer("orders", time.Hour)
	s.Spec.Metadata = nil
	s.Spec.Lease = v1alpha1.Lease{RenewalIntervalSeconds: g.optional(1, 300), DurationSeconds: g.optional(2, 3600)}
	if g.bool() {
		hc := &v1alpha1.HealthCheck{Type: v1alpha1.HealthCheckType(g.pick("HTTP", "TCP")),
			PeriodSeconds: g.optional(1, 300), TimeoutSeconds: g.optional(1, 60),
			FailureThreshold: g.optional(1, 100), SuccessThreshold: g.optional(1, 100)}
		if hc.Type == v1alpha1.HealthCheckHTTP {
			hc.Path = g.path()
			hc.Scheme = g.pick("", "HTTP", "HTTPS")
		}
		switch g.intn(3) {
		case 1:
			hc.Port = ptr.To(intstr.FromString("http"))
		case 2:
			hc.Port = ptr.To(intstr.FromInt32(g.int32In(1, 65535)))
		}
		s.Spec.HealthCheck = hc
	}
	if g.bool() {
		s.Spec.Management = &v1alpha1.Management{BasePath: g.pick("", "/actuator", "/m?x", "/", "/manage#x", "/a b")}
	}
	if g.bool() {
		s.Spec.Drain.PreStopSleepSeconds = ptr.To(g.optional(0, 3600))
	}
	if g.bool() {
		s.Spec.Protocol = v1alpha1.Protocol(g.pick("HTTP", "TCP"))
	}
	if g.bool() {
		s.Spec.Traffic = v1alpha1.Traffic(g.pick("Serve", "Standby"))
	}
	return s
}

// pod is a generated Spring pod: its readinessProbe within Kubernetes'
// bounds (which have no upper limit), its preStop, restartPolicy, OS and
// eurekube.io/ annotations, valid and not.
func (g *gen) pod() *corev1.Pod {
	p := springPod()
	c := &p.Spec.Containers[0]
	big := func() int32 { return g.int32In(1, math.MaxInt32) }
	switch g.intn(4) {
	case 0:
		c.ReadinessProbe = nil
	case 1:
		c.ReadinessProbe.HTTPGet.Path = g.pick("", "/ready", "/actuator/health/readiness")
	case 2:
		c.ReadinessProbe.ProbeHandler = corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(8080)}}
	case 3:
		c.ReadinessProbe.ProbeHandler = corev1.ProbeHandler{GRPC: &corev1.GRPCAction{Port: 8080}}
	}
	if c.ReadinessProbe != nil {
		c.ReadinessProbe.PeriodSeconds, c.ReadinessProbe.TimeoutSeconds = big(), big()
		c.ReadinessProbe.FailureThreshold, c.ReadinessProbe.SuccessThreshold = big(), big()
	}
	switch g.intn(4) {
	case 1:
		c.Lifecycle = &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Sleep: &corev1.SleepAction{Seconds: int64(g.int32In(1, 60))}}}
	case 2:
		c.Lifecycle = &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Exec: &corev1.ExecAction{Command: []string{"/bin/stop"}}}}
	case 3:
		c.Lifecycle = &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/pause", Port: intstr.FromString(g.pick("http", "nope"))}}}
	}
	p.Spec.RestartPolicy = corev1.RestartPolicy(g.pick("", "Always", "Always", "Never", "OnFailure"))
	if g.intn(5) == 0 {
		p.Spec.OS = &corev1.PodOS{Name: corev1.OSName(g.pick("linux", "windows"))}
	}
	for range g.intn(4) {
		if p.Annotations == nil {
			p.Annotations = map[string]string{}
		}
		switch g.intn(8) {
		case 0:
			p.Annotations[v1alpha1.AnnotationManagementPath] = g.pick("/manage", "/m?x", "/", "x")
		case 1:
			p.Annotations[v1alpha1.AnnotationHealthPath] = g.path()
		case 2:
			p.Annotations[v1alpha1.AnnotationHealthType] = g.pick("HTTP", "TCP", "tcp", "exec")
		case 3:
			p.Annotations[v1alpha1.AnnotationPreStopSleep] = g.pick("0", "5", "3600", "3601", "-1")
		case 4:
			p.Annotations[v1alpha1.AnnotationHealthScheme] = g.pick("HTTP", "https", "ftp")
		case 5:
			p.Annotations[v1alpha1.AnnotationProtocol] = g.pick("HTTP", "TCP", "udp")
		case 6:
			p.Annotations[v1alpha1.AnnotationAppName] = g.pick("ORDERS-V2", "bad name")
		case 7:
			p.Annotations["team"] = "shop"
		}
	}
	return p
}

// laterWebhook changes an admitted pod as a webhook called after Eurekube
// would (a mesh injector, a policy engine): containers (a classic proxy,
// with or without its own preStop), a native sidecar, an init container,
// volumes and annotations added.
func (g *gen) laterWebhook(p *corev1.Pod) (*corev1.Pod, []string) {
	q := p.DeepCopy()
	var added []string
	for i := range g.intn(3) {
		c := corev1.Container{Name: fmt.Sprintf("proxy-%d", i), Image: "registry.example/proxy:1",
			Ports: []corev1.ContainerPort{{Name: fmt.Sprintf("proxy-%d", i), ContainerPort: int32(15001 + i)}}}
		switch g.intn(4) {
		case 1:
			c.Lifecycle = &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Sleep: &corev1.SleepAction{Seconds: 5}}}
		case 2:
			c.Lifecycle = &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Exec: &corev1.ExecAction{Command: []string{"pilot-agent", "drain"}}}}
		case 3:
			c.Lifecycle = &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Sleep: &corev1.SleepAction{Seconds: 7200}}}
		}
		q.Spec.Containers = append(q.Spec.Containers, c)
		added = append(added, c.Name)
	}
	if g.bool() {
		q.Spec.InitContainers = append(q.Spec.InitContainers, corev1.Container{Name: "linkerd-proxy", Image: "registry.example/proxy:1",
			RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways)})
	}
	if g.bool() {
		q.Spec.InitContainers = append(q.Spec.InitContainers, corev1.Container{Name: "istio-init", Image: "registry.example/proxy:1"})
	}
	if g.bool() {
		q.Spec.Volumes = append(q.Spec.Volumes, corev1.Volume{Name: "istio-envoy", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
	}
	if g.bool() {
		if q.Annotations == nil {
			q.Annotations = map[string]string{}
		}
		q.Annotations["sidecar.istio.io/status"] = `{"containers":["istio-proxy"]}`
	}
	return q, added
}

// defaults is the manager's, or with the exec fallback of old kubelets,
// with or without a gateway audience.
func (g *gen) defaults() Defaults {
	d := testDefaults
	d.ExecSleepFallback = g.intn(4) == 0
	if g.bool() {
		d.GatewayAudience = "eurekube-gateway"
	}
	return d
}

// injected is a generated pod, syncer and manager, and what Inject made of
// them.
func (g *gen) injected() (*corev1.Pod, []v1alpha1.EurekaSyncer, Defaults, Result) {
	syncers, pod, defaults := []v1alpha1.EurekaSyncer{g.syncer()}, g.pod(), g.defaults()
	return pod, syncers, defaults, Inject(pod, enabledNamespace(), syncers, defaults)
}

var closureSeeds = [][]byte{
	nil,
	[]byte("\x01\x00\x00\x00\x00\x00\x00\x00\x01\x00\x00\x00\x01\x00\x00\x00"),
	[]byte("abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ"),
	[]byte("\xff\xff\xff\xff\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0a\x0b\x0c\x0d\x0e\x0f\x10\x11\x12\x13\x14\x15\x16\x17\x18\x19"),
}

func addSeeds(f *testing.F) {
	for _, s := range closureSeeds {
		f.Add(s)
	}
	for i := range 64 { // a spread of simple choices
		b := make([]byte, 128)
		for j := range b {
			b[j] = byte(i*7 + j*13)
		}
		f.Add(b)
	}
}

// (a) Whatever the API server admits (the CRD's schema and CEL rules for
// the syncer, Kubernetes' bounds for the probe, the webhook's own
// annotation rules), the registrar accepts: Inject never finds a setting
// the registrar would refuse, and what it renders parses back.
func FuzzInject_WhatIsAdmittedTheRegistrarAccepts(f *testing.F) {
	addSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		g := &gen{data: data}
		s, pod, defaults := g.syncer(), g.pod(), g.defaults()
		admitted, err := webhooktest.AdmitSyncer(&s)
		if err != nil {
			return // refused at kubectl apply, with the reason
		}
		r := Inject(pod, enabledNamespace(), []v1alpha1.EurekaSyncer{*admitted}, defaults)
		if _, annErr := ParseAnnotations(pod.Annotations); annErr != nil {
			if r.Denied == "" {
				t.Fatalf("bad annotations (%v) were not denied", annErr)
			}
			return
		}
		if strings.Contains(r.Denied, "registrar would refuse") {
			t.Fatalf("the API server admits syncer spec %+v and pod annotations %v, but the pod is denied at admission only because the registrar would refuse it: %s",
				admitted.Spec, pod.Annotations, r.Denied)
		}
		if _, ok := InjectedSettings(r.Pod); r.Inject && !ok {
			t.Fatalf("the registrar refuses what the webhook rendered")
		}
	})
}

// (b) Inject(Inject(p)) = Inject(p) for every outcome: the pod admitted
// comes back unchanged (no patch), and a denied pod is denied again. And
// what is admitted fixes no user or group.
func FuzzInject_IsIdempotent(f *testing.F) {
	addSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		g := &gen{data: data}
		pod, syncers, defaults, first := g.injected()
		checkPatch(t, pod, first)
		if first.Denied != "" {
			if again := Inject(pod, enabledNamespace(), syncers, defaults); again.Denied != first.Denied {
				t.Fatalf("denied %q, then %q", first.Denied, again.Denied)
			}
			return
		}
		checkFixesNoUser(t, first.Pod)
		second := Inject(first.Pod, enabledNamespace(), syncers, defaults)
		if second.Denied != "" {
			t.Fatalf("Eurekube denies its own output (%s): %s", first.Reason, second.Denied)
		}
		if _, err := newRegistrarImages(defaults).registrars(first.Pod); err != nil {
			t.Fatalf("the registrars Eurekube writes are unreadable to it (%s): %v", first.Reason, err)
		}
		if len(second.Patch) > 0 || !equality.Semantic.DeepEqual(second.Pod, first.Pod) {
			t.Fatalf("Inject(Inject(p)) changed the pod (%s, then %s): %s", first.Reason, second.Reason, opsOf(second.Patch))
		}
	})
}

// (c) A pod changed by a later webhook and sent back (reinvocation)
// converges: the containers it added get the drain exactly once, nothing
// else changes, the grace period is not lengthened again, and a third
// call changes nothing.
func FuzzInject_ConvergesAfterALaterWebhook(f *testing.F) {
	addSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		g := &gen{data: data}
		_, syncers, defaults, first := g.injected()
		if first.Denied != "" {
			return
		}
		changed, added := g.laterWebhook(first.Pod)
		again := Inject(changed, enabledNamespace(), syncers, defaults)
		if again.Denied != "" {
			t.Fatalf("a %s pod changed by a later webhook is denied: %s", first.Reason, again.Denied)
		}
		checkPatch(t, changed, again)
		got := again.Pod
		if !equality.Semantic.DeepEqual(got.Spec.TerminationGracePeriodSeconds, changed.Spec.TerminationGracePeriodSeconds) {
			t.Fatalf("the grace period changed again: %v → %v", ptr.Deref(changed.Spec.TerminationGracePeriodSeconds, -1), ptr.Deref(got.Spec.TerminationGracePeriodSeconds, -1))
		}
		for i, c := range changed.Spec.Containers[:len(first.Pod.Spec.Containers)] {
			if !equality.Semantic.DeepEqual(c, got.Spec.Containers[i]) {
				t.Fatalf("container %s, already handled, changed again", c.Name)
			}
		}
		if first.Inject {
			seconds := drainOf(got)
			for _, name := range added {
				c := containerNamed(got, name)
				if seconds > 0 && !drained(c, seconds) {
					t.Fatalf("container %s added by a later webhook has no drain: preStop %+v", name, c.Lifecycle)
				}
			}
		} else if !equality.Semantic.DeepEqual(got, changed) {
			t.Fatalf("a %s pod changed by a later webhook was changed again: %s", first.Reason, opsOf(again.Patch))
		}
		third := Inject(got, enabledNamespace(), syncers, defaults)
		if third.Denied != "" || len(third.Patch) > 0 {
			t.Fatalf("not converged: a third call denies %q or patches %s", third.Denied, opsOf(third.Patch))
		}
	})
}

// checkFixesNoUser fails when an admitted pod, whose generated spec asks
// for no user or group, comes back with one: the registrar and the drain
// helper run as their image's numeric user, and a platform that assigns
// each namespace its UIDs (OpenShift's restricted-v2) refuses a pod that
// fixes one.
func checkFixesNoUser(t *testing.T, pod *corev1.Pod) {
	t.Helper()
	if sc := pod.Spec.SecurityContext; sc != nil && (sc.RunAsUser != nil || sc.RunAsGroup != nil || sc.FSGroup != nil) {
		t.Fatalf("the pod's securityContext fixes a user or group: %+v", sc)
	}
	for _, c := range append(slices.Clone(pod.Spec.InitContainers), pod.Spec.Containers...) {
		if sc := c.SecurityContext; sc != nil && (sc.RunAsUser != nil || sc.RunAsGroup != nil) {
			t.Fatalf("container %s fixes a user or group: runAsUser %v, runAsGroup %v", c.Name, ptr.Deref(sc.RunAsUser, -1), ptr.Deref(sc.RunAsGroup, -1))
		}
	}
}

// checkPatch applies r's patch to pod's JSON as the API server would and
// expects r.Pod.
func checkPatch(t *testing.T, pod *corev1.Pod, r Result) {
	t.Helper()
	if r.Denied != "" {
		return
	}
	raw, err := json.Marshal(pod)
	if err != nil {
		t.Fatal(err)
	}
	var got corev1.Pod
	if err := json.Unmarshal(applyPatch(t, raw, r.Patch), &got); err != nil {
		t.Fatal(err)
	}
	if !equality.Semantic.DeepEqual(&got, r.Pod) {
		t.Fatalf("the patch %s does not make the pod Inject made", opsOf(r.Patch))
	}
}

func drainOf(p *corev1.Pod) int32 {
	var n int32
	fmt.Sscan(p.Annotations[v1alpha1.DrainAnnotation], &n)
	return n
}

func containerNamed(p *corev1.Pod, name string) *corev1.Container {
	for i := range p.Spec.Containers {
		if p.Spec.Containers[i].Name == name {
			return &p.Spec.Containers[i]
		}
	}
	return nil
}

// A pod injected offline (eurekube inject) while its syncer said Serve,
// applied after the syncer turned Standby, registers as the syncer says
// now: the traffic annotation the registrar reads follows the syncer.
func TestInject_AnInjectedPodSentBackFollowsItsSyncersTraffic(t *testing.T) {
	orders := syncer("orders", time.Hour)
	injected := inject(t, springPod(), orders)
	orders.Spec.Traffic = v1alpha1.TrafficStandby
	r := Inject(injected, enabledNamespace(), []v1alpha1.EurekaSyncer{orders}, testDefaults)
	if r.Denied != "" || r.Reason != ReasonAlreadyInjected {
		t.Fatalf("reason %s, denied %q", r.Reason, r.Denied)
	}
	if got := r.Pod.Annotations[v1alpha1.TrafficAnnotation]; got != string(v1alpha1.TrafficStandby) {
		t.Fatalf("traffic %q, want %q", got, v1alpha1.TrafficStandby)
	}
	if len(r.Patch) != 1 || r.Patch[0].Path != "/metadata/annotations/eurekube.io~1traffic" {
		t.Fatalf("patch %s, want the traffic annotation alone", opsOf(r.Patch))
	}
}

// Settings within the API server's bounds that the registrar once refused
// now run: a health timeout longer than the period (as the kubelet runs
// such a probe), a failure threshold above 1000.
func TestInject_ProbesKubernetesAcceptsRun(t *testing.T) {
	orders := syncer("orders", time.Hour)
	orders.Spec.HealthCheck = &v1alpha1.HealthCheck{Type: v1alpha1.HealthCheckHTTP, Path: "/ready", TimeoutSeconds: 10}
	pod := springPod()
	pod.Spec.Containers[0].ReadinessProbe.FailureThreshold = 1200
	for name, s := range map[string]v1alpha1.EurekaSyncer{"syncer's timeout 10 s, period unset": orders,
		"probe's failureThreshold 1200": syncer("orders", time.Hour)} {
		r := Inject(pod, enabledNamespace(), []v1alpha1.EurekaSyncer{s}, testDefaults)
		if !r.Inject {
			t.Fatalf("%s: %s %s", name, r.Reason, r.Denied)
		}
		if _, ok := InjectedSettings(r.Pod); !ok {
			t.Fatalf("%s: the registrar refuses what the webhook rendered", name)
		}
	}
}
