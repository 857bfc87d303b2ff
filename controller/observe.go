package controller

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/eurekube/eurekube/api/v1alpha1"
	"github.com/eurekube/eurekube/eureka"
	"github.com/eurekube/eurekube/internal/ownership"
)

// Measurement: what one reconcile reads, the pods its selector matches
// (from the manager's cache) and this cluster's instances of the syncer
// (from the registry read its Eureka servers share), into observed, to
// which each concern then adds what it found and did.

// observed is what one reconcile measured and did.
type observed struct {
	pods podCounts
	// detach: what detaching a deleted syncer found and did (detach.go).
	detach detachObserved
	// registryRead: this cluster's instances of the syncer were read, so
	// instances is what Eureka holds (less what was removed since).
	registryRead bool
	// instances: this cluster's instances of the syncer, orphans removed.
	instances      []eureka.Instance
	orphansRemoved int
	// eurekaErr: Eureka could not be read or written; eurekaReason says
	// which step failed.
	eurekaErr    error
	eurekaReason string
	// leading: when this reconciler first reconciled; a new leader
	// refreshes no lastSyncTime alone soon after it (lastsync.go).
	leading time.Time
	// elsewhere: the instances of the syncer's app that no Eurekube of
	// this cluster registered (VMs, other clusters), from the same read.
	elsewhere []eureka.Instance
	// otherSyncers: the instances of the syncer's app that other syncers
	// of this cluster registered (a namespace the platform's policy shares
	// the app with), from the same read.
	otherSyncers []eureka.Instance
	// apps: the Eureka apps the syncer's instances are registered under,
	// its own first, then those its pods were given by an
	// eurekube.io/app-name annotation.
	apps []string
	// readAt: what instances and elsewhere show is at least as recent as
	// this (the read, less the server's response cache).
	readAt time.Time
	// service: what a Service-mode reconcile found and did.
	service serviceObserved
	// traffic: what applying spec.traffic found and did.
	traffic trafficObserved
	// notAllowed: the Permitted condition, False, when the manager's
	// allowlists refuse what the syncer names (permitted.go); Eureka is then
	// not contacted.
	notAllowed *metav1.Condition
	// ownership: whether the namespace may register the syncer's app
	// (ownership.go); nil when not checked (a deleted syncer).
	ownership *ownership.Verdict
}

// observe reads the selected pods from the cache and this cluster's
// instances of the syncer from the registry of its Eureka servers, read at
// most once per resync for all the syncers of those servers. Only a
// failure to read the cache is an error; Eureka's is recorded in the
// result. cl is nil when no client could be built.
func (r *Reconciler) observe(ctx context.Context, s *v1alpha1.EurekaSyncer) (observed, *eureka.Client, error) {
	selector, err := r.selectors.of(s)
	if err != nil {
		return observed{}, nil, fmt.Errorf("selector: %w", err)
	}
	// The informer behind this list has synced before the first reconcile
	// starts (controller-runtime waits for every watched kind), so orphan
	// collection never runs against a half-filled cache.
	var pods corev1.PodList
	if err := r.client.List(ctx, &pods, client.InNamespace(s.Namespace), client.MatchingLabelsSelector{Selector: selector},
		client.UnsafeDisableDeepCopy); err != nil { // read only
		return observed{}, nil, fmt.Errorf("list pods: %w", err)
	}
	obs := observed{pods: countPods(pods.Items, s, r.opts.Defaults, r.drifts, time.Now()), apps: appsOf(s, pods.Items)}
	if !s.DeletionTimestamp.IsZero() {
		// Pods injected by this syncer keep its registrar even when its
		// selector no longer matches them.
		var all corev1.PodList
		if err := r.client.List(ctx, &all, client.InNamespace(s.Namespace), client.MatchingFields{podsBySyncer: s.Name}, client.UnsafeDisableDeepCopy); err != nil {
			return observed{}, nil, fmt.Errorf("list pods: %w", err)
		}
		obs.detach.aliveRegistrarPods, obs.detach.registrarPods = registrarPodsOf(all.Items, s.Name)
		obs.apps = appsOf(s, all.Items)
	}
	if obs.notAllowed, err = r.notAllowed(ctx, s); err != nil {
		return observed{}, nil, err
	}
	if obs.notAllowed != nil {
		obs.eurekaErr, obs.eurekaReason = errNotContacted, obs.notAllowed.Reason
		r.clients.release(client.ObjectKeyFromObject(s))
		return obs, nil, nil
	}
	refused, err := r.ownershipRefusesReading(ctx, s)
	if err != nil {
		return observed{}, nil, err
	}
	if refused != "" {
		obs.eurekaErr, obs.eurekaReason = errNotContacted, refused
		r.clients.release(client.ObjectKeyFromObject(s))
		return obs, nil, nil
	}
	cache, err := r.clients.forSyncer(ctx, s)
	if err != nil {
		obs.eurekaErr, obs.eurekaReason = err, configReason(err)
		return obs, nil, nil
	}
	if err = r.instances(ctx, s, cache, &obs); err != nil {
		obs.eurekaErr, obs.eurekaReason = err, reasonEurekaUnreachable
		// Refused credentials or certificates may have been rotated.
		r.clients.reads.unsettle(s)
	} else {
		obs.registryRead = true
	}
	return obs, cache.Client(), nil
}

