package controller_test

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/eurekube/eurekube/api/v1alpha1"
	"github.com/eurekube/eurekube/eureka"
	"github.com/eurekube/eurekube/tests/harness"
)

func TestStatus_CountsSelectedInjectedAndRegisteredPods(t *testing.T) {
	ns := newNamespace(t)
	s := newSyncer(t, ns, "orders")
	c := directClient(t, server.URL())
	foreign(t, c, s)
	for i := 1; i <= 3; i++ {
		pod := newPod(t, ns, "orders", fmt.Sprintf("orders-%d", i), true, fmt.Sprintf("10.0.0.%d", i))
		register(t, c, s, pod)
	}
	harness.Eventually(t, patience, "status 3 selected, 3 injected, 3 registered, READY 3/3, Synced", func() error {
		got, err := getSyncer(s)
		if err != nil {
			return err
		}
		st := got.Status
		if st.SelectedPods != 3 || st.InjectedPods != 3 || st.ReadyPods != 3 || st.RegisteredInstances != 3 || st.UpInstances != 3 || st.Ready != "3/3" {
			return fmt.Errorf("status %+v", st)
		}
		for _, typ := range []string{v1alpha1.ConditionSynced, v1alpha1.ConditionExclusive, v1alpha1.ConditionDrained, v1alpha1.ConditionPodsInjected} {
			if !meta.IsStatusConditionTrue(st.Conditions, typ) {
				return fmt.Errorf("not %s: %+v", typ, st.Conditions)
			}
		}
		return nil
	})
	// The VM and the other cluster's instance are elsewhere, both UP.
	if got, want := getEsync(t, ns, s.Name), "orders ORDERS Serve 3/3 2/2 Both 3 True"; !strings.HasPrefix(got, want+" ") {
		t.Fatalf("kubectl get esync = %q, want NAME APP TRAFFIC READY ELSEWHERE CALLS-TO REGISTERED SYNCED AGE = %q AGE", got, want)
	}
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

func TestSynced_FalseWhilePodsAreSelectedAndNoInstanceIsUp(t *testing.T) {
	ns := newNamespace(t)
	s := newSyncer(t, ns, "cart")
	foreign(t, directClient(t, server.URL()), s) // UP, but not this cluster's
	for i := 1; i <= 2; i++ {
		podShape{ns: ns, app: "cart", name: fmt.Sprintf("cart-%d", i), ip: fmt.Sprintf("10.0.6.%d", i), registrar: true, ready: false,
			annotations: map[string]string{v1alpha1.StatusAnnotation: v1alpha1.StatusInjected, v1alpha1.SyncerAnnotation: "cart", v1alpha1.DrainAnnotation: "100"}}.create(t)
	}
	// The foreign instances (a VM's, another cluster's) count elsewhere
	// once a registry read after their registration reached the syncer: a
	// resync at most.
	harness.Eventually(t, patience, "READY 0/2, ELSEWHERE 2/2, Synced False NoInstanceUp", func() error {
		got, err := getSyncer(s)
		if err != nil {
			return err
		}
		st := got.Status
		c := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionSynced)
		if st.Ready != "0/2" || st.Elsewhere != "2/2" || c == nil || c.Status != metav1.ConditionFalse || c.Reason != "NoInstanceUp" || !strings.Contains(c.Message, "2 pod(s) selected, 0 ready") {
			return fmt.Errorf("ready %q, elsewhere %q, Synced %+v", st.Ready, st.Elsewhere, c)
		}
		return nil
	})
	if got, want := getEsync(t, ns, s.Name), "cart CART Serve 0/2 2/2 Elsewhere 0 False"; !strings.HasPrefix(got, want+" ") {
		t.Fatalf("kubectl get esync = %q, want %q AGE", got, want)
	}
	if got := getEsync(t, ns, s.Name, "-o", "wide"); !strings.Contains(got, " NoInstanceUp 2 0 0 0") {
		t.Fatalf("kubectl get esync -o wide = %q, want ... REASON=NoInstanceUp INJECTED=2 SKIPPED=0 OTHER-SYNCER=0 NO-DRAIN=0", got)
	}
}

