package controller

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/eurekube/eurekube/api/v1alpha1"
)

// The manager caches every pod of the cluster, and an injected pod is
// mostly what the reconciler never reads: its volumes, resources,
// security contexts, the app's environment, managedFields. Keeping only
// what it reads halves what a pod costs in memory (measured by `make
// bench`: 1,000 syncers × 20 pods).

// Indexes of the pod cache, so that a reconcile lists the pods it needs,
// not its namespace's or the cluster's: each list copies what it returns.
const (
	// podsBySyncer: the syncer that injected the pod (its
	// eurekube.io/syncer annotation).
	podsBySyncer = "eurekube.io/syncer"
	// podsByNode: the node the pod is bound to.
	podsByNode = "spec.nodeName"
)

// indexPods registers the pod cache's indexes with the manager.
func indexPods(ctx context.Context, mgr manager.Manager) error {
	fi := mgr.GetFieldIndexer()
	if err := fi.IndexField(ctx, &corev1.Pod{}, podsBySyncer, func(o client.Object) []string {
		if s := o.GetAnnotations()[v1alpha1.SyncerAnnotation]; s != "" {
			return []string{s}
		}
		return nil
	}); err != nil {
		return fmt.Errorf("index pods by syncer: %w", err)
	}
	if err := fi.IndexField(ctx, &corev1.Pod{}, podsByNode, func(o client.Object) []string {
		if p, ok := o.(*corev1.Pod); ok && p.Spec.NodeName != "" {
			return []string{p.Spec.NodeName}
		}
		return nil
	}); err != nil {
		return fmt.Errorf("index pods by node: %w", err)
	}
	return nil
}

// CacheOptions are the cache settings the reconciler needs of its
// manager: managedFields stripped from every object, and pods trimmed to
// what the reconciler reads (TrimPod).
func CacheOptions() cache.Options {
	return cache.Options{
		// managedFields are most of an object's bytes and nothing here
		// reads them.
		DefaultTransform: cache.TransformStripManagedFields(),
		ByObject: map[client.Object]cache.ByObject{
			&corev1.Pod{}: {Transform: TrimPod},
		},
	}
}

// TrimPod is the cache's transform of a pod: what the reconciler reads of
// it, nothing else.
//   - metadata without managedFields: labels and annotations (the
//     webhook's record, the pod's overrides), UID, deletion;
//   - spec.nodeName (lost nodes, zones), and of each container its name,
//     image, ports, readinessProbe and restartPolicy (what
//     webhook.Settings reads to say what the syncer would give the pod
//     now), and the registrar container's environment (what it was given);
//   - the status: phase, conditions, addresses, and the containers'
//     names, states, readiness and restarts (the registrar's last words).
//
// Objects other than pods pass unchanged.
func TrimPod(obj any) (any, error) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil
	}
	t := &corev1.Pod{TypeMeta: p.TypeMeta, ObjectMeta: p.ObjectMeta}
	t.ManagedFields = nil
	t.Spec.NodeName = p.Spec.NodeName
	t.Spec.Containers = trimContainers(p.Spec.Containers)
	t.Spec.InitContainers = trimContainers(p.Spec.InitContainers)
	t.Status = corev1.PodStatus{
		Phase: p.Status.Phase, Conditions: p.Status.Conditions, Reason: p.Status.Reason, Message: p.Status.Message,
		HostIP: p.Status.HostIP, HostIPs: p.Status.HostIPs, PodIP: p.Status.PodIP, PodIPs: p.Status.PodIPs,
		StartTime: p.Status.StartTime, InitContainerStatuses: trimStatuses(p.Status.InitContainerStatuses), ContainerStatuses: trimStatuses(p.Status.ContainerStatuses),
	}
	return t, nil
}

func trimStatuses(cs []corev1.ContainerStatus) []corev1.ContainerStatus {
	if cs == nil {
		return nil
	}
	out := make([]corev1.ContainerStatus, len(cs))
	for i := range cs {
		c := &cs[i]
		out[i] = corev1.ContainerStatus{Name: c.Name, State: c.State, LastTerminationState: c.LastTerminationState,
			Ready: c.Ready, RestartCount: c.RestartCount, Image: c.Image, Started: c.Started}
	}
	return out
}

func trimContainers(cs []corev1.Container) []corev1.Container {
	if cs == nil {
		return nil
	}
	out := make([]corev1.Container, len(cs))
	for i := range cs {
		c := &cs[i]
		out[i] = corev1.Container{Name: c.Name, Image: c.Image, Ports: c.Ports, ReadinessProbe: c.ReadinessProbe, RestartPolicy: c.RestartPolicy}
		if c.Name == v1alpha1.RegistrarContainerName {
			out[i].Env = c.Env
		}
	}
	return out
}
