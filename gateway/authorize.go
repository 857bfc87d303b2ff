package gateway

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/eurekube/eurekube/api/v1alpha1"
	"github.com/eurekube/eurekube/eureka"
	"github.com/eurekube/eurekube/internal/ownership"
	"github.com/eurekube/eurekube/sidecar"
)

// Reasons of a verdict on a write.
const (
	ReasonAllowed         = "Allowed"
	ReasonNotOwnInstance  = "NotOwnInstance"
	ReasonNotOwnAddress   = "NotOwnAddress"
	ReasonForgedMarkers   = "ForgedMarkers"
	ReasonStandby         = "StandbyWithoutOverride"
	ReasonDetached        = "PodDetached"
	ReasonStatusReserved  = "StatusOverrideReserved"
	ReasonAppNotBound     = "AppNotBoundToClient"
	ReasonMalformedBody   = "MalformedInstance"
	ReasonPodNoIP         = "PodHasNoIP"
	ReasonOwnershipFailed = "OwnershipUnknown"
)

// verdict is the gateway's word on one write.
type verdict struct {
	allowed bool
	status  int // the status code of a refusal
	reason  string
	msg     string
}

func allow(msg string) verdict { return verdict{allowed: true, reason: ReasonAllowed, msg: msg} }

func refuse(status int, reason, msg string) verdict {
	return verdict{status: status, reason: reason, msg: msg}
}

// authorizer decides writes: who may write which app (the ownership
// contract for pods, EurekaAppPolicies' clientSecrets for clients) and
// which instances are the writer's own.
type authorizer struct {
	cache     client.Reader // policies, claims, syncers, namespaces
	checker   ownership.Checker
	pods      client.Reader // live reads of pods
	clusterID string
}

// write is one write as the authorizer reads it.
type write struct {
	route
	query url.Values
	// inst is the registration's body, parsed (OpRegister only).
	inst eureka.Instance
}

func (a authorizer) decide(ctx context.Context, id Identity, w write) verdict {
	switch id.Kind {
	case KindPod:
		return a.decidePod(ctx, id, w)
	case KindClient:
		return a.decideClient(ctx, id, w)
	}
	return refuse(http.StatusUnauthorized, ReasonNoIdentity,
		"a write needs an identity: a pod's projected ServiceAccount token for the gateway's audience (Bearer; Eurekube's registrar sends it), or the credentials (Basic) of a Secret an EurekaAppPolicy names in spec.clientSecrets")
}

func (a authorizer) decidePod(ctx context.Context, id Identity, w write) verdict {
	if id.Manager {
		return allow(fmt.Sprintf("%s writes what the reconciler keeps", id))
	}
	var ns corev1.Namespace
	if err := a.cache.Get(ctx, client.ObjectKey{Name: id.Namespace}, &ns); err != nil {
		return refuse(http.StatusServiceUnavailable, ReasonOwnershipFailed, fmt.Sprintf("read namespace %s: %v", id.Namespace, err))
	}
	v, err := a.checker.Check(ctx, w.app, ownership.Namespace{Name: ns.Name, Labels: ns.Labels}, false)
	if err != nil {
		return refuse(http.StatusServiceUnavailable, ReasonOwnershipFailed, err.Error())
	}
	if !v.Allowed {
		return refuse(http.StatusForbidden, v.Reason, v.Message)
	}
	prefix := sidecar.InstanceIDPrefix(id.Pod, id.Namespace, id.PodUID)
	if target := w.instanceID(); !strings.HasPrefix(target, prefix) {
		return refuse(http.StatusForbidden, ReasonNotOwnInstance,
			fmt.Sprintf("instance %q is not pod %s/%s's: a pod writes only the instances whose id begins %q, as its registrar names them", target, id.Namespace, id.Pod, prefix))
	}
	switch w.op {
	case OpStatus, OpStatusRemove:
		return refuse(http.StatusForbidden, ReasonStatusReserved,
			"a pod does not set or remove its own status override: overrides are how the manager holds a Standby syncer's instances out of traffic (spec.traffic)")
	case OpMetadata:
		if why := podMarkers(id, queryMap(w.query), a.clusterID); why != "" {
			return refuse(http.StatusForbidden, ReasonForgedMarkers, why)
		}
	case OpRegister:
		return a.decidePodRegistration(ctx, id, w.inst)
	}
	return allow(fmt.Sprintf("%s may write app %s (%s), instance %s is its own", id, v.App, v.Message, w.id))
}

