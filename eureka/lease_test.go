package eureka_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/eurekube/eurekube/eureka"
	"github.com/eurekube/eurekube/tests/harness"
)

// The server reports a lease's last renewal as the registration's time
// until the first heartbeat, then as the heartbeat's time plus the lease's
// duration; and a delta's instances carry their leases as they stand when
// the delta is encoded, not as they stood at the change it names.
func TestLease_TheServerReportsTheLastHeartbeatPlusTheLeasesDuration(t *testing.T) {
	c := newClient(t)
	ops := &opCounter{ops: map[string]int{}}
	reader, err := eureka.New(eureka.Options{URLs: c.URLs(), Timeout: requestTimeout, Observer: ops})
	if err != nil {
		t.Fatal(err)
	}
	inst := testInstance("lease-app", "pod-1") // a 90 s lease
	before := time.Now().Truncate(time.Millisecond)
	if err := c.Register(ctx(t), inst); err != nil {
		t.Fatal(err)
	}
	registered := time.Now()
	got, err := c.Instance(ctx(t), inst.App, inst.InstanceID)
	if err != nil {
		t.Fatal(err)
	}
	if got.LastUpdated.Before(before) || got.LastUpdated.After(registered) {
		t.Fatalf("before any heartbeat: lastRenewalTimestamp %s, want the registration's time, within [%s, %s]", got.LastUpdated, before, registered)
	}
	cache := eureka.NewRegistryCache(reader, 0) // every reader reads
	if _, err := cache.Registry(ctx(t)); err != nil {
		t.Fatal(err)
	}

	beat := time.Now().Truncate(time.Millisecond)
	if err := c.Heartbeat(ctx(t), inst.App, inst.InstanceID, time.Time{}); err != nil {
		t.Fatal(err)
	}
	beaten := time.Now()
	renewed := func(what string, got eureka.Instance) {
		t.Helper()
		if lo, hi := beat.Add(inst.Duration), beaten.Add(inst.Duration); got.LastUpdated.Before(lo) || got.LastUpdated.After(hi) {
			t.Errorf("%s: lastRenewalTimestamp %s, want the heartbeat's time plus the lease's %s, within [%s, %s]", what, got.LastUpdated, inst.Duration, lo, hi)
		}
	}
	got, err = c.Instance(ctx(t), inst.App, inst.InstanceID)
	if err != nil {
		t.Fatal(err)
	}
	renewed("read straight from the registry after a heartbeat", got)

	// Another registration: a change, so that the server encodes its
	// answers afresh (the tests' server caches one for 1 s).
	if err := c.Register(ctx(t), testInstance("lease-app", "pod-2")); err != nil {
		t.Fatal(err)
	}
	reg, err := cache.Registry(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	if ops.count("delta") != 1 || ops.count("applications") != 1 {
		t.Fatalf("requests %s, want the second read to be a delta", ops)
	}
	got = instanceIn(t, reg, inst)
	renewed("carried by a delta whose change is its registration", got)
	if got.LeaseObservedAt.Before(beat) {
		t.Errorf("the delta showed the lease as of %s, before the heartbeat it shows (%s)", got.LeaseObservedAt, beat)
	}
	if expired := reg.ExpiredLeases(inst.App); len(expired) != 0 {
		t.Errorf("ExpiredLeases %v, want none", expired)
	}
}

func instanceIn(t *testing.T, reg *eureka.Registry, inst eureka.Instance) eureka.Instance {
	t.Helper()
	for _, got := range reg.Instances(inst.App) {
		if got.InstanceID == inst.InstanceID {
			return got
		}
	}
	t.Fatalf("%s is not in the registry", inst.InstanceID)
	return eureka.Instance{}
}

// replayFor is how long TestRegistryCache_JudgesLeasesOnlyOnWhatTheServerShowedFresh
// reads: a whole read, the deltas of five minutes, a second whole read, the
// deltas of five more.
const replayFor = 10 * time.Minute

// replayPeriod is how often it reads, renews and changes the registry, as
// the manager resyncs and Eureka clients heartbeat.
const replayPeriod = 30 * time.Second

// A real server's registry, read through the real RegistryCache every
// 30 s for 10 minutes, as the manager's resync reads it: deltas between
// whole reads, which carry no renewal. Heartbeating instances, two of them
// changing (so the deltas are not empty), are never listed by
// ExpiredLeases. Instances that stopped heartbeating, on a server in
// self-preservation that keeps them, are listed by the first whole read
// after their lease ran out (within a bound derived below), and never
// before it ran out.
//
// It needs a server with Eureka's default timings and self-preservation
// on (harness.ProfileReal), of its own: eviction and the response cache
// at their defaults, and no other test's instances in its count of
// expected renewals. 10 minutes of real time, mostly waiting: run
// beside the package's other tests, and skipped when go test's -timeout
// leaves it too little (the default 10 minutes does).
func TestRegistryCache_JudgesLeasesOnlyOnWhatTheServerShowedFresh(t *testing.T) {
	harness.SkipWhenShort(t, "a Eureka server (a JVM), for 10 minutes")
	t.Parallel()
	if deadline, ok := t.Deadline(); ok && time.Until(deadline) < replayFor+8*time.Minute {
		t.Skipf("replays %s of a real server's reads and needs go test -timeout 20m or more (make test gives 40m); %s left", replayFor, time.Until(deadline).Round(time.Second))
	}
	srv := harness.EurekaT(t, harness.EurekaOptions{Profile: harness.ProfileReal})
	writer, err := eureka.New(eureka.Options{URLs: []string{srv.URL()}, Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	const app = "LEASE-REPLAY"
	setup, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	// Stopped heartbeating: one with a 30 s lease after one heartbeat, one
	// with the default lease after one, one after none. With the four
	// below, seven instances: the server expects (7 + 1) × 2 × 0.85 = 13
	// renewals a minute and gets 8, so it is in self-preservation and
	// evicts none of them.
	frozen30 := testInstance(app, "frozen-30s")
	frozen30.RenewalInterval, frozen30.Duration = 10*time.Second, 30*time.Second
	frozen := []eureka.Instance{frozen30, testInstance(app, "frozen-90s"), testInstance(app, "never-renewed")}
	for i, inst := range frozen {
		if err := writer.Register(setup, inst); err != nil {
			t.Fatal(err)
		}
		if i < 2 {
			if err := writer.Heartbeat(setup, inst.App, inst.InstanceID, time.Time{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	// Each one's lastRenewalTimestamp, as the server reports it from now on.
	lastRenewal := map[string]time.Time{}
	for _, inst := range frozen {
		got, err := writer.Instance(setup, inst.App, inst.InstanceID)
		if err != nil {
			t.Fatal(err)
		}
		lastRenewal[inst.InstanceID] = got.LastUpdated
	}

	// Heartbeating every 30 s: two steady; one re-registered DOWN or UP
	// every minute (its client's health changing, as a registrar reports
	// it); one cancelled and registered again every two minutes (a new
	// lease).
	beating := []eureka.Instance{testInstance(app, "steady-1"), testInstance(app, "steady-2"), testInstance(app, "flapping"), testInstance(app, "returning")}
	beats := &beatLog{last: map[string]time.Time{}}
	for _, inst := range beating {
		if err := writer.Register(setup, inst); err != nil {
			t.Fatal(err)
		}
		beats.beat(inst.InstanceID, time.Now())
	}
	running, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() { stop(); wg.Wait() }()
	for _, inst := range beating {
		wg.Go(func() { keepBeating(running, t, writer, inst, beats) })
	}

	ops := &opCounter{ops: map[string]int{}}
	reader, err := eureka.New(eureka.Options{URLs: []string{srv.URL()}, Timeout: time.Minute, Observer: ops})
	if err != nil {
		t.Fatal(err)
	}
	// The manager's resync reads at most once per 30 s; a little less, so
	// that each tick of the reader reads.
	cache := eureka.NewRegistryCache(reader, replayPeriod-5*time.Second)

	// How much older than a whole read the moment its leases are judged as
	// of (LeaseObservedAt) can be in this test: an answer shows the
	// registrations made before the server last refreshed its read-only
	// cache (every ServerCacheDelay), and here one is made every minute,
	// a minute late at worst on a busy machine. So a frozen instance is
	// listed by the first whole read that asks past its lease's run-out
	// (lastRenewalTimestamp + duration + the eviction period) by that much.
	const answerLag = time.Minute + eureka.ServerCacheDelay + time.Minute
	ranOut := func(inst eureka.Instance) time.Time {
		return lastRenewal[inst.InstanceID].Add(inst.Duration + eureka.EvictionPeriod)
	}

	var (
		reads, deltaReads, carried, keptOnDelta int
		listedFirst                             = map[string]time.Time{}
		previous                                *eureka.Registry
	)
	tick := time.NewTicker(replayPeriod)
	defer tick.Stop()
	begin := time.Now()
	for {
		asked, wholeBefore := time.Now(), ops.count("applications")
		readCtx, cancelRead := context.WithTimeout(context.Background(), 3*time.Minute)
		reg, err := cache.Registry(readCtx)
		cancelRead()
		answered := time.Now()
		if err != nil {
			t.Fatalf("read %d, at %s: %v", reads, asked.Sub(begin).Round(time.Second), err)
		}
		reads++
		whole := ops.count("applications") > wholeBefore
		at := fmt.Sprintf("read %d (%s, at +%s)", reads, map[bool]string{true: "whole", false: "delta"}[whole], asked.Sub(begin).Round(time.Second))
		listed := reg.ExpiredLeases(strings.ToLower(app))
		for _, inst := range beating {
			if slices.Contains(listed, inst.InstanceID) {
				t.Errorf("%s: ExpiredLeases lists %s, which heartbeats (last at +%s): %s", at, inst.InstanceID, beats.at(inst.InstanceID).Sub(begin).Round(time.Second), leaseOf(reg, inst))
			}
		}
		for _, inst := range frozen {
			isListed := slices.Contains(listed, inst.InstanceID)
			switch {
			case isListed && answered.Before(ranOut(inst)):
				t.Errorf("%s: ExpiredLeases lists %s before its lease ran out (at +%s): %s", at, inst.InstanceID, ranOut(inst).Sub(begin).Round(time.Second), leaseOf(reg, inst))
			case !isListed && whole && asked.After(ranOut(inst).Add(answerLag)):
				t.Errorf("%s: ExpiredLeases does not list %s, whose lease ran out at +%s: %s", at, inst.InstanceID, ranOut(inst).Sub(begin).Round(time.Second), leaseOf(reg, inst))
			case isListed && listedFirst[inst.InstanceID].IsZero():
				listedFirst[inst.InstanceID] = asked
				// Listed, so the server still lists it past its own expiry
				// (lastRenewalTimestamp + duration): it did not evict.
				liveCtx, cancelLive := context.WithTimeout(context.Background(), time.Minute)
				_, err := writer.Instance(liveCtx, inst.App, inst.InstanceID)
				cancelLive()
				if err != nil {
					t.Errorf("%s: %s is listed as expired, but reading it: %v", at, inst.InstanceID, err)
				}
				t.Logf("%s: %s listed, its lease ran out at +%s", at, inst.InstanceID, ranOut(inst).Sub(begin).Round(time.Second))
			}
		}
		if !whole && previous != nil {
			deltaReads++
			for _, inst := range beating {
				before, now := leaseShown(previous, inst), leaseShown(reg, inst)
				switch {
				case before.IsZero() || now.IsZero(): // cancelled meanwhile
				case now.Equal(before):
					keptOnDelta++
				default:
					carried++
				}
			}
		}
		previous = reg
		if time.Since(begin) >= replayFor {
			break
		}
		<-tick.C
	}

	t.Logf("%d reads in %s: %d deltas, %d whole (requests %s); on delta reads, %d leases shown afresh, %d kept", reads, time.Since(begin).Round(time.Second), deltaReads, reads-deltaReads, ops, carried, keptOnDelta)
	if reads-deltaReads < 2 || deltaReads < 15 {
		t.Errorf("%d whole reads and %d delta reads, want 2 or 3 whole ones (one per 5 minutes), the rest deltas", reads-deltaReads, deltaReads)
	}
	if carried == 0 || keptOnDelta == 0 {
		t.Errorf("on delta reads, %d leases shown afresh and %d kept: want both (a delta stamps only the instances it carries)", carried, keptOnDelta)
	}
	for _, inst := range frozen {
		// Listed by a whole read at most 5 minutes and a read apart, when
		// one came late enough in these 10 minutes.
		if listedFirst[inst.InstanceID].IsZero() && time.Since(ranOut(inst).Add(answerLag)) > 5*time.Minute+replayPeriod {
			t.Errorf("%s, whose lease ran out at +%s, was never listed", inst.InstanceID, ranOut(inst).Sub(begin).Round(time.Second))
		}
	}
	for _, id := range []string{frozen[0].InstanceID, frozen[2].InstanceID} {
		if listedFirst[id].IsZero() {
			t.Errorf("%s was never listed in %s", id, replayFor)
		}
	}
}

// keepBeating heartbeats inst every replayPeriod until ctx ends; "flapping"
// is registered again with the other status every second beat, and
// "returning" cancelled and registered again every fourth. A request that
// fails (a busy machine) is tried again at the next beat; the log says so.
func keepBeating(ctx context.Context, t *testing.T, c *eureka.Client, inst eureka.Instance, beats *beatLog) {
	tick := time.NewTicker(replayPeriod)
	defer tick.Stop()
	for n := 1; ; n++ {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		reqCtx, cancel := context.WithTimeout(ctx, time.Minute)
		var err error
		switch pod := inst.Metadata[eureka.MetaPod]; {
		case pod == "flapping" && n%2 == 0:
			inst.Status = map[eureka.Status]eureka.Status{eureka.StatusUp: eureka.StatusDown, eureka.StatusDown: eureka.StatusUp}[inst.Status]
			inst.LastDirtyTimestamp = time.Now()
			err = c.Register(reqCtx, inst)
		case pod == "returning" && n%4 == 0:
			if err = c.Cancel(reqCtx, inst.App, inst.InstanceID); err == nil {
				err = c.Register(reqCtx, inst)
			}
		default:
			err = c.Heartbeat(reqCtx, inst.App, inst.InstanceID, time.Time{})
			if errors.Is(err, eureka.ErrNotFound) {
				err = fmt.Errorf("%w (the server lost its lease)", err)
			}
		}
		cancel()
		if err != nil {
			if ctx.Err() == nil {
				t.Logf("%s: %v", inst.InstanceID, err)
			}
			continue
		}
		beats.beat(inst.InstanceID, time.Now())
	}
}

// beatLog is when each instance last renewed its lease or registered.
type beatLog struct {
	mu   sync.Mutex
	last map[string]time.Time
}

func (b *beatLog) beat(id string, at time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.last[id] = at
}

func (b *beatLog) at(id string) time.Time {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.last[id]
}

// leaseShown is when reg's copy of inst was shown with its lease; zero
// when reg does not hold it.
func leaseShown(reg *eureka.Registry, inst eureka.Instance) time.Time {
	for _, got := range reg.Instances(inst.App) {
		if got.InstanceID == inst.InstanceID {
			return got.LeaseObservedAt
		}
	}
	return time.Time{}
}

// leaseOf says what reg holds of inst's lease.
func leaseOf(reg *eureka.Registry, inst eureka.Instance) string {
	for _, got := range reg.Instances(inst.App) {
		if got.InstanceID == inst.InstanceID {
			return fmt.Sprintf("lastRenewalTimestamp %s, shown as of %s, lease %s", got.LastUpdated.Format(time.RFC3339Nano), got.LeaseObservedAt.Format(time.RFC3339Nano), got.Duration)
		}
	}
	return "not in the registry"
}
