package controller

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crcontroller "sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/eurekube/eurekube/api/v1alpha1"
	"github.com/eurekube/eurekube/eureka"
	"github.com/eurekube/eurekube/internal/ownership"
	"github.com/eurekube/eurekube/webhook"
)

// Options configure the reconciler.
type Options struct {
	// ClusterID is this cluster's marker on the instances it owns; only
	// instances carrying it are ever removed.
	ClusterID string
	// ResyncPeriod: every syncer is reconciled at least this often
	// (default 30 s), because Eureka cannot be watched.
	ResyncPeriod time.Duration
	// Defaults are what the manager's webhook gives every registrar
	// (webhook.Defaults, from the same flags): its EurekaURLs serve syncers
	// that name no server; pods a syncer injected with another image than
	// its RegistrarImage (spec.sidecar.image aside) count as outdated (empty:
	// none does), and so do pods whose registrar was given other settings
	// than the webhook gives now (registrars.go).
	Defaults webhook.Defaults
	// DetachTimeout: how long a deleted syncer's finalizer waits for
	// Eureka once no pod runs the syncer's registrar (detach.go); default
	// DefaultDetachTimeout.
	DetachTimeout time.Duration
	// ClaimGrace: how long an EurekaAppClaim is kept whatever uses it
	// (the webhook claims before the pod it admits exists); zero is
	// DefaultClaimGrace.
	ClaimGrace time.Duration
	// ClaimHold: how long a claim is held for a namespace that registers
	// its app no more before another namespace may claim it (ownership.go);
	// zero is DefaultClaimHold.
	ClaimHold time.Duration
	// PatternAppGrace: how long an app that left Eureka, or no longer
	// matches, keeps the import a pattern import made for it, and so its
	// Service and ClusterIP; zero is DefaultPatternAppGrace.
	PatternAppGrace time.Duration
	// ImportEmptiedHold: how long an import keeps its endpoints once a
	// registry read lists none of its app's instances while it had some;
	// zero is DefaultImportEmptiedHold.
	ImportEmptiedHold time.Duration
	// PodCIDRs and ServiceCIDRs are this cluster's pod and Service
	// ranges (--pod-cidr, --service-cidr): an import writes no address
	// inside them but its own namespace's pods'. Each replaces what would
	// be detected for its kind (import_ranges.go).
	PodCIDRs, ServiceCIDRs []netip.Prefix
	// PatternCap caps the apps one pattern import imports; zero is
	// DefaultMaxPatternApps.
	PatternCap int
	// MaxServerSets caps the Eureka server sets (with their credentials
	// and TLS material) whose registries the manager holds at once
	// (--max-eureka-server-sets); zero is DefaultMaxServerSets (eureka.go).
	MaxServerSets int
	// EurekaTimeout bounds one Eureka request (default: the eureka
	// package's).
	EurekaTimeout time.Duration
	// EurekaBearerToken, when set, is the manager's token for Eurekube's
	// gateway (--gateway-token-file): the clients of the manager's own
	// servers send it (eureka.go).
	EurekaBearerToken func() (string, error)
	// Grant is how a namespace lets the manager read the Secrets and
	// ConfigMaps its syncers name; a forbidden read's condition prints it.
	Grant v1alpha1.ReadGrant
	// Logger receives the reconciler's and its Eureka clients' logs
	// (default: logrus' standard logger).
	Logger logrus.FieldLogger
	// Registries, when set, is bound to the reconciler's registry reads
	// for the webhook (elsewhere.go).
	Registries *Registries
	// AppIndexed: the manager's cache has ownership's index of syncers by
	// app already (manager.Run registers it once, for the webhook too);
	// else Setup registers it.
	AppIndexed bool
}

const (
	// maxNamedPods is how many names a condition message or event lists.
	maxNamedPods = 5
	// maxEventNote: the API refuses an Event whose note is longer than
	// 1 KiB.
	maxEventNote = 1000
	// maxConcurrentReconciles: a reconcile mostly waits for the API
	// server (Eureka is read once per resync for all syncers of a server
	// set), so reconciles overlap those waits; and syncers of a server
	// that times out must not hold up the others.
	maxConcurrentReconciles = 16
)

