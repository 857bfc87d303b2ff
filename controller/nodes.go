package controller

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/eurekube/eurekube/api/v1alpha1"
)

// Nodes and zones: which nodes are lost (their Ready condition is not
// True) and each node's zone. The instances of pods on a lost node are held
// OUT_OF_SERVICE until it is Ready again (applyTraffic, traffic.go): Eureka
// would keep them UP for minutes while their calls fail. A node whose
// readiness changes reconciles the syncers that injected pods on it. Where
// Kubernetes did not copy a node's zone label onto its pods, the reconciler
// does (podZonePatch), in the same patch that keeps their traffic
// annotation current (syncPodTraffic).

// nodes is what the reconciler needs to know of the nodes.
type nodes struct {
	// notReady names the nodes whose Ready condition is not True: the
	// kubelet stopped reporting (Unknown) or reports a failure (False).
	notReady map[string]bool
	// zone is each node's topology.kubernetes.io/zone label.
	zone map[string]string
}

func (r *Reconciler) nodeFacts(ctx context.Context) (nodes, error) {
	var list corev1.NodeList
	if err := r.client.List(ctx, &list, client.UnsafeDisableDeepCopy); err != nil {
		return nodes{}, fmt.Errorf("list nodes: %w", err)
	}
	out := nodes{notReady: map[string]bool{}, zone: map[string]string{}}
	for i := range list.Items {
		n := &list.Items[i]
		if !nodeReady(n) {
			out.notReady[n.Name] = true
		}
		if z, ok := n.Labels[corev1.LabelTopologyZone]; ok {
			out.zone[n.Name] = z
		}
	}
	return out, nil
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// nodeReadinessChanged passes the node events that can change which
// instances are lost: a node's Ready condition changing, or a node going.
var nodeReadinessChanged = predicate.Funcs{
	CreateFunc: func(event.CreateEvent) bool { return false },
	UpdateFunc: func(e event.UpdateEvent) bool {
		o, ok1 := e.ObjectOld.(*corev1.Node)
		n, ok2 := e.ObjectNew.(*corev1.Node)
		return ok1 && ok2 && nodeReady(o) != nodeReady(n)
	},
	DeleteFunc:  func(event.DeleteEvent) bool { return true },
	GenericFunc: func(event.GenericEvent) bool { return false },
}

// syncersOfNode maps a node whose readiness changed to the Pod-mode
// syncers that injected pods running on it.
func (r *Reconciler) syncersOfNode(ctx context.Context, obj client.Object) []reconcile.Request {
	var pods corev1.PodList
	if err := r.client.List(ctx, &pods, client.MatchingFields{podsByNode: obj.GetName()}, client.UnsafeDisableDeepCopy); err != nil {
		r.log.WithError(err).WithField("node", obj.GetName()).Warn("list pods for a node event")
		return nil
	}
	seen := map[types.NamespacedName]bool{}
	var reqs []reconcile.Request
	for i := range pods.Items {
		p := &pods.Items[i]
		syncer := p.Annotations[v1alpha1.SyncerAnnotation]
		key := types.NamespacedName{Namespace: p.Namespace, Name: syncer}
		if p.Spec.NodeName != obj.GetName() || syncer == "" || seen[key] {
			continue
		}
		seen[key] = true
		reqs = append(reqs, reconcile.Request{NamespacedName: key})
	}
	return reqs
}

// podZonePatch is the zone label a scheduled pod lacks and its node has.
// Kubernetes copies it when it binds the pod (the PodTopologyLabels
// admission plugin, on by default since 1.35); where that plugin is off,
// the reconciler does, so that the registrar, which reads the label
// through a downward-API file, registers the pod's zone either way.
func podZonePatch(p *corev1.Pod, zones map[string]string) (string, bool) {
	if _, has := p.Labels[corev1.LabelTopologyZone]; has || p.Spec.NodeName == "" {
		return "", false
	}
	zone, ok := zones[p.Spec.NodeName]
	return zone, ok && zone != ""
}
