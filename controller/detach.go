package controller

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/eurekube/eurekube/api/v1alpha1"
	"github.com/eurekube/eurekube/eureka"
)

// takeOutOfTraffic tells the pods of a deleted syncer that it is gone
// (annotation eurekube.io/traffic: Detached, which their registrars read
// from a downward-API file: they cancel and register no more), and
// meanwhile re-registers its remaining instances (those of running pods:
// orphans are already collected) as DOWN, so callers stop using them at
// once.
//
// Why DOWN by re-registration and not a cancel or the /status override: a
// cancelled instance comes back UP at the registrar's next heartbeat (404
// means "register again"); the /status override is sticky and would
// outlive the pod. A client-reported DOWN survives the registrar's
// heartbeats (Eureka keeps a DOWN the client reported); only the
// registrar's own re-registration (its app's health changing, or Eureka
// forgetting it) undoes it, and the next resync marks it DOWN again. The
// instance leaves Eureka when its registrar reads Detached and cancels
// (registrars older than Detached: when their pod stops).
func (r *Reconciler) takeOutOfTraffic(ctx context.Context, s *v1alpha1.EurekaSyncer, cl *eureka.Client, obs *observed) {
	if _, err := r.syncPodTraffic(ctx, s, v1alpha1.TrafficDetached); err != nil {
		r.log.WithError(err).WithFields(map[string]any{"namespace": s.Namespace, "syncer": s.Name}).Warn("deleted syncer: could not mark every pod Detached; retried at the next pass")
	}
	if obs.eurekaErr != nil {
		obs.eurekaReason = reasonDetachBlocked
		obs.eurekaErr = fmt.Errorf("cannot remove this syncer's instances; the finalizer %s stays until Eureka answers (remove it by hand to abandon them): %w",
			v1alpha1.Finalizer, obs.eurekaErr)
		return
	}
	var marked, pods []string
	for i := range obs.instances {
		inst := &obs.instances[i]
		if inst.Status == eureka.StatusDown {
			continue
		}
		down := *inst
		down.Status = eureka.StatusDown
		if err := cl.Register(ctx, down); err != nil {
			obs.eurekaErr, obs.eurekaReason = fmt.Errorf("take %s out of traffic: %w", inst.InstanceID, err), reasonEurekaUnreachable
			break
		}
		inst.Status = eureka.StatusDown
		marked = append(marked, inst.InstanceID)
		pods = append(pods, inst.Metadata[eureka.MetaPod])
	}
	if len(marked) > 0 {
		r.log.WithFields(map[string]any{"namespace": s.Namespace, "syncer": s.Name, "instances": marked}).
			Info("deleted syncer: instances marked DOWN")
		r.recorder.Eventf(s, nil, corev1.EventTypeNormal, "Detaching", "Detach",
			"the syncer is being deleted: marked %d instance(s) DOWN (%s); they leave Eureka once the registrars of pods %s read that the syncer is gone (within a minute or two), or when those pods stop",
			len(marked), names(marked), names(pods))
	}
}

// detached: nothing this cluster created for the syncer is left — no
// instance in Eureka, no pod running its registrar.
func (o *observed) detached() bool {
	return o.eurekaErr == nil && len(o.instances) == 0 && len(o.registrarPods) == 0
}

// releaseFinalizer lets the API server delete the syncer.
func (r *Reconciler) releaseFinalizer(ctx context.Context, s *v1alpha1.EurekaSyncer) error {
	controllerutil.RemoveFinalizer(s, v1alpha1.Finalizer)
	if err := r.client.Update(ctx, s); err != nil {
		return client.IgnoreNotFound(fmt.Errorf("release finalizer: %w", err))
	}
	forgetMetrics(s.Namespace, s.Name)
	r.recorder.Eventf(s, nil, corev1.EventTypeNormal, "Detached", "Detach",
		"no instance of this syncer is left in Eureka and no pod runs its registrar; the syncer can go")
	return nil
}