// Reconciler keeps EurekaSyncer status true, collects orphans and detaches
// deleted syncers.
type Reconciler struct {
	client    client.Client
	apiReader client.Reader
	recorder  events.EventRecorder
	clients   *clients
	log       logrus.FieldLogger
	opts      Options
	overrides *writeMemo
	// cancelled: the orphans this manager cancelled, so that a registry
	// read older than the cancel neither cancels nor counts them again.
	cancelled *writeMemo
	// leases heartbeats the instances of Service-mode syncers
	// (service_heartbeats.go).
	leases *leaseKeeper
	// detachClocks: since when each deleted syncer has had no pod running
	// its registrar (detach.go).
	detachClocks *detachClocks
	// drifts: what the last count of each syncer's pods found they were
	// injected with (registrars.go).
	drifts *driftMemo
	// selectors: each syncer's parsed pod selector (selectors.go).
	selectors *selectors
	// syncerIndex: the syncer informer's namespace index (syncersIn); nil
	// reads with List.
	syncerIndex toolscache.Indexer
	// appIndexed: the cache has ownership's index of syncers by app
	// (Setup registers it).
	appIndexed bool
	// leader: when this reconciler first reconciled (lastsync.go).
	leader leaderClock
}

// NewReconciler returns a reconciler using the manager's clients. Setup
// calls it; benchmarks call Reconcile on it directly.
func NewReconciler(mgr manager.Manager, o Options) *Reconciler {
	if o.ResyncPeriod <= 0 {
		o.ResyncPeriod = 30 * time.Second
	}
	if o.Logger == nil {
		o.Logger = logrus.StandardLogger()
	}
	if o.DetachTimeout <= 0 {
		o.DetachTimeout = DefaultDetachTimeout
	}
	if o.ClaimGrace <= 0 {
		o.ClaimGrace = DefaultClaimGrace
	}
	if o.ClaimHold <= 0 {
		o.ClaimHold = DefaultClaimHold
	}
	if o.ImportEmptiedHold <= 0 {
		o.ImportEmptiedHold = DefaultImportEmptiedHold
	}
	if o.PatternAppGrace <= 0 {
		o.PatternAppGrace = DefaultPatternAppGrace
	}
	if o.PatternCap <= 0 {
		o.PatternCap = DefaultMaxPatternApps
	}
	return &Reconciler{
		client:    mgr.GetClient(),
		apiReader: mgr.GetAPIReader(),
		recorder:  mgr.GetEventRecorder("eurekube"),
		log:       o.Logger,
		opts:      o,
		// Longer than a resync plus the server's response cache (30 s).
		overrides:    &writeMemo{ttl: o.ResyncPeriod + time.Minute},
		cancelled:    &writeMemo{ttl: o.ResyncPeriod + time.Minute},
		leases:       newLeaseKeeper(o.Logger),
		detachClocks: &detachClocks{},
		drifts:       &driftMemo{},
		selectors:    &selectors{},
		clients: &clients{
			reads: newAccessReads(mgr.GetAPIReader()), grant: o.Grant, defaults: o.Defaults.EurekaURLs, timeout: o.EurekaTimeout, maxAge: o.ResyncPeriod,
			maxSets: o.MaxServerSets, log: o.Logger, observer: requestObserver{}, bearer: o.EurekaBearerToken,
		},
	}
}

