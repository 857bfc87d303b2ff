package webhook

import (
	"fmt"
	"maps"

	"gomodules.xyz/jsonpatch/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"

	"github.com/eurekube/eurekube/api/v1alpha1"
)

// Result is everything Inject decided and made for one pod.
type Result struct {
	// Decision says whether and why; Reason is ReasonInvalidConfig when the
	// syncer and the pod do not fit together.
	Decision
	// Pod is the pod to admit: the input pod itself when nothing changes,
	// else a changed copy (injected, or annotated as skipped).
	Pod *corev1.Pod
	// Patch turns the input pod into Pod: whole-field operations on the
	// fields that changed (see patchOps). Empty when nothing changes.
	Patch []jsonpatch.Operation
	// Adaptations are what was adapted or could not be done (injected
	// pods); their messages are among Warnings.
	Adaptations []v1alpha1.Adaptation
	// Denied is the message of a denial, naming what to fix; empty when
	// the pod is admitted.
	Denied string
}

// Inject is the webhook's whole decision and mutation for one pod, without
// I/O: Decide, then Mutate or Skip, then the JSON patch from pod to the
// result. pod is not modified.
func Inject(pod *corev1.Pod, ns Namespace, syncers []v1alpha1.EurekaSyncer, defaults Defaults) Result {
	r := Result{Decision: Decide(pod, ns, syncers), Pod: pod}
	switch {
	case r.Reason == ReasonInvalidAnnotation:
		r.Denied = r.Err.Error()
		return r
	case r.Reason == ReasonMeantToFinish:
		r.Pod = Skip(pod, r.Syncer.Name, *r.Skipped)
	case r.Inject:
		mutated, adaptations, err := Mutate(pod, Config{Syncer: r.Syncer, Overrides: r.Overrides, Defaults: defaults})
		if err != nil {
			r.Inject, r.Reason, r.Err = false, ReasonInvalidConfig, err
			r.Denied = fmt.Sprintf("EurekaSyncer %s cannot register this pod: %v", r.Syncer.Name, err)
			return r
		}
		r.Pod, r.Adaptations = mutated, adaptations
		for _, a := range adaptations {
			r.Warnings = append(r.Warnings, a.Message)
		}
	default:
		return r
	}
	r.Patch = patchOps(pod, r.Pod)
	return r
}

// patchOps is the JSON patch from before to after, built from the fields
// Mutate and Skip may change rather than by diffing the whole pod: each
// changed field is set whole with "add", which replaces a member that
// exists (RFC 6902, 4.1), so the patch holds whatever the request's pod
// held there. TestInject_PatchTurnsTheRequestIntoThePod checks it against
// every golden pod.
func patchOps(before, after *corev1.Pod) []jsonpatch.Operation {
	ops := make([]jsonpatch.Operation, 0, 5)
	set := func(path string, value any) {
		ops = append(ops, jsonpatch.Operation{Operation: "add", Path: path, Value: value})
	}
	if !maps.Equal(before.Annotations, after.Annotations) {
		set("/metadata/annotations", after.Annotations)
	}
	if !sameContainers(before.Spec.InitContainers, after.Spec.InitContainers) {
		set("/spec/initContainers", after.Spec.InitContainers)
	}
	if !sameContainers(before.Spec.Containers, after.Spec.Containers) {
		set("/spec/containers", after.Spec.Containers)
	}
	if len(before.Spec.Volumes) != len(after.Spec.Volumes) || !equality.Semantic.DeepEqual(before.Spec.Volumes, after.Spec.Volumes) {
		set("/spec/volumes", after.Spec.Volumes)
	}
	if g := after.Spec.TerminationGracePeriodSeconds; g != nil && (before.Spec.TerminationGracePeriodSeconds == nil || *g != *before.Spec.TerminationGracePeriodSeconds) {
		set("/spec/terminationGracePeriodSeconds", *g)
	}
	return ops
}

// sameContainers compares lengths first: an injection appends a container,
// so the deep comparison runs only for pods it did not inject.
func sameContainers(a, b []corev1.Container) bool {
	return len(a) == len(b) && equality.Semantic.DeepEqual(a, b)
}
