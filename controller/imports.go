package controller

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crcontroller "sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/eurekube/eurekube/api/v1alpha1"
	"github.com/eurekube/eurekube/eureka"
	"github.com/eurekube/eurekube/internal/ownership"
)

// Imports: the other direction. An EurekaImport keeps a selector-less
// Service of its namespace, and EndpointSlices with one endpoint per
// instance of a Eureka app (import_plan.go says how), and the same as an
// Endpoints (import_endpoints.go), from the registry read every syncer of
// the same servers shares: the cost of a thousand imports is one read per
// resync, and a slice is written only when it changes. The Service,
// Endpoints and slices carry the import as owner and label; nothing
// else's is ever changed, and deleting the import removes exactly them.

// Reasons of an import's conditions.
const (
	reasonImported         = "Imported"
	reasonNoInstances      = "NoInstances"
	reasonServiceNotOwned  = "ServiceNotOwned"
	reasonServiceOwned     = "ServiceOwned"
	reasonLeasesExpired    = v1alpha1.ReasonLeasesExpired
	reasonImportNotAllowed = "NotPermitted"
	// reasonImportWriteFailed: the API server refused a write of the
	// Service or a slice (a full Service IP range, a policy).
	reasonImportWriteFailed = "WriteFailed"
	// reasonEndpointsChanged is the Normal Event of a pass that wrote
	// slices: at most one per registry read, none while nothing changes.
	reasonEndpointsChanged = "EndpointsChanged"
	// reasonEndpointsNotOwned: an Endpoints of the Service's name exists
	// that the import did not make.
	reasonEndpointsNotOwned = "EndpointsNotOwned"
	// reasonAllServed: every instance imported is an endpoint.
	reasonAllServed = "AllServed"
	// reasonSeveralReasons: instances are left out for more than one
	// reason (InstancesServed).
	reasonSeveralReasons = "SeveralReasons"
)

// DefaultImportEmptiedHold is how long an import keeps its endpoints once a registry
// read lists none of its app's instances while it had some: a Eureka
// server restarted empty lists an instance again at its next heartbeat
// (within its 30 s renewal interval, when the server answers 404 and the
// client registers anew), and answers from a response cache up to
// eureka.ServerCacheDelay old; a lease (90 s) covers both, with room for
// a busy server.
const DefaultImportEmptiedHold = 2 * time.Minute

// emptied is when an import's registry read first listed none of its
// app's instances, and until when its endpoints are kept.
type emptied struct{ since, until time.Time }

// holdEmptied says whether imp keeps its endpoints as last written, and
// until when: from a read that lists none of its app's instances while it
// had endpoints, as long as the reads list fewer instances (instances)
// than it had endpoints, and at most until the hold ends. The hold starts
// at the first such read this manager saw (a restarted manager holds
// anew: longer, never shorter).
func (r *importReconciler) holdEmptied(imp *v1alpha1.EurekaImport, instances int) (bool, emptied) {
	key := client.ObjectKeyFromObject(imp)
	now := time.Now()
	v, holding := r.emptied.Load(key)
	switch {
	case imp.Status.TotalEndpoints == 0:
	case instances == 0 && !holding:
		e := emptied{since: now, until: now.Add(r.opts.ImportEmptiedHold)}
		r.emptied.Store(key, e)
		return true, e
	case holding && instances < int(imp.Status.TotalEndpoints) && now.Before(v.(emptied).until):
		// Refilling: instances register again one heartbeat at a time,
		// and the first few must not take all the Service's calls.
		return true, v.(emptied)
	}
	r.emptied.Delete(key)
	return false, emptied{}
}

// leftOutReason is the reason for instances left out: their kind's, or
// SeveralReasons.
func leftOutReason(all []leftOut) string {
	for _, l := range all[1:] {
		if l.kind != all[0].kind {
			return reasonSeveralReasons
		}
	}
	return all[0].kind.reason()
}

// Import condition types beyond the syncer's (Synced, EurekaReachable,
// Permitted).
const conditionServiceOwned = v1alpha1.ConditionServiceOwned

