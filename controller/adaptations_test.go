package controller

import (
	"strings"
	"testing"

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
