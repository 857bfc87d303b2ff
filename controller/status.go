package controller

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/eurekube/eurekube/api/v1alpha1"
	"github.com/eurekube/eurekube/eureka"
)

// The status: computed from what one reconcile observed (nextStatus) and
// written when it changed (writeStatus). Each condition has one owner:
// this file computes Synced, EurekaReachable, PodsInjected, Exclusive and
// Drained; the concerns compute theirs: RegistrarCurrent and
// RegistrarHealthy (registrars.go), TrafficApplied (traffic.go), LeaseSafe
// (leasesafe.go), Permitted (ownership.go; the allowlists add to it),
// ServiceReachable and Synced in Service mode
// (service_status.go), Synced's message while the syncer is deleted
// (detach.go). Synced is never True while Permitted is False
// (notSyncedWhileRefused).

// Reasons of the conditions and events about Eureka.
const (
	reasonEurekaUnreachable = "EurekaUnreachable"
	reasonEurekaConfig      = "EurekaConfigInvalid"
)

// Reasons of the Synced, Exclusive and Drained conditions.
const (
	reasonInSync           = "InSync"
	reasonNoPodSelected    = "NoPodSelected"
	reasonNoInstanceUp     = "NoInstanceUp"
	reasonNotAllRegistered = "NotAllRegistered"
	reasonMoreUpThanReady  = "MoreUpThanReady"
	reasonOverlapping      = "OverlappingSyncers"
	reasonNoOverlap        = "NoOverlap"
	reasonWithoutDrain     = "PodsWithoutDrain"
	reasonAllDrained       = "AllDrained"
)

// nextStatus computes the status from what was observed, and whether it
// differs from the current one. Counts from Eureka keep their last measured
// value while Eureka does not answer.
//
// lastSyncTime (the last successful read of Eureka) does not by itself
// cause a write each resync: it is refreshed with any other change, or
// once per lastSyncRefresh at the syncer's own phase (lastsync.go). A
// thousand idle syncers cost no API writes, and a new leader's first pass
// over right statuses none.
func nextStatus(s *v1alpha1.EurekaSyncer, obs *observed, now metav1.Time) (v1alpha1.EurekaSyncerStatus, bool) {
	next := *s.Status.DeepCopy()
	next.ObservedGeneration = s.Generation
	next.AppName = s.EffectiveAppName()
	next.Apps = nil
	if len(obs.apps) > 1 {
		next.Apps = obs.apps
	}
	next.SelectedPods, next.InjectedPods, next.ReadyPods = obs.pods.selected, obs.pods.injected, obs.pods.ready
	next.SkippedPods, next.PodsOwnedByOtherSyncers = obs.pods.skipped, obs.pods.ownedByOthersCount()
	next.PodsWithoutDrain = int32(len(obs.pods.withoutDrain))
	next.OutdatedRegistrarPods = int32(len(obs.pods.outdated))
	next.Adaptations = obs.pods.adaptations
	next.OrphansRemoved += int64(obs.orphansRemoved)
	if obs.eurekaErr == nil {
		newAppView(obs.instances, obs.elsewhere, obs.otherSyncers).apply(&next)
	}
	next.Ready = fmt.Sprintf("%d/%d", next.UpInstances, next.SelectedPods)
	// Service mode: addresses, READY and ServiceReachable of its own
	// (service_status.go); cleared in Pod mode.
	applyServiceStatus(s, obs, &next)
	// Instances held OUT_OF_SERVICE on purpose (Standby, a lost node)
	// are where they should be: Synced counts them with the UP ones.
	inService := next.UpInstances
	if s.EffectiveTraffic() == v1alpha1.TrafficStandby || len(obs.traffic.lost) > 0 {
		inService += next.OutOfServiceInstances
	}
	for _, c := range withPermitted(obs, conditions(s, obs, inService)) {
		c.ObservedGeneration = s.Generation
		meta.SetStatusCondition(&next.Conditions, c)
	}
	notSyncedWhileRefused(&next.Conditions)
	changed := !equality.Semantic.DeepEqual(s.Status, next)
	stale := lastSyncDue(next.LastSyncTime, now.Time, obs.leading, s.UID)
	if obs.eurekaErr == nil && (changed || stale) {
		next.LastSyncTime = &now
		changed = true
	}
	return next, changed
}