func TestOverlap_TheNewerSyncerNamesTheOlderThatOwnsThePods(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	older := newSyncer(t, ns, "ledger")
	newer := &v1alpha1.EurekaSyncer{
		ObjectMeta: metav1.ObjectMeta{Name: "ledger-v2", Namespace: ns},
		Spec: v1alpha1.EurekaSyncerSpec{
			Selector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "ledger"}}, // the same pods
			Port:     older.Spec.Port,
		},
	}
	if err := k8s.Create(ctx, newer); err != nil {
		t.Fatal(err)
	}
	c := directClient(t, server.URL())
	foreign(t, c, older)
	for i := 1; i <= 2; i++ { // the webhook gave them to the older syncer
		register(t, c, older, newPod(t, ns, "ledger", fmt.Sprintf("ledger-%d", i), true, fmt.Sprintf("10.0.7.%d", i)))
	}
	harness.Eventually(t, patience, "the newer syncer counts none and names the owner; the older counts both", func() error {
		gotNewer, err := getSyncer(newer)
		if err != nil {
			return err
		}
		st := gotNewer.Status
		if st.SelectedPods != 0 || st.InjectedPods != 0 || st.ReadyPods != 0 || st.PodsOwnedByOtherSyncers != 2 || st.Ready != "0/0" {
			return fmt.Errorf("newer status %+v", st)
		}
		x := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionExclusive)
		if x == nil || x.Status != metav1.ConditionFalse || x.Reason != "OverlappingSyncers" {
			return fmt.Errorf("newer Exclusive %+v", x)
		}
		for _, m := range []string{"syncer ledger owns 2 (ledger-1, ledger-2)", "oldest", "narrow the selector"} {
			if !strings.Contains(x.Message, m) {
				return fmt.Errorf("newer Exclusive message %q does not say %q", x.Message, m)
			}
		}
		gotOlder, err := getSyncer(older)
		if err != nil {
			return err
		}
		st = gotOlder.Status
		if st.SelectedPods != 2 || st.InjectedPods != 2 || st.PodsOwnedByOtherSyncers != 0 || st.Ready != "2/2" ||
			!meta.IsStatusConditionTrue(st.Conditions, v1alpha1.ConditionExclusive) || !meta.IsStatusConditionTrue(st.Conditions, v1alpha1.ConditionSynced) {
			return fmt.Errorf("older status %+v", st)
		}
		return nil
	})
	if got, want := getEsync(t, ns, newer.Name), "ledger-v2 LEDGER-V2 Serve 0/0 0/0 Nowhere 0 True"; !strings.HasPrefix(got, want+" ") {
		t.Fatalf("kubectl get esync %s = %q, want %q AGE", newer.Name, got, want)
	}
	if got := getEsync(t, ns, newer.Name, "-o", "wide"); !strings.HasSuffix(got, " 0 0 2 0 0") {
		t.Fatalf("kubectl get esync -o wide = %q, want ... INJECTED=0 SKIPPED=0 OTHER-SYNCER=2 NO-DRAIN=0 OUTDATED=0", got)
	}
}

