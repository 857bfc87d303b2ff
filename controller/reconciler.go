package controller

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/eurekube/eurekube/api/v1alpha1"
	"github.com/eurekube/eurekube/eureka"
)

// Options configure the reconciler.
type Options struct {
	// ClusterID is this cluster's marker on the instances it owns.
	ClusterID string
	// ResyncPeriod: every syncer is reconciled at least this often
	// (default 30 s), because Eureka cannot be watched.
	ResyncPeriod time.Duration
	// DefaultEurekaURLs serve syncers that name no server.
	DefaultEurekaURLs []string
	// EurekaTimeout bounds one Eureka request (default 5 s).
	EurekaTimeout time.Duration
	Logger        logrus.FieldLogger
}

// lastSyncRefresh: status.lastSyncTime alone is rewritten at most this
// often, so an unchanged syncer costs no write per resync.
const lastSyncRefresh = 5 * time.Minute

// maxNamedPods is how many pods a condition message names.
const maxNamedPods = 5

// Reconciler keeps EurekaSyncer status true and collects orphans.
type Reconciler struct {
	client    client.Client
	apiReader client.Reader
	recorder  events.EventRecorder
	clients   *clients
	opts      Options
}

// NewReconciler returns a reconciler using the manager's clients.
func NewReconciler(mgr manager.Manager, o Options) *Reconciler {
	if o.ResyncPeriod <= 0 {
		o.ResyncPeriod = 30 * time.Second
	}
	if o.Logger == nil {
		o.Logger = logrus.StandardLogger()
	}
	return &Reconciler{
		client:    mgr.GetClient(),
		apiReader: mgr.GetAPIReader(),
		recorder:  mgr.GetEventRecorder("eurekube"),
		opts:      o,
		clients: &clients{
			reader: mgr.GetAPIReader(), defaults: o.DefaultEurekaURLs, timeout: o.EurekaTimeout,
			log: o.Logger, observer: requestObserver{}, byHash: map[[32]byte]*eureka.Client{},
		},
	}
}

// Setup registers the reconciler with the manager: it watches syncers and
// pods (a pod maps to the syncers of its namespace).
func Setup(mgr manager.Manager, o Options) error {
	r := NewReconciler(mgr, o)
	return ctrl.NewControllerManagedBy(mgr).
		Named("eurekasyncer").
		For(&v1alpha1.EurekaSyncer{}).
		Watches(&corev1.Pod{}, handler.EnqueueRequestsFromMapFunc(r.syncersOfPod)).
		Complete(r)
}

// syncersOfPod maps a pod to every syncer of its namespace: a pod that
// stopped matching changes its old syncer's counts too.
func (r *Reconciler) syncersOfPod(ctx context.Context, obj client.Object) []reconcile.Request {
	var list v1alpha1.EurekaSyncerList
	if err := r.client.List(ctx, &list, client.InNamespace(obj.GetNamespace())); err != nil {
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(list.Items))
	for _, s := range list.Items {
		reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: s.Namespace, Name: s.Name}})
	}
	return reqs
}

// Reconcile syncs one EurekaSyncer.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	var s v1alpha1.EurekaSyncer
	if err := r.client.Get(ctx, req.NamespacedName, &s); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if !s.DeletionTimestamp.IsZero() {
		return r.detach(ctx, &s)
	}
	if !controllerutil.ContainsFinalizer(&s, v1alpha1.Finalizer) {
		controllerutil.AddFinalizer(&s, v1alpha1.Finalizer)
		if err := r.client.Update(ctx, &s); err != nil {
			return reconcile.Result{}, fmt.Errorf("add finalizer: %w", err)
		}
	}
	return reconcile.Result{RequeueAfter: r.opts.ResyncPeriod}, r.sync(ctx, &s)
}

// observed is what one reconcile measured.
type observed struct {
	selected, injected, ready int32
	notInjected               []string
	instances                 []eureka.Instance
	eurekaErr                 error
	orphansRemoved            int
}

// sync measures, collects orphans and writes the status.
func (r *Reconciler) sync(ctx context.Context, s *v1alpha1.EurekaSyncer) error {
	obs, err := r.measurePods(ctx, s)
	if err != nil {
		return err
	}
	cl, err := r.clients.forSyncer(ctx, s)
	if err == nil {
		obs.instances, err = cl.InstancesWithMetadata(ctx, s.EffectiveAppName(), r.markers(s))
	}
	if err == nil {
		obs.orphansRemoved, obs.instances, err = r.collectOrphans(ctx, s, cl, obs.instances)
	}
	obs.eurekaErr = err
	if err != nil {
		r.recorder.Eventf(s, nil, corev1.EventTypeWarning, "EurekaUnreachable", "Sync", "%v", err)
	}
	return r.writeStatus(ctx, s, obs)
}

// markers select this cluster's instances of this syncer.
func (r *Reconciler) markers(s *v1alpha1.EurekaSyncer) map[string]string {
	return map[string]string{
		eureka.MetaManagedBy: eureka.ManagedByValue,
		eureka.MetaCluster:   r.opts.ClusterID,
		eureka.MetaNamespace: s.Namespace,
		eureka.MetaSyncer:    s.Name,
	}
}