// importReconciler keeps EurekaImports. It shares the syncers' Eureka
// clients and registry reads.
type importReconciler struct {
	*Reconciler
	follow *readFollowers
	// ranges are the cluster's pod and Service ranges (import_ranges.go).
	ranges *rangeSource
	// emptied holds, by import, the reads that listed none of its app's
	// instances while it had endpoints (holdEmptied).
	emptied sync.Map
}

// setupImports registers the import controller beside the syncers'.
func setupImports(mgr manager.Manager, r *Reconciler) error {
	follow := newReadFollowers()
	if err := indexPodsByIP(context.Background(), mgr); err != nil {
		return err
	}
	ranges := &rangeSource{pods: r.opts.PodCIDRs, services: r.opts.ServiceCIDRs, cache: r.client, api: r.apiReader}
	return ctrl.NewControllerManagedBy(mgr).
		Named("eurekaimport").
		For(&v1alpha1.EurekaImport{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		// A Service or slice of an import changed or deleted by hand is
		// put back, and so is its Endpoints (the cache holds only
		// imports': endpointsCache). Their creation is the import's own
		// doing (or, at start, the initial list, when every import is
		// queued anyway): queueing the import again would only re-read
		// what it wrote, from a cache that may not have its status yet,
		// and write that status twice.
		Owns(&corev1.Service{}, builder.WithPredicates(notCreated)).
		Owns(&discoveryv1.EndpointSlice{}, builder.WithPredicates(notCreated)).
		Owns(watchedEndpoints(), builder.WithPredicates(notCreated)).
		// A pattern import's imports, one per app: their statuses make
		// its own (import_pattern.go).
		Owns(&v1alpha1.EurekaImport{}).
		// Each read of an import's registry, whoever asked for it.
		WatchesRawSource(follow.source()).
		// As the syncers': a reconcile mostly waits for the API server.
		// One at a time, 1,000 imports took 51 s to their first slices.
		WithOptions(crcontroller.Options{MaxConcurrentReconciles: maxConcurrentReconciles}).
		Complete(&importReconciler{Reconciler: r, follow: follow, ranges: ranges})
}

// notCreated passes every event but an object's creation.
var notCreated = predicate.Funcs{CreateFunc: func(event.CreateEvent) bool { return false }}

// importFinalizer keeps a deleted import until what it made is gone.
const importFinalizer = v1alpha1.ImportFinalizer

// Reconcile keeps one import's Service and slices.
func (r *importReconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	var imp v1alpha1.EurekaImport
	if err := r.client.Get(ctx, req.NamespacedName, &imp); err != nil {
		if apierrors.IsNotFound(err) {
			forgetImportMetrics(req.Namespace, req.Name)
			forgetRefusedMetric(req.Namespace, req.Name)
			r.follow.forget(req.NamespacedName)
			gone := &v1alpha1.EurekaImport{}
			gone.Namespace, gone.Name = req.Namespace, req.Name
			r.clients.release(client.ObjectKeyFromObject(importAsSyncer(gone)))
		}
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if imp.IsPattern() {
		return r.reconcilePattern(ctx, &imp)
	}
	log := r.log.WithFields(map[string]any{"namespace": imp.Namespace, "import": imp.Name})
	if !imp.DeletionTimestamp.IsZero() {
		if err := r.removeImported(ctx, &imp); err != nil {
			return reconcile.Result{}, err
		}
		r.emptied.Delete(req.NamespacedName)
		if controllerutil.RemoveFinalizer(&imp, importFinalizer) {
			if err := r.client.Update(ctx, &imp); client.IgnoreNotFound(err) != nil {
				return reconcile.Result{}, fmt.Errorf("remove finalizer: %w", err)
			}
		}
		forgetImportMetrics(imp.Namespace, imp.Name)
		forgetRefusedMetric(imp.Namespace, imp.Name)
		r.follow.forget(req.NamespacedName)
		log.Info("import deleted: its Service, Endpoints and EndpointSlices removed")
		return reconcile.Result{}, nil
	}
	finalized := r.finalizeAside(ctx, &imp)
	defer finalized() // on every way out; the status write below waits for it first

	before := imp.Status.DeepCopy()
	finish := func() (reconcile.Result, error) {
		ferr := finalized()
		res, err := r.finishImport(ctx, &imp, before)
		return res, errors.Join(err, ferr)
	}
	st := &imp.Status
	st.ObservedGeneration, st.App, st.ServiceName = imp.Generation, imp.EffectiveApp(), imp.EffectiveServiceName()
	set := importConditionSetter(&imp)

	if refusal := r.importRefusal(ctx, &imp); refusal != nil {
		r.clients.release(client.ObjectKeyFromObject(importAsSyncer(&imp))) // a refused import reads nothing
		set(v1alpha1.ConditionPermitted, false, refusal.reason, refusal.message)
		set(v1alpha1.ConditionSynced, false, refusal.reason, "nothing is read from Eureka and nothing is imported: see the Permitted condition")
		// A refused import reads nothing: it stops following its
		// servers' reads too.
		r.follow.forget(req.NamespacedName)
		return finish()
	}
	set(v1alpha1.ConditionPermitted, true, v1alpha1.ReasonPermitted, "the app, its Eureka servers and the namespace are allowed")

	registry, err := r.readFollowed(ctx, &imp)
	if err != nil {
		reason := reasonEurekaUnreachable
		if capped := (*serverSetCapError)(nil); errors.As(err, &capped) {
			reason = reasonServerSetCap // read nothing, as a syncer past the cap
		}
		set(v1alpha1.ConditionEurekaReachable, false, reason, err.Error())
		stale := "no endpoints were ever imported"
		if st.LastSyncTime != nil {
			stale = fmt.Sprintf("the endpoints are kept as last read at %s (%s ago)", st.LastSyncTime.UTC().Format(time.RFC3339), time.Since(st.LastSyncTime.Time).Round(time.Second))
		}
		set(v1alpha1.ConditionSynced, false, reason, "Eureka could not be read: "+stale)
		if st.LastSyncTime != nil {
			// The endpoints as last written are still served: the gauges
			// say so after a restart during an outage too.
			setImportGauges(imp.Namespace, imp.Name, st.ReadyEndpoints, st.TotalEndpoints)
		}
		r.recorder.Eventf(&imp, nil, corev1.EventTypeWarning, reason, "Import", "%s", truncate(err.Error(), maxEventNote))
		return finish()
	}
	set(v1alpha1.ConditionEurekaReachable, true, "Reachable", "Eureka answered")

	all := registry.Instances(imp.EffectiveApp())
	rule, err := r.addressRule(ctx, &imp)
	if err != nil {
		// The slices stay as last written: nothing serving is emptied
		// because the manager could not tell what is inside the cluster.
		set(v1alpha1.ConditionSynced, false, reasonRangesUnknown, fmt.Sprintf("which addresses are inside the cluster, or who may register %s, could not be read, so nothing is written (the endpoints are kept as last written): %v", imp.EffectiveApp(), err))
		if _, serr := finish(); serr != nil {
			err = errors.Join(err, serr)
		}
		return reconcile.Result{}, err
	}
	taken, notIncluded := splitThisCluster(all, r.opts.ClusterID, rule.includeThisCluster)
	kept, refused := allowedInstances(taken, rule.addressRule)
	if imp.Spec.IncludeThisCluster && !rule.includeThisCluster {
		// Asked for, and not this namespace's to take: named, not
		// silently dropped.
		for _, inst := range notIncluded {
			refused = append(refused, refusedInstance{id: inst.InstanceID, addr: inst.IPAddr, why: "this cluster's instance, and includeThisCluster is refused: " + rule.includeRefusal})
		}
	}
	setRefusedMetric(imp.Namespace, imp.Name, len(refused))
	if len(refused) > 0 {
		set(v1alpha1.ConditionAddressesAllowed, false, v1alpha1.ReasonInClusterAddress, refusalMessage(imp.EffectiveApp(), refused))
	} else {
		set(v1alpha1.ConditionAddressesAllowed, true, reasonAddressesAllowed, "no instance's address is inside this cluster but those of pods of namespaces that may register "+imp.EffectiveApp())
	}
	if held, left := r.holdEmptied(&imp, len(kept)); held {
		// A read that lists none of the app's instances while its
		// endpoints had some, or fewer than it had since: kept, as last
		// written, until they are back or the hold ends.
		setImportGauges(imp.Namespace, imp.Name, st.ReadyEndpoints, st.TotalEndpoints)
		set(v1alpha1.ConditionSynced, false, v1alpha1.ReasonRegistryEmptied, fmt.Sprintf("Eureka listed no instance of %s at %s, while the Service had %d endpoint(s), and lists %d now: a server restarted empty lists them again as they heartbeat, so they are kept as last written until as many are listed again, or until %s",
			imp.EffectiveApp(), left.since.UTC().Format(time.RFC3339), st.TotalEndpoints, len(kept), left.until.UTC().Format(time.RFC3339)))
		if _, err := finish(); err != nil {
			return reconcile.Result{}, err
		}
		return reconcile.Result{RequeueAfter: min(r.opts.ResyncPeriod, time.Until(left.until)+time.Second)}, nil
	}
	plan, owner, ownerReason, err := r.applyImport(ctx, &imp, kept)
	if err != nil {
		// Said on the import, not only in the manager's log; the
		// controller retries with backoff.
		set(v1alpha1.ConditionSynced, false, reasonImportWriteFailed, err.Error())
		r.recorder.Eventf(&imp, nil, corev1.EventTypeWarning, reasonImportWriteFailed, "Import", "%s", truncate(err.Error(), maxEventNote))
		if _, serr := finish(); serr != nil {
			err = errors.Join(err, serr)
		}
		return reconcile.Result{}, err
	}
	if owner != "" {
		set(conditionServiceOwned, false, ownerReason, owner)
		set(v1alpha1.ConditionSynced, false, ownerReason, owner)
		r.recorder.Eventf(&imp, nil, corev1.EventTypeWarning, ownerReason, "Import", "%s", truncate(owner, maxEventNote))
		return finish()
	}
	made := "its Endpoints and its EndpointSlices are"
	if !imp.KeepsEndpoints() {
		made = "its EndpointSlices are (no Endpoints: legacyEndpoints is false)"
	}
	set(conditionServiceOwned, true, reasonServiceOwned, fmt.Sprintf("Service %s, %s this import's", plan.service.Name, made))
	r.follow.saw(req.NamespacedName, imp.EffectiveApp(), registry) // the slices hold this read of the app
	st.ReadyEndpoints, st.TotalEndpoints = plan.ready, plan.total
	setImportGauges(imp.Namespace, imp.Name, plan.ready, plan.total)
	if written := plan.writes(); written > 0 {
		r.recorder.Eventf(&imp, nil, corev1.EventTypeNormal, reasonEndpointsChanged, "Import", "Service %s: %d of %d endpoint(s) ready (%d EndpointSlice(s) written)",
			plan.service.Name, plan.ready, plan.total, written)
	}
	st.Endpoints = fmt.Sprintf("%d/%d", plan.ready, plan.total)
	readAt := metav1.NewTime(registry.ReadAt().Truncate(time.Second))
	if lastSyncDue(st.LastSyncTime, readAt.Time, r.leader.since(), imp.UID) || !equality.Semantic.DeepEqual(before, st) {
		st.LastSyncTime = &readAt
	}
	if len(plan.leftOut) > 0 {
		set(v1alpha1.ConditionInstancesServed, false, leftOutReason(plan.leftOut), fmt.Sprintf("%d instance(s) of %s are no endpoint: %s", len(plan.leftOut), imp.EffectiveApp(), names(plan.leftOutNames())))
	} else {
		set(v1alpha1.ConditionInstancesServed, true, reasonAllServed, "every instance imported is an endpoint, on each Service port it has enabled")
	}
	split := ""
	if imp.KeepsEndpoints() && len(plan.splitPorts) > 0 {
		split = fmt.Sprintf("; the Endpoints names port %s in more than one subset (instances on different port numbers, or some without a port), as Kubernetes would: Spring Cloud Kubernetes' DiscoveryClient (3.3) cannot read that, see docs/operations.md", strings.Join(plan.splitPorts, ", "))
	}
	switch expired := registry.ExpiredLeases(imp.EffectiveApp()); {
	case len(all) == 0:
		set(v1alpha1.ConditionSynced, false, reasonNoInstances, fmt.Sprintf("Eureka lists no instance of %s yet: the Service has no endpoints until one registers", imp.EffectiveApp()))
	case plan.total == 0 && len(plan.leftOut) > 0:
		set(v1alpha1.ConditionSynced, false, leftOutReason(plan.leftOut), fmt.Sprintf("no instance of %s is an endpoint; the instances have: %s; left out: %s",
			imp.EffectiveApp(), strings.Join(plan.ports, "; "), names(plan.leftOutNames())))
	case len(expired) > 0:
		set(v1alpha1.ConditionSynced, true, reasonLeasesExpired, fmt.Sprintf("%d of %d endpoint(s) ready; %d instance(s) were listed past their lease at Eureka's last full answer (%s): the server may be in self-preservation, and they may be dead",
			plan.ready, plan.total, len(expired), names(expired)))
	case len(plan.leftOut) > 0:
		set(v1alpha1.ConditionSynced, true, reasonImported, fmt.Sprintf("%d of %d endpoint(s) ready; left out: %s%s", plan.ready, plan.total, names(plan.leftOutNames()), split))
	default:
		set(v1alpha1.ConditionSynced, true, reasonImported, fmt.Sprintf("%d of %d endpoint(s) ready, from %d instance(s) of %s%s", plan.ready, plan.total, len(all), imp.EffectiveApp(), split))
	}
	return finish()
}

// importConditionSetter sets one of imp's status conditions, for the
// generation it describes.
func importConditionSetter(imp *v1alpha1.EurekaImport) func(typ string, ok bool, reason, message string) {
	return func(typ string, ok bool, reason, message string) {
		status := metav1.ConditionFalse
		if ok {
			status = metav1.ConditionTrue
		}
		meta.SetStatusCondition(&imp.Status.Conditions, metav1.Condition{Type: typ, Status: status, Reason: reason,
			Message: truncate(message, 1024), ObservedGeneration: imp.Generation})
	}
}

// readFollowed reads the registry of imp's Eureka servers through the
// cache their syncers share, and has imp follow that cache's reads.
func (r *importReconciler) readFollowed(ctx context.Context, imp *v1alpha1.EurekaImport) (*eureka.Registry, error) {
	cache, err := r.clients.forSyncer(ctx, importAsSyncer(imp))
	if err != nil {
		return nil, err
	}
	r.follow.follow(cache, client.ObjectKeyFromObject(imp))
	return cache.Registry(ctx)
}

// finalizeAside puts the finalizer on an import that lacks it, beside the
// import's first writes rather than before them, and returns the wait for
// that write (nil once it landed). A new import's first pass is then a
// write shorter: its Endpoints, Service and slices are made while the
// finalizer is written, and only the status waits for it, as two writes
// of one object must come in order (the finalizer's Update carries the
// read resourceVersion). Should the import be deleted before the
// finalizer lands, what was made meanwhile is the import's by controller
// reference, and Kubernetes' garbage collector removes it.
func (r *importReconciler) finalizeAside(ctx context.Context, imp *v1alpha1.EurekaImport) func() error {
	if controllerutil.ContainsFinalizer(imp, importFinalizer) {
		return func() error { return nil }
	}
	withIt := imp.DeepCopy()
	controllerutil.AddFinalizer(withIt, importFinalizer)
	done := make(chan error, 1)
	go func() {
		if err := r.client.Update(ctx, withIt); err != nil {
			done <- fmt.Errorf("add finalizer: %w", err)
			return
		}
		done <- nil
	}()
	var once sync.Once
	var err error
	return func() error {
		once.Do(func() { err = <-done })
		return err
	}
}

// finishImport writes the status when it changed, and comes back at the
// next resync.
func (r *importReconciler) finishImport(ctx context.Context, imp *v1alpha1.EurekaImport, before *v1alpha1.EurekaImportStatus) (reconcile.Result, error) {
	notSyncedWhileRefused(&imp.Status.Conditions) // status.go: never Synced while refused
	if !equality.Semantic.DeepEqual(before, &imp.Status) {
		old := imp.DeepCopy()
		old.Status = *before
		patch := client.MergeFrom(old)
		if err := r.client.Status().Patch(ctx, imp, patch); client.IgnoreNotFound(err) != nil {
			return reconcile.Result{}, fmt.Errorf("write status: %w", err)
		}
	}
	return reconcile.Result{RequeueAfter: r.opts.ResyncPeriod}, nil
}

// refusal says why an import may not be made.
type refusal struct{ reason, message string }

// importRefusal applies the platform's rules to an import: its Eureka
// hosts must be allowed, as a syncer's are, and an app that an
// EurekaAppPolicy names may be imported only where the policy grants it
// (an app no policy names is anyone's to call).
func (r *importReconciler) importRefusal(ctx context.Context, imp *v1alpha1.EurekaImport) *refusal {
	if err := r.opts.Defaults.CheckAllowed(importAsSyncer(imp)); err != nil {
		return &refusal{reason: reasonImportNotAllowed, message: err.Error()}
	}
	var policies v1alpha1.EurekaAppPolicyList
	if err := r.client.List(ctx, &policies); err != nil {
		return &refusal{reason: reasonImportNotAllowed, message: fmt.Sprintf("list EurekaAppPolicies: %v", err)}
	}
	var ns corev1.Namespace
	if err := r.client.Get(ctx, client.ObjectKey{Name: imp.Namespace}, &ns); err != nil {
		return &refusal{reason: reasonImportNotAllowed, message: fmt.Sprintf("read namespace %s: %v", imp.Namespace, err)}
	}
	v := ownership.Decide(imp.EffectiveApp(), ownership.Namespace{Name: ns.Name, Labels: ns.Labels}, policies.Items, nil)
	if !v.Allowed && !v.NeedsClaim {
		return &refusal{reason: v.Reason, message: v.Message}
	}
	return nil
}

// importAsSyncer is the syncer-shaped view of an import's Eureka block,
// which the Eureka access code (its Secrets, its allowlist) reads: one
// path for both. Its name cannot be a syncer's.
func importAsSyncer(imp *v1alpha1.EurekaImport) *v1alpha1.EurekaSyncer {
	return &v1alpha1.EurekaSyncer{
		ObjectMeta: metav1.ObjectMeta{Namespace: imp.Namespace, Name: "import:" + imp.Name, UID: imp.UID, Generation: imp.Generation},
		Spec:       v1alpha1.EurekaSyncerSpec{Eureka: imp.Spec.Eureka},
	}
}

// applyImport makes the Service, its Endpoints and slices what imp wants
// for instances, writing only what differs, and returns the plan it wrote.
// It returns a message naming the owner, and the reason, when the
// Service's name is taken by a Service or Endpoints the import did not
// make; nothing is written then. Slices are written as Kubernetes'
// EndpointSlice controller writes them: new ones first, then changed
// ones, then those that go, so that an endpoint moving between slices is
// never in none.
func (r *importReconciler) applyImport(ctx context.Context, imp *v1alpha1.EurekaImport, instances []eureka.Instance) (importPlan, string, string, error) {
	var serviceErr error
	var svc corev1.Service
	err := r.client.Get(ctx, client.ObjectKey{Namespace: imp.Namespace, Name: imp.EffectiveServiceName()}, &svc)
	exists := err == nil
	switch {
	case apierrors.IsNotFound(err): // made below, after its Endpoints
	case err != nil:
		return importPlan{}, "", "", fmt.Errorf("read Service %s: %w", imp.EffectiveServiceName(), err)
	case !metav1.IsControlledBy(&svc, imp):
		return importPlan{}, notOwnedMessage("Service", &svc), reasonServiceNotOwned, nil
	}
	have, err := r.importSlices(ctx, imp)
	if err != nil {
		return importPlan{}, "", "", err
	}
	// The Service's IP families are known once it exists; a Service about
	// to be made is planned for any, and again once made.
	var families []corev1.IPFamily
	if exists {
		families = svc.Spec.IPFamilies
	}
	plan := planImport(imp, instances, families, have)
	want := &plan.service // the same whatever the families
	// The Endpoints before the Service: a stranger's Endpoints of the name
	// would become the Service's endpoints for whoever reads Endpoints.
	if owner, err := r.keepEndpoints(ctx, imp, &plan.endpoints, !exists); err != nil || owner != "" {
		return plan, owner, reasonEndpointsNotOwned, err
	}
	switch {
	case !exists:
		svc = *want.DeepCopy()
		if err := controllerutil.SetControllerReference(imp, &svc, r.client.Scheme()); err != nil {
			return plan, "", "", err
		}
		if err := r.client.Create(ctx, &svc); err != nil {
			return plan, "", "", fmt.Errorf("create Service %s: %w", svc.Name, err)
		}
	case (svc.Spec.ClusterIP == corev1.ClusterIPNone) != (want.Spec.ClusterIP == corev1.ClusterIPNone):
		// ClusterIP and headless cannot turn into each other: make it anew.
		if err := r.client.Delete(ctx, &svc, client.Preconditions{UID: &svc.UID}); client.IgnoreNotFound(err) != nil {
			return plan, "", "", fmt.Errorf("delete Service %s to change its type: %w", svc.Name, err)
		}
		return plan, "", "", fmt.Errorf("made Service %s anew for its new type: retry", svc.Name)
	case mergeImportService(&svc, want):
		// A Service update the API server refuses (a field this server
		// does not have, a policy) is said, and the slices are written
		// all the same: they follow Eureka whatever the Service's fields.
		if err := r.client.Update(ctx, &svc); err != nil {
			serviceErr = fmt.Errorf("update Service %s: %w", svc.Name, err)
			if err := r.client.Get(ctx, client.ObjectKeyFromObject(&svc), &svc); err != nil {
				return plan, "", "", errors.Join(serviceErr, fmt.Errorf("read Service %s: %w", svc.Name, err))
			}
		}
	}
	if !slices.Equal(families, svc.Spec.IPFamilies) {
		plan = planImport(imp, instances, svc.Spec.IPFamilies, have)
		if owner, err := r.keepEndpoints(ctx, imp, &plan.endpoints, false); err != nil || owner != "" {
			return plan, owner, reasonEndpointsNotOwned, err
		}
	}
	for _, i := range plan.create {
		s := &plan.slices[i]
		if err := controllerutil.SetControllerReference(imp, s, r.client.Scheme()); err != nil {
			return plan, "", "", err
		}
		if err := r.client.Create(ctx, s); err != nil {
			return plan, "", "", fmt.Errorf("create EndpointSlice %s: %w", s.Name, err)
		}
	}
	for _, i := range plan.update {
		s := &plan.slices[i]
		if err := r.client.Update(ctx, s); err != nil {
			return plan, "", "", fmt.Errorf("update EndpointSlice %s: %w", s.Name, err)
		}
	}
	for _, stale := range plan.remove {
		if err := r.client.Delete(ctx, &stale, client.Preconditions{UID: &stale.UID}); client.IgnoreNotFound(err) != nil {
			return plan, "", "", fmt.Errorf("delete EndpointSlice %s: %w", stale.Name, err)
		}
	}
	return plan, "", "", serviceErr
}

// mergeImportService makes got, the import's Service as stored, what want
// says, and is true when that changed it. Labels and annotations the
// import put there from its spec and no longer wants are taken off; those
// anyone else added stay. A selector added by hand goes: Kubernetes'
// EndpointSlice controller would add slices of its own.
func mergeImportService(got, want *corev1.Service) bool {
	before := got.DeepCopy()
	var had appliedMetadata
	_ = json.Unmarshal([]byte(got.Annotations[ImportAppliedMetadata]), &had) // unreadable: nothing known applied
	var wanted appliedMetadata
	_ = json.Unmarshal([]byte(want.Annotations[ImportAppliedMetadata]), &wanted)
	for _, k := range had.Labels {
		if _, keep := want.Labels[k]; !keep {
			delete(got.Labels, k)
		}
	}
	for _, k := range had.Annotations {
		if _, keep := want.Annotations[k]; !keep {
			delete(got.Annotations, k)
		}
	}
	if _, keep := want.Annotations[ImportAppliedMetadata]; !keep {
		delete(got.Annotations, ImportAppliedMetadata)
	}
	if len(want.Labels) > 0 && got.Labels == nil {
		got.Labels = map[string]string{}
	}
	maps.Copy(got.Labels, want.Labels)
	if len(want.Annotations) > 0 && got.Annotations == nil {
		got.Annotations = map[string]string{}
	}
	maps.Copy(got.Annotations, want.Annotations)
	got.Spec.Ports = slices.Clone(want.Spec.Ports) // no nodePort: the type goes back too
	got.Spec.Type, got.Spec.ExternalIPs = want.Spec.Type, nil
	got.Spec.Selector = nil
	got.Spec.SessionAffinity, got.Spec.SessionAffinityConfig = want.Spec.SessionAffinity, want.Spec.SessionAffinityConfig
	got.Spec.TrafficDistribution, got.Spec.IPFamilyPolicy = want.Spec.TrafficDistribution, want.Spec.IPFamilyPolicy
	// Fields the API server fills in (a port's targetPort) compare as
	// stored.
	for i := range got.Spec.Ports {
		for _, p := range before.Spec.Ports {
			if p.Name == got.Spec.Ports[i].Name && p.Port == got.Spec.Ports[i].Port {
				got.Spec.Ports[i].TargetPort = p.TargetPort
			}
		}
	}
	return !equality.Semantic.DeepEqual(before, got)
}

// notOwnedMessage names who a Service (or Endpoints, kind) belongs to
// that an import would have made.
func notOwnedMessage(kind string, obj client.Object) string {
	owner := "no owner reference; it was made by hand or by another tool"
	if ref := metav1.GetControllerOf(obj); ref != nil {
		owner = fmt.Sprintf("it belongs to %s %s", ref.Kind, ref.Name)
	} else if m := obj.GetLabels()["app.kubernetes.io/managed-by"]; m != "" {
		owner = "it is managed by " + m
	}
	return fmt.Sprintf("%s %s exists and is not this import's (%s): nothing is written to it; set spec.service.name to a free name, or delete it", kind, obj.GetName(), owner)
}

// importSlices are the EndpointSlices imp made: labelled with its name and
// controlled by it (a slice someone took the owner reference off is no
// longer the import's).
func (r *importReconciler) importSlices(ctx context.Context, imp *v1alpha1.EurekaImport) ([]discoveryv1.EndpointSlice, error) {
	var list discoveryv1.EndpointSliceList
	if err := r.client.List(ctx, &list, client.InNamespace(imp.Namespace), client.MatchingLabels{ImportLabel: imp.Name}); err != nil {
		return nil, fmt.Errorf("list EndpointSlices: %w", err)
	}
	var own []discoveryv1.EndpointSlice
	for _, s := range list.Items {
		if metav1.IsControlledBy(&s, imp) {
			own = append(own, s)
		}
	}
	return own, nil
}

// removeImported deletes the Service, Endpoints and slices the import
// made, and nothing else.
func (r *importReconciler) removeImported(ctx context.Context, imp *v1alpha1.EurekaImport) error {
	if err := r.removeEndpoints(ctx, imp); err != nil {
		return err
	}
	slices, err := r.importSlices(ctx, imp)
	if err != nil {
		return err
	}
	for i := range slices {
		s := &slices[i]
		if err := r.client.Delete(ctx, s, client.Preconditions{UID: &s.UID}); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("delete EndpointSlice %s: %w", s.Name, err)
		}
	}
	var svc corev1.Service
	err = r.client.Get(ctx, client.ObjectKey{Namespace: imp.Namespace, Name: imp.EffectiveServiceName()}, &svc)
	if err == nil && metav1.IsControlledBy(&svc, imp) {
		err = r.client.Delete(ctx, &svc, client.Preconditions{UID: &svc.UID})
	}
	if client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("delete Service %s: %w", imp.EffectiveServiceName(), err)
	}
	return nil
}