func TestAdaptations_OneEventPerReasonStatusEntriesAndAGauge(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	c := directClient(t, server.URL())
	composed := v1alpha1.Adaptation{Reason: v1alpha1.AdaptationPreStopComposed, Message: "container app: its own preStop (exec) runs, then the 100 s drain"}
	disabled := v1alpha1.Adaptation{Reason: v1alpha1.AdaptationDrainDisabled, Message: "the drain is 0: the pod stops serving while callers may still hold its instance"}
	finish := v1alpha1.Adaptation{Reason: v1alpha1.AdaptationMeantToFinish, Message: "restartPolicy Never: not injected, a registrar would keep the pod running"}
	injected := func(drain string, list ...v1alpha1.Adaptation) map[string]string {
		a := map[string]string{v1alpha1.StatusAnnotation: v1alpha1.StatusInjected, v1alpha1.SyncerAnnotation: "quotes",
			v1alpha1.AdaptationsAnnotation: v1alpha1.EncodeAdaptations(list)}
		if drain != "" {
			a[v1alpha1.DrainAnnotation] = drain
		}
		return a
	}
	shapes := []podShape{
		{name: "quotes-1", annotations: injected("100", composed)},
		{name: "quotes-2", annotations: injected("100", composed)},
		{name: "quotes-3", annotations: injected("100", composed)},
		{name: "quotes-nodrain", annotations: injected("0", disabled)},
		{name: "quotes-old", annotations: injected("")}, // injected before drains were recorded
		{name: "quotes-garbled", annotations: map[string]string{v1alpha1.StatusAnnotation: v1alpha1.StatusInjected, v1alpha1.SyncerAnnotation: "quotes",
			v1alpha1.DrainAnnotation: "100", v1alpha1.AdaptationsAnnotation: "[{oops"}},
	}
	// The pods exist (in the manager's cache too) before the syncer, as
	// when a Deployment's pods come at once: each reason is reported once.
	var pods []*corev1.Pod
	for i, p := range shapes {
		p.ns, p.app, p.ip, p.registrar, p.ready = ns, "quotes", fmt.Sprintf("10.0.8.%d", i+1), true, true
		pods = append(pods, p.create(t))
	}
	podShape{ns: ns, app: "quotes", name: "quotes-migrate", ready: false, // a Job's pod, skipped on purpose
		annotations: map[string]string{v1alpha1.StatusAnnotation: v1alpha1.StatusSkipped, v1alpha1.SyncerAnnotation: "quotes",
			v1alpha1.AdaptationsAnnotation: v1alpha1.EncodeAdaptations([]v1alpha1.Adaptation{finish})}}.create(t)
	harness.Eventually(t, patience, "the manager's cache holds the pods", func() error {
		var list corev1.PodList
		if err := mgr.GetClient().List(ctx, &list, &clientInNamespace{ns}); err != nil || len(list.Items) != len(shapes)+1 {
			return fmt.Errorf("%d pods cached, %v", len(list.Items), err)
		}
		for _, p := range list.Items {
			if p.Status.Phase != corev1.PodRunning {
				return fmt.Errorf("pod %s %s in the cache", p.Name, p.Status.Phase)
			}
		}
		return nil
	})
	s := newSyncer(t, ns, "quotes")
	foreign(t, c, s)
	for _, pod := range pods {
		register(t, c, s, pod)
	}

	harness.Eventually(t, patience, "adaptations, skipped pods and pods without drain in status", func() error {
		got, err := getSyncer(s)
		if err != nil {
			return err
		}
		st := got.Status
		if st.SelectedPods != 6 || st.SkippedPods != 1 || st.PodsWithoutDrain != 2 || st.Ready != "6/6" {
			return fmt.Errorf("status selected %d skipped %d without drain %d ready %q", st.SelectedPods, st.SkippedPods, st.PodsWithoutDrain, st.Ready)
		}
		var entries []string
		for _, a := range st.Adaptations {
			entries = append(entries, fmt.Sprintf("%s=%d:%s", a.Reason, a.Pods, strings.Join(a.ExamplePods, ",")))
		}
		want := "AdaptationsUnreadable=1:quotes-garbled DrainDisabled=1:quotes-nodrain PodMeantToFinish=1:quotes-migrate PreStopComposed=3:quotes-1,quotes-2,quotes-3"
		if strings.Join(entries, " ") != want {
			return fmt.Errorf("adaptations %v, want %s", entries, want)
		}
		d := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionDrained)
		if d == nil || d.Status != metav1.ConditionFalse || d.Reason != "PodsWithoutDrain" || !strings.Contains(d.Message, "quotes-nodrain, quotes-old") || !strings.Contains(d.Message, "restart them") {
			return fmt.Errorf("Drained %+v", d)
		}
		return nil
	})

	// events: one per reason, with its type; not one per pod, not one per
	// resync.
	wantEvents := func(want map[string]string) func() error {
		return func() error {
			var list corev1.EventList
			if err := k8s.List(ctx, &list, &clientInNamespace{ns}); err != nil {
				return err
			}
			got := map[string]string{}
			for _, e := range list.Items {
				if e.InvolvedObject.Name != s.Name || e.Reason == "SyncFailed" {
					continue
				}
				count := int32(1)
				if e.Series != nil {
					count = e.Series.Count
				}
				got[e.Reason] += fmt.Sprintf("[%s %d %s]", e.Type, count, e.Message)
			}
			for reason, mentions := range want {
				for _, m := range strings.Split(mentions, "|") {
					if !strings.Contains(got[reason], m) {
						return fmt.Errorf("%s events %q do not mention %q (all: %v)", reason, got[reason], m, got)
					}
				}
				if n := strings.Count(got[reason], "["); n != strings.Count(mentions, "[") {
					return fmt.Errorf("%d %s events, want %d: %q", n, reason, strings.Count(mentions, "["), got[reason])
				}
			}
			return nil
		}
	}
	first := map[string]string{
		"PreStopComposed":       "[Normal 1 3 running pod(s) of this syncer (quotes-1, quotes-2, quotes-3); quotes-1: container app: its own preStop",
		"DrainDisabled":         "[Warning 1 1 running pod(s) of this syncer (quotes-nodrain)",
		"PodMeantToFinish":      "[Warning 1 1 running pod(s) of this syncer (quotes-migrate)",
		"AdaptationsUnreadable": "[Warning 1 1 running pod(s) of this syncer (quotes-garbled); quotes-garbled: annotation eurekube.io/adaptations",
	}
	harness.Eventually(t, patience, "one event per reason", wantEvents(first))
	time.Sleep(2 * resync) // resyncs that change nothing report nothing
	if err := wantEvents(first)(); err != nil {
		t.Fatal(err)
	}

	gauge := func() (map[string]float64, error) {
		families, err := metrics.Registry.Gather()
		if err != nil {
			return nil, err
		}
		out := map[string]float64{}
		for _, f := range families {
			if f.GetName() != "eurekube_syncer_pod_adaptations" {
				continue
			}
			for _, m := range f.GetMetric() {
				labels := map[string]string{}
				for _, l := range m.GetLabel() {
					labels[l.GetName()] = l.GetValue()
				}
				if labels["namespace"] == ns && labels["syncer"] == s.Name {
					out[labels["reason"]] = m.GetGauge().GetValue()
				}
			}
		}
		return out, nil
	}
	if got, err := gauge(); err != nil || fmt.Sprint(got) != "map[AdaptationsUnreadable:1 DrainDisabled:1 PodMeantToFinish:1 PreStopComposed:3]" {
		t.Fatalf("eurekube_syncer_pod_adaptations = %v, %v", got, err)
	}

	// One more composed pod, and the drain-0 pod goes: one event for each
	// reason that changed, the gauge follows, the gone reason's series too.
	register(t, c, s, podShape{ns: ns, app: "quotes", name: "quotes-4", ip: "10.0.8.9", registrar: true, ready: true, annotations: injected("100", composed)}.create(t))
	var nodrain corev1.Pod
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "quotes-nodrain"}, &nodrain); err != nil {
		t.Fatal(err)
	}
	if err := k8s.Delete(ctx, &nodrain, &clientGrace0); err != nil {
		t.Fatal(err)
	}
	second := map[string]string{
		"PreStopComposed":  first["PreStopComposed"] + "|[Normal 1 4 running pod(s) of this syncer (quotes-1, quotes-2, quotes-3, quotes-4)",
		"DrainDisabled":    first["DrainDisabled"] + "|[Normal 1 no running pod of this syncer carries this adaptation any more",
		"PodMeantToFinish": first["PodMeantToFinish"],
	}
	harness.Eventually(t, patience, "one more event for each reason that changed", wantEvents(second))
	harness.Eventually(t, patience, "the gauge follows", func() error {
		if got, err := gauge(); err != nil || fmt.Sprint(got) != "map[AdaptationsUnreadable:1 PodMeantToFinish:1 PreStopComposed:4]" {
			return fmt.Errorf("eurekube_syncer_pod_adaptations = %v, %v", got, err)
		}
		return nil
	})
}