// Setup registers the reconciler with the manager. It watches syncers
// (spec changes and deletion) and pods: a pod event reaches the syncers of
// its namespace that select it, before or after the change, and the one
// that injected it.
func Setup(mgr manager.Manager, o Options) error {
	r := NewReconciler(mgr, o)
	if o.Registries != nil {
		o.Registries.bind(r)
	}
	if err := indexPods(context.Background(), mgr); err != nil {
		return err
	}
	if !o.AppIndexed {
		if err := ownership.IndexSyncers(context.Background(), mgr.GetFieldIndexer()); err != nil {
			return err
		}
	}
	r.appIndexed = true
	idx, err := indexedSyncers(context.Background(), mgr)
	if err != nil {
		return err
	}
	r.syncerIndex = idx
	b := ctrl.NewControllerManagedBy(mgr).
		Named("eurekasyncer").
		// Our own status writes need no reconcile; deletion bumps the
		// generation, so it still comes through.
		For(&v1alpha1.EurekaSyncer{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&corev1.Pod{}, handler.EnqueueRequestsFromMapFunc(r.syncersOfPod)).
		// A node that stops being Ready takes its pods' instances out of
		// traffic (nodes.go).
		Watches(&corev1.Node{}, handler.EnqueueRequestsFromMapFunc(r.syncersOfNode), builder.WithPredicates(nodeReadinessChanged)).
		WithOptions(crcontroller.Options{MaxConcurrentReconciles: maxConcurrentReconciles})
	b, err = r.watchServiceMode(mgr, b)
	if err != nil {
		return err
	}
	if err := b.Complete(r); err != nil {
		return err
	}
	if err := setupClaimSweeper(mgr, r); err != nil {
		return err
	}
	return setupImports(mgr, r)
}

// syncersOfPod maps a pod to the syncers of its namespace whose selector
// matches it, and to the syncer named by its injection annotation. A pod
// two syncers select thus reaches both: the one that owns it and the one
// that reports it as owned by another. For an update, controller-runtime
// calls it with the old and the new pod, so a syncer the pod stopped
// matching is reconciled too.
func (r *Reconciler) syncersOfPod(ctx context.Context, obj client.Object) []reconcile.Request {
	// Read only, and called for every pod event (each pod of the cluster at
	// start-up): the namespace's syncers are neither deep-copied nor copied
	// into a list each time.
	syncers, err := r.syncersIn(ctx, obj.GetNamespace())
	if err != nil {
		r.log.WithError(err).WithField("namespace", obj.GetNamespace()).Warn("list syncers for a pod event")
		return nil
	}
	podLabels := labels.Set(obj.GetLabels())
	injectedBy := obj.GetAnnotations()[v1alpha1.SyncerAnnotation]
	var reqs []reconcile.Request
	for _, s := range syncers {
		selector, err := r.selectors.of(s)
		if s.Name == injectedBy || (err == nil && selector.Matches(podLabels)) {
			reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: s.Namespace, Name: s.Name}})
		}
	}
	return reqs
}

// syncersIn returns the syncers of a namespace as the cache holds them,
// to be read and never changed: from the informer's namespace index
// where the manager's cache exposes it (a List copies every syncer into
// the list, 400,000 copies for the pod events of a cluster of 1,000
// syncers and 20,000 pods), else from a List.
func (r *Reconciler) syncersIn(ctx context.Context, namespace string) ([]*v1alpha1.EurekaSyncer, error) {
	if r.syncerIndex != nil {
		items, err := r.syncerIndex.ByIndex(toolscache.NamespaceIndex, namespace)
		if err != nil {
			return nil, err
		}
		out := make([]*v1alpha1.EurekaSyncer, 0, len(items))
		for _, item := range items {
			if s, ok := item.(*v1alpha1.EurekaSyncer); ok {
				out = append(out, s)
			}
		}
		return out, nil
	}
	var list v1alpha1.EurekaSyncerList
	if err := r.client.List(ctx, &list, client.InNamespace(namespace), client.UnsafeDisableDeepCopy); err != nil {
		return nil, err
	}
	out := make([]*v1alpha1.EurekaSyncer, len(list.Items))
	for i := range list.Items {
		out[i] = &list.Items[i]
	}
	return out, nil
}

// indexedSyncers is the namespace index of the cache's syncer informer,
// or nil when the cache does not expose one.
func indexedSyncers(ctx context.Context, mgr manager.Manager) (toolscache.Indexer, error) {
	inf, err := mgr.GetCache().GetInformer(ctx, &v1alpha1.EurekaSyncer{})
	if err != nil {
		return nil, fmt.Errorf("syncer informer: %w", err)
	}
	si, ok := inf.(interface{ GetIndexer() toolscache.Indexer })
	if !ok {
		return nil, nil
	}
	idx := si.GetIndexer()
	if _, has := idx.GetIndexers()[toolscache.NamespaceIndex]; !has {
		return nil, nil
	}
	return idx, nil
}