// instances lists this cluster's instances of the syncer, and the app's
// instances elsewhere (VMs, other clusters). A live syncer
// reads them from the registry read shared by every syncer of its servers,
// at most a resync period old: its status follows within a resync, and an
// orphan it misses is collected at the next. A deleted syncer reads its
// app now, as the release of its finalizer rests on finding no instance
// and cannot be undone: the shared read may predate an instance
// registered since, which would be left in Eureka for good.
func (r *Reconciler) instances(ctx context.Context, s *v1alpha1.EurekaSyncer, cache *eureka.RegistryCache, obs *observed) error {
	markers := r.markers(s)
	if !s.DeletionTimestamp.IsZero() {
		obs.readAt = time.Now()
		for i, app := range obs.apps {
			all, err := cache.Client().Instances(ctx, app)
			if err != nil {
				return err
			}
			for _, inst := range all {
				if inst.HasMetadata(markers) {
					obs.instances = append(obs.instances, inst)
				}
			}
			if i == 0 {
				obs.elsewhere, obs.otherSyncers = r.elsewhereAndOthers(all, s)
			}
		}
		return nil
	}
	registry, err := cache.Registry(ctx)
	if err != nil {
		return err
	}
	for _, app := range obs.apps {
		obs.instances = append(obs.instances, registry.InstancesWithMetadata(app, markers)...)
	}
	obs.elsewhere, obs.otherSyncers = r.elsewhereAndOthers(registry.Instances(s.EffectiveAppName()), s)
	obs.readAt = registry.ReadAt().Add(-eureka.ServerCacheDelay)
	return nil
}

// elsewhereAndOthers splits the instances of the syncer's app that are not
// its own: those no Eurekube of this cluster registered (elsewhere), and
// those other syncers of this cluster did.
func (r *Reconciler) elsewhereAndOthers(all []eureka.Instance, s *v1alpha1.EurekaSyncer) (elsewhere, others []eureka.Instance) {
	for _, inst := range all {
		switch {
		case inst.Metadata[eureka.MetaManagedBy] != eureka.ManagedByValue || inst.Metadata[eureka.MetaCluster] != r.opts.ClusterID:
			elsewhere = append(elsewhere, inst)
		case inst.Metadata[eureka.MetaNamespace] != s.Namespace || inst.Metadata[eureka.MetaSyncer] != s.Name:
			others = append(others, inst)
		}
	}
	return elsewhere, others
}

// appsOf lists the Eureka apps the syncer's instances are registered
// under: its own, then, sorted, those that the pods it injected were given
// by their eurekube.io/app-name annotation (which the webhook admitted
// only where the app's ownership allows it).
func appsOf(s *v1alpha1.EurekaSyncer, pods []corev1.Pod) []string {
	own := s.EffectiveAppName()
	var others []string
	for i := range pods {
		p := &pods[i]
		name, ok := p.Annotations[v1alpha1.AnnotationAppName]
		if !ok || p.Annotations[v1alpha1.SyncerAnnotation] != s.Name {
			continue
		}
		if app := strings.ToUpper(name); app != own && !slices.Contains(others, app) {
			others = append(others, app)
		}
	}
	slices.Sort(others)
	return append([]string{own}, others...)
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
