package controller

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/sirupsen/logrus"

	"github.com/eurekube/eurekube/api/v1alpha1"
	"github.com/eurekube/eurekube/eureka"
	"github.com/eurekube/eurekube/sidecar"
)

// Reasons of the conditions and events about a deleted syncer.
const (
	// reasonDetaching: Synced while the syncer is deleted.
	reasonDetaching     = "Detaching"
	reasonDetachBlocked = "DetachBlocked"
	// reasonDetachTimedOut: the Warning Event of a finalizer released
	// without Eureka's word.
	reasonDetachTimedOut = "DetachTimedOut"
)

// detachObserved is what a reconcile of a deleted syncer found and did.
type detachObserved struct {
	// registrarPods: the pods running its registrar that have not yet
	// been told it is gone (annotation eurekube.io/traffic: Detached).
	registrarPods []string
	// aliveRegistrarPods: every pod running its registrar that has not
	// finished (told or not): while there is one, the finalizer waits for
	// Eureka as long as it takes.
	aliveRegistrarPods []string
	// deadline: when no pod runs the registrar and something in Eureka
	// keeps the syncer, when the finalizer stops waiting for Eureka; zero
	// otherwise.
	deadline time.Time
	// cause: why its instances could not be read or removed.
	cause error
}

// takeOutOfTraffic tells the pods of a deleted syncer that it is gone
// (annotation eurekube.io/traffic: Detached, which their registrars read
// from a downward-API file: they cancel and register no more), and
// meanwhile re-registers its remaining instances (those of running pods:
// orphans are already collected) as DOWN, so callers stop using them at
// once.
//
// Why DOWN by re-registration and not a cancel or the /status override: a
// cancelled instance comes back UP at the registrar's next heartbeat (404
// means "register again"); the /status override is sticky and would
// outlive the pod. A client-reported DOWN survives the registrar's
// heartbeats (Eureka keeps a DOWN the client reported); only the
// registrar's own re-registration (its app's health changing, or Eureka
// forgetting it) undoes it, and the next resync marks it DOWN again. The
// instance leaves Eureka when its registrar reads Detached and cancels
// (registrars older than Detached: when their pod stops).
func (r *Reconciler) takeOutOfTraffic(ctx context.Context, s *v1alpha1.EurekaSyncer, cl *eureka.Client, obs *observed) {
	if _, err := r.syncPodTraffic(ctx, s, v1alpha1.TrafficDetached); err != nil {
		r.logFrom(ctx).WithError(err).Warn("deleted syncer: could not mark every pod Detached; retried at the next pass")
	}
	if obs.eurekaErr != nil {
		obs.detach.cause, obs.eurekaReason = obs.eurekaErr, reasonDetachBlocked
		obs.eurekaErr = fmt.Errorf("cannot remove this syncer's instances; the finalizer %s stays until Eureka answers, and once no pod runs the syncer's registrar for at most %s more (remove it by hand to abandon them sooner): %w",
			v1alpha1.Finalizer, r.opts.DetachTimeout, obs.eurekaErr)
		return
	}
	var marked, pods []string
	for i := range obs.instances {
		inst := &obs.instances[i]
		if inst.Status == eureka.StatusDown {
			continue
		}
		down := *inst
		down.Status = eureka.StatusDown
		if err := cl.Register(ctx, down); err != nil {
			obs.eurekaErr, obs.eurekaReason = fmt.Errorf("take %s out of traffic: %w", inst.InstanceID, err), reasonEurekaUnreachable
			obs.detach.cause = obs.eurekaErr
			break
		}
		inst.Status = eureka.StatusDown
		marked = append(marked, inst.InstanceID)
		pods = append(pods, inst.Metadata[eureka.MetaPod])
	}
	if len(marked) > 0 {
		r.logFrom(ctx).WithField("instances", marked).
			Info("deleted syncer: instances marked DOWN")
		r.recorder.Eventf(s, nil, corev1.EventTypeNormal, "Detaching", "Detach",
			"the syncer is being deleted: marked %d instance(s) DOWN (%s); they leave Eureka once the registrars of pods %s read that the syncer is gone (seconds after the kubelet rewrites their %s file), or when those pods stop",
			len(marked), names(marked), names(pods), v1alpha1.TrafficAnnotation)
	}
}