func (r *Reconciler) measurePods(ctx context.Context, s *v1alpha1.EurekaSyncer) (observed, error) {
	selector, err := metav1.LabelSelectorAsSelector(&s.Spec.Selector)
	if err != nil {
		return observed{}, fmt.Errorf("selector: %w", err)
	}
	var pods corev1.PodList
	if err := r.client.List(ctx, &pods, client.InNamespace(s.Namespace), client.MatchingLabelsSelector{Selector: selector}); err != nil {
		return observed{}, fmt.Errorf("list pods: %w", err)
	}
	var obs observed
	for i := range pods.Items {
		pod := &pods.Items[i]
		if pod.DeletionTimestamp != nil || pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
			continue
		}
		obs.selected++
		if hasRegistrar(pod) {
			obs.injected++
		} else {
			obs.notInjected = append(obs.notInjected, pod.Name)
		}
		if podReady(pod) {
			obs.ready++
		}
	}
	sort.Strings(obs.notInjected)
	return obs, nil
}

// collectOrphans cancels the instances whose pod is gone. A pod missing
// from the cache is confirmed missing with an uncached read first.
func (r *Reconciler) collectOrphans(ctx context.Context, s *v1alpha1.EurekaSyncer, cl *eureka.Client, insts []eureka.Instance) (int, []eureka.Instance, error) {
	gone, err := r.podsGone(ctx, s.Namespace, insts)
	if err != nil || len(gone) == 0 {
		return 0, insts, err
	}
	var kept []eureka.Instance
	var removed []string
	for _, inst := range insts {
		if !gone[inst.Metadata[eureka.MetaPodUID]] {
			kept = append(kept, inst)
			continue
		}
		if err := cl.Cancel(ctx, inst.App, inst.InstanceID); err != nil && !errors.Is(err, eureka.ErrNotFound) {
			return len(removed), insts, fmt.Errorf("remove orphan %s: %w", inst.InstanceID, err)
		}
		removed = append(removed, inst.InstanceID)
	}
	orphansRemoved.WithLabelValues(s.Namespace, s.Name).Add(float64(len(removed)))
	r.recorder.Eventf(s, nil, corev1.EventTypeNormal, "OrphansRemoved", "CollectOrphans", "removed %d instance(s) whose pod no longer exists: %s", len(removed), names(removed))
	return len(removed), kept, nil
}

// podsGone returns the pod UIDs of insts that exist neither in the cache
// nor in the API server.
func (r *Reconciler) podsGone(ctx context.Context, namespace string, insts []eureka.Instance) (map[string]bool, error) {
	var cached corev1.PodList
	if err := r.client.List(ctx, &cached, client.InNamespace(namespace)); err != nil {
		return nil, fmt.Errorf("list pods: %w", err)
	}
	suspects := map[string]bool{}
	for _, inst := range insts {
		suspects[inst.Metadata[eureka.MetaPodUID]] = true
	}
	for _, p := range cached.Items {
		delete(suspects, string(p.UID))
	}
	delete(suspects, "")
	if len(suspects) == 0 {
		return nil, nil
	}
	var live corev1.PodList
	if err := r.apiReader.List(ctx, &live, client.InNamespace(namespace)); err != nil {
		return nil, fmt.Errorf("confirm pods are gone: %w", err)
	}
	for _, p := range live.Items {
		delete(suspects, string(p.UID))
	}
	return suspects, nil
}

// detach takes a deleted syncer's instances out of traffic and releases
// the finalizer once none is left.
func (r *Reconciler) detach(ctx context.Context, s *v1alpha1.EurekaSyncer) (reconcile.Result, error) {
	if !controllerutil.ContainsFinalizer(s, v1alpha1.Finalizer) {
		return reconcile.Result{}, nil
	}
	retry := reconcile.Result{RequeueAfter: r.opts.ResyncPeriod}
	cl, err := r.clients.forSyncer(ctx, s)
	var insts []eureka.Instance
	if err == nil {
		insts, err = cl.InstancesWithMetadata(ctx, s.EffectiveAppName(), r.markers(s))
	}
	if err == nil {
		_, insts, err = r.collectOrphans(ctx, s, cl, insts)
	}
	if err != nil {
		r.recorder.Eventf(s, nil, corev1.EventTypeWarning, "DetachBlocked", "Detach",
			"cannot reach Eureka to remove this syncer's instances (%v); the finalizer %s stays until it can, or remove it by hand to abandon them", err, v1alpha1.Finalizer)
		return retry, nil
	}
	if len(insts) > 0 {
		var marked []string
		for _, inst := range insts {
			if inst.Status == eureka.StatusDown {
				continue
			}
			inst.Status = eureka.StatusDown
			if err := cl.Register(ctx, inst); err != nil {
				return retry, fmt.Errorf("take %s out of traffic: %w", inst.InstanceID, err)
			}
			marked = append(marked, inst.InstanceID)
		}
		if len(marked) > 0 {
			r.recorder.Eventf(s, nil, corev1.EventTypeNormal, "Detaching", "Detach",
				"marked %d instance(s) DOWN: %s; they leave Eureka when their pods stop — restart or delete the pods to remove the sidecars", len(marked), names(marked))
		}
		return retry, nil
	}
	controllerutil.RemoveFinalizer(s, v1alpha1.Finalizer)
	if err := r.client.Update(ctx, s); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	instancesGauge.DeletePartialMatch(map[string]string{"namespace": s.Namespace, "syncer": s.Name})
	r.recorder.Eventf(s, nil, corev1.EventTypeNormal, "Detached", "Detach", "no instance of this syncer is left in Eureka; pods created from now on are not injected")
	return reconcile.Result{}, nil
}

