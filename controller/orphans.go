package controller

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/eurekube/eurekube/api/v1alpha1"
	"github.com/eurekube/eurekube/eureka"
)

// orphanSuspects returns the pod UIDs of insts that are not in known. An
// instance without a pod UID is never a suspect: nothing could confirm
// that its pod is gone.
func orphanSuspects(insts []eureka.Instance, known map[types.UID]struct{}) map[types.UID]struct{} {
	suspects := map[types.UID]struct{}{}
	for _, inst := range insts {
		uid := types.UID(inst.Metadata[eureka.MetaPodUID])
		if _, ok := known[uid]; !ok && uid != "" {
			suspects[uid] = struct{}{}
		}
	}
	return suspects
}

// collectOrphans cancels the instances (all of this cluster and syncer:
// insts come filtered by markers, read at readAt) whose pod no longer
// exists or has finished, and returns how many it removed and the instances
// left. A pod is gone when neither the cache nor an uncached read of the
// API server knows its UID, or when the cache says it has finished (Failed,
// an evicted pod among them, or Succeeded: a phase it never leaves, whose
// registrar has stopped; a registrar that could not cancel would otherwise
// leave it UP until its lease ends, and for good under self-preservation). An instance cancelled since the read is not cancelled and
// counted again: a read older than the cancel still lists it, and a second
// cancel, failed over to a peer the first has not reached yet, would even
// succeed.
func (r *Reconciler) collectOrphans(ctx context.Context, s *v1alpha1.EurekaSyncer, cl *eureka.Client, insts []eureka.Instance, readAt time.Time, selected map[types.UID]struct{}) (int, []eureka.Instance, error) {
	gone := orphanSuspects(insts, selected)
	if len(gone) == 0 {
		return 0, insts, nil
	}
	// Not selected is not gone: a pod whose labels changed still runs its
	// registrar.
	var cached corev1.PodList
	if err := r.client.List(ctx, &cached, client.InNamespace(s.Namespace), client.UnsafeDisableDeepCopy); err != nil {
		return 0, insts, fmt.Errorf("list pods: %w", err)
	}
	finishedUIDs := map[types.UID]struct{}{}
	for i := range cached.Items {
		if pod := &cached.Items[i]; finished(pod) {
			finishedUIDs[pod.UID] = struct{}{}
		} else {
			delete(gone, pod.UID)
		}
	}
	if len(gone) == 0 {
		return 0, insts, nil
	}
	// The cache may lag behind a pod created a moment ago whose registrar
	// was quicker: ask the API server itself (for metadata only: a pod the
	// cache has seen finished stays finished).
	var current metav1.PartialObjectMetadataList
	current.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("PodList"))
	if err := r.apiReader.List(ctx, &current, client.InNamespace(s.Namespace)); err != nil {
		return 0, insts, fmt.Errorf("confirm that pods are gone: %w", err)
	}
	for i := range current.Items {
		if _, done := finishedUIDs[current.Items[i].UID]; !done {
			delete(gone, current.Items[i].UID)
		}
	}
	if len(gone) == 0 {
		return 0, insts, nil
	}

	kept := make([]eureka.Instance, 0, len(insts))
	var removed []string
	var err error
	for _, inst := range insts {
		if _, orphan := gone[types.UID(inst.Metadata[eureka.MetaPodUID])]; !orphan || err != nil {
			kept = append(kept, inst)
			continue
		}
		key := inst.App + "/" + inst.InstanceID
		if r.cancelled.setSince(key, readAt) {
			continue // cancelled since this read: gone
		}
		switch cerr := cl.Cancel(ctx, inst.App, inst.InstanceID); {
		case cerr == nil:
			removed = append(removed, inst.InstanceID)
			r.cancelled.remember(key)
		case errors.Is(cerr, eureka.ErrNotFound):
			// Gone already: the list read was stale.
		default:
			// Eureka is failing: leave the rest for the next resync.
			err = fmt.Errorf("remove orphan %s: %w", inst.InstanceID, cerr)
			kept = append(kept, inst)
		}
	}
	if len(removed) > 0 {
		orphansRemoved.WithLabelValues(s.Namespace, s.Name).Add(float64(len(removed)))
		r.logFrom(ctx).WithField("instances", removed).
			Info("removed instances whose pod no longer exists or has finished")
		r.recorder.Eventf(s, nil, corev1.EventTypeNormal, "OrphansRemoved", "CollectOrphans",
			"removed %d instance(s) whose pod no longer exists or has finished: %s", len(removed), names(removed))
	}
	return len(removed), kept, err
}
