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

// takeOutOfTraffic re-registers a deleted syncer's remaining instances
// (those of running pods: orphans are already collected) as DOWN, so
// callers stop using them while the pods still run.
//
// Why DOWN by re-registration and not a cancel or the /status override: a
// cancelled instance comes back UP at the registrar's next heartbeat (404
// means "register again"); the /status override is sticky and would
// outlive the pod. A client-reported DOWN survives the registrar's
// heartbeats (Eureka keeps a DOWN the client reported); only the
// registrar's own re-registration (its app's health changing, or Eureka
// forgetting it) undoes it, and the next resync marks it DOWN again. The
// instance leaves Eureka when its pod stops and the registrar cancels.
func (r *Reconciler) takeOutOfTraffic(ctx context.Context, s *v1alpha1.EurekaSyncer, cl *eureka.Client, obs *observed) {
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
			"the syncer is being deleted: marked %d instance(s) DOWN (%s); they leave Eureka when their pods stop — restart or delete pods %s to remove the sidecars",
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
