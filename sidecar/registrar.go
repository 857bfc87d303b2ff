package sidecar

import (
	"context"
	"errors"
	"math/rand/v2"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/cenkalti/backoff/v5"
	"github.com/sirupsen/logrus"

	"github.com/eurekube/eurekube/eureka"
)

// Registry is what the registrar needs of Eureka; *eureka.Client has it.
type Registry interface {
	Register(ctx context.Context, inst eureka.Instance) error
	Heartbeat(ctx context.Context, app, id string, lastDirty time.Time) error
	Cancel(ctx context.Context, app, id string) error
}

// Registrar keeps one pod registered while its context lives.
type Registrar struct {
	cfg      Config
	registry Registry
	checker  Checker
	log      logrus.FieldLogger
	metrics  *Metrics

	status     atomic.Value // eureka.Status last sent successfully
	registered atomic.Bool

	// version stamps what the registrar wants Eureka to hold (sent as
	// lastDirtyTimestamp); accepted is the version Eureka last accepted.
	// Both are touched by Run's goroutine only.
	version, accepted time.Time
	// trafficFileMissing: the missing traffic file has been logged.
	trafficFileMissing bool
	// zone: what the last accepted registration carried from the zone
	// file; zoneFileUnreadable: a failure to read it has been logged.
	zone               string
	zoneFileUnreadable bool
}

// New returns a registrar for cfg. metrics may be nil.
func New(cfg Config, registry Registry, log logrus.FieldLogger, metrics *Metrics) *Registrar {
	r := &Registrar{
		cfg:      cfg,
		registry: registry,
		checker:  NewChecker(cfg.Health, cfg.PodIP),
		log:      log.WithFields(logrus.Fields{"app": cfg.AppName, "instance": cfg.InstanceID()}),
		metrics:  metrics,
	}
	r.status.Store(eureka.StatusStarting)
	return r
}

// Status is the status Eureka last accepted, and whether the pod is
// registered at all.
func (r *Registrar) Status() (eureka.Status, bool) {
	return r.status.Load().(eureka.Status), r.registered.Load()
}

// Run registers the pod and keeps it registered until ctx ends, then
// cancels the registration within cfg.ShutdownTimeout and returns nil. It
// never returns early because Eureka is unreachable.
func (r *Registrar) Run(ctx context.Context) error {
	health := make(chan bool, 1)
	go r.watchHealth(ctx, health)
	detachedChanged := make(chan struct{}, 1)
	go r.watchDetached(ctx, detachedChanged)

	r.version = r.nextVersion()
	var (
		want      = eureka.StatusStarting // what Eureka should show
		dirty     = true                  // want has not been sent yet
		attempted bool                    // a registration may exist
		retry     = r.newBackoff()
		outage    outageLog
		next      = time.Now() // when to talk to Eureka next
		timer     = time.NewTimer(0)
	)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			if attempted {
				r.cancel()
			}
			return nil
		case healthy := <-health:
			status := eureka.StatusDown
			if healthy {
				status = eureka.StatusUp
			}
			if status != want {
				r.log.WithFields(logrus.Fields{"from": want, "to": status}).Info("app health changed")
				want, dirty = status, true
				r.version = r.nextVersion()
				next = time.Now()
			}
		case <-detachedChanged:
			// The syncer went or came back: the next turn, now, cancels or
			// registers again, instead of at the next heartbeat.
			next = time.Now()
		case <-timer.C:
			if ctx.Err() != nil {
				continue // shutting down: the next turn cancels
			}
			if r.detached() {
				// The syncer is gone: leave Eureka and stay out. Should the
				// file change back (the syncer recreated), everything is
				// sent again.
				if attempted {
					r.log.Info("the pod's syncer is gone (traffic file says Detached): cancelling the registration and registering no more")
					r.cancel()
					attempted = false
				}
				dirty = true
				next = time.Now().Add(r.heartbeatInterval())
				timer.Reset(time.Until(next))
				continue
			}
			zone := r.readZone()
			if !dirty && zone != r.zone {
				r.log.WithFields(logrus.Fields{"from": r.zone, "to": zone}).Info("zone changed: registering again")
				dirty = true
				r.version = r.nextVersion()
			}
			var err error
			if dirty {
				attempted = true
				err = r.register(ctx, want, zone)
				if err == nil {
					dirty = false
				}
			} else {
				err = r.heartbeat(ctx)
				if errors.Is(err, eureka.ErrNotFound) {
					// Eureka forgot us (restart, eviction, lease deleted)
					// or holds an older version than it last accepted
					// (a delayed registration won a race): register again
					// at once, metadata and all.
					r.log.Info("eureka does not know the instance; registering again")
					dirty, err = true, nil
				}
			}
			if ctx.Err() != nil {
				continue
			}
			if err != nil {
				outage.failed(r.log, err)
				next = time.Now().Add(retry.NextBackOff())
			} else {
				outage.recovered(r.log)
				retry.Reset()
				if dirty {
					next = time.Now()
				} else {
					next = time.Now().Add(r.heartbeatInterval())
				}
			}
		}
		timer.Reset(time.Until(next))
	}
}

