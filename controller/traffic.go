package controller

import (
	"cmp"
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/eurekube/eurekube/api/v1alpha1"
	"github.com/eurekube/eurekube/eureka"
)

// Cut-over and rollback: spec.traffic Standby holds this cluster's
// instances OUT_OF_SERVICE through Eureka's status override, the mechanism
// red/black deployment tools use, so callers stay on the instances
// elsewhere; Serve removes the override. The reconciler applies it to the
// instances it finds in every pass (level-triggered), and keeps each
// injected pod's eurekube.io/traffic annotation current, which the pod's
// registrar reads before each registration, so a pod registering after the
// switch honours it from its first moment.
//
// A lost node is the same mechanism (nodes.go): the instances of pods on a node that
// is not Ready are held OUT_OF_SERVICE until it is Ready again, since
// Eureka would keep them UP for minutes (two leases, longer under
// self-preservation) while their calls fail.

const (
	reasonServing       = "Serving"
	reasonStandingBy    = "StandingBy"
	reasonNodeLost      = "NodeNotReady"
	reasonSwitchFailed  = "TrafficSwitchFailed"
	reasonNothingOnCall = "StandbyLeavesNoInstanceUp"
)

// trafficObserved is what applying spec.traffic found and did.
type trafficObserved struct {
	// held: instances held OUT_OF_SERVICE after this pass; lost: those of
	// pods on a node that is not Ready (Serve only).
	held, lost []string
	// heldOut and putIn: the instances this pass took out of traffic
	// (override set) and put back in (override removed).
	heldOut, putIn []string
	// err: an override could not be changed; the next pass tries again.
	err error
}

// wantOverride is the override an instance should carry: OUT_OF_SERVICE in
// Standby or when its pod's node is lost, none otherwise.
func wantOverride(traffic v1alpha1.Traffic, nodeLost bool) eureka.Status {
	if traffic == v1alpha1.TrafficStandby || nodeLost {
		return eureka.StatusOutOfService
	}
	return ""
}

// currentOverride normalises what Eureka reports: UNKNOWN means none.
func currentOverride(inst *eureka.Instance) eureka.Status {
	if inst.OverriddenStatus == eureka.StatusUnknown {
		return ""
	}
	return inst.OverriddenStatus
}

// applyTraffic brings the syncer's pods and instances to spec.traffic.
func (r *Reconciler) applyTraffic(ctx context.Context, s *v1alpha1.EurekaSyncer, cl *eureka.Client, obs *observed) {
	traffic := s.EffectiveTraffic()
	var pods podTraffic
	if s.EffectiveMode() == v1alpha1.ModePod {
		var err error
		if pods, err = r.syncPodTraffic(ctx, s, string(traffic)); err != nil {
			obs.traffic.err = err
		}
	}
	if obs.eurekaErr != nil || cl == nil {
		return
	}
	for i := range obs.instances {
		inst := &obs.instances[i]
		node, lost := pods.lost[inst.Metadata[eureka.MetaPodUID]]
		want := wantOverride(traffic, lost)
		if err := r.override(ctx, cl, inst, want, pods.ready, obs, &obs.traffic); err != nil {
			obs.traffic.err = errors.Join(obs.traffic.err, err)
		}
		if currentOverride(inst) == eureka.StatusOutOfService {
			obs.traffic.held = append(obs.traffic.held, inst.InstanceID)
			if lost && traffic == v1alpha1.TrafficServe {
				obs.traffic.lost = append(obs.traffic.lost, inst.Metadata[eureka.MetaPod]+" on "+node)
			}
		}
	}
	r.reportTraffic(ctx, s, traffic, obs)
}

