package controller

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/eurekube/eurekube/api/v1alpha1"
)

// What the webhook adapted or could not do for a pod is recorded on the pod
// (eurekube.io/adaptations), because admission warnings never reach a human
// for pods made by controllers. The reconciler aggregates it per reason into
// status.adaptations, one Event per reason when the pods carrying it change
// (never one per pod, never one per resync), and the gauge
// eurekube_syncer_pod_adaptations.
//
// Event types: Warning for what can cost calls or keep a pod out of Eureka
// (DrainDisabled, PortNotDeclared, PreStopDropped, PodMeantToFinish,
// AdaptationsUnreadable, and UnknownAdaptations, so that nothing new passes
// quietly); Normal for adaptations that keep the promise (PreStopComposed,
// RegistrarPortMoved, HostNetwork). A reason that disappears gets one Normal
// Event saying so.
//
// Anyone who may edit a pod may write its annotation: only the reasons the
// webhook writes (AdaptationReason.Known) count as themselves; all others
// count once, under UnknownAdaptations, so that the status entries, Event
// reasons and metric series of a syncer are a fixed set whatever its pods
// say.

// normalAdaptations are the reasons reported as Normal events.
var normalAdaptations = map[v1alpha1.AdaptationReason]bool{
	v1alpha1.AdaptationPreStopComposed:    true,
	v1alpha1.AdaptationRegistrarPortMoved: true,
	v1alpha1.AdaptationHostNetwork:        true,
}

// maxAdaptationMessage bounds one example message in the status.
const maxAdaptationMessage = 1024

// aggregateAdaptations groups the adaptations of pods (sorted by name) per
// reason, sorted by reason. A pod counts once per reason; the message is
// the first pod's. An annotation that cannot be decoded is itself reported
// under AdaptationsUnreadable.
func aggregateAdaptations(pods []*corev1.Pod) []v1alpha1.PodAdaptations {
	byReason := map[v1alpha1.AdaptationReason]*v1alpha1.PodAdaptations{}
	for _, pod := range pods {
		for _, a := range podAdaptations(pod) {
			entry := byReason[a.Reason]
			if entry == nil {
				entry = &v1alpha1.PodAdaptations{Reason: a.Reason, Message: truncate(a.Message, maxAdaptationMessage)}
				byReason[a.Reason] = entry
			}
			entry.Pods++
			if len(entry.ExamplePods) < maxNamedPods {
				entry.ExamplePods = append(entry.ExamplePods, pod.Name)
			}
		}
	}
	if len(byReason) == 0 {
		return nil
	}
	out := make([]v1alpha1.PodAdaptations, 0, len(byReason))
	for _, entry := range byReason {
		out = append(out, *entry)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Reason < out[j].Reason })
	return out
}

// podAdaptations decodes a pod's annotation, one adaptation per reason.
func podAdaptations(pod *corev1.Pod) []v1alpha1.Adaptation {
	list, err := v1alpha1.DecodeAdaptations(pod.Annotations[v1alpha1.AdaptationsAnnotation])
	if err != nil {
		return []v1alpha1.Adaptation{{Reason: v1alpha1.AdaptationsUnreadable,
			Message: fmt.Sprintf("%v (the webhook writes this annotation: was it edited?)", err)}}
	}
	seen := map[v1alpha1.AdaptationReason]bool{}
	out := make([]v1alpha1.Adaptation, 0, len(list))
	var unknown []string
	for _, a := range list {
		if !a.Reason.Known() {
			unknown = append(unknown, string(a.Reason))
			continue
		}
		if !seen[a.Reason] {
			seen[a.Reason] = true
			out = append(out, a)
		}
	}
	if len(unknown) > 0 {
		out = append(out, v1alpha1.Adaptation{Reason: v1alpha1.AdaptationUnknown,
			Message: fmt.Sprintf("annotation %s: %d reason(s) the webhook does not write, such as %q, counted here alone (was the annotation edited, or written by a newer Eurekube?)",
				v1alpha1.AdaptationsAnnotation, len(unknown), truncate(unknown[0], 64))})
	}
	return out
}

// adaptationEvent is one Event to record on the syncer.
type adaptationEvent struct {
	eventType string
	reason    v1alpha1.AdaptationReason
	note      string
}

// adaptationEvents compares the adaptations of the previous status with the
// new ones: one event per reason that appeared, whose count or example pods
// changed, or that disappeared. Nothing changed, nothing reported.
func adaptationEvents(prev, next []v1alpha1.PodAdaptations) []adaptationEvent {
	var out []adaptationEvent
	for _, n := range next {
		i := slices.IndexFunc(prev, func(p v1alpha1.PodAdaptations) bool { return p.Reason == n.Reason })
		if i >= 0 && prev[i].Pods == n.Pods && slices.Equal(prev[i].ExamplePods, n.ExamplePods) {
			continue
		}
		out = append(out, adaptationEvent{eventType: adaptationEventType(n.Reason), reason: n.Reason, note: adaptationNote(n)})
	}
	for _, p := range prev {
		if !slices.ContainsFunc(next, func(n v1alpha1.PodAdaptations) bool { return n.Reason == p.Reason }) {
			out = append(out, adaptationEvent{eventType: corev1.EventTypeNormal, reason: p.Reason,
				note: "no running pod of this syncer carries this adaptation any more"})
		}
	}
	return out
}

func adaptationEventType(reason v1alpha1.AdaptationReason) string {
	if normalAdaptations[reason] {
		return corev1.EventTypeNormal
	}
	return corev1.EventTypeWarning
}

// adaptationNote: how many pods, which, and what the webhook said for the
// first (events.k8s.io notes are limited to 1 kB).
func adaptationNote(a v1alpha1.PodAdaptations) string {
	pods := strings.Join(a.ExamplePods, ", ")
	if more := int(a.Pods) - len(a.ExamplePods); more > 0 {
		pods = fmt.Sprintf("%s and %d more", pods, more)
	}
	return truncate(fmt.Sprintf("%d running pod(s) of this syncer (%s); %s: %s", a.Pods, pods, a.ExamplePods[0], a.Message), 1000)
}

// reportAdaptations records one Event per adaptation reason whose pods
// changed since the previous status.
func (r *Reconciler) reportAdaptations(s *v1alpha1.EurekaSyncer, previous, current []v1alpha1.PodAdaptations) {
	for _, e := range adaptationEvents(previous, current) {
		r.recorder.Eventf(s, nil, e.eventType, string(e.reason), "Inject", "%s", e.note)
	}
}