// register sends the instance with status, in zone (see zone.go), and with
// the status override of the traffic file (see readTrafficOverride). A registration under way when
// ctx ends may finish, for up to half the shutdown budget, before the
// cancel is sent: aborted, it could still reach the server after the
// cancel and bring the terminating pod back into the registry.
func (r *Registrar) register(ctx context.Context, status eureka.Status, zone string) error {
	inst := r.cfg.Instance(status)
	inst.LastDirtyTimestamp = r.version
	inst.OverriddenStatus = r.readTrafficOverride()
	if inst.OverriddenStatus == eureka.StatusOutOfService && inst.Status == eureka.StatusUp {
		// The server stores a registration as sent and applies its
		// override a moment later: sent UP, a pod meant to stay out of
		// traffic can be read UP in between (a test saw it at load 30).
		// DOWN and STARTING are sent as they are: they win over any
		// override.
		inst.Status = eureka.StatusOutOfService
	}
	withZone(&inst, zone)
	ctx, done := lingering(ctx, r.cfg.ShutdownTimeout/2)
	defer done()
	err := r.registry.Register(ctx, inst)
	r.metrics.observeRegistration(err)
	if err == nil {
		r.accepted = r.version
		r.zone = zone
		r.status.Store(status)
		r.registered.Store(true)
		r.metrics.setStatus(status)
		log := r.log.WithField("status", status)
		if inst.OverriddenStatus != "" {
			log = log.WithField("override", inst.OverriddenStatus)
		}
		log.Info("registered")
	}
	return err
}

func (r *Registrar) heartbeat(ctx context.Context) error {
	err := r.registry.Heartbeat(ctx, r.cfg.Instance("").App, r.cfg.InstanceID(), r.accepted)
	r.metrics.observeHeartbeat(err)
	if errors.Is(err, eureka.ErrNotFound) {
		r.registered.Store(false)
	}
	return err
}

// lingering returns a context that ends grace after ctx does.
func lingering(ctx context.Context, grace time.Duration) (context.Context, context.CancelFunc) {
	out, cancel := context.WithCancel(context.WithoutCancel(ctx))
	stop := context.AfterFunc(ctx, func() { time.AfterFunc(grace, cancel) })
	return out, func() {
		stop()
		cancel()
	}
}

// nextVersion stamps a new version of the instance: now, at Eureka's
// millisecond precision, and always after the previous one, so that the
// server orders two changes made within one millisecond too.
func (r *Registrar) nextVersion() time.Time {
	v := time.Now().Truncate(time.Millisecond)
	if !v.After(r.version) {
		v = r.version.Add(time.Millisecond)
	}
	return v
}

// cancel removes the registration on shutdown, bounded so the pod's other
// containers are not held up.
func (r *Registrar) cancel() {
	ctx, done := context.WithTimeout(context.Background(), r.cfg.ShutdownTimeout)
	defer done()
	err := r.registry.Cancel(ctx, r.cfg.Instance("").App, r.cfg.InstanceID())
	switch {
	case err == nil:
		r.log.Info("cancelled the registration")
	case errors.Is(err, eureka.ErrNotFound):
		r.log.Info("nothing to cancel: eureka did not know the instance")
	default:
		r.log.WithError(err).Warn("could not cancel the registration; the lease will expire or the reconciler will collect it")
	}
	r.registered.Store(false)
}