// Reconcile syncs one EurekaSyncer: it measures pods and Eureka, collects
// orphans, detaches a deleted syncer, and writes the status.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	ctx = r.withReconcileLog(ctx, req)
	leading := r.leader.since()
	var s v1alpha1.EurekaSyncer
	if err := r.client.Get(ctx, req.NamespacedName, &s); err != nil {
		if apierrors.IsNotFound(err) {
			forgetMetrics(req.Namespace, req.Name)
			// Gone without its finalizer (removed by hand): stop heartbeating
			// its Service instances, which Eureka then lets expire.
			r.leases.forget(req.NamespacedName)
			r.detachClocks.stop(req.NamespacedName)
			r.drifts.forget(req.NamespacedName)
			r.selectors.forget(req.NamespacedName)
			r.clients.release(req.NamespacedName)
		}
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	deleting := !s.DeletionTimestamp.IsZero()
	switch {
	case deleting && !controllerutil.ContainsFinalizer(&s, v1alpha1.Finalizer):
		return reconcile.Result{}, nil
	case !deleting && !controllerutil.ContainsFinalizer(&s, v1alpha1.Finalizer):
		controllerutil.AddFinalizer(&s, v1alpha1.Finalizer)
		if err := r.client.Update(ctx, &s); err != nil {
			return reconcile.Result{}, fmt.Errorf("add finalizer: %w", err)
		}
	}

	obs, cl, err := r.observe(ctx, &s)
	if err != nil {
		r.recorder.Eventf(&s, nil, corev1.EventTypeWarning, "SyncFailed", "Sync", "%v", err)
		return reconcile.Result{}, err
	}
	obs.leading = leading
	if obs.eurekaErr == nil {
		obs.orphansRemoved, obs.instances, obs.eurekaErr = r.collectOrphans(ctx, &s, cl, obs.instances, obs.readAt, obs.pods.uids)
	}
	if err := r.checkOwnership(ctx, &s, &obs); err != nil {
		return reconcile.Result{}, fmt.Errorf("app ownership: %w", err)
	}
	// Service mode: the manager registers the Service itself; a deleted
	// syncer's Service instances, and those a syncer back in Pod mode left,
	// are cancelled there (service.go). What remains of a deleted syncer is
	// its pods' instances.
	r.syncService(ctx, &s, cl, &obs)
	if deleting {
		r.takeOutOfTraffic(ctx, &s, cl, &obs)
		obs.detach.deadline = r.detachDeadline(&s, &obs, time.Now())
	}
	if !deleting {
		r.applyTraffic(ctx, &s, cl, &obs)
	}
	if obs.eurekaErr != nil {
		r.recorder.Eventf(&s, nil, corev1.EventTypeWarning, obs.eurekaReason, "Sync", "%s", eureka.Redact(obs.eurekaErr.Error()))
	} else {
		setInstanceGauges(&s, obs.instances, obs.elsewhere)
	}
	setAdaptationGauges(&s, obs.pods.adaptations)
	previous, previousHealth := s.Status.Adaptations, registrarHealth(&s)
	err = r.writeStatus(ctx, &s, &obs)
	if errors.Is(err, errStale) {
		// The cache has not yet seen this reconciler's previous write:
		// write on the API server's copy, so that what this reconcile did
		// (orphans removed, adaptations reported) is neither lost nor
		// counted twice.
		var live v1alpha1.EurekaSyncer
		if err := r.apiReader.Get(ctx, req.NamespacedName, &live); err != nil {
			return reconcile.Result{}, client.IgnoreNotFound(fmt.Errorf("read the syncer: %w", err))
		}
		if live.Generation != s.Generation {
			// The spec changed since obs was measured: the reconcile of
			// the new spec comes next.
			return reconcile.Result{RequeueAfter: staleRetry}, nil
		}
		s, previous, previousHealth = live, live.Status.Adaptations, registrarHealth(&live)
		err = r.writeStatus(ctx, &s, &obs)
	}
	if err != nil {
		return reconcile.Result{}, err
	}
	setStatusGauges(&s)
	// After the write: a failed write reports the change on the next try,
	// not twice.
	r.reportAdaptations(&s, previous, obs.pods.adaptations)
	r.reportRegistrarHealth(&s, previousHealth)
	if deleting && (obs.detached() || !obs.detach.deadline.IsZero() && !time.Now().Before(obs.detach.deadline)) {
		// The syncer goes: so do the claims of apps its namespace
		// registers no more. A claim that cannot be released never holds
		// the syncer back; the platform team may delete it by hand.
		if err := r.releaseClaims(ctx, &s, obs.apps); err != nil {
			r.logFrom(ctx).WithError(err).Warn("release the app's claim")
		}
	}
	if deleting {
		switch {
		case obs.detached():
			return reconcile.Result{}, r.releaseDetached(ctx, &s)
		case obs.detach.deadline.IsZero():
			if obs.eurekaErr == nil {
				return reconcile.Result{RequeueAfter: detachPoll(time.Since(s.DeletionTimestamp.Time), r.opts.ResyncPeriod)}, nil
			}
		case time.Now().Before(obs.detach.deadline):
			return reconcile.Result{RequeueAfter: min(r.opts.ResyncPeriod, time.Until(obs.detach.deadline))}, nil
		default:
			return reconcile.Result{}, r.abandonDetach(ctx, &s, &obs)
		}
	}
	return reconcile.Result{RequeueAfter: r.opts.ResyncPeriod}, nil
}