func TestOrphans_AnInstanceWhosePodIsGoneIsRemovedWithinOneResync(t *testing.T) {
	needsServers(t)
	for _, profile := range []string{harness.ProfileFast, harness.ProfileReal} {
		t.Run(profile, func(t *testing.T) {
			srv := server
			if profile == harness.ProfileReal {
				// Self-preservation on and default eviction. Only the
				// server's response caches are shortened: a list read that
				// races a registration can be cached for up to 180 s (30 s
				// read-only + a read-write entry loaded just before the
				// invalidation), which the reconciler tolerates (it acts on
				// the next resync) but a test should not wait for.
				srv = harness.EurekaT(t, harness.EurekaOptions{Profile: harness.ProfileReal, Args: []string{
					"--eureka.server.use-read-only-response-cache=false",
					"--eureka.server.response-cache-auto-expiration-in-seconds=1",
				}})
			}
			ns := newNamespace(t)
			s := newSyncer(t, ns, "payments", srv.URL())
			c := directClient(t, srv.URL())
			foreign(t, c, s)
			keep := newPod(t, ns, "payments", "payments-1", true, "10.0.1.1")
			keepInst := register(t, c, s, keep)
			doomed := newPod(t, ns, "payments", "payments-2", true, "10.0.1.2")
			orphan := register(t, c, s, doomed)
			harness.Eventually(t, patience, "both registered", func() error {
				got, err := getSyncer(s)
				if err != nil || got.Status.RegisteredInstances != 2 {
					all, lerr := c.Instances(context.Background(), s.EffectiveAppName())
					return fmt.Errorf("status %+v, %v; the server lists %v (%v)", got.Status, err, all, lerr)
				}
				return nil
			})
			// The registrar was killed with SIGKILL: the pod goes, its
			// instance stays.
			if err := k8s.Delete(context.Background(), doomed, &clientGrace0); err != nil {
				t.Fatal(err)
			}
			deleted := time.Now()
			harness.Eventually(t, patience, "orphan removed", func() error {
				_, err := c.Instance(context.Background(), orphan.App, orphan.InstanceID)
				if errors.Is(err, eureka.ErrNotFound) {
					return nil
				}
				return fmt.Errorf("still registered %s after deletion (%v)", time.Since(deleted), err)
			})
			if _, err := c.Instance(context.Background(), keepInst.App, keepInst.InstanceID); err != nil {
				t.Fatalf("the instance of a live pod was removed: %v", err)
			}
			harness.Eventually(t, patience, "orphan counted", func() error {
				got, err := getSyncer(s)
				if err != nil || got.Status.OrphansRemoved != 1 || got.Status.RegisteredInstances != 1 {
					return fmt.Errorf("status %+v, %v", got.Status, err)
				}
				return nil
			})
		})
	}
}

