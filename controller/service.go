package controller

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/eurekube/eurekube/api/v1alpha1"
	"github.com/eurekube/eurekube/eureka"
)

// Service mode: many clusters' pod IPs are not reachable from VMs, so the
// elected manager registers the address VMs can reach the Service at
// (service_address.go), one instance per address (service_register.go),
// heartbeats them (service_heartbeats.go), and cancels them when the
// Service, its address or the syncer goes, or the syncer returns to Pod
// mode. No sidecar is involved: a Service-mode syncer has no selector, so
// the webhook never selects a pod for it.

// serviceObserved is what a Service-mode reconcile found and did.
type serviceObserved struct {
	// active: the syncer is in Service mode (status shows its addresses
	// and ServiceReachable).
	active bool
	// resolved: the Service was looked at (the cache answered); res is
	// what was found.
	resolved bool
	res      serviceResolution
	// synced: Eureka was brought to the Service this pass; addresses and
	// up are then what Eureka holds.
	synced bool
	// addresses: host:port registered, sorted.
	addresses []string
	// err: the Service could not be read, or Eureka refused a
	// registration or cancel.
	err error
}

// watchServiceMode adds what Service mode watches to the controller, and
// the keeper of the Service instances' leases to the manager.
func (r *Reconciler) watchServiceMode(mgr manager.Manager, b *builder.Builder) (*builder.Builder, error) {
	if err := mgr.Add(r.leases); err != nil {
		return nil, fmt.Errorf("add the Service instances' heartbeats: %w", err)
	}
	return b.
		// Created, deleted, retyped, given a load-balancer ingress.
		Watches(&corev1.Service{}, handler.EnqueueRequestsFromMapFunc(r.syncersOfService)).
		// Ready endpoints decide UP or DOWN; with externalTrafficPolicy
		// Local, which nodes are registered.
		Watches(&discoveryv1.EndpointSlice{}, handler.EnqueueRequestsFromMapFunc(r.syncersOfEndpointSlice)).
		// Nodes are the addresses of NodePort registrations.
		Watches(&corev1.Node{}, handler.EnqueueRequestsFromMapFunc(r.nodePortSyncers), builder.WithPredicates(nodeAddressingChanged)), nil
}

// syncersOfService maps a Service to the Service-mode syncers of its
// namespace that name it.
func (r *Reconciler) syncersOfService(ctx context.Context, obj client.Object) []reconcile.Request {
	return r.serviceSyncers(ctx, obj.GetNamespace(), func(s *v1alpha1.EurekaSyncer) bool { return s.Spec.Service.Name == obj.GetName() })
}

// syncersOfEndpointSlice maps an EndpointSlice to the Service-mode syncers
// of its Service.
func (r *Reconciler) syncersOfEndpointSlice(ctx context.Context, obj client.Object) []reconcile.Request {
	svc := obj.GetLabels()[discoveryv1.LabelServiceName]
	if svc == "" {
		return nil
	}
	return r.serviceSyncers(ctx, obj.GetNamespace(), func(s *v1alpha1.EurekaSyncer) bool { return s.Spec.Service.Name == svc })
}

// nodePortSyncers maps a node to every syncer that may register node
// addresses: NodePort, and Auto without an explicit address (the node port
// is Auto's fallback).
func (r *Reconciler) nodePortSyncers(ctx context.Context, _ client.Object) []reconcile.Request {
	return r.serviceSyncers(ctx, "", func(s *v1alpha1.EurekaSyncer) bool {
		t := s.Spec.Service
		return t.Address == "" && (t.AddressType == "" || t.AddressType == v1alpha1.AddressAuto || t.AddressType == v1alpha1.AddressNodePort)
	})
}

