package controller

//lint:file-ignore SA1019 core/v1 Endpoints is deprecated, and still what Spring Cloud Kubernetes' DiscoveryClient reads.

import (
	"context"
	"fmt"
	"math"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/eurekube/eurekube/api/v1alpha1"
)

// An import's Endpoints. Kubernetes keeps a core/v1 Endpoints object
// beside the EndpointSlices of a Service with a selector, and some
// clients read only that: Spring Cloud Kubernetes' DiscoveryClient (3.3
// and 5.0, both flavours) takes a Service's instances from its Endpoints,
// so in its load balancer's default POD mode a Service with slices alone
// has no instances. An import keeps one too, named as its Service, from
// the same plan as its slices: it is a view of them, never decided apart.
//
// It carries the import's marks (the label and the controlling owner
// reference) and endpointslice.kubernetes.io/skip-mirror: "true", else
// Kubernetes' EndpointSlice mirroring controller, which mirrors the
// Endpoints of a selector-less Service, would add a second set of slices.

// maxEndpointsAddresses is as many addresses as an Endpoints holds, the
// endpoints controller's cap; past it the object is truncated and says so
// (corev1.EndpointsOverCapacity).
const maxEndpointsAddresses = 1000

// planEndpoints is the Endpoints of svc whose slices are slices: one
// subset per set of ports (IPv4 and IPv6 addresses together), a ready
// endpoint's address in addresses, the others' in notReadyAddresses,
// ports named as the Service's. As Kubernetes' endpoints controller, it
// lists only the addresses of the Service's primary IP family (families'
// first; nil: every family). An address two slices share is listed once,
// ready if either says so.
func planEndpoints(svc *corev1.Service, families []corev1.IPFamily, slices []discoveryv1.EndpointSlice) corev1.Endpoints {
	eps := corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Namespace: svc.Namespace, Name: svc.Name,
		Labels: map[string]string{ImportLabel: svc.Labels[ImportLabel], discoveryv1.LabelSkipMirror: "true"}}}
	type subset struct {
		ports []corev1.EndpointPort
		ready map[string]bool
	}
	byPorts := map[string]*subset{}
	for _, s := range slices {
		if len(families) > 0 && string(s.AddressType) != string(families[0]) {
			continue
		}
		var ports []corev1.EndpointPort
		var key strings.Builder
		for _, p := range s.Ports {
			ports = append(ports, corev1.EndpointPort{Name: *p.Name, Port: *p.Port, Protocol: *p.Protocol, AppProtocol: p.AppProtocol})
			fmt.Fprintf(&key, "%s=%d ", *p.Name, *p.Port)
		}
		ss := byPorts[key.String()]
		if ss == nil {
			ss = &subset{ports: ports, ready: map[string]bool{}}
			byPorts[key.String()] = ss
		}
		for _, ep := range s.Endpoints {
			ready := ep.Conditions.Ready != nil && *ep.Conditions.Ready
			for _, a := range ep.Addresses {
				ss.ready[a] = ss.ready[a] || ready
			}
		}
	}
	keys := make([]string, 0, len(byPorts))
	for k := range byPorts {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		ss := byPorts[k]
		addrs := make([]string, 0, len(ss.ready))
		for a := range ss.ready {
			addrs = append(addrs, a)
		}
		sort.Strings(addrs)
		out := corev1.EndpointSubset{Ports: ss.ports}
		for _, a := range addrs {
			if ss.ready[a] {
				out.Addresses = append(out.Addresses, corev1.EndpointAddress{IP: a})
			} else {
				out.NotReadyAddresses = append(out.NotReadyAddresses, corev1.EndpointAddress{IP: a})
			}
		}
		eps.Subsets = append(eps.Subsets, out)
	}
	if truncateEndpoints(&eps) {
		eps.Annotations = map[string]string{corev1.EndpointsOverCapacity: "truncated"}
	}
	return eps
}