func TestPodsInjected_FalseNamingASelectedPodWithoutTheRegistrar(t *testing.T) {
	ns := newNamespace(t)
	s := newSyncer(t, ns, "billing")
	foreign(t, directClient(t, server.URL()), s)
	newPod(t, ns, "billing", "billing-injected", true, "10.0.2.1")
	newPod(t, ns, "billing", "billing-before-label", false, "10.0.2.2")
	harness.Eventually(t, patience, "PodsInjected false naming the pod", func() error {
		got, err := getSyncer(s)
		if err != nil {
			return err
		}
		c := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionPodsInjected)
		if c == nil || c.Status != metav1.ConditionFalse || !strings.Contains(c.Message, "billing-before-label") || strings.Contains(c.Message, "billing-injected") {
			return fmt.Errorf("condition %+v", c)
		}
		return nil
	})
}

func TestEurekaDown_ReportedWithTheURLAndRecoveredOnItsOwn(t *testing.T) {
	ns := newNamespace(t)
	s := newSyncer(t, ns, "shipping") // default URL: through the proxy
	foreign(t, directClient(t, server.URL()), s)
	condition := func(want metav1.ConditionStatus, mention string) func() error {
		return func() error {
			got, err := getSyncer(s)
			if err != nil {
				return err
			}
			c := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionEurekaReachable)
			if c == nil || c.Status != want || !strings.Contains(c.Message, mention) {
				return fmt.Errorf("condition %+v", c)
			}
			return nil
		}
	}
	harness.Eventually(t, patience, "reachable", condition(metav1.ConditionTrue, ""))
	proxy.Block()
	defer proxy.Unblock()
	harness.Eventually(t, patience, "unreachable, naming the URL", condition(metav1.ConditionFalse, proxy.Addr()))
	proxy.Unblock()
	harness.Eventually(t, patience, "reachable again", condition(metav1.ConditionTrue, ""))
}