// conditions returns Synced, EurekaReachable, PodsInjected, Exclusive,
// Drained, RegistrarCurrent, RegistrarHealthy, TrafficApplied, LeaseSafe
// and, for a live syncer, Permitted (ownership.go).
// up counts the instances UP, and those held OUT_OF_SERVICE on purpose.
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
		reachable.Status, reachable.Reason, reachable.Message = metav1.ConditionFalse, obs.eurekaReason, truncate(eureka.Redact(obs.eurekaErr.Error()), 1024)
	}

	out := []metav1.Condition{synced(s, obs, up, injected), reachable, injected, exclusive(s, obs), drained(obs), registrarCurrent(s, obs),
		registrarHealthy(s, obs), trafficCondition(s, obs), leaseSafe(s)}
	if c := ownershipCondition(obs); c != nil {
		out = append(out, *c)
	}
	return out
}

// synced says whether Eureka agrees with Kubernetes: every selected pod
// injected, as many instances UP as pods ready. It is never True while pods
// are selected and no instance is UP. With nothing selected and nothing UP
// both sides agree (like a Deployment scaled to 0). Instances missing while
// registrars fail are explained by the failures (reason RegistrarFailing,
// the message of RegistrarHealthy).
func synced(s *v1alpha1.EurekaSyncer, obs *observed, up int32, injected metav1.Condition) metav1.Condition {
	pods := &obs.pods
	c := metav1.Condition{Type: v1alpha1.ConditionSynced, Status: metav1.ConditionFalse}
	switch {
	case !s.DeletionTimestamp.IsZero():
		c.Reason, c.Message = reasonDetaching, detachingMessage(obs)
	case obs.notAllowed != nil:
		c.Reason, c.Message = obs.notAllowed.Reason, "nothing is synced: see the Permitted condition"
	case errors.Is(obs.eurekaErr, errNotContacted): // refused by app ownership: nothing read
		c.Reason, c.Message = obs.eurekaReason, "nothing is synced, and no Eureka server is contacted: see the Permitted condition"
	case obs.eurekaErr != nil:
		c.Reason, c.Message = obs.eurekaReason, "Eureka could not be read: see the EurekaReachable condition"
	case obs.service.active:
		c = serviceSynced(s, obs) // no pods: the Service's endpoints (service_status.go)
	case pods.selected > 0 && up == 0:
		c.Reason = reasonNoInstanceUp
		c.Message = fmt.Sprintf("%d pod(s) selected, %d ready, %d run the registrar, but no instance is UP in Eureka", pods.selected, pods.ready, pods.injected)
	case len(pods.notInjected) > 0:
		c.Reason, c.Message = injected.Reason, injected.Message
	case up < pods.ready:
		c.Reason = reasonNotAllRegistered
		c.Message = fmt.Sprintf("%d ready pod(s) but only %d instance(s) UP in Eureka", pods.ready, up)
	case up > pods.ready:
		c.Reason = reasonMoreUpThanReady
		c.Message = fmt.Sprintf("%d instance(s) UP in Eureka but only %d selected pod(s) ready: callers are sent to pods Kubernetes does not count as ready (failing readiness, or relabelled out of the selector with the registrar still running)",
			up, pods.ready)
	case pods.selected == 0:
		c.Status, c.Reason = metav1.ConditionTrue, reasonNoPodSelected
		c.Message = "no pod selected and no instance UP"
	default:
		c.Status, c.Reason = metav1.ConditionTrue, reasonInSync
		c.Message = fmt.Sprintf("%d pod(s) selected, %d ready, %d instance(s) UP", pods.selected, pods.ready, up)
		if s.EffectiveTraffic() == v1alpha1.TrafficStandby {
			c.Message = fmt.Sprintf("%d pod(s) selected, %d ready, %d instance(s) registered and held OUT_OF_SERVICE (Standby)", pods.selected, pods.ready, up)
		}
	}
	if len(pods.failing) > 0 && (c.Reason == reasonNoInstanceUp || c.Reason == reasonNotAllRegistered) {
		c.Reason, c.Message = reasonRegistrarFailing, fmt.Sprintf("the registrar fails in %s; %s", failingMessage(s.Namespace, pods.failing), c.Message)
	}
	if n := pods.ownedByOthersCount(); n > 0 && c.Reason != reasonDetaching {
		c.Message += fmt.Sprintf("; %d pod(s) matched by the selector belong to another syncer and are not counted (see Exclusive)", n)
	}
	return c
}

