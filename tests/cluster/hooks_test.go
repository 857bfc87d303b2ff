package cluster_test

import (
	"context"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/eurekube/eurekube/api/v1alpha1"
	"github.com/eurekube/eurekube/tests/cluster"
	"github.com/eurekube/eurekube/tests/harness"
	"github.com/eurekube/eurekube/tests/node"
)

// Every pod shape keeps every call answered through a rolling update: the
// app's own preStop of each kind runs after the drain (exec and httpGet
// through the drain helper, which only a real kubelet runs), and a second
// container of the pod's own, serving a management port with its own hook,
// keeps serving for the drain too. Each case asserts 0 failed calls by the
// real Spring client, that every replaced pod's own hook ran (reported to
// a recorder on the host) no sooner than the drain after the rollout
// began, and that the kubelet reported no failed hook. Where the webhook
// composed the app's own hook with the drain, the syncer reports it in one
// Event for all its pods, not one per pod.
func TestRollingUpdate_EveryPreStopKindNoCallFails(t *testing.T) {
	kinds := storiesOf(t, 5)
	rec := startRecorder(t)
	for _, tc := range []struct {
		kind  string
		hook  *corev1.LifecycleHandler
		shape func(*appsv1.Deployment)
		// byIP: the hook is an HTTP GET from the pod's IP, else an exec
		// that names the pod.
		reports, byIP bool
		// composed: the app's preStop becomes one sleep of the drain and
		// its own (the hooks of the other kinds run through the drain
		// helper); every own hook is reported in a PreStopComposed Event.
		composed bool
	}{
		{kind: "none"},
		{kind: "sleep", hook: &corev1.LifecycleHandler{Sleep: &corev1.SleepAction{Seconds: 2}}, composed: true},
		{kind: "exec", hook: &corev1.LifecycleHandler{Exec: &corev1.ExecAction{Command: []string{"/testapp", "hook", rec.url("exec")}}}, reports: true},
		{kind: "httpget", hook: &corev1.LifecycleHandler{HTTPGet: &corev1.HTTPGetAction{
			Host: node.NodeIP, Port: intstr.FromInt(rec.port), Path: "/hook/httpget"}}, reports: true, byIP: true},
		{kind: "sidecar", shape: func(d *appsv1.Deployment) {
			app := d.Spec.Template.Spec.Containers[0]
			admin := *app.DeepCopy()
			admin.Name, admin.ReadinessProbe = "admin", nil
			admin.Ports = []corev1.ContainerPort{{Name: "management", ContainerPort: 9090}}
			admin.Env = append(admin.Env, corev1.EnvVar{Name: "LISTEN_ADDR", Value: ":9090"})
			admin.Lifecycle = &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Exec: &corev1.ExecAction{Command: []string{"/testapp", "hook", rec.url("sidecar")}}}}
			d.Spec.Template.Spec.Containers = append(d.Spec.Template.Spec.Containers, admin)
		}, reports: true},
	} {
		t.Run(tc.kind, func(t *testing.T) {
			// Beside the other kinds and the suite's other stories:
			// each in its own namespace, with its own client.
			kinds.story(t, 45*time.Second)
			ctx := context.Background()
			app := cluster.App{Namespace: "hooks-" + tc.kind, Name: "hook" + tc.kind, Replicas: 2,
				DrainSeconds: ptr.To[int32](drainSeconds), PreStop: tc.hook}
			deploy(t, app, tc.shape)
			v := settle(t, app, 3*time.Minute)
			old := map[string]string{} // name and IP of the pods the rollout replaces
			for _, p := range v.Pods {
				old[p.Name] = p.Status.PodIP
			}
			if tc.composed {
				for _, p := range v.Pods {
					if ps := p.Spec.Containers[0].Lifecycle.PreStop; ps.Sleep == nil || ps.Sleep.Seconds != drainSeconds+tc.hook.Sleep.Seconds {
						t.Fatalf("pod %s preStop = %+v, want one sleep of the %d s drain and the app's own %d s", p.Name, ps, drainSeconds, tc.hook.Sleep.Seconds)
					}
				}
			}
			if tc.kind != "none" { // every own hook is composed, and said so once
				t.Logf("pod %s %s: %s", v.Pods[0].Name, v1alpha1.AdaptationsAnnotation, v.Pods[0].Annotations[v1alpha1.AdaptationsAnnotation])
				e := waitEvent(t, app, string(v1alpha1.AdaptationPreStopComposed), time.Minute, v.ReadyPods...)
				t.Logf("event %s %s: %s", e.Type, e.Reason, e.Note)
			}
			sc := startClient(t, app.Name)
			waitAnswered(t, sc, harness.SpringStats{}, v.ReadyPods)

			d, began := rolloutCalled(t, app, sc)
			t.Logf("%s: rollout in %s, %d calls by name, %d failed", tc.kind, time.Since(began).Round(time.Second), d.OK+d.Failed, d.Failed)
			if d.Failed != 0 {
				t.Errorf("%d of %d calls failed during the rollout; last error: %s", d.Failed, d.OK+d.Failed, d.LastError)
			}
			if tc.reports {
				for name, ip := range old {
					who := name
					if tc.byIP {
						who = ip
					}
					at, ok := rec.first(tc.kind, who)
					if !ok {
						t.Errorf("pod %s (%s): its own %s hook never ran", name, ip, tc.kind)
						continue
					}
					t.Logf("pod %s: own hook ran %s after the rollout began", name, at.Sub(began).Round(time.Millisecond))
					if at.Sub(began) < drainSeconds*time.Second {
						t.Errorf("pod %s: its own hook ran %s after the rollout began, before the %d s drain could end", name, at.Sub(began), drainSeconds)
					}
				}
			}
			var events eventsv1.EventList
			if err := c.Node.Client.List(ctx, &events, client.InNamespace(app.Namespace)); err != nil {
				t.Fatal(err)
			}
			for _, e := range events.Items {
				if e.Reason == "FailedPreStopHook" {
					t.Errorf("the kubelet reported a failed preStop hook on %s: %s", e.Regarding.Name, e.Note)
				}
			}
		})
	}
}