func TestDelete_DetachesAndLeavesNothingThisClusterCreated(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	s := newSyncer(t, ns, "inventory")
	c := directClient(t, server.URL())
	foreign(t, c, s)
	running := newPod(t, ns, "inventory", "inventory-1", true, "10.0.3.1")
	inst := register(t, c, s, running)
	gone := newPod(t, ns, "inventory", "inventory-2", true, "10.0.3.2")
	orphan := register(t, c, s, gone)
	if err := k8s.Delete(ctx, gone, &clientGrace0); err != nil {
		t.Fatal(err)
	}
	waitFinalizer(t, s)
	if err := k8s.Delete(ctx, s); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, patience, "the running pod's instance out of traffic and the pod told Detached, the orphan gone", func() error {
		got, err := c.Instance(ctx, inst.App, inst.InstanceID)
		if err != nil || got.Status != eureka.StatusDown {
			return fmt.Errorf("running pod's instance: %+v, %v", got.Status, err)
		}
		if _, err := c.Instance(ctx, orphan.App, orphan.InstanceID); !errors.Is(err, eureka.ErrNotFound) {
			return fmt.Errorf("orphan still there (%v)", err)
		}
		syncer, err := getSyncer(s)
		if apierrors.IsNotFound(err) {
			return errors.New("finalizer released while an instance was left")
		}
		if c := meta.FindStatusCondition(syncer.Status.Conditions, v1alpha1.ConditionSynced); c == nil || c.Reason != "Detaching" || !strings.Contains(c.Message, "DOWN") {
			return fmt.Errorf("Synced condition %+v, want Detaching saying the instance stays DOWN", c)
		}
		var pod corev1.Pod
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(running), &pod); err != nil {
			return err
		}
		if got := pod.Annotations[v1alpha1.TrafficAnnotation]; got != v1alpha1.TrafficDetached {
			return fmt.Errorf("pod %s: %s=%q, want %s (what its registrar reads to leave)", pod.Name, v1alpha1.TrafficAnnotation, got, v1alpha1.TrafficDetached)
		}
		return nil
	})
	// Its registrar reads Detached and cancels; the pod runs on, and the
	// syncer goes: nothing this cluster created is left in Eureka.
	if err := c.Cancel(ctx, inst.App, inst.InstanceID); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, patience, "syncer gone once nothing is left, the pod still running", func() error {
		if _, err := getSyncer(s); !apierrors.IsNotFound(err) {
			return fmt.Errorf("syncer still there (%v)", err)
		}
		return nil
	})
	mine, err := c.InstancesWithMetadata(ctx, s.EffectiveAppName(), map[string]string{eureka.MetaCluster: clusterID})
	if err != nil || len(mine) != 0 {
		t.Fatalf("left behind: %v, %v", mine, err)
	}
	var events corev1.EventList
	if err := k8s.List(ctx, &events, &clientInNamespace{ns}); err != nil {
		t.Fatal(err)
	}
	var reasons []string
	for _, e := range events.Items {
		reasons = append(reasons, e.Reason)
	}
	if !strings.Contains(strings.Join(reasons, ","), "Detaching") || !strings.Contains(strings.Join(reasons, ","), "Detached") {
		t.Fatalf("events %v, want Detaching and Detached", reasons)
	}
}

func TestOrphans_APodThatNoLongerMatchesIsNotAnOrphan(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	s := newSyncer(t, ns, "search", server.URL())
	c := directClient(t, server.URL())
	foreign(t, c, s)
	relabelled := newPod(t, ns, "search", "search-1", true, "10.0.4.1")
	kept := register(t, c, s, relabelled)
	harness.Eventually(t, patience, "registered", func() error {
		got, err := getSyncer(s)
		if err != nil || got.Status.RegisteredInstances != 1 || got.Status.SelectedPods != 1 {
			return fmt.Errorf("status %+v, %v", got.Status, err)
		}
		return nil
	})
	// Taken out of the selector for debugging: its registrar still runs.
	before := relabelled.DeepCopy()
	relabelled.Labels["app"] = "search-debug"
	if err := k8s.Patch(ctx, relabelled, client.MergeFrom(before)); err != nil {
		t.Fatal(err)
	}
	// A true orphan whose removal proves that a collection ran after the
	// relabelling.
	doomed := newPod(t, ns, "search", "search-2", true, "10.0.4.2")
	orphan := register(t, c, s, doomed)
	if err := k8s.Delete(ctx, doomed, &clientGrace0); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, patience, "the true orphan removed", func() error {
		if _, err := c.Instance(ctx, orphan.App, orphan.InstanceID); !errors.Is(err, eureka.ErrNotFound) {
			return fmt.Errorf("orphan still there (%v)", err)
		}
		return nil
	})
	if _, err := c.Instance(ctx, kept.App, kept.InstanceID); err != nil {
		t.Fatalf("the instance of a running pod outside the selector was removed: %v", err)
	}
	harness.Eventually(t, patience, "0 selected, 1 registered", func() error {
		got, err := getSyncer(s)
		if err != nil || got.Status.SelectedPods != 0 || got.Status.RegisteredInstances != 1 {
			return fmt.Errorf("status %+v, %v", got.Status, err)
		}
		return nil
	})
}