// detached: nothing this cluster created for the syncer is left — no
// instance in Eureka, no pod running its registrar.
func (o *observed) detached() bool {
	return o.eurekaErr == nil && len(o.instances) == 0 && len(o.detach.registrarPods) == 0
}

// DefaultDetachTimeout is how long a deleted syncer's finalizer waits for
// Eureka once no pod runs the syncer's registrar, when Eureka cannot be
// read or an instance cannot be removed (Options.DetachTimeout). While a
// pod runs the registrar the finalizer waits as long as it takes: the
// registrar could still register or heartbeat. Once none does, nothing of
// this cluster keeps the syncer's instances alive: Eureka evicts them when
// their lease runs out (unless it is in self-preservation), and a syncer
// whose Eureka is gone for good (a typo, a retired server) must not keep
// its namespace Terminating. Two minutes give Eureka several resyncs to
// come back and have the orphans cancelled, and outlast the 90 s lease of
// the instances left.
const DefaultDetachTimeout = 2 * time.Minute

// detachPoll is how soon a deleted syncer whose Eureka answers, and whose
// pods' registrars have not all left yet, is read again: 2 s at first,
// then a quarter of the time since its deletion, at most a resync period.
// Its registrars leave within a second or two of reading Detached, and
// nothing in Kubernetes says so: waiting a whole resync for the next read
// kept every namespace deletion and uninstall up to that much longer
// (34 s at the default 30 s resync, from the manager's DOWN to the
// finalizer released, in the lifecycle story). A deleted syncer reads
// its apps directly, so each poll is one read per app; the quarter keeps
// a thousand syncers deleted at once to about ten reads each over their
// first half minute.
func detachPoll(age, resync time.Duration) time.Duration {
	return min(max(2*time.Second, age/4), resync)
}

// detachClocks remember since when each deleted syncer has had no pod
// running its registrar: the finalizer waits for Eureka at most
// Options.DetachTimeout from then. In memory: a new leader starts counting
// again, so the wait may be longer, never shorter.
type detachClocks struct {
	mu    sync.Mutex
	since map[types.NamespacedName]detachClock
}

type detachClock struct {
	uid types.UID // of the syncer: one created again with the name starts again
	at  time.Time
}

// start returns since when the syncer has had no pod running its
// registrar, now when this is the first time.
func (c *detachClocks) start(s *v1alpha1.EurekaSyncer, now time.Time) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	key := client.ObjectKeyFromObject(s)
	if clock, ok := c.since[key]; ok && clock.uid == s.UID {
		return clock.at
	}
	if c.since == nil {
		c.since = map[types.NamespacedName]detachClock{}
	}
	c.since[key] = detachClock{uid: s.UID, at: now}
	return now
}

func (c *detachClocks) stop(key types.NamespacedName) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.since, key)
}

// detachDeadline is when the finalizer of a deleted syncer stops waiting for
// Eureka: DetachTimeout after no pod ran its registrar any more. Zero while
// a pod runs it, or when nothing is left to wait for.
func (r *Reconciler) detachDeadline(s *v1alpha1.EurekaSyncer, obs *observed, now time.Time) time.Time {
	if obs.detached() || len(obs.detach.aliveRegistrarPods) > 0 {
		r.detachClocks.stop(client.ObjectKeyFromObject(s))
		return time.Time{}
	}
	return r.detachClocks.start(s, now).Add(r.opts.DetachTimeout)
}

// releaseDetached lets a syncer go once nothing it made is left.
func (r *Reconciler) releaseDetached(ctx context.Context, s *v1alpha1.EurekaSyncer) error {
	if err := r.releaseFinalizer(ctx, s); err != nil {
		return err
	}
	r.recorder.Eventf(s, nil, corev1.EventTypeNormal, "Detached", "Detach",
		"no instance of this syncer is left in Eureka and no pod runs its registrar; the syncer can go")
	return nil
}

