package v1alpha1

import (
	"encoding/json"
	"fmt"
	"sort"
)

// AdaptationReason names one cause of an adaptation. The same value is the
// Event reason, the status entry and the metric label.
type AdaptationReason string

// Adaptation reasons.
const (
	// AdaptationPreStopComposed: a container's own preStop hook runs after
	// the drain, and the grace period covers both.
	AdaptationPreStopComposed AdaptationReason = "PreStopComposed"
	// AdaptationPreStopDropped: a container's tcpSocket preStop hook, which
	// the kubelet never runs, is replaced by the drain.
	AdaptationPreStopDropped AdaptationReason = "PreStopDropped"
	// AdaptationDrainDisabled: the drain is 0, so the pod stops serving while
	// callers may still hold its instance.
	AdaptationDrainDisabled AdaptationReason = "DrainDisabled"
	// AdaptationRegistrarPortMoved: the registrar's own port was declared by
	// a container of the pod, so it listens on another.
	AdaptationRegistrarPortMoved AdaptationReason = "RegistrarPortMoved"
	// AdaptationPortNotDeclared: no container declares the registered port.
	AdaptationPortNotDeclared AdaptationReason = "PortNotDeclared"
	// AdaptationHostNetwork: the registrar listens on a port of the node.
	AdaptationHostNetwork AdaptationReason = "HostNetwork"
	// AdaptationMeantToFinish: the pod's restartPolicy is Never or OnFailure
	// (a Job's pod); a registrar would keep it running forever, so it is
	// not injected (status "skipped").
	AdaptationMeantToFinish AdaptationReason = "PodMeantToFinish"
	// AdaptationUnsupportedOS: the pod runs on Windows (spec.os.name); the
	// registrar and the drain are Linux containers, so it is not injected
	// (status "skipped").
	AdaptationUnsupportedOS AdaptationReason = "UnsupportedOS"
	// AdaptationDrainAdded: on reinvocation, containers that a later
	// webhook added (a mesh proxy) got the drain too.
	AdaptationDrainAdded AdaptationReason = "DrainAdded"
)

// AdaptationUnknown is the one reason under which the reconciler counts a
// pod's adaptations whose reason is none of the constants above: the
// annotation is the pod's, writable by whoever may edit the pod, so a
// reason the webhook does not write never becomes a status entry, an Event
// reason or a metric series of its own.
const AdaptationUnknown AdaptationReason = "UnknownAdaptations"

// Known says whether r is one of the reasons the webhook writes (the
// constants above).
func (r AdaptationReason) Known() bool {
	switch r {
	case AdaptationPreStopComposed, AdaptationPreStopDropped, AdaptationDrainDisabled, AdaptationRegistrarPortMoved,
		AdaptationPortNotDeclared, AdaptationHostNetwork, AdaptationMeantToFinish, AdaptationUnsupportedOS, AdaptationDrainAdded:
		return true
	}
	return false
}

// Adaptation is one thing the webhook adapted or could not do for a pod.
type Adaptation struct {
	// Reason is the cause.
	Reason AdaptationReason `json:"reason"`
	// Message says what was done and what it means, for a human.
	Message string `json:"message"`
}

// EncodeAdaptations renders the annotation's value, ordered by reason so
// that the same adaptations always give the same text.
func EncodeAdaptations(list []Adaptation) string {
	sorted := append([]Adaptation(nil), list...)
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].Reason < sorted[j].Reason })
	raw, err := json.Marshal(sorted)
	if err != nil { // strings only: cannot happen
		panic(fmt.Sprintf("encode adaptations: %v", err))
	}
	return string(raw)
}

// DecodeAdaptations parses the annotation's value; an empty value is no
// adaptation.
func DecodeAdaptations(value string) ([]Adaptation, error) {
	if value == "" {
		return nil, nil
	}
	var list []Adaptation
	if err := json.Unmarshal([]byte(value), &list); err != nil {
		return nil, fmt.Errorf("annotation %s: %w", AdaptationsAnnotation, err)
	}
	return list, nil
}