// writeStatus computes the status from obs and writes it when it changed.
func (r *Reconciler) writeStatus(ctx context.Context, s *v1alpha1.EurekaSyncer, obs observed) error {
	next := s.Status.DeepCopy()
	next.ObservedGeneration = s.Generation
	next.AppName = s.EffectiveAppName()
	next.SelectedPods, next.InjectedPods, next.ReadyPods = obs.selected, obs.injected, obs.ready
	next.OrphansRemoved += int64(obs.orphansRemoved)
	now := metav1.Now()

	injected := metav1.Condition{Type: v1alpha1.ConditionPodsInjected, Status: metav1.ConditionTrue, Reason: "AllInjected",
		Message: fmt.Sprintf("%d of %d selected pods run the registrar", obs.injected, obs.selected)}
	if len(obs.notInjected) > 0 {
		injected.Status, injected.Reason = metav1.ConditionFalse, "PodsWithoutRegistrar"
		injected.Message = fmt.Sprintf("%d selected pod(s) run without the registrar (created before injection was enabled? restart them): %s",
			len(obs.notInjected), names(obs.notInjected))
	}
	reachable := metav1.Condition{Type: v1alpha1.ConditionEurekaReachable, Status: metav1.ConditionTrue, Reason: "Reachable", Message: "Eureka answered"}
	if obs.eurekaErr != nil {
		reachable.Status, reachable.Reason, reachable.Message = metav1.ConditionFalse, "Unreachable", truncate(obs.eurekaErr.Error(), 1000)
	} else {
		var up int32
		for _, inst := range obs.instances {
			if inst.Status == eureka.StatusUp {
				up++
			}
		}
		next.RegisteredInstances, next.UpInstances = int32(len(obs.instances)), up
		if next.LastSyncTime == nil || now.Sub(next.LastSyncTime.Time) >= lastSyncRefresh {
			next.LastSyncTime = &now
		}
		setInstanceGauges(s, obs.instances)
	}
	ready := metav1.Condition{Type: v1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: "Registered",
		Message: fmt.Sprintf("%d ready pod(s), %d instance(s) UP", obs.ready, next.UpInstances)}
	switch {
	case obs.eurekaErr != nil:
		ready.Status, ready.Reason, ready.Message = metav1.ConditionFalse, "EurekaUnreachable", "Eureka did not answer"
	case len(obs.notInjected) > 0:
		ready.Status, ready.Reason, ready.Message = metav1.ConditionFalse, "PodsWithoutRegistrar", injected.Message
	case next.UpInstances < obs.ready:
		ready.Status, ready.Reason = metav1.ConditionFalse, "NotAllRegistered"
	}
	for _, c := range []metav1.Condition{ready, reachable, injected} {
		c.ObservedGeneration = s.Generation
		meta.SetStatusCondition(&next.Conditions, c)
	}
	if equality.Semantic.DeepEqual(&s.Status, next) {
		return nil
	}
	// A change of anything but lastSyncTime also refreshes it.
	if obs.eurekaErr == nil {
		next.LastSyncTime = &now
	}
	patch := client.MergeFrom(s.DeepCopy())
	s.Status = *next
	if err := r.client.Status().Patch(ctx, s, patch); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("write status: %w", err)
	}
	return nil
}

func setInstanceGauges(s *v1alpha1.EurekaSyncer, insts []eureka.Instance) {
	counts := map[eureka.Status]int{eureka.StatusUp: 0, eureka.StatusDown: 0, eureka.StatusStarting: 0, eureka.StatusOutOfService: 0}
	for _, inst := range insts {
		counts[inst.Status]++
	}
	for status, n := range counts {
		instancesGauge.WithLabelValues(s.Namespace, s.Name, string(status)).Set(float64(n))
	}
}

func hasRegistrar(pod *corev1.Pod) bool {
	for _, c := range pod.Spec.Containers {
		if c.Name == v1alpha1.RegistrarContainerName {
			return true
		}
	}
	return false
}

func podReady(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// names lists up to maxNamedPods names, then how many more.
func names(all []string) string {
	if len(all) <= maxNamedPods {
		return strings.Join(all, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(all[:maxNamedPods], ", "), len(all)-maxNamedPods)
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