// serviceSyncers lists the Service-mode syncers of a namespace (all when
// empty) that match.
func (r *Reconciler) serviceSyncers(ctx context.Context, namespace string, match func(*v1alpha1.EurekaSyncer) bool) []reconcile.Request {
	var list v1alpha1.EurekaSyncerList
	// Read only: no deep copy of the syncers for every event.
	if err := r.client.List(ctx, &list, client.InNamespace(namespace), client.UnsafeDisableDeepCopy); err != nil {
		r.log.WithError(err).WithField("namespace", namespace).Warn("list syncers for a Service, EndpointSlice or Node event")
		return nil
	}
	var reqs []reconcile.Request
	for i := range list.Items {
		s := &list.Items[i]
		if s.EffectiveMode() == v1alpha1.ModeService && s.Spec.Service != nil && match(s) {
			reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: s.Namespace, Name: s.Name}})
		}
	}
	return reqs
}

// nodeAddressingChanged passes the node events that can change the
// addresses of NodePort registrations: a node coming or going, its Ready
// condition or its addresses changing.
var nodeAddressingChanged = predicate.Funcs{
	CreateFunc: func(event.CreateEvent) bool { return true },
	UpdateFunc: func(e event.UpdateEvent) bool {
		o, ok1 := e.ObjectOld.(*corev1.Node)
		n, ok2 := e.ObjectNew.(*corev1.Node)
		return ok1 && ok2 && (nodeReady(o) != nodeReady(n) || nodeAddress(o) != nodeAddress(n) || o.DeletionTimestamp.IsZero() != n.DeletionTimestamp.IsZero())
	},
	DeleteFunc:  func(event.DeleteEvent) bool { return true },
	GenericFunc: func(event.GenericEvent) bool { return false },
}

// syncService registers, updates and cancels the instances of a
// Service-mode syncer's Service. It runs for every syncer: a Pod-mode one
// that was in Service mode before has its Service instances cancelled, as
// has a syncer being deleted (its finalizer stays until they are gone:
// they stay in obs.instances while a cancel fails).
func (r *Reconciler) syncService(ctx context.Context, s *v1alpha1.EurekaSyncer, cl *eureka.Client, obs *observed) {
	key := types.NamespacedName{Namespace: s.Namespace, Name: s.Name}
	serviceMode := s.EffectiveMode() == v1alpha1.ModeService && s.Spec.Service != nil
	obs.service.active = serviceMode
	var want []eureka.Instance
	if serviceMode && s.DeletionTimestamp.IsZero() {
		res, err := r.resolveService(ctx, s)
		if err != nil {
			obs.service.err = err
			return
		}
		obs.service.resolved, obs.service.res = true, res
		want = serviceInstances(s, res, r.opts.ClusterID)
		if v := obs.ownership; v != nil && !v.Allowed {
			// Not the namespace's app: register nothing new, and keep what
			// an earlier pass registered, as the pods of a Pod-mode syncer
			// keep running (ownership.go).
			want = want[:0]
			for _, inst := range obs.instances {
				if isServiceInstance(&inst) {
					want = append(want, inst)
				}
			}
		}
		r.reportReachability(ctx, s, res)
	} else if !r.leases.holds(key) && !slices.ContainsFunc(obs.instances, func(inst eureka.Instance) bool { return isServiceInstance(&inst) }) {
		return // Pod mode, nothing of Service mode left
	}
	if obs.eurekaErr != nil || cl == nil {
		// Eureka cannot be read, so what it holds is unknown: the keeper
		// goes on heartbeating what it holds, and the next pass acts.
		return
	}
	done := r.registerService(ctx, key, cl, obs, want)
	obs.service.synced, obs.service.err = true, done.err
	for i := range obs.instances {
		inst := &obs.instances[i]
		if done.kept[inst.InstanceID] {
			addr := serviceAddress{Host: inst.HostName, Port: int32(inst.Port)}
			obs.service.addresses = append(obs.service.addresses, addr.String())
		}
	}
	slices.Sort(obs.service.addresses)
	r.reportServiceSync(ctx, s, obs, done)
}