func TestDelete_WhileEurekaIsDownAndAPodRunsTheRegistrarTheSyncerStaysUntilItAnswers(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	s := newSyncer(t, ns, "payments") // default URL: through the proxy
	c := directClient(t, server.URL())
	foreign(t, c, s) // checked untouched at the end
	// An instance whose pod is gone, and a pod that still runs the
	// registrar (and could register again while Eureka is away): the
	// finalizer waits for Eureka as long as it takes.
	gone := newPod(t, ns, "payments", "payments-1", true, "10.0.5.1")
	inst := register(t, c, s, gone)
	running := newPod(t, ns, "payments", "payments-2", true, "10.0.5.2")
	waitFinalizer(t, s)
	proxy.Block()
	defer proxy.Unblock()
	if err := k8s.Delete(ctx, gone, &clientGrace0); err != nil {
		t.Fatal(err)
	}
	if err := k8s.Delete(ctx, s); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, patience, "deletion blocked, saying why and how to abandon, with no time limit while the pod runs", func() error {
		got, err := getSyncer(s)
		if err != nil {
			return fmt.Errorf("syncer: %w (it must stay while its instances cannot be removed)", err)
		}
		cond := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionEurekaReachable)
		if cond == nil || cond.Status != metav1.ConditionFalse || cond.Reason != "DetachBlocked" ||
			!strings.Contains(cond.Message, v1alpha1.Finalizer) || !strings.Contains(cond.Message, proxy.Addr()) {
			return fmt.Errorf("EurekaReachable %+v, want DetachBlocked naming the finalizer and the URL", cond)
		}
		synced := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionSynced)
		if synced == nil || synced.Reason != "Detaching" {
			return fmt.Errorf("Synced %+v, want Detaching", synced)
		}
		if strings.Contains(synced.Message, "waits for Eureka until") {
			t.Fatalf("Synced %q: a deadline while a pod runs the registrar", synced.Message)
		}
		var pod corev1.Pod
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(running), &pod); err != nil {
			return err
		}
		if pod.Annotations[v1alpha1.TrafficAnnotation] != v1alpha1.TrafficDetached {
			return fmt.Errorf("pod annotations %v, want it told %s (then only Eureka holds the syncer)", pod.Annotations, v1alpha1.TrafficDetached)
		}
		return nil
	})
	if _, err := c.Instance(ctx, inst.App, inst.InstanceID); err != nil {
		t.Fatalf("the orphan while Eureka was unreachable: %v", err)
	}

	proxy.Unblock()
	harness.Eventually(t, patience, "once Eureka answers: the orphan cancelled, then the syncer gone", func() error {
		if _, err := c.Instance(ctx, inst.App, inst.InstanceID); !errors.Is(err, eureka.ErrNotFound) {
			return fmt.Errorf("orphan still there (%v)", err)
		}
		if _, err := getSyncer(s); !apierrors.IsNotFound(err) {
			return fmt.Errorf("syncer still there (%v)", err)
		}
		return nil
	})
}