// override sets or removes one instance's override so that it carries
// want, and updates inst to what it then is. readyPods are the UIDs of
// the syncer's pods Kubernetes counts Ready; obs says how recent the
// registry read is, and what the Service has (Service mode).
func (r *Reconciler) override(ctx context.Context, cl *eureka.Client, inst *eureka.Instance, want eureka.Status, readyPods map[string]bool, obs *observed, t *trafficObserved) error {
	have := currentOverride(inst)
	if have == want {
		return nil
	}
	key := inst.App + "/" + inst.InstanceID
	if want == eureka.StatusOutOfService {
		if inst.Status != eureka.StatusUp {
			// DOWN, STARTING or UNKNOWN is out of traffic already, and a
			// PUT would list it OUT_OF_SERVICE whatever its registrar
			// reported, which Serve could then not tell from UP. When it
			// registers UP, it carries OUT_OF_SERVICE itself (the pod's
			// traffic file), or the next pass sets it.
			return nil
		}
		if r.overrides.setSince(key, obs.readAt) {
			// Set a moment ago; the registry read has not caught up.
			inst.OverriddenStatus, inst.Status = want, eureka.StatusOutOfService
			return nil
		}
		if err := cl.SetStatusOverride(ctx, inst.App, inst.InstanceID, want); err != nil {
			if errors.Is(err, eureka.ErrNotFound) {
				return nil // gone since the read
			}
			return fmt.Errorf("take %s out of traffic: %w", inst.InstanceID, err)
		}
		r.overrides.remember(key)
		inst.OverriddenStatus, inst.Status = want, eureka.StatusOutOfService
		t.heldOut = append(t.heldOut, inst.InstanceID)
		return nil
	}
	r.overrides.forget(key)
	// Removing: read the instance itself (uncached), as the registry read
	// may predate a change. Eureka lists whatever status the removal
	// names. The override is only ever set on an instance listed UP (its
	// registrar reported UP), so one listed OUT_OF_SERVICE is named UP
	// again — when its pod is Ready, or, for a Service instance, while
	// the Service has a ready endpoint. Any other is given no status:
	// Eureka lists it UNKNOWN (out of traffic) until its registrar's (or
	// the keeper's) next heartbeat is refused and it registers again with
	// what its app says, within one renewal interval.
	fresh, err := cl.Instance(ctx, inst.App, inst.InstanceID)
	switch {
	case errors.Is(err, eureka.ErrNotFound):
		return nil
	case err != nil:
		return fmt.Errorf("read %s before putting it in traffic: %w", inst.InstanceID, err)
	case currentOverride(&fresh) != eureka.StatusOutOfService:
		*inst = fresh
		return nil
	}
	var back eureka.Status // none: UNKNOWN until the registrar registers again
	serving := readyPods[inst.Metadata[eureka.MetaPodUID]]
	if inst.Metadata[eureka.MetaService] != "" {
		serving = obs.service.res.readyEndpoints > 0
	}
	if fresh.Status == eureka.StatusOutOfService && serving {
		back = eureka.StatusUp
	}
	if err := cl.RemoveStatusOverride(ctx, inst.App, inst.InstanceID, back); err != nil {
		if errors.Is(err, eureka.ErrNotFound) {
			return nil
		}
		return fmt.Errorf("put %s in traffic: %w", inst.InstanceID, err)
	}
	inst.OverriddenStatus, inst.Status = "", cmp.Or(back, eureka.StatusUnknown)
	t.putIn = append(t.putIn, inst.InstanceID)
	return nil
}

// podTraffic is what the pods of a syncer say about their instances'
// traffic, by pod UID.
type podTraffic struct {
	lost  map[string]string // on a node that is not Ready: the node
	ready map[string]bool   // Ready, as Kubernetes counts it
}

// syncPodTraffic keeps the eurekube.io/traffic annotation of the pods this
// syncer injected equal to traffic (spec.traffic, or TrafficDetached once
// the syncer is deleted), gives them their node's zone label where
// Kubernetes did not (see podZonePatch), and returns which of them are
// Ready and which run on a node that is not.
func (r *Reconciler) syncPodTraffic(ctx context.Context, s *v1alpha1.EurekaSyncer, traffic string) (podTraffic, error) {
	out := podTraffic{lost: map[string]string{}, ready: map[string]bool{}}
	var pods corev1.PodList
	if err := r.client.List(ctx, &pods, client.InNamespace(s.Namespace), client.MatchingFields{podsBySyncer: s.Name}, client.UnsafeDisableDeepCopy); err != nil {
		return out, fmt.Errorf("list pods: %w", err)
	}
	nodes, err := r.nodeFacts(ctx)
	if err != nil {
		return out, err
	}
	var errs []error
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.Annotations[v1alpha1.SyncerAnnotation] != s.Name || !v1alpha1.MarkedInjected(p) || !p.DeletionTimestamp.IsZero() {
			continue
		}
		if nodes.notReady[p.Spec.NodeName] {
			out.lost[string(p.UID)] = p.Spec.NodeName
		}
		out.ready[string(p.UID)] = podReady(p)
		var setTraffic, setZone string
		if trafficPatchNeeded(p, traffic) {
			setTraffic = traffic
		}
		if zone, ok := podZonePatch(p, nodes.zone); ok {
			setZone = zone
		}
		if setTraffic == "" && setZone == "" {
			continue
		}
		raw, err := PodPatch(setTraffic, setZone)
		if err != nil { // strings only: cannot happen
			return out, fmt.Errorf("encode the patch of pod %s: %w", p.Name, err)
		}
		target := &corev1.Pod{}
		target.Namespace, target.Name = p.Namespace, p.Name
		if err := r.client.Patch(ctx, target, client.RawPatch(types.MergePatchType, raw)); client.IgnoreNotFound(err) != nil {
			errs = append(errs, fmt.Errorf("patch pod %s with %s: %w", p.Name, raw, err))
		}
	}
	return out, errors.Join(errs...)
}