// abandonDetach lets a syncer go without Eureka's word, DetachTimeout after
// no pod ran its registrar any more, and says in a Warning Event what may
// be left in Eureka.
func (r *Reconciler) abandonDetach(ctx context.Context, s *v1alpha1.EurekaSyncer, obs *observed) error {
	if err := r.releaseFinalizer(ctx, s); err != nil {
		return err
	}
	left := r.leftInEureka(s, obs)
	r.logFrom(ctx).WithFields(logrus.Fields{"waited": r.opts.DetachTimeout, "left": left}).
		Warn("deleted syncer: no pod runs its registrar and Eureka did not let its instances be removed in time; released the finalizer anyway")
	r.recorder.Eventf(s, nil, corev1.EventTypeWarning, reasonDetachTimedOut, "Detach", "%s", truncate(fmt.Sprintf(
		"released the finalizer without Eureka's word: no pod has run this syncer's registrar for %s. May be left in Eureka: %s. "+
			"Nothing heartbeats them any more: Eureka evicts each when its lease (%s) runs out, unless the server is in self-preservation; then cancel them by hand",
		r.opts.DetachTimeout, left, leaseDuration(s)), maxEventNote))
	return nil
}

// leftInEureka names what a deleted syncer may leave in Eureka: the
// instances that could not be removed, or why they could not be read.
func (r *Reconciler) leftInEureka(s *v1alpha1.EurekaSyncer, obs *observed) string {
	if !obs.registryRead {
		return fmt.Sprintf("its instances, if any (could not read the registry at %s: %v)", strings.Join(eureka.RedactAll(r.clients.urls(s)), ", "), obs.detach.cause)
	}
	ids := make([]string, 0, len(obs.instances))
	for _, inst := range obs.instances {
		ids = append(ids, inst.InstanceID)
	}
	left := fmt.Sprintf("app %s, instance(s) %s", s.EffectiveAppName(), names(ids))
	if obs.detach.cause != nil {
		left += fmt.Sprintf(" (could not remove them: %v)", obs.detach.cause)
	}
	return left
}

// leaseDuration is how long Eureka keeps an instance of s without a
// heartbeat.
func leaseDuration(s *v1alpha1.EurekaSyncer) time.Duration {
	if d := s.Spec.Lease.DurationSeconds; d > 0 {
		return time.Duration(d) * time.Second
	}
	return sidecar.DefaultLeaseDuration
}

// releaseFinalizer lets the API server delete the syncer.
func (r *Reconciler) releaseFinalizer(ctx context.Context, s *v1alpha1.EurekaSyncer) error {
	controllerutil.RemoveFinalizer(s, v1alpha1.Finalizer)
	if err := r.client.Update(ctx, s); err != nil {
		return client.IgnoreNotFound(fmt.Errorf("release finalizer: %w", err))
	}
	r.detachClocks.stop(client.ObjectKeyFromObject(s))
	r.drifts.forget(client.ObjectKeyFromObject(s))
	r.selectors.forget(client.ObjectKeyFromObject(s))
	forgetMetrics(s.Namespace, s.Name)
	return nil
}

func detachingMessage(obs *observed) string {
	var b strings.Builder
	b.WriteString("the syncer is being deleted; new pods are not injected")
	if obs.eurekaErr != nil {
		b.WriteString("; waiting for Eureka to answer to remove its instances")
	}
	if !obs.detach.deadline.IsZero() {
		fmt.Fprintf(&b, "; no pod runs its registrar any more: the finalizer waits for Eureka until %s, then goes anyway (Event %s names what may be left in Eureka)",
			obs.detach.deadline.UTC().Format(time.RFC3339), reasonDetachTimedOut)
	}
	if n := len(obs.instances); n > 0 {
		fmt.Fprintf(&b, "; %d instance(s) stay in Eureka, DOWN, until their registrars read that the syncer is gone (seconds after the kubelet rewrites the pods' %s file) and cancel them, or their pods stop", n, v1alpha1.TrafficAnnotation)
	}
	if n := len(obs.detach.registrarPods); n > 0 {
		fmt.Fprintf(&b, "; %d pod(s) are being told to stop registering: %s", n, names(obs.detach.registrarPods))
	}
	return b.String()
}