func (a authorizer) decidePodRegistration(ctx context.Context, id Identity, inst eureka.Instance) verdict {
	var pod corev1.Pod
	err := a.pods.Get(ctx, client.ObjectKey{Namespace: id.Namespace, Name: id.Pod}, &pod)
	switch {
	case apierrors.IsNotFound(err) || err == nil && string(pod.UID) != id.PodUID:
		return refuse(http.StatusUnauthorized, ReasonPodGone, fmt.Sprintf("pod %s/%s (UID %s) is gone", id.Namespace, id.Pod, id.PodUID))
	case err != nil:
		return refuse(http.StatusServiceUnavailable, ReasonOwnershipFailed, fmt.Sprintf("read pod %s/%s: %v", id.Namespace, id.Pod, err))
	}
	ips := make([]string, 0, len(pod.Status.PodIPs))
	for _, ip := range pod.Status.PodIPs {
		ips = append(ips, ip.IP)
	}
	if len(ips) == 0 {
		return refuse(http.StatusServiceUnavailable, ReasonPodNoIP, fmt.Sprintf("pod %s/%s: %v; registering again in a moment works", id.Namespace, id.Pod, errNoPodIP))
	}
	if !slices.Contains(ips, inst.IPAddr) || !(slices.Contains(ips, inst.HostName) || inst.HostName == pod.Name) {
		return refuse(http.StatusForbidden, ReasonNotOwnAddress,
			fmt.Sprintf("instance %s registers ipAddr %q and hostName %q, but pod %s/%s has IPs %v: a pod registers only its own address", inst.InstanceID, inst.IPAddr, inst.HostName, id.Namespace, id.Pod, ips))
	}
	if why := podMarkers(id, inst.Metadata, a.clusterID); why != "" {
		return refuse(http.StatusForbidden, ReasonForgedMarkers, why)
	}
	switch pod.Annotations[v1alpha1.TrafficAnnotation] {
	case v1alpha1.TrafficDetached:
		return refuse(http.StatusForbidden, ReasonDetached,
			fmt.Sprintf("pod %s/%s is detached (its syncer was deleted): it registers no more", id.Namespace, id.Pod))
	case string(v1alpha1.TrafficStandby):
		if inst.OverriddenStatus != eureka.StatusOutOfService {
			return refuse(http.StatusForbidden, ReasonStandby,
				fmt.Sprintf("pod %s/%s belongs to a Standby syncer: its registration carries overriddenStatus OUT_OF_SERVICE, as its registrar sends it", id.Namespace, id.Pod))
		}
	}
	return allow(fmt.Sprintf("%s may register app %s at its own address %s", id, inst.App, inst.IPAddr))
}

// podMarkers says what is wrong with the Eurekube markers in a pod's
// metadata, "" when nothing: they may be left out, but those present name
// the pod itself, and this cluster.
func podMarkers(id Identity, meta map[string]string, clusterID string) string {
	want := map[string]string{
		eureka.MetaManagedBy: eureka.ManagedByValue,
		eureka.MetaNamespace: id.Namespace,
		eureka.MetaPod:       id.Pod,
		eureka.MetaPodUID:    id.PodUID,
	}
	if clusterID != "" {
		want[eureka.MetaCluster] = clusterID
	}
	for k, v := range meta {
		if !strings.HasPrefix(k, markerPrefix) {
			continue
		}
		if k == eureka.MetaService {
			return fmt.Sprintf("metadata %s=%q: a pod registers no Service (the manager does, for Service-mode syncers)", k, v)
		}
		if w, known := want[k]; known && w != v {
			return fmt.Sprintf("metadata %s=%q is not %s's (%q): Eurekube's markers say who registered an instance, and a pod names only itself", k, v, id, w)
		}
	}
	return ""
}

// markerPrefix begins every key of Eurekube's metadata markers.
const markerPrefix = "eurekube.io/"

func (a authorizer) decideClient(ctx context.Context, id Identity, w write) verdict {
	var policies v1alpha1.EurekaAppPolicyList
	if err := a.cache.List(ctx, &policies, client.UnsafeDisableDeepCopy); err != nil {
		return refuse(http.StatusServiceUnavailable, ReasonOwnershipFailed, fmt.Sprintf("list EurekaAppPolicies: %v", err))
	}
	var binding string
	for _, p := range policies.Items {
		if slices.Contains(p.Spec.ClientSecrets, id.Secret) && ownership.Names(&p, w.app) {
			binding = p.Name
			break
		}
	}
	if binding == "" {
		return refuse(http.StatusForbidden, ReasonAppNotBound,
			fmt.Sprintf("no EurekaAppPolicy binds app %s to Secret %s (spec.clientSecrets beside spec.apps): the platform team binds a client's credentials to the apps it runs", w.app, id.Secret))
	}
	meta := queryMap(w.query)
	if w.op == OpRegister {
		meta = w.inst.Metadata
	}
	for k := range meta {
		if strings.HasPrefix(k, markerPrefix) {
			return refuse(http.StatusForbidden, ReasonForgedMarkers,
				fmt.Sprintf("metadata %s: keys under %s are Eurekube's markers of what its registrars and manager registered; a client outside the cluster writes none", k, markerPrefix))
		}
	}
	return allow(fmt.Sprintf("EurekaAppPolicy %s binds app %s to Secret %s", binding, w.app, id.Secret))
}

// queryMap is a metadata update's query (…/metadata?k=v) as Eureka merges
// it: one value per key.
func queryMap(q url.Values) map[string]string {
	m := make(map[string]string, len(q))
	for k, v := range q {
		if len(v) > 0 {
			m[k] = v[0]
		}
	}
	return m
}

// instanceID is the instance the write is about: the path's, or the
// registration's.
func (w write) instanceID() string {
	if w.op == OpRegister {
		return w.inst.InstanceID
	}
	return w.id
}
