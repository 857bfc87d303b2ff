package controller

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/sirupsen/logrus"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/eurekube/eurekube/eureka"
)

// leaseKeeper heartbeats the instances the manager registers itself
// (Service mode), each at its lease's renewal interval, and registers an
// instance again at once when a heartbeat is answered "not found".
//
// It runs on the elected manager only (a leader-only manager.Runnable), as
// does the reconciler that tells it what to hold: syncService hands it the
// desired instances of each syncer after every reconcile. A new leader
// starts empty; its first reconcile of each syncer registers what the
// registry lacks or holds differently, adopts what is already right and
// heartbeats it at once, so the lease does not lapse over a change of
// leader (the old leader's last heartbeat is at most one renewal old, the
// lease lasts three by default). Stopping (losing the lease, or a shutdown)
// cancels nothing: the next leader carries on.
type leaseKeeper struct {
	log logrus.FieldLogger
	now func() time.Time

	// writing is held across each request the keeper sends, and by hold
	// and forget: once they return, the keeper sends nothing more for what
	// they dropped, so a cancel that follows is not undone by a
	// re-registration in flight.
	writing sync.Mutex

	mu      sync.Mutex
	syncers map[types.NamespacedName]*heldSyncer
	wake    chan struct{}
}

// heldSyncer is what the keeper holds for one syncer.
type heldSyncer struct {
	client    *eureka.Client
	instances map[string]*heldInstance // by instance id
}

type heldInstance struct {
	inst eureka.Instance
	due  time.Time // next heartbeat
}

var _ manager.LeaderElectionRunnable = (*leaseKeeper)(nil)

// heartbeatRetry bounds the wait before a failed heartbeat is tried again
// (a renewal interval when shorter), well inside the lease.
const heartbeatRetry = 10 * time.Second

func newLeaseKeeper(log logrus.FieldLogger) *leaseKeeper {
	return &leaseKeeper{log: log, now: time.Now, syncers: map[types.NamespacedName]*heldSyncer{}, wake: make(chan struct{}, 1)}
}

// NeedLeaderElection: only the elected manager heartbeats, like only it
// registers.
func (k *leaseKeeper) NeedLeaderElection() bool { return true }

// renewalOf is the instance's renewal interval (Eureka's default when
// unset).
func renewalOf(inst *eureka.Instance) time.Duration {
	if inst.RenewalInterval > 0 {
		return inst.RenewalInterval
	}
	return 30 * time.Second
}

// held returns a copy of the instances held for a syncer, by id.
func (k *leaseKeeper) held(key types.NamespacedName) map[string]eureka.Instance {
	k.mu.Lock()
	defer k.mu.Unlock()
	out := map[string]eureka.Instance{}
	if hs := k.syncers[key]; hs != nil {
		for id, h := range hs.instances {
			out[id] = h.inst
		}
	}
	return out
}

// holds is true when the keeper holds instances of the syncer.
func (k *leaseKeeper) holds(key types.NamespacedName) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.syncers[key] != nil
}

// hold replaces what the keeper holds for a syncer with insts. Those in
// registered were just registered: their first heartbeat is one renewal
// away. An instance held before keeps its schedule; any other (adopted
// from the registry by a new leader) is heartbeaten at once.
func (k *leaseKeeper) hold(key types.NamespacedName, cl *eureka.Client, insts []eureka.Instance, registered map[string]bool) {
	if len(insts) == 0 {
		k.forget(key)
		return
	}
	k.writing.Lock()
	defer k.writing.Unlock()
	k.mu.Lock()
	defer k.mu.Unlock()
	now := k.now()
	previous := k.syncers[key]
	next := &heldSyncer{client: cl, instances: make(map[string]*heldInstance, len(insts))}
	for _, inst := range insts {
		h := &heldInstance{inst: inst, due: now}
		switch {
		case registered[inst.InstanceID]:
			h.due = now.Add(renewalOf(&inst))
		case previous != nil && previous.instances[inst.InstanceID] != nil:
			h.due = previous.instances[inst.InstanceID].due
		}
		next.instances[inst.InstanceID] = h
	}
	k.syncers[key] = next
	k.poke()
}