// truncateEndpoints caps eps at maxEndpointsAddresses as Kubernetes'
// endpoints controller does: ready addresses first, the room shared out
// between subsets in proportion to what each has. A subset left empty
// goes.
func truncateEndpoints(eps *corev1.Endpoints) bool {
	ready, notReady := 0, 0
	for _, ss := range eps.Subsets {
		ready += len(ss.Addresses)
		notReady += len(ss.NotReadyAddresses)
	}
	if ready+notReady <= maxEndpointsAddresses {
		return false
	}
	truncateReady := ready > maxEndpointsAddresses
	room, total := maxEndpointsAddresses-ready, notReady
	if truncateReady {
		room, total = maxEndpointsAddresses, ready
	}
	left := room
	var kept []corev1.EndpointSubset
	for _, ss := range eps.Subsets {
		n := len(ss.NotReadyAddresses)
		if truncateReady {
			n = len(ss.Addresses)
		}
		take := min(int(math.Ceil(float64(n)/float64(total)*float64(room))), left, n)
		if truncateReady {
			ss.Addresses, ss.NotReadyAddresses = ss.Addresses[:take], nil
			left -= take
		} else {
			ss.NotReadyAddresses = ss.NotReadyAddresses[:take]
			left -= take
		}
		if len(ss.NotReadyAddresses) == 0 {
			ss.NotReadyAddresses = nil
		}
		if len(ss.Addresses)+len(ss.NotReadyAddresses) > 0 {
			kept = append(kept, ss)
		}
	}
	eps.Subsets = kept
	return true
}

// endpointsCache is how the manager caches Endpoints: only imports'
// (labelled eurekube.io/import), not every Service's of the cluster.
func endpointsCache() cache.ByObject {
	has, err := labels.NewRequirement(ImportLabel, selection.Exists, nil)
	if err != nil {
		panic(err) // a constant key
	}
	return cache.ByObject{Label: labels.NewSelector().Add(*has)}
}

// applyEndpoints makes the import's Endpoints what want says, writing
// only when it differs. It returns a message naming the owner when an
// Endpoints of the name exists that the import did not make: nothing is
// written to it then. It runs before the Service is made, so that a
// stranger's Endpoints never becomes the endpoints of the import's
// Service.
func (r *importReconciler) applyEndpoints(ctx context.Context, imp *v1alpha1.EurekaImport, want *corev1.Endpoints) (owner string, err error) {
	key := client.ObjectKeyFromObject(want)
	var got corev1.Endpoints
	// The cache holds only Endpoints labelled as an import's: one it does
	// not is either free or a stranger's, which the create tells apart.
	err = r.client.Get(ctx, key, &got)
	switch {
	case apierrors.IsNotFound(err):
		create := want.DeepCopy()
		if err := controllerutil.SetControllerReference(imp, create, r.client.Scheme()); err != nil {
			return "", err
		}
		err := r.client.Create(ctx, create)
		if err == nil {
			return "", nil
		}
		if !apierrors.IsAlreadyExists(err) {
			return "", fmt.Errorf("create Endpoints %s: %w", key.Name, err)
		}
		// A stranger's, or this import's made a moment ago and not yet
		// in the cache: the API server says which.
		if err := r.apiReader.Get(ctx, key, &got); err != nil {
			return "", fmt.Errorf("read Endpoints %s: %w", key.Name, err)
		}
	case err != nil:
		return "", fmt.Errorf("read Endpoints %s: %w", key.Name, err)
	}
	if !metav1.IsControlledBy(&got, imp) {
		return notOwnedMessage("Endpoints", &got), nil
	}
	if !endpointsDiffer(&got, want) {
		return "", nil
	}
	got.Subsets = want.Subsets
	if got.Labels == nil {
		got.Labels = map[string]string{}
	}
	for k, v := range want.Labels {
		got.Labels[k] = v
	}
	if v, ok := want.Annotations[corev1.EndpointsOverCapacity]; ok {
		if got.Annotations == nil {
			got.Annotations = map[string]string{}
		}
		got.Annotations[corev1.EndpointsOverCapacity] = v
	} else {
		delete(got.Annotations, corev1.EndpointsOverCapacity)
	}
	if err := r.client.Update(ctx, &got); err != nil {
		return "", fmt.Errorf("update Endpoints %s: %w", got.Name, err)
	}
	return "", nil
}

