package controller_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/eurekube/eurekube/api/v1alpha1"
	"github.com/eurekube/eurekube/tests/harness"
)

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
	harness.Eventually(t, patience, "the manager's cache holds the pods", podsCached(ctx, ns, len(shapes)+1))
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
		return gaugeSeries("eurekube_syncer_pod_adaptations", func(l map[string]string) (string, bool) {
			return l["reason"], l["namespace"] == ns && l["syncer"] == s.Name
		})
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

// A tenant who may edit their pods writes a thousand reasons of their own
// into eurekube.io/adaptations: the syncer's status, its Events and its
// gauge count them once, under UnknownAdaptations, beside the known
// reasons; nothing grows with what the tenant writes.
func TestAdaptations_AThousandReasonsOfATenantCountOnceAsUnknown(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	list := []v1alpha1.Adaptation{{Reason: v1alpha1.AdaptationPreStopComposed, Message: "container app: its own preStop (exec) runs, then the 100 s drain"}}
	for i := range 1000 {
		list = append(list, v1alpha1.Adaptation{Reason: v1alpha1.AdaptationReason(fmt.Sprintf("Tenant%04d", i)), Message: "written by hand"})
	}
	annotations := map[string]string{v1alpha1.StatusAnnotation: v1alpha1.StatusInjected, v1alpha1.SyncerAnnotation: "notes",
		v1alpha1.DrainAnnotation: "100", v1alpha1.AdaptationsAnnotation: v1alpha1.EncodeAdaptations(list)}
	for i := range 2 {
		podShape{ns: ns, app: "notes", name: fmt.Sprintf("notes-%d", i), ip: fmt.Sprintf("10.0.9.%d", i+1), registrar: true, ready: true, annotations: annotations}.create(t)
	}
	// Both pods in the manager's cache before the syncer: each reason is
	// reported once, for both.
	harness.Eventually(t, patience, "the manager's cache holds the pods", podsCached(ctx, ns, 2))
	s := newSyncer(t, ns, "notes")

	harness.Eventually(t, patience, "the known reason, and one entry for the others", func() error {
		got, err := getSyncer(s)
		if err != nil {
			return err
		}
		var entries []string
		for _, a := range got.Status.Adaptations {
			entries = append(entries, fmt.Sprintf("%s=%d", a.Reason, a.Pods))
		}
		if want := "PreStopComposed=2 UnknownAdaptations=2"; strings.Join(entries, " ") != want {
			return fmt.Errorf("adaptations %v, want %s", entries, want)
		}
		return nil
	})
	harness.Eventually(t, patience, "one gauge series per reason", func() error {
		got, err := gaugeSeries("eurekube_syncer_pod_adaptations", func(l map[string]string) (string, bool) {
			return l["reason"], l["namespace"] == ns && l["syncer"] == s.Name
		})
		if err != nil || fmt.Sprint(got) != "map[PreStopComposed:2 UnknownAdaptations:2]" {
			return fmt.Errorf("eurekube_syncer_pod_adaptations = %v, %v", got, err)
		}
		return nil
	})
	harness.Eventually(t, patience, "one Event per reason, the unknown one a Warning saying how many", func() error {
		var events corev1.EventList
		if err := k8s.List(ctx, &events, &clientInNamespace{ns}); err != nil {
			return err
		}
		reasons := map[string]string{}
		for _, e := range events.Items {
			if e.InvolvedObject.Name != s.Name {
				continue
			}
			if strings.HasPrefix(e.Reason, "Tenant") {
				return fmt.Errorf("an Event with reason %s", e.Reason)
			}
			if e.Reason == "PreStopComposed" || e.Reason == "UnknownAdaptations" {
				if _, dup := reasons[e.Reason]; dup {
					return fmt.Errorf("two %s events", e.Reason)
				}
				reasons[e.Reason] = e.Type + " " + e.Message
			}
		}
		if u := reasons["UnknownAdaptations"]; !strings.HasPrefix(u, "Warning") || !strings.Contains(u, "1000 reason(s) the webhook does not write") {
			return fmt.Errorf("UnknownAdaptations event %q", u)
		}
		return nil
	})
}

// podsCached waits for the manager's cache to hold n pods of namespace ns,
// each running.
func podsCached(ctx context.Context, ns string, n int) func() error {
	return func() error {
		var list corev1.PodList
		if err := mgr.GetClient().List(ctx, &list, &clientInNamespace{ns}); err != nil || len(list.Items) != n {
			return fmt.Errorf("%d pods cached, %v", len(list.Items), err)
		}
		for _, p := range list.Items {
			if p.Status.Phase != corev1.PodRunning {
				return fmt.Errorf("pod %s %s in the cache", p.Name, p.Status.Phase)
			}
		}
		return nil
	}
}
