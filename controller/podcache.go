package controller

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"unique"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
	// podsByApp: the Eureka app the pod asks for by annotation
	// (eurekube.io/app-name), upper-cased as Eureka names apps.
	podsByApp = v1alpha1.AnnotationAppName
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
	if err := fi.IndexField(ctx, &corev1.Pod{}, podsByApp, func(o client.Object) []string {
		if name, ok := o.GetAnnotations()[v1alpha1.AnnotationAppName]; ok {
			return []string{strings.ToUpper(name)}
		}
		return nil
	}); err != nil {
		return fmt.Errorf("index pods by app: %w", err)
	}
	return nil
}

// CacheOptions are the cache settings the reconciler needs of its
// manager: managedFields stripped from every object, pods trimmed to
// what the reconciler reads (TrimPod), and of Endpoints only imports'.
func CacheOptions() cache.Options {
	return cache.Options{
		// managedFields are most of an object's bytes and nothing here
		// reads them.
		DefaultTransform: cache.TransformStripManagedFields(),
		ByObject: map[client.Object]cache.ByObject{
			&corev1.Pod{}: {Transform: TrimPod},
			// Imports' Endpoints only, not every Service's of the
			// cluster.
			watchedEndpoints(): endpointsCache(),
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
	t.Namespace, t.GenerateName = shared(t.Namespace), shared(t.GenerateName)
	t.Labels, t.Annotations = sharedMap(t.Labels), sharedMap(t.Annotations)
	if len(t.OwnerReferences) > 0 {
		refs := make([]metav1.OwnerReference, len(t.OwnerReferences))
		for i, o := range t.OwnerReferences {
			refs[i] = o
			refs[i].APIVersion, refs[i].Kind, refs[i].Name = shared(o.APIVersion), shared(o.Kind), shared(o.Name)
		}
		t.OwnerReferences = refs
	}
	t.Spec.NodeName = shared(p.Spec.NodeName)
	t.Spec.Containers = sharedContainers(trimContainers(p.Spec.Containers))
	t.Spec.InitContainers = sharedContainers(trimContainers(p.Spec.InitContainers))
	t.Status = corev1.PodStatus{
		Phase: p.Status.Phase, Conditions: trimConditions(p.Status.Conditions), Reason: shared(p.Status.Reason), Message: shared(p.Status.Message),
		HostIP: shared(p.Status.HostIP), HostIPs: p.Status.HostIPs, PodIP: p.Status.PodIP, PodIPs: p.Status.PodIPs,
		StartTime: p.Status.StartTime, InitContainerStatuses: trimStatuses(p.Status.InitContainerStatuses), ContainerStatuses: trimStatuses(p.Status.ContainerStatuses),
	}
	for i := range t.Status.HostIPs {
		t.Status.HostIPs[i].IP = shared(t.Status.HostIPs[i].IP)
	}
	return t, nil
}

// The strings of a cached pod are mostly the same in every pod of a
// syncer, or of the cluster: label and annotation keys and values, the
// registrar's environment, container names and images, condition types.
// Decoding gives each pod its own copy of each; the cache keeps one
// (unique.Make: a value no pod holds any more is forgotten), which is
// about a third of what a trimmed pod costs in memory.

// shared is s, its bytes shared with every equal string of the cache.
func shared[S ~string](s S) S {
	if s == "" {
		return s
	}
	return S(unique.Make(string(s)).Value())
}

// sharedMap is m with its keys and values shared.
func sharedMap(m map[string]string) map[string]string {
	if m == nil {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[shared(k)] = shared(v)
	}
	return out
}

// containerSets are trimmed container lists by their encoding: the pods of
// one template, or of one syncer, have the same, which is most of what a
// trimmed pod holds (the registrar's environment: some 30 variables).
// Pods share one list; nothing changes a cached object, so they may.
// The map is emptied when it reaches maxContainerSets, so it holds at
// most that many lists besides those pods still use.
var containerSets struct {
	mu   sync.Mutex
	sets map[string][]corev1.Container
}

const maxContainerSets = 4096

// sharedContainers is cs, or an equal list already cached.
func sharedContainers(cs []corev1.Container) []corev1.Container {
	if len(cs) == 0 {
		return cs
	}
	key, err := (&corev1.PodSpec{Containers: cs}).Marshal()
	if err != nil {
		return cs
	}
	containerSets.mu.Lock()
	defer containerSets.mu.Unlock()
	if got, ok := containerSets.sets[string(key)]; ok {
		return got
	}
	if containerSets.sets == nil || len(containerSets.sets) >= maxContainerSets {
		containerSets.sets = map[string][]corev1.Container{}
	}
	containerSets.sets[string(key)] = cs
	return cs
}

func trimConditions(cs []corev1.PodCondition) []corev1.PodCondition {
	if cs == nil {
		return nil
	}
	out := make([]corev1.PodCondition, len(cs))
	for i, c := range cs {
		out[i] = c
		out[i].Type, out[i].Status, out[i].Reason, out[i].Message = shared(c.Type), shared(c.Status), shared(c.Reason), shared(c.Message)
	}
	return out
}

func trimStatuses(cs []corev1.ContainerStatus) []corev1.ContainerStatus {
	if cs == nil {
		return nil
	}
	out := make([]corev1.ContainerStatus, len(cs))
	for i := range cs {
		c := &cs[i]
		out[i] = corev1.ContainerStatus{Name: shared(c.Name), State: sharedState(c.State), LastTerminationState: sharedState(c.LastTerminationState),
			Ready: c.Ready, RestartCount: c.RestartCount, Image: shared(c.Image), Started: c.Started}
	}
	return out
}

// sharedState shares the reasons of a container's state; a termination
// message, which the registrar's last words fill, stays its own.
func sharedState(s corev1.ContainerState) corev1.ContainerState {
	if s.Waiting != nil {
		w := *s.Waiting
		w.Reason, w.Message = shared(w.Reason), shared(w.Message)
		s.Waiting = &w
	}
	if s.Terminated != nil {
		t := *s.Terminated
		t.Reason = shared(t.Reason)
		s.Terminated = &t
	}
	return s
}

func trimContainers(cs []corev1.Container) []corev1.Container {
	if cs == nil {
		return nil
	}
	out := make([]corev1.Container, len(cs))
	for i := range cs {
		c := &cs[i]
		out[i] = corev1.Container{Name: shared(c.Name), Image: shared(c.Image), Ports: sharedPorts(c.Ports), ReadinessProbe: sharedProbe(c.ReadinessProbe), RestartPolicy: c.RestartPolicy}
		if c.Name == v1alpha1.RegistrarContainerName {
			out[i].Env = sharedEnv(c.Env)
		}
	}
	return out
}

func sharedPorts(ps []corev1.ContainerPort) []corev1.ContainerPort {
	if ps == nil {
		return nil
	}
	out := make([]corev1.ContainerPort, len(ps))
	for i, p := range ps {
		out[i] = p
		out[i].Name, out[i].Protocol, out[i].HostIP = shared(p.Name), shared(p.Protocol), shared(p.HostIP)
	}
	return out
}

// sharedEnv is the registrar's environment with its names and values
// shared. Variables from the downward API (the pod's name, UID, IP) are
// kept as they are: nothing here reads them, but they are part of what
// the registrar was given.
func sharedEnv(env []corev1.EnvVar) []corev1.EnvVar {
	if env == nil {
		return nil
	}
	out := make([]corev1.EnvVar, len(env))
	for i, e := range env {
		out[i] = corev1.EnvVar{Name: shared(e.Name), Value: shared(e.Value), ValueFrom: sharedFieldRef(e.ValueFrom)}
	}
	return out
}

// fieldRefs are the downward-API sources of registrar environments, one
// of each: the webhook gives every registrar the same few.
var fieldRefs sync.Map // fieldRefKey → *corev1.EnvVarSource

type fieldRefKey struct{ apiVersion, fieldPath string }

// maxFieldRefs bounds fieldRefs, whatever pods the cluster holds.
const maxFieldRefs = 64

var fieldRefCount atomic.Int32

// sharedFieldRef is v, or an equal source already cached when v is a
// plain field reference.
func sharedFieldRef(v *corev1.EnvVarSource) *corev1.EnvVarSource {
	if v == nil || v.FieldRef == nil || v.ResourceFieldRef != nil || v.ConfigMapKeyRef != nil || v.SecretKeyRef != nil || v.FileKeyRef != nil {
		return v
	}
	key := fieldRefKey{v.FieldRef.APIVersion, v.FieldRef.FieldPath}
	if got, ok := fieldRefs.Load(key); ok {
		return got.(*corev1.EnvVarSource)
	}
	if fieldRefCount.Load() >= maxFieldRefs {
		return v
	}
	own := &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{APIVersion: shared(key.apiVersion), FieldPath: shared(key.fieldPath)}}
	got, loaded := fieldRefs.LoadOrStore(key, own)
	if !loaded {
		fieldRefCount.Add(1)
	}
	return got.(*corev1.EnvVarSource)
}

// sharedProbe is a copy of p with its strings shared.
func sharedProbe(p *corev1.Probe) *corev1.Probe {
	if p == nil {
		return nil
	}
	q := *p
	if h := q.HTTPGet; h != nil {
		g := *h
		g.Path, g.Host, g.Scheme, g.Port.StrVal = shared(g.Path), shared(g.Host), shared(g.Scheme), shared(g.Port.StrVal)
		q.HTTPGet = &g
	}
	if s := q.TCPSocket; s != nil {
		t := *s
		t.Host, t.Port.StrVal = shared(t.Host), shared(t.Port.StrVal)
		q.TCPSocket = &t
	}
	return &q
}
