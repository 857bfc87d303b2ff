package controller

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/eurekube/eurekube/api/v1alpha1"
)

// accessReadTTL is how long a read Secret or ConfigMap serves the syncers
// that stay healthy: a rotated one is used within it and a resync period.
// Five minutes cut the reads of a thousand syncers, each naming a Secret,
// from 33 GETs a second (one per reconcile, a resync of 30 s) to about 3.
const accessReadTTL = 5 * time.Minute

// accessShareWithin is how recent a read must be to serve a syncer never
// read for yet (accessReads).
const accessShareWithin = time.Second

// accessReads caches the GETs of the Secrets and ConfigMaps syncers'
// spec.eureka names, by kind, namespace and name, for ttl.
//
// Why GETs, not an informer: the manager may only get Secrets and
// ConfigMaps, and only in namespaces that bind its credentials ClusterRole
// (ReadGrant). An informer needs list and watch, cluster-wide or per
// namespace, and would hold every Secret it may see, used or not; even a
// label-selected one (EurekaCredentialsLabel) needs list and watch of all
// of a namespace's Secrets in RBAC, which cannot restrict either by label.
// A cache of GETs keeps the privilege at get and holds only what syncers
// name.
//
// The cache serves a syncer only while it is settled: its access was last
// built from these reads without error at its current generation, and
// Eureka answered it. A spec change, a missing, forbidden, unconsented or
// invalid object, or a failed Eureka request makes its next reconcile read
// afresh (refreshing the cache for every syncer naming the same objects):
// labelling a Secret or fixing a bundle is seen at the next reconcile, and
// a password rotated on the server first, which it then refuses, at the
// reconcile after.
//
// A syncer this manager has not yet read for (a new one, and every syncer
// after the manager starts) reads afresh too, but takes a read of the same
// object that another syncer made in the last accessShareWithin: a manager
// that starts over a thousand syncers naming fifty Secrets makes about
// fifty GETs before its first pass is done, not a thousand, and a copy a
// second old is as fresh as the syncer could tell apart. A syncer that
// failed, or whose spec changed, always reads the API server itself.
type accessReads struct {
	reader objectGetter
	ttl    time.Duration
	now    func() time.Time

	mu        sync.Mutex
	objects   map[readKey]cachedRead
	settled   map[types.NamespacedName]settledAt
	lastSweep time.Time
}

type readKey struct {
	kind string
	key  types.NamespacedName
}

type cachedRead struct {
	obj client.Object
	at  time.Time
}

type settledAt struct {
	generation int64
	at         time.Time
	// failed: its last access could not be used (unsettle); it reads
	// the API server itself until it settles again.
	failed bool
}

var accessReadsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "eurekube_eureka_access_reads_total",
	Help: "Reads of the Secrets and ConfigMaps syncers' spec.eureka names, by kind and source: cache (no API request), api (a GET) or error (a GET that failed).",
}, []string{"kind", "source"})

func init() { metrics.Registry.MustRegister(accessReadsTotal) }

func newAccessReads(reader objectGetter) *accessReads {
	return &accessReads{reader: reader, ttl: accessReadTTL, now: time.Now,
		objects: map[readKey]cachedRead{}, settled: map[types.NamespacedName]settledAt{}}
}

// forSyncer is what one reconcile of s reads through: the cache when s is
// settled at its generation, else the API server, or for a syncer never
// read for yet, a read of the last accessShareWithin.
func (c *accessReads) forSyncer(s *v1alpha1.EurekaSyncer) objectGetter {
	c.mu.Lock()
	defer c.mu.Unlock()
	st, ok := c.settled[types.NamespacedName{Namespace: s.Namespace, Name: s.Name}]
	r := syncerReads{c: c, maxAge: c.ttl}
	switch {
	case !ok:
		r.maxAge = accessShareWithin
	case st.failed || st.generation != s.Generation || c.now().Sub(st.at) > c.ttl:
		r.maxAge = 0
	}
	return r
}

// settle records that s's access was built from the cache's reads.
func (c *accessReads) settle(s *v1alpha1.EurekaSyncer) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.settled[types.NamespacedName{Namespace: s.Namespace, Name: s.Name}] = settledAt{generation: s.Generation, at: c.now()}
}

// unsettle makes s's next reconciles read the API server until it
// settles again.
func (c *accessReads) unsettle(s *v1alpha1.EurekaSyncer) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.settled[types.NamespacedName{Namespace: s.Namespace, Name: s.Name}] = settledAt{at: c.now(), failed: true}
}

// lookup copies k's object into obj if it was read less than maxAge ago.
func (c *accessReads) lookup(k readKey, obj client.Object, maxAge time.Duration) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	r, ok := c.objects[k]
	if !ok || c.now().Sub(r.at) > maxAge {
		return false
	}
	switch dst := obj.(type) {
	case *corev1.Secret:
		*dst = *r.obj.(*corev1.Secret).DeepCopy()
	case *corev1.ConfigMap:
		*dst = *r.obj.(*corev1.ConfigMap).DeepCopy()
	}
	return true
}

// store keeps obj, or forgets k's object when obj is nil (a failed read),
// and drops what expired: the cache holds what syncers read in the last
// two ttl at most.
func (c *accessReads) store(k readKey, obj client.Object) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	if obj == nil {
		delete(c.objects, k)
	} else {
		c.objects[k] = cachedRead{obj: obj.DeepCopyObject().(client.Object), at: now}
	}
	if now.Sub(c.lastSweep) < c.ttl {
		return
	}
	c.lastSweep = now
	for key, r := range c.objects {
		if now.Sub(r.at) > c.ttl {
			delete(c.objects, key)
		}
	}
	for key, st := range c.settled {
		if now.Sub(st.at) > c.ttl {
			delete(c.settled, key)
		}
	}
}

// syncerReads reads for one reconcile of a syncer: through the cache,
// what was read less than maxAge ago (none when 0).
type syncerReads struct {
	c      *accessReads
	maxAge time.Duration
}

func (r syncerReads) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	kind := cachedKind(obj)
	if kind == "" {
		return r.c.reader.Get(ctx, key, obj, opts...)
	}
	k := readKey{kind: kind, key: key}
	if r.maxAge > 0 && r.c.lookup(k, obj, r.maxAge) {
		accessReadsTotal.WithLabelValues(kind, "cache").Inc()
		return nil
	}
	if err := r.c.reader.Get(ctx, key, obj, opts...); err != nil {
		accessReadsTotal.WithLabelValues(kind, "error").Inc()
		r.c.store(k, nil)
		return err
	}
	accessReadsTotal.WithLabelValues(kind, "api").Inc()
	r.c.store(k, obj)
	return nil
}

// cachedKind is the kind of obj the cache keeps, or "".
func cachedKind(obj client.Object) string {
	switch obj.(type) {
	case *corev1.Secret:
		return "Secret"
	case *corev1.ConfigMap:
		return "ConfigMap"
	}
	return ""
}
