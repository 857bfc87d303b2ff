package controller

import (
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/eurekube/eurekube/api/v1alpha1"
)

func TestAdaptationEvents_OnePerReasonWhoseSetChanged(t *testing.T) {
	composed := func(pods int32, examples ...string) v1alpha1.PodAdaptations {
		return v1alpha1.PodAdaptations{Reason: v1alpha1.AdaptationPreStopComposed, Pods: pods, Message: "composed", ExamplePods: examples}
	}
	disabled := v1alpha1.PodAdaptations{Reason: v1alpha1.AdaptationDrainDisabled, Pods: 1, Message: "drain 0", ExamplePods: []string{"orders-1"}}
	cases := []struct {
		name       string
		prev, next []v1alpha1.PodAdaptations
		want       []string // type/reason
	}{
		{"nothing before, nothing now", nil, nil, nil},
		{"new reasons are reported once each, with their type", nil, []v1alpha1.PodAdaptations{disabled, composed(3, "a", "b", "c")},
			[]string{"Warning/DrainDisabled", "Normal/PreStopComposed"}},
		{"the same set is not reported again", []v1alpha1.PodAdaptations{composed(3, "a", "b", "c")}, []v1alpha1.PodAdaptations{composed(3, "a", "b", "c")}, nil},
		{"a changed count is reported", []v1alpha1.PodAdaptations{composed(3, "a", "b", "c")}, []v1alpha1.PodAdaptations{composed(2, "a", "b")},
			[]string{"Normal/PreStopComposed"}},
		{"a replaced pod is reported", []v1alpha1.PodAdaptations{composed(2, "a", "b")}, []v1alpha1.PodAdaptations{composed(2, "a", "c")},
			[]string{"Normal/PreStopComposed"}},
		{"a reason gone is reported as Normal", []v1alpha1.PodAdaptations{disabled, composed(1, "a")}, []v1alpha1.PodAdaptations{composed(1, "a")},
			[]string{"Normal/DrainDisabled"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, e := range adaptationEvents(tc.prev, tc.next) {
				got = append(got, e.eventType+"/"+string(e.reason))
				if e.note == "" {
					t.Errorf("event %s has no note", e.reason)
				}
			}
			if strings.Join(got, " ") != strings.Join(tc.want, " ") {
				t.Errorf("events %v, want %v", got, tc.want)
			}
		})
	}
}

func TestAdaptationNote_SaysHowManyWhichAndWhat(t *testing.T) {
	got := adaptationNote(v1alpha1.PodAdaptations{Reason: v1alpha1.AdaptationPreStopComposed, Pods: 7, Message: "its exec preStop runs, then the drain",
		ExamplePods: []string{"a", "b", "c", "d", "e"}})
	want := "7 running pod(s) of this syncer (a, b, c, d, e and 2 more); a: its exec preStop runs, then the drain"
	if got != want {
		t.Errorf("note %q, want %q", got, want)
	}
}

func TestEventTypes_WarningForWhatCanCostCalls(t *testing.T) {
	for reason, want := range map[v1alpha1.AdaptationReason]string{
		v1alpha1.AdaptationDrainDisabled: "Warning", v1alpha1.AdaptationPortNotDeclared: "Warning", v1alpha1.AdaptationPreStopDropped: "Warning",
		v1alpha1.AdaptationMeantToFinish: "Warning", v1alpha1.AdaptationsUnreadable: "Warning", "SomethingNew": "Warning",
		v1alpha1.AdaptationPreStopComposed: "Normal", v1alpha1.AdaptationRegistrarPortMoved: "Normal", v1alpha1.AdaptationHostNetwork: "Normal",
	} {
		if got := adaptationEventType(reason); got != want {
			t.Errorf("%s: %s, want %s", reason, got, want)
		}
	}
}

// A tenant who writes a thousand reasons of their own on their pods gets
// one entry for all of them, beside the known ones: the status, the Events
// and the gauge of a syncer have a fixed set of reasons.
func TestAggregateAdaptations_UnknownReasonsCountOnceUnderOneReason(t *testing.T) {
	var pods []*corev1.Pod
	for p := range 3 {
		list := []v1alpha1.Adaptation{{Reason: v1alpha1.AdaptationPreStopComposed, Message: "composed"}}
		for i := range 1000 {
			list = append(list, v1alpha1.Adaptation{Reason: v1alpha1.AdaptationReason(fmt.Sprintf("Attack%dOn%d", i, p)), Message: strings.Repeat("x", 2000)})
		}
		pods = append(pods, &corev1.Pod{})
		pods[p].Name = fmt.Sprintf("orders-%d", p)
		pods[p].Annotations = map[string]string{v1alpha1.AdaptationsAnnotation: v1alpha1.EncodeAdaptations(list)}
	}
	got := aggregateAdaptations(pods)
	var reasons []string
	for _, a := range got {
		reasons = append(reasons, fmt.Sprintf("%s=%d", a.Reason, a.Pods))
		if len(a.Message) > maxAdaptationMessage {
			t.Errorf("%s: a message of %d bytes", a.Reason, len(a.Message))
		}
	}
	if want := "PreStopComposed=3 UnknownAdaptations=3"; strings.Join(reasons, " ") != want {
		t.Fatalf("adaptations %s, want %s", reasons, want)
	}
	if msg := got[1].Message; !strings.Contains(msg, "1001 reason(s)") && !strings.Contains(msg, "1000 reason(s)") {
		t.Errorf("UnknownAdaptations says %q, want how many", msg)
	}
	if len(adaptationEvents(nil, got)) != 2 {
		t.Errorf("events %v, want one per reason", adaptationEvents(nil, got))
	}
}

// Every reason the webhook writes is known; nothing else is.
func TestAdaptationReason_KnownAreTheWebhooksReasons(t *testing.T) {
	for _, r := range []v1alpha1.AdaptationReason{v1alpha1.AdaptationPreStopComposed, v1alpha1.AdaptationPreStopDropped, v1alpha1.AdaptationDrainDisabled,
		v1alpha1.AdaptationRegistrarPortMoved, v1alpha1.AdaptationPortNotDeclared, v1alpha1.AdaptationHostNetwork, v1alpha1.AdaptationMeantToFinish,
		v1alpha1.AdaptationUnsupportedOS, v1alpha1.AdaptationDrainAdded} {
		if !r.Known() {
			t.Errorf("%s is not known", r)
		}
	}
	for _, r := range []v1alpha1.AdaptationReason{"", "SomethingNew", "prestopcomposed", v1alpha1.AdaptationUnknown, v1alpha1.AdaptationsUnreadable} {
		if r.Known() {
			t.Errorf("%q is known", r)
		}
	}
}