// notSyncedWhileRefused keeps Synced from saying True, or a reason of its
// own, while Permitted is False: a refused syncer or import is not what
// its owner asked for, whatever Eureka holds (a syncer whose selector
// matches nothing, or whose pods were injected before the refusal, would
// otherwise read Synced True). Synced then takes Permitted's reason, so the
// Reason column names the refusal, and keeps what was measured in its
// message. The one rule for syncers (nextStatus) and imports
// (finishImport). A syncer being deleted says Detaching.
func notSyncedWhileRefused(conds *[]metav1.Condition) {
	permitted := meta.FindStatusCondition(*conds, v1alpha1.ConditionPermitted)
	synced := meta.FindStatusCondition(*conds, v1alpha1.ConditionSynced)
	if permitted == nil || synced == nil || permitted.Status != metav1.ConditionFalse || synced.Reason == reasonDetaching ||
		(synced.Status == metav1.ConditionFalse && synced.Reason == permitted.Reason) {
		return
	}
	refused := *synced
	refused.Status, refused.Reason = metav1.ConditionFalse, permitted.Reason
	refused.Message = truncate(fmt.Sprintf("refused by the platform (%s): see the Permitted condition; as measured: %s", permitted.Reason, synced.Message), 1024)
	meta.SetStatusCondition(conds, refused)
}

// exclusive is False when other syncers injected pods this syncer's
// selector matches: they are registered under those syncers' apps. It names
// the owners and how to resolve the overlap.
func exclusive(s *v1alpha1.EurekaSyncer, obs *observed) metav1.Condition {
	owners := make([]string, 0, len(obs.pods.ownedByOthers))
	for owner := range obs.pods.ownedByOthers {
		owners = append(owners, owner)
	}
	if len(owners) == 0 {
		return metav1.Condition{Type: v1alpha1.ConditionExclusive, Status: metav1.ConditionTrue, Reason: reasonNoOverlap,
			Message: "no pod matched by the selector belongs to another syncer"}
	}
	sort.Strings(owners)
	var parts []string
	for _, owner := range owners {
		pods := obs.pods.ownedByOthers[owner]
		parts = append(parts, fmt.Sprintf("syncer %s owns %d (%s)", owner, len(pods), names(pods)))
	}
	return metav1.Condition{Type: v1alpha1.ConditionExclusive, Status: metav1.ConditionFalse, Reason: reasonOverlapping,
		Message: truncate(fmt.Sprintf("%d running pod(s) matched by this selector were injected by another syncer and are registered under its app, not %s: %s. "+
			"The webhook gives a pod to the oldest matching syncer (then by name), so the older syncer keeps them. "+
			"To resolve: narrow the selector of one syncer so that each pod matches only one, or delete the syncer that should not register them (then restart the pods)",
			obs.pods.ownedByOthersCount(), s.EffectiveAppName(), strings.Join(parts, "; ")), 2048)}
}

// drained is False when pods this syncer injected keep no drain: they stop
// serving while callers may still hold their instance.
func drained(obs *observed) metav1.Condition {
	n := len(obs.pods.withoutDrain)
	if n == 0 {
		return metav1.Condition{Type: v1alpha1.ConditionDrained, Status: metav1.ConditionTrue, Reason: reasonAllDrained,
			Message: "every injected pod keeps serving for its drain after its instance is cancelled"}
	}
	return metav1.Condition{Type: v1alpha1.ConditionDrained, Status: metav1.ConditionFalse, Reason: reasonWithoutDrain,
		Message: fmt.Sprintf("%d injected pod(s) have no drain (annotation %s absent or \"0\"), so they stop serving while callers may still hold their instance: %s. "+
			"Pods injected by an older Eurekube: restart them so the current webhook gives them a drain; drain set to 0: raise spec.drain.preStopSleepSeconds (or the pod's eurekube.io/prestop-sleep) and restart them",
			n, v1alpha1.DrainAnnotation, names(obs.pods.withoutDrain))}
}

// errStale: the syncer read from the cache is older than the API server's
// copy (the cache has not yet seen this reconciler's previous write).
var errStale = errors.New("the cached syncer is older than the API server's")

// staleRetry: how soon a reconcile that measured an outdated spec is
// followed by one of the current spec, if no event brings it sooner.
const staleRetry = 250 * time.Millisecond

// writeStatus writes the status computed from obs when it changed. The
// write is conditional on the syncer's resourceVersion (errStale when it
// moved on): a status computed from a stale copy would lose the previous
// write's orphan count and report its adaptations again, as new.
func (r *Reconciler) writeStatus(ctx context.Context, s *v1alpha1.EurekaSyncer, obs *observed) error {
	next, changed := nextStatus(s, obs, metav1.Now())
	if !changed {
		return nil
	}
	patch := client.MergeFromWithOptions(s.DeepCopy(), client.MergeFromWithOptimisticLock{})
	s.Status = next
	err := r.client.Status().Patch(ctx, s, patch)
	switch {
	case err == nil, apierrors.IsNotFound(err):
		return nil
	case apierrors.IsConflict(err):
		return errStale
	default:
		return fmt.Errorf("write status: %w", err)
	}
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
