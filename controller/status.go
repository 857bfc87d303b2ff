package controller

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/eurekube/eurekube/api/v1alpha1"
	"github.com/eurekube/eurekube/eureka"
)

// Reasons of the conditions and events about Eureka.
const (
	reasonEurekaUnreachable = "EurekaUnreachable"
	reasonEurekaConfig      = "EurekaConfigInvalid"
	reasonDetachBlocked     = "DetachBlocked"
)

// observed is what one reconcile measured and did.
type observed struct {
	pods podCounts
	// registrarPods: for a deleted syncer, the pods still running its
	// registrar.
	registrarPods []string
	// instances: this cluster's instances of the syncer, orphans removed.
	instances      []eureka.Instance
	orphansRemoved int
	// eurekaErr: Eureka could not be read or written; eurekaReason says
	// which step failed.
	eurekaErr    error
	eurekaReason string
}

// nextStatus computes the status from what was observed, and whether it
// differs from the current one. Counts from Eureka keep their last measured
// value while Eureka does not answer.
//
// lastSyncTime (the last successful read of Eureka) does not by itself
// cause a write each resync: it is refreshed with any other change, or
// when it is older than lastSyncRefresh. A thousand idle syncers cost no
// API writes.
func nextStatus(s *v1alpha1.EurekaSyncer, obs *observed, now metav1.Time) (v1alpha1.EurekaSyncerStatus, bool) {
	next := *s.Status.DeepCopy()
	next.ObservedGeneration = s.Generation
	next.AppName = s.EffectiveAppName()
	next.SelectedPods, next.InjectedPods, next.ReadyPods = obs.pods.selected, obs.pods.injected, obs.pods.ready
	next.OrphansRemoved += int64(obs.orphansRemoved)
	if obs.eurekaErr == nil {
		var up int32
		for _, inst := range obs.instances {
			if inst.Status == eureka.StatusUp {
				up++
			}
		}
		next.RegisteredInstances, next.UpInstances = int32(len(obs.instances)), up
	}
	for _, c := range conditions(s, obs, next.UpInstances) {
		c.ObservedGeneration = s.Generation
		meta.SetStatusCondition(&next.Conditions, c)
	}
	changed := !equality.Semantic.DeepEqual(s.Status, next)
	stale := next.LastSyncTime == nil || now.Sub(next.LastSyncTime.Time) >= lastSyncRefresh
	if obs.eurekaErr == nil && (changed || stale) {
		next.LastSyncTime = &now
		changed = true
	}
	return next, changed
}

// conditions returns Ready, EurekaReachable and PodsInjected.
func conditions(s *v1alpha1.EurekaSyncer, obs *observed, up int32) []metav1.Condition {
	injected := metav1.Condition{Type: v1alpha1.ConditionPodsInjected, Status: metav1.ConditionTrue, Reason: "AllInjected",
		Message: fmt.Sprintf("%d of %d selected pod(s) run the registrar", obs.pods.injected, obs.pods.selected)}
	if n := len(obs.pods.notInjected); n > 0 {
		injected.Status, injected.Reason = metav1.ConditionFalse, "PodsWithoutRegistrar"
		injected.Message = fmt.Sprintf("%d selected pod(s) run without the registrar (created before injection was enabled, or opted out? restart them to inject): %s",
			n, names(obs.pods.notInjected))
	}

	reachable := metav1.Condition{Type: v1alpha1.ConditionEurekaReachable, Status: metav1.ConditionTrue, Reason: "Reachable", Message: "Eureka answered"}
	if obs.eurekaErr != nil {
		reachable.Status, reachable.Reason, reachable.Message = metav1.ConditionFalse, obs.eurekaReason, truncate(obs.eurekaErr.Error(), 1024)
	}

	ready := metav1.Condition{Type: v1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: "Registered",
		Message: fmt.Sprintf("%d ready pod(s), %d instance(s) UP", obs.pods.ready, up)}
	switch {
	case !s.DeletionTimestamp.IsZero():
		ready.Status, ready.Reason, ready.Message = metav1.ConditionFalse, "Detaching", detachingMessage(obs)
	case obs.eurekaErr != nil:
		ready.Status, ready.Reason, ready.Message = metav1.ConditionFalse, obs.eurekaReason, "Eureka could not be read: see the EurekaReachable condition"
	case len(obs.pods.notInjected) > 0:
		ready.Status, ready.Reason, ready.Message = metav1.ConditionFalse, injected.Reason, injected.Message
	case up < obs.pods.ready:
		ready.Status, ready.Reason = metav1.ConditionFalse, "NotAllRegistered"
		ready.Message = fmt.Sprintf("%d ready pod(s) but only %d instance(s) UP in Eureka", obs.pods.ready, up)
	}
	return []metav1.Condition{ready, reachable, injected}
}

func detachingMessage(obs *observed) string {
	var b strings.Builder
	b.WriteString("the syncer is being deleted; new pods are not injected")
	if obs.eurekaErr != nil {
		b.WriteString("; waiting for Eureka to answer to remove its instances")
	}
	if n := len(obs.instances); n > 0 {
		fmt.Fprintf(&b, "; %d instance(s) stay in Eureka, DOWN, until their pods stop", n)
	}
	if n := len(obs.registrarPods); n > 0 {
		fmt.Fprintf(&b, "; %d pod(s) still run its registrar — restart or delete them to remove the sidecars: %s", n, names(obs.registrarPods))
	}
	return b.String()
}

// names lists up to maxNamedPods names, then how many more.
func names(all []string) string {
	if len(all) <= maxNamedPods {
		return strings.Join(all, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(all[:maxNamedPods], ", "), len(all)-maxNamedPods)
}

// truncate keeps condition messages within reason (the API allows 32 KiB).
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