// keepEndpoints keeps the import's Endpoints what want says, or, where the
// import keeps none (legacyEndpoints: false), deletes the one it made. It
// returns a message naming the owner of an Endpoints of the Service's name
// the import did not make, when it keeps one, or when the Service is about
// to be made (creating): Kubernetes' EndpointSlice mirroring controller
// would turn a stranger's Endpoints into slices of the import's
// selector-less Service.
func (r *importReconciler) keepEndpoints(ctx context.Context, imp *v1alpha1.EurekaImport, want *corev1.Endpoints, creating bool) (owner string, err error) {
	if imp.KeepsEndpoints() {
		return r.applyEndpoints(ctx, imp, want)
	}
	key := client.ObjectKeyFromObject(want)
	var got corev1.Endpoints
	// The cache holds only Endpoints labelled as an import's.
	switch err := r.client.Get(ctx, key, &got); {
	case err == nil && metav1.IsControlledBy(&got, imp):
		if err := r.client.Delete(ctx, &got, client.Preconditions{UID: &got.UID}); client.IgnoreNotFound(err) != nil {
			return "", fmt.Errorf("delete Endpoints %s (legacyEndpoints is false): %w", key.Name, err)
		}
		return "", nil
	case err != nil && !apierrors.IsNotFound(err):
		return "", fmt.Errorf("read Endpoints %s: %w", key.Name, err)
	case err == nil:
		return notOwnedMessage("Endpoints", &got), nil
	}
	if !creating {
		return "", nil
	}
	switch err := r.apiReader.Get(ctx, key, &got); {
	case apierrors.IsNotFound(err):
		return "", nil
	case err != nil:
		return "", fmt.Errorf("read Endpoints %s: %w", key.Name, err)
	case !metav1.IsControlledBy(&got, imp):
		return notOwnedMessage("Endpoints", &got), nil
	}
	return "", nil
}

// endpointsDiffer is true when got's subsets, import labels or
// over-capacity annotation are not want's.
func endpointsDiffer(got, want *corev1.Endpoints) bool {
	for k, v := range want.Labels {
		if got.Labels[k] != v {
			return true
		}
	}
	if got.Annotations[corev1.EndpointsOverCapacity] != want.Annotations[corev1.EndpointsOverCapacity] {
		return true
	}
	return !equality.Semantic.DeepEqual(got.Subsets, want.Subsets)
}

// removeEndpoints deletes the import's Endpoints, and no other. It reads
// from the API server, not the cache, which may not hold one made a moment
// ago (once a deletion, not on every pass). One that lacks a mark of the
// import's is no longer its own (import-write-policy would refuse its
// deletion): an Endpoints that Kubernetes' endpoints controller took over
// when its Service was handed to Kubernetes, which relabels it as the
// Service.
func (r *importReconciler) removeEndpoints(ctx context.Context, imp *v1alpha1.EurekaImport) error {
	var eps corev1.Endpoints
	err := r.apiReader.Get(ctx, client.ObjectKey{Namespace: imp.Namespace, Name: imp.EffectiveServiceName()}, &eps)
	if err == nil && metav1.IsControlledBy(&eps, imp) && eps.Labels[ImportLabel] == imp.Name && eps.Labels[discoveryv1.LabelSkipMirror] == "true" {
		err = r.client.Delete(ctx, &eps, client.Preconditions{UID: &eps.UID})
	}
	if client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("delete Endpoints %s: %w", imp.EffectiveServiceName(), err)
	}
	return nil
}

// watchedEndpoints is the Endpoints type the import controller owns, for
// setupImports (this file is where the deprecated type is named).
func watchedEndpoints() client.Object { return &corev1.Endpoints{} }