func TestDelete_AnUnreachableEurekaHoldsTheFinalizerOnlySoLongOnceNoPodRunsTheRegistrar(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	port, err := harness.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	nowhere := fmt.Sprintf("http://127.0.0.1:%d/eureka", port) // a typo, a retired server: nobody listens
	s := newSyncer(t, ns, "ledger", nowhere)
	pod := newPod(t, ns, "ledger", "ledger-1", true, "10.0.6.1")
	waitFinalizer(t, s)
	if err := k8s.Delete(ctx, s); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, patience, "detach blocked while the pod runs the registrar, with no time limit", func() error {
		got, err := getSyncer(s)
		if err != nil {
			return fmt.Errorf("syncer: %w (it must stay while a pod runs its registrar)", err)
		}
		cond := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionEurekaReachable)
		if cond == nil || cond.Reason != "DetachBlocked" || !strings.Contains(cond.Message, nowhere) {
			return fmt.Errorf("EurekaReachable %+v, want DetachBlocked naming %s", cond, nowhere)
		}
		if synced := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionSynced); synced != nil && strings.Contains(synced.Message, "waits for Eureka until") {
			t.Fatalf("Synced %q: a deadline while a pod runs the registrar", synced.Message)
		}
		var p corev1.Pod
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(pod), &p); err != nil {
			return err
		}
		if p.Annotations[v1alpha1.TrafficAnnotation] != v1alpha1.TrafficDetached {
			return fmt.Errorf("pod annotations %v, want it told %s", p.Annotations, v1alpha1.TrafficDetached)
		}
		return nil
	})

	// The namespace is being deleted, say: the pod goes, nothing can
	// heartbeat any more, and the finalizer waits for Eureka no longer
	// than the bound.
	podGone := time.Now()
	if err := k8s.Delete(ctx, pod, &clientGrace0); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, patience, "Synced announcing when the finalizer goes", func() error {
		got, err := getSyncer(s)
		if apierrors.IsNotFound(err) {
			return nil // gone already: checked below
		}
		if err != nil {
			return err
		}
		if synced := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionSynced); synced == nil || !strings.Contains(synced.Message, "waits for Eureka until") {
			return fmt.Errorf("Synced %+v, want the deadline", synced)
		}
		return nil
	})
	harness.Eventually(t, detachTimeout+patience, "the syncer gone within the bound", func() error {
		if _, err := getSyncer(s); !apierrors.IsNotFound(err) {
			return fmt.Errorf("syncer still there %s after its last pod went (%v)", time.Since(podGone).Round(time.Second), err)
		}
		return nil
	})
	if waited := time.Since(podGone); waited < detachTimeout {
		t.Errorf("the finalizer went %s after the last pod, before the %s bound", waited, detachTimeout)
	}
	// The recorder writes Events in the background: wait for the warning.
	var warning corev1.Event
	harness.Eventually(t, patience, "a DetachTimedOut event", func() error {
		events, err := syncerEvents(ns, s.Name)
		if err != nil {
			return err
		}
		for _, e := range events {
			if e.Reason == "DetachTimedOut" {
				warning = e
				return nil
			}
		}
		return fmt.Errorf("no DetachTimedOut event among %d", len(events))
	})
	for _, want := range []string{nowhere, "lease", "self-preservation"} {
		if warning.Type != corev1.EventTypeWarning || !strings.Contains(warning.Message, want) {
			t.Errorf("event %s %s %q, want a Warning naming %q", warning.Type, warning.Reason, warning.Message, want)
		}
	}
	events, err := syncerEvents(ns, s.Name)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range events {
		if e.Reason == "Detached" {
			t.Errorf("event %s %q: nothing confirmed that Eureka holds nothing", e.Reason, e.Message)
		}
	}
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

func TestOrphans_TheInstanceOfAFinishedPodIsRemoved(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	s := newSyncer(t, ns, "receipts", server.URL())
	c := directClient(t, server.URL())
	foreign(t, c, s)
	running := newPod(t, ns, "receipts", "receipts-1", true, "10.0.8.1")
	kept := register(t, c, s, running)
	evicted := newPod(t, ns, "receipts", "receipts-2", true, "10.0.8.2")
	orphan := register(t, c, s, evicted)
	harness.Eventually(t, patience, "both registered", func() error {
		got, err := getSyncer(s)
		if err != nil || got.Status.RegisteredInstances != 2 {
			return fmt.Errorf("status %+v, %v", got.Status, err)
		}
		return nil
	})
	// Evicted: the kubelet stopped every container, its registrar could
	// not cancel, and the pod object stays.
	before := evicted.DeepCopy()
	evicted.Status.Phase, evicted.Status.Reason, evicted.Status.Message = corev1.PodFailed, "Evicted", "The node was low on resource: memory."
	if err := k8s.Status().Patch(ctx, evicted, client.MergeFrom(before)); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, patience, "the finished pod's instance removed and counted", func() error {
		if _, err := c.Instance(ctx, orphan.App, orphan.InstanceID); !errors.Is(err, eureka.ErrNotFound) {
			return fmt.Errorf("still registered (%v)", err)
		}
		got, err := getSyncer(s)
		if err != nil || got.Status.OrphansRemoved != 1 || got.Status.RegisteredInstances != 1 {
			return fmt.Errorf("status %+v, %v", got.Status, err)
		}
		return nil
	})
	if _, err := c.Instance(ctx, kept.App, kept.InstanceID); err != nil {
		t.Fatalf("the instance of a running pod was removed: %v", err)
	}
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(evicted), &corev1.Pod{}); err != nil {
		t.Fatalf("the evicted pod: %v (it stays; only its instance goes)", err)
	}
}