// forget drops what the keeper holds for a syncer; it sends nothing more
// for it once forget returns.
func (k *leaseKeeper) forget(key types.NamespacedName) {
	k.writing.Lock()
	defer k.writing.Unlock()
	k.mu.Lock()
	defer k.mu.Unlock()
	delete(k.syncers, key)
}

func (k *leaseKeeper) poke() {
	select {
	case k.wake <- struct{}{}:
	default:
	}
}

// Start heartbeats until ctx ends.
func (k *leaseKeeper) Start(ctx context.Context) error {
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-k.wake:
		case <-timer.C:
		}
		k.renewDue(ctx)
		timer.Reset(k.untilNextDue())
	}
}

// untilNextDue is how long until the earliest heartbeat (an hour when the
// keeper holds nothing: hold wakes it).
func (k *leaseKeeper) untilNextDue() time.Duration {
	k.mu.Lock()
	defer k.mu.Unlock()
	wait := time.Hour
	now := k.now()
	for _, hs := range k.syncers {
		for _, h := range hs.instances {
			if d := h.due.Sub(now); d < wait {
				wait = d
			}
		}
	}
	return max(wait, 0)
}

type heldRef struct {
	key types.NamespacedName
	id  string
}

// renewDue heartbeats every instance whose heartbeat is due.
func (k *leaseKeeper) renewDue(ctx context.Context) {
	k.mu.Lock()
	now := k.now()
	var due []heldRef
	for key, hs := range k.syncers {
		for id, h := range hs.instances {
			if !h.due.After(now) {
				due = append(due, heldRef{key, id})
			}
		}
	}
	k.mu.Unlock()
	for _, ref := range due {
		if ctx.Err() != nil {
			return
		}
		k.renew(ctx, ref)
	}
}

// renew heartbeats one instance, if still held, and registers it again
// when Eureka no longer knows it.
func (k *leaseKeeper) renew(ctx context.Context, ref heldRef) {
	k.writing.Lock()
	defer k.writing.Unlock()
	k.mu.Lock()
	hs := k.syncers[ref.key]
	if hs == nil || hs.instances[ref.id] == nil {
		k.mu.Unlock()
		return // dropped meanwhile
	}
	h := hs.instances[ref.id]
	inst, cl := h.inst, hs.client
	interval := renewalOf(&inst)
	h.due = k.now().Add(interval)
	k.mu.Unlock()

	log := k.log.WithFields(logrus.Fields{"namespace": ref.key.Namespace, "syncer": ref.key.Name, "instance": inst.InstanceID})
	err := cl.Heartbeat(ctx, inst.App, inst.InstanceID, inst.LastDirtyTimestamp)
	if errors.Is(err, eureka.ErrNotFound) {
		// Eureka forgot it (lease expired, server restarted, someone
		// cancelled it): register again at once, as Eureka's own client does.
		if inst.LastDirtyTimestamp.IsZero() {
			inst.LastDirtyTimestamp = k.now()
		}
		if err = cl.Register(ctx, inst); err == nil {
			log.Info("Service instance registered again: Eureka no longer knew it")
			k.mu.Lock()
			if cur := k.syncers[ref.key]; cur != nil && cur.instances[ref.id] != nil {
				cur.instances[ref.id].inst.LastDirtyTimestamp = inst.LastDirtyTimestamp
			}
			k.mu.Unlock()
			return
		}
	}
	if err != nil && ctx.Err() == nil {
		log.WithError(err).Warn("Service instance heartbeat failed; retrying")
		k.mu.Lock()
		if cur := k.syncers[ref.key]; cur != nil && cur.instances[ref.id] != nil {
			cur.instances[ref.id].due = k.now().Add(min(interval, heartbeatRetry))
		}
		k.mu.Unlock()
	}
}