// heartbeatInterval is the renewal interval shortened by up to 10 % at
// random, so that a fleet started together does not beat in lockstep and
// no heartbeat is ever late.
func (r *Registrar) heartbeatInterval() time.Duration {
	i := r.cfg.RenewalInterval
	return i - time.Duration(rand.Int64N(int64(i)/10+1))
}

// newBackoff paces attempts while Eureka fails: 1 s doubling to RetryMax,
// ±20 % jitter. The cap is also kept under three quarters of the renewal
// interval, so that even at its longest jittered wait (0.9 of an interval)
// an instance is registered again within one renewal interval of Eureka's
// return, as a heartbeat would have found it.
func (r *Registrar) newBackoff() *backoff.ExponentialBackOff {
	ceiling := min(r.cfg.RetryMax, r.cfg.RenewalInterval*3/4)
	b := backoff.NewExponentialBackOff()
	b.InitialInterval = min(time.Second, ceiling)
	b.MaxInterval = ceiling
	b.Multiplier = 2
	b.RandomizationFactor = 0.2
	return b
}

// watchHealth probes the app every period and sends each change of the
// gated verdict (the first verdict included once the gate decides).
func (r *Registrar) watchHealth(ctx context.Context, out chan<- bool) {
	gate := NewGate(r.cfg.Health.SuccessThreshold, r.cfg.Health.FailureThreshold)
	tick := time.NewTicker(r.cfg.Health.Period)
	defer tick.Stop()
	last, sent := false, false
	for {
		probeCtx, cancel := context.WithTimeout(ctx, r.cfg.Health.Timeout)
		err := r.checker.Check(probeCtx)
		cancel()
		if ctx.Err() != nil {
			return
		}
		healthy := gate.Observe(err)
		r.metrics.setAppHealthy(healthy)
		if err != nil {
			r.log.WithError(err).Debug("health check failed")
		}
		// Failures before the first success leave the instance STARTING;
		// only a change after that is news.
		if healthy != last || (!sent && healthy) {
			last, sent = healthy, true
			select {
			case out <- healthy:
			case <-ctx.Done():
				return
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// outageLog keeps the log bounded while Eureka is unreachable: the first
// failure, then one line per minute, then one line on recovery.
type outageLog struct {
	failures int
	since    time.Time
	lastLog  time.Time
	// refused: the last failure logged was Eureka refusing the
	// credentials (401), which is logged as such when it begins, even in
	// the middle of an outage (a server restarted with a rotated
	// password), since the fix is not Eureka's but the pod's credentials.
	refused bool
}

func (o *outageLog) failed(log logrus.FieldLogger, err error) {
	now := time.Now()
	o.failures++
	refused := eureka.StatusCode(err) == http.StatusUnauthorized
	if refused && !o.refused {
		if o.failures == 1 {
			o.since = now
		}
		o.lastLog, o.refused = now, true
		log.WithError(err).Warn("eureka refused the credentials; retrying with backoff")
		return
	}
	o.refused = refused
	if o.failures == 1 {
		o.since, o.lastLog = now, now
		log.WithError(err).Warn("eureka unreachable; retrying with backoff")
		return
	}
	if now.Sub(o.lastLog) >= time.Minute {
		o.lastLog = now
		log.WithError(err).WithFields(logrus.Fields{"attempts": o.failures, "since": o.since.Format(time.RFC3339)}).Warn("eureka still unreachable")
	}
}

func (o *outageLog) recovered(log logrus.FieldLogger) {
	if o.failures > 0 {
		log.WithFields(logrus.Fields{"attempts": o.failures, "outage": time.Since(o.since).Round(time.Millisecond).String()}).Info("eureka reachable again")
	}
	*o = outageLog{}
}