// resolveService reads the syncer's Service, its EndpointSlices and the
// nodes from the cache, and resolves the addresses to register.
func (r *Reconciler) resolveService(ctx context.Context, s *v1alpha1.EurekaSyncer) (serviceResolution, error) {
	in := serviceInputs{target: *s.Spec.Service, port: s.Spec.Port}
	name := s.Spec.Service.Name
	var svc corev1.Service
	switch err := r.client.Get(ctx, types.NamespacedName{Namespace: s.Namespace, Name: name}, &svc); {
	case apierrors.IsNotFound(err):
	case err != nil:
		return serviceResolution{}, fmt.Errorf("read Service %s: %w", name, err)
	default:
		in.service = &svc
	}
	// Read only: no deep copies.
	var eps discoveryv1.EndpointSliceList
	if err := r.client.List(ctx, &eps, client.InNamespace(s.Namespace), client.MatchingLabels{discoveryv1.LabelServiceName: name},
		client.UnsafeDisableDeepCopy); err != nil {
		return serviceResolution{}, fmt.Errorf("list the EndpointSlices of Service %s: %w", name, err)
	}
	in.slices = eps.Items
	var nodes corev1.NodeList
	if err := r.client.List(ctx, &nodes, client.UnsafeDisableDeepCopy); err != nil {
		return serviceResolution{}, fmt.Errorf("list nodes: %w", err)
	}
	in.nodes = nodes.Items
	return resolveService(in), nil
}

// reportReachability records a Warning Event when ServiceReachable turns
// False (or False for another reason).
func (r *Reconciler) reportReachability(ctx context.Context, s *v1alpha1.EurekaSyncer, res serviceResolution) {
	if res.reachable() {
		return
	}
	prev := meta.FindStatusCondition(s.Status.Conditions, v1alpha1.ConditionServiceReachable)
	if prev != nil && prev.Status == metav1.ConditionFalse && prev.Reason == res.reason {
		return
	}
	r.logFrom(ctx).WithField("reason", res.reason).Warn(res.message)
	r.recorder.Eventf(s, nil, corev1.EventTypeWarning, res.reason, "RegisterService", "%s", res.message)
}

// reportServiceSync records what registering the Service did: a Normal
// Event when the registered addresses changed, one when stale instances
// were cancelled, a Warning when Eureka refused a write.
func (r *Reconciler) reportServiceSync(ctx context.Context, s *v1alpha1.EurekaSyncer, obs *observed, done serviceSync) {
	log := r.logFrom(ctx)
	if len(done.registered) > 0 {
		log.WithField("instances", done.registered).Info("Service instances registered")
	}
	if len(obs.service.addresses) > 0 && !slices.Equal(obs.service.addresses, s.Status.ServiceAddresses) {
		r.recorder.Eventf(s, nil, corev1.EventTypeNormal, "ServiceRegistered", "RegisterService",
			"Service %s registered in Eureka as %s at %s (%s)", s.Spec.Service.Name, s.EffectiveAppName(), names(obs.service.addresses), obs.service.res.source)
	}
	if len(done.cancelled) > 0 {
		why := "their address is no longer the Service's"
		switch {
		case !s.DeletionTimestamp.IsZero():
			why = "the syncer is being deleted"
		case !obs.service.active:
			why = "the syncer is in Pod mode now"
		case !obs.service.res.reachable():
			why = "the Service cannot be reached (see ServiceReachable)"
		}
		log.WithField("instances", done.cancelled).Info("Service instances cancelled: " + why)
		r.recorder.Eventf(s, nil, corev1.EventTypeNormal, "ServiceInstancesCancelled", "RegisterService",
			"cancelled %d Service instance(s) because %s: %s", len(done.cancelled), why, names(done.cancelled))
	}
	if done.err != nil {
		log.WithError(done.err).Warn("Service registration failed")
		r.recorder.Eventf(s, nil, corev1.EventTypeWarning, reasonServiceRegistration, "RegisterService", "%s", truncate(done.err.Error(), 1024))
	}
}