// trafficPatchNeeded says whether the pod's eurekube.io/traffic annotation
// must change to say traffic. A pod without the annotation (injected by a
// release before spec.traffic) has an empty traffic file, which its
// registrar reads as Serve: under Serve it needs no patch, so the first
// pass after an upgrade does not write every pod of the cluster.
func trafficPatchNeeded(p *corev1.Pod, traffic string) bool {
	current, set := p.Annotations[v1alpha1.TrafficAnnotation]
	if !set && traffic == string(v1alpha1.TrafficServe) {
		return false
	}
	return current != traffic
}

// reportTraffic records Events for what this pass switched.
func (r *Reconciler) reportTraffic(ctx context.Context, s *v1alpha1.EurekaSyncer, traffic v1alpha1.Traffic, obs *observed) {
	t := &obs.traffic
	log := r.logFrom(ctx).WithField("traffic", traffic)
	switch {
	case len(t.heldOut) > 0 && traffic == v1alpha1.TrafficServe:
		log.WithField("instances", t.heldOut).Warn("traffic: held OUT_OF_SERVICE, their node is not Ready")
		r.recorder.Eventf(s, nil, corev1.EventTypeWarning, reasonNodeLost, "Switch",
			"held %d instance(s) OUT_OF_SERVICE because their node is not Ready: %s; they return to traffic when it is Ready again", len(t.heldOut), names(t.lost))
	case len(t.heldOut) > 0:
		log.WithField("instances", t.heldOut).Info("traffic: held OUT_OF_SERVICE")
		r.recorder.Eventf(s, nil, corev1.EventTypeNormal, "TrafficSwitched", "Switch", "Standby: held %d instance(s) OUT_OF_SERVICE: %s", len(t.heldOut), names(t.heldOut))
	}
	if len(t.putIn) > 0 {
		log.WithField("instances", t.putIn).Info("traffic: put back in traffic")
		r.recorder.Eventf(s, nil, corev1.EventTypeNormal, "TrafficSwitched", "Switch", "%s: put %d instance(s) back in traffic: %s", traffic, len(t.putIn), names(t.putIn))
	}
	if traffic == v1alpha1.TrafficStandby && len(t.heldOut) > 0 {
		if countUp(obs.elsewhere) == 0 {
			r.recorder.Eventf(s, nil, corev1.EventTypeWarning, reasonNothingOnCall, "Switch",
				"Standby holds every instance of %s in this cluster OUT_OF_SERVICE and none is UP elsewhere: calls to it fail until instances elsewhere are UP or traffic is Serve again",
				s.EffectiveAppName())
		}
	}
}

// trafficCondition says whether every instance carries what spec.traffic
// asks, and where calls go.
func trafficCondition(s *v1alpha1.EurekaSyncer, obs *observed) metav1.Condition {
	t := &obs.traffic
	c := metav1.Condition{Type: v1alpha1.ConditionTrafficApplied, Status: metav1.ConditionTrue}
	traffic := s.EffectiveTraffic()
	switch {
	case t.err != nil:
		c.Status, c.Reason = metav1.ConditionFalse, reasonSwitchFailed
		c.Message = truncate(fmt.Sprintf("spec.traffic is %s but not every instance could be switched (retried at the next resync): %v", traffic, t.err), 1024)
	case obs.eurekaErr != nil:
		c.Status, c.Reason, c.Message = metav1.ConditionUnknown, obs.eurekaReason, "Eureka could not be read: see the EurekaReachable condition"
	case traffic == v1alpha1.TrafficStandby:
		c.Reason = reasonStandingBy
		c.Message = fmt.Sprintf("Standby: %d instance(s) of this cluster held OUT_OF_SERVICE; calls go to the %d instance(s) UP elsewhere", len(t.held), countUp(obs.elsewhere))
	case len(t.lost) > 0:
		c.Reason = reasonNodeLost
		c.Message = truncate(fmt.Sprintf("Serve, but %d instance(s) held OUT_OF_SERVICE while their node is not Ready: %s", len(t.lost), names(t.lost)), 1024)
	default:
		c.Reason = reasonServing
		c.Message = fmt.Sprintf("Serve: this cluster's instances take traffic beside the %d UP elsewhere", countUp(obs.elsewhere))
	}
	return c
}

func countUp(insts []eureka.Instance) int {
	n := 0
	for _, inst := range insts {
		if inst.Status == eureka.StatusUp {
			n++
		}
	}
	return n
}
