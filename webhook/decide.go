package webhook

import (
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/eurekube/eurekube/api/v1alpha1"
)

// Namespace is what Decide needs to know about the pod's namespace.
type Namespace struct {
	// Labels of the namespace.
	Labels map[string]string
	// Excluded is true for namespaces that are never mutated.
	Excluded bool
}

// OptedIn is true when the namespace is labelled for injection.
func (ns Namespace) OptedIn() bool {
	return ns.Labels[v1alpha1.NamespaceInjectionLabel] == "enabled"
}

// Decision is the outcome of Decide.
type Decision struct {
	// Inject is true when the pod gets the registrar.
	Inject bool
	// Reason says why.
	Reason Reason
	// Syncer is the syncer that registers the pod (Inject), that selects a
	// pod it skips (Skipped), or that injected it (ReasonAlreadyInjected,
	// nil when that syncer is gone). It points into the
	// syncers given to Decide (the cache's own objects in the handler), so
	// it is only read.
	Syncer *v1alpha1.EurekaSyncer
	// Overrides are the pod's parsed annotations (Inject only).
	Overrides Overrides
	// Skipped says why a pod that Syncer selects stays without the
	// registrar (ReasonMeantToFinish, ReasonUnsupportedOS); Skip records it
	// on the pod.
	Skipped *v1alpha1.Adaptation
	// Err is the annotation error when Reason is ReasonInvalidAnnotation.
	Err error
	// Warnings go into the admission response.
	Warnings []string
}

// Decide says whether pod is injected, given its namespace and the syncers
// of that namespace. It has no side effects.
//
// Order matters: namespaces are checked before annotations, so that pods of
// excluded namespaces are never denied; an already injected pod is left
// alone before anything else is looked at, so reinvocation is safe.
func Decide(pod *corev1.Pod, ns Namespace, syncers []v1alpha1.EurekaSyncer) Decision {
	switch {
	case ns.Excluded:
		return Decision{Reason: ReasonNamespaceExcluded}
	case !ns.OptedIn():
		return Decision{Reason: ReasonNamespaceNotEnabled}
	case pod.Labels[v1alpha1.InjectLabel] == "false":
		return Decision{Reason: ReasonOptedOut}
	case v1alpha1.MarkedInjected(pod) || v1alpha1.RunsRegistrar(pod):
		// Reinvoked after a later webhook, or Eurekube's own output sent
		// back: Inject converges it (containers added since get the drain,
		// the traffic annotation follows the syncer that injected it).
		return Decision{Reason: ReasonAlreadyInjected, Syncer: byName(syncers, pod.Annotations[v1alpha1.SyncerAnnotation])}
	}

	overrides, err := ParseAnnotations(pod.Annotations)
	if err != nil {
		return Decision{Reason: ReasonInvalidAnnotation, Err: err}
	}
	if overrides.Inject != nil && !*overrides.Inject {
		return Decision{Reason: ReasonOptedOut}
	}

	var warnings []string
	var live, deleting []*v1alpha1.EurekaSyncer
	for i := range syncers {
		s := &syncers[i]
		if s.EffectiveMode() != v1alpha1.ModePod {
			// The manager registers a Service-mode syncer's Service; its
			// pods get no registrar, whatever its selector holds (the CRD
			// allows none; PodSelector selects nothing for an empty one).
			continue
		}
		selects, err := selects(s, pod.Labels)
		if err != nil {
			warnings = append(warnings, fmt.Sprintf("EurekaSyncer %s ignored: invalid selector: %v", s.Name, err))
			continue
		}
		if !selects {
			continue
		}
		if s.DeletionTimestamp != nil {
			deleting = append(deleting, s)
			continue
		}
		live = append(live, s)
	}
	if len(live) == 0 {
		if len(deleting) > 0 {
			return Decision{Reason: ReasonSyncerDeleting, Warnings: append(warnings,
				fmt.Sprintf("not registered in Eureka: EurekaSyncer %s is being deleted", names(deleting)))}
		}
		return Decision{Reason: ReasonNoMatchingSyncer, Warnings: warnings}
	}

	sort.Slice(live, func(i, j int) bool { return older(live[i], live[j]) })
	winner := live[0]
	if len(live) > 1 {
		warnings = append(warnings, fmt.Sprintf("several EurekaSyncers select this pod: %s (the oldest) registers it; ignored: %s",
			winner.Name, names(live[1:])))
	}
	if p := pod.Spec.RestartPolicy; p == corev1.RestartPolicyNever || p == corev1.RestartPolicyOnFailure {
		why := meantToFinish(p)
		return Decision{Reason: ReasonMeantToFinish, Syncer: winner, Skipped: &why, Warnings: append(warnings, why.Message)}
	}
	if os := pod.Spec.OS; os != nil && os.Name == corev1.Windows {
		why := v1alpha1.Adaptation{Reason: v1alpha1.AdaptationUnsupportedOS,
			Message: "spec.os.name windows: the registrar and the drain are Linux containers, so the pod is not registered in Eureka; narrow the syncer's selector to leave it out"}
		return Decision{Reason: ReasonUnsupportedOS, Syncer: winner, Skipped: &why, Warnings: append(warnings, why.Message)}
	}
	return Decision{Inject: true, Reason: ReasonInjected, Syncer: winner, Overrides: overrides, Warnings: warnings}
}

// meantToFinish says why a pod of a Job (or any pod meant to finish) is not
// registered.
func meantToFinish(p corev1.RestartPolicy) v1alpha1.Adaptation {
	return v1alpha1.Adaptation{Reason: v1alpha1.AdaptationMeantToFinish,
		Message: fmt.Sprintf("restartPolicy %s: the pod is meant to finish (a Job's pod?), and the registrar would keep it running forever, so it is not registered in Eureka; narrow the syncer's selector to leave it out", p)}
}

// byName is the live syncer of that name among syncers, or nil.
func byName(syncers []v1alpha1.EurekaSyncer, name string) *v1alpha1.EurekaSyncer {
	for i := range syncers {
		if s := &syncers[i]; name != "" && s.Name == name && s.DeletionTimestamp == nil {
			return s
		}
	}
	return nil
}

// older orders syncers by creation time, then name, so the winner among
// several is stable across replicas and restarts.
func older(a, b *v1alpha1.EurekaSyncer) bool {
	if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
		return a.CreationTimestamp.Before(&b.CreationTimestamp)
	}
	return a.Name < b.Name
}

func names(syncers []*v1alpha1.EurekaSyncer) string {
	n := make([]string, len(syncers))
	for i, s := range syncers {
		n[i] = s.Name
	}
	sort.Strings(n)
	return strings.Join(n, ", ")
}
