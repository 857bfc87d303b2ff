package eureka

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
)

// The lease judgment over the cache's whole and delta reads, on a fake
// clock: minutes of reads in microseconds. The answers are the real
// server's shape and its lease rules as lease.go describes them (checked
// against it by TestLease_TheServerReportsTheLastHeartbeatPlusTheLeasesDuration);
// the fake serves what the tests choose, down to the millisecond of each
// lease and how old each answer is, which the real server cannot be made
// to.

type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// fakeLease is one instance of app ORDERS as an answer shows it.
type fakeLease struct {
	id         string
	status     Status        // UP when empty
	registered time.Time     // when its lease began
	renewed    time.Time     // its last heartbeat; zero: none since registering
	duration   time.Duration // durationInSecs; zero: the server's 90 s
	action     string        // in a delta
}

// json is the instance as the server encodes it: lastRenewalTimestamp is
// the registration's time until a heartbeat, then the heartbeat's time
// plus the lease's duration (Lease.renew()).
func (l fakeLease) json() string {
	last := l.registered
	if !l.renewed.IsZero() {
		d := l.duration
		if d <= 0 {
			d = defaultLeaseDuration
		}
		last = l.renewed.Add(d)
	}
	status := l.status
	if status == "" {
		status = StatusUp
	}
	return fmt.Sprintf(`{"instanceId":%q,"hostName":"10.0.0.1","app":"ORDERS","ipAddr":"10.0.0.1","status":%q,"overriddenStatus":"UNKNOWN",`+
		`"port":{"$":8080,"@enabled":"true"},"securePort":{"$":443,"@enabled":"false"},`+
		`"dataCenterInfo":{"@class":"com.netflix.appinfo.InstanceInfo$DefaultDataCenterInfo","name":"MyOwn"},`+
		`"leaseInfo":{"renewalIntervalInSecs":30,"durationInSecs":%d,"registrationTimestamp":%d,"lastRenewalTimestamp":%d,"evictionTimestamp":0,"serviceUpTimestamp":%d},`+
		`"metadata":{"@class":"java.util.Collections$EmptyMap"},"vipAddress":"orders","actionType":%q}`,
		l.id, status, int(l.duration/time.Second), l.registered.UnixMilli(), last.UnixMilli(), l.registered.UnixMilli(), l.action)
}

// answerJSON is GET /apps of all, or, with changed, GET /apps/delta
// carrying changed; either with the hashcode of all.
func answerJSON(all, changed []fakeLease, delta bool) string {
	counts := map[Status]int{}
	for _, l := range all {
		if l.status == "" {
			l.status = StatusUp
		}
		counts[l.status]++
	}
	var statuses []string
	for s := range counts {
		statuses = append(statuses, string(s))
	}
	sort.Strings(statuses)
	var hash strings.Builder
	for _, s := range statuses {
		fmt.Fprintf(&hash, "%s_%d_", s, counts[Status(s)])
	}
	shown := all
	if delta {
		shown = changed
	}
	var insts []string
	for _, l := range shown {
		if !delta {
			l.action = actionAdded
		}
		insts = append(insts, l.json())
	}
	app := ""
	if len(insts) > 0 {
		app = fmt.Sprintf(`{"name":"ORDERS","instance":[%s]}`, strings.Join(insts, ","))
	}
	return fmt.Sprintf(`{"applications":{"versions__delta":"1","apps__hashcode":%q,"application":[%s]}}`, hash.String(), app)
}

// leaseServer answers GET /apps and /apps/delta with what answers returns
// at each request.
type leaseServer struct {
	*httptest.Server
	mu                     sync.Mutex
	answers                func(delta bool) string
	wholeReads, deltaReads int
}

func newLeaseServer(t *testing.T, answers func(delta bool) string) *leaseServer {
	t.Helper()
	s := &leaseServer{answers: answers}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		defer s.mu.Unlock()
		var delta bool
		switch r.URL.Path {
		case "/eureka/apps":
			s.wholeReads++
		case "/eureka/apps/delta":
			s.deltaReads++
			delta = true
		default:
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(s.answers(delta)))
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *leaseServer) reads() (whole, delta int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.wholeReads, s.deltaReads
}

// fakeCache reads s through a RegistryCache on clock, as the manager's
// resync does (maxAge 30 s).
func fakeCache(t *testing.T, s *leaseServer, clock *fakeClock) *RegistryCache {
	t.Helper()
	c, err := New(Options{URLs: []string{s.URL + "/eureka"}, Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	c.now = clock.Now
	rc := NewRegistryCache(c, 30*time.Second)
	rc.now = clock.Now
	return rc
}

func readAt(t *testing.T, rc *RegistryCache) *Registry {
	t.Helper()
	reg, err := rc.Registry(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return reg
}

func instanceOf(t *testing.T, reg *Registry, id string) Instance {
	t.Helper()
	for _, inst := range reg.Instances("orders") {
		if inst.InstanceID == id {
			return inst
		}
	}
	t.Fatalf("%s not in the registry", id)
	return Instance{}
}

// t0 is any moment; the server and the reader share the fake clock.
var t0 = time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)

// A heartbeating instance that no delta carries keeps the lease its last
// whole read showed; it is never listed, however long ago that read was,
// whether the answers are fresh (a registry that changes) or as old as the
// server's cache lets them be (one that does not). The old judgment, of
// the lease against the reader's clock, lists it on either.
func TestExpiredLeases_AHeartbeatingInstanceIsNeverListedBetweenWholeReads(t *testing.T) {
	for _, tc := range []struct {
		name string
		// answerAge is how long before a read the server encoded its
		// answer; churn is whether an instance changes status at every
		// read (a change makes the server encode its answers afresh).
		answerAge time.Duration
		churn     bool
	}{
		{"fresh answers, deltas naming another instance", 0, true},
		{"answers as old as the server's cache keeps them, empty deltas", maxAnswerAge - time.Second, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock := &fakeClock{now: t0}
			step := 0
			// newcomer registered 25 s before the first answer was encoded:
			// that answer shows it not yet renewed, since its registration.
			joined := t0.Add(-tc.answerAge - 25*time.Second)
			state := func(at time.Time) []fakeLease {
				// Heartbeats every 30 s: the last one was at most 30 s before.
				beat := at.Add(-time.Duration(at.Unix()%30) * time.Second)
				churner := fakeLease{id: "churner", registered: t0.Add(-time.Hour), renewed: beat, action: actionModified}
				if tc.churn && step%2 == 1 {
					churner.status = StatusDown
				}
				newcomer := fakeLease{id: "newcomer", registered: joined}
				if since := at.Sub(joined); since >= 30*time.Second {
					newcomer.renewed = at.Add(-since % (30 * time.Second))
				}
				return []fakeLease{{id: "beating", registered: t0.Add(-time.Hour), renewed: beat}, churner, newcomer}
			}
			s := newLeaseServer(t, func(delta bool) string {
				all := state(clock.Now().Add(-tc.answerAge))
				if delta && tc.churn {
					return answerJSON(all, all[1:2], true)
				}
				return answerJSON(all, nil, delta)
			})
			rc := fakeCache(t, s, clock)
			oldRuleListed := 0
			for ; clock.Now().Before(t0.Add(10 * time.Minute)); clock.Add(30 * time.Second) {
				step++
				reg := readAt(t, rc)
				if got := reg.ExpiredLeases("orders"); len(got) != 0 {
					t.Fatalf("at t0+%s: ExpiredLeases %v, want none (%s)", clock.Now().Sub(t0), got, leasesOf(reg))
				}
				// The rule this replaces: the lease against the reader's clock.
				if beating := instanceOf(t, reg, "beating"); clock.Now().Sub(beating.LastUpdated) > leaseDuration(beating)+EvictionPeriod {
					oldRuleListed++
				}
			}
			whole, delta := s.reads()
			if whole != 2 || delta != 18 {
				t.Errorf("%d whole reads and %d delta reads in 10 minutes, want 2 and 18 (whole every 5 minutes)", whole, delta)
			}
			if oldRuleListed == 0 {
				t.Error("the old rule never listed the heartbeating instance: the test does not reach the false alarm it guards against")
			}
		})
	}
}

// An instance that stopped heartbeating, listed by a server in
// self-preservation, is listed by the first whole read after its lease ran
// out, and not before: deltas never carry it, so between whole reads it is
// judged on the last one. Each lease is the instance's own: the default
// one (durationInSecs 0), a shorter one, and one never renewed since its
// registration, which the server judges on one duration, not two.
func TestExpiredLeases_AFrozenInstanceIsListedByTheNextWholeReadAfterItsLease(t *testing.T) {
	clock := &fakeClock{now: t0}
	frozen := []fakeLease{
		// Expired by the server's rule at renewed + 2 × 90 s, by
		// ExpiredLeases one eviction period later: t0 + 220 s.
		{id: "frozen-default-lease", registered: t0.Add(-time.Hour), renewed: t0.Add(-20 * time.Second)},
		// renewed + 2 × 30 s + 60 s: t0 + 20 s.
		{id: "frozen-30s-lease", registered: t0.Add(-time.Hour), renewed: t0.Add(-100 * time.Second), duration: 30 * time.Second},
		// registered + 90 s + 60 s: t0 - 50 s, expired when first read.
		{id: "never-renewed", registered: t0.Add(-200 * time.Second)},
	}
	s := newLeaseServer(t, func(delta bool) string {
		now := clock.Now()
		beating := fakeLease{id: "beating", registered: t0.Add(-time.Hour), renewed: now.Add(-5 * time.Second), action: actionModified}
		all := append([]fakeLease{beating}, frozen...)
		if delta { // a delta that names the heartbeating instance (a status change)
			return answerJSON(all, all[:1], true)
		}
		return answerJSON(all, nil, false)
	})
	rc := fakeCache(t, s, clock)
	for at := time.Duration(0); at < 10*time.Minute; at += 30 * time.Second {
		// Judged on the whole read at t0 (its leases shown as of t0 - 5 s),
		// then on the one at t0 + 5 min.
		want := []string{"never-renewed"}
		if at >= wholeEvery {
			want = []string{"frozen-30s-lease", "frozen-default-lease", "never-renewed"}
		}
		got := readAt(t, rc).ExpiredLeases("Orders")
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Errorf("at t0+%s: ExpiredLeases %v, want %v", at, got, want)
		}
		clock.Add(30 * time.Second)
	}
}

// A delta sets when the leases of the instances it carries were shown, and
// only theirs; a delta the server encoded before the last whole read (its
// cache keeps each answer apart) does not take an instance's lease back
// to an older one.
func TestExpiredLeases_ADeltaStampsOnlyTheInstancesItCarries(t *testing.T) {
	clock := &fakeClock{now: t0}
	var next func(delta bool) string
	s := newLeaseServer(t, func(delta bool) string { return next(delta) })
	rc := fakeCache(t, s, clock)
	stays := fakeLease{id: "stays", registered: t0.Add(-time.Hour), renewed: t0.Add(-10 * time.Second)}
	next = func(bool) string { return answerJSON([]fakeLease{stays}, nil, false) }
	first := instanceOf(t, readAt(t, rc), "stays")
	if want := t0.Add(-10 * time.Second); !first.LeaseObservedAt.Equal(want) {
		t.Fatalf("a whole read showed the lease as of %s, want %s (its freshest heartbeat)", first.LeaseObservedAt, want)
	}

	// comes registered at t0 + 40 s; the delta read at t0 + 60 s carries it.
	comes := fakeLease{id: "comes", registered: t0.Add(40 * time.Second), action: actionAdded}
	next = func(bool) string {
		return answerJSON([]fakeLease{stays, comes}, []fakeLease{comes}, true)
	}
	clock.Add(60 * time.Second)
	reg := readAt(t, rc)
	if got := instanceOf(t, reg, "comes").LeaseObservedAt; !got.Equal(comes.registered) {
		t.Errorf("the instance the delta carried: lease shown as of %s, want %s", got, comes.registered)
	}
	if got := instanceOf(t, reg, "stays"); !got.LeaseObservedAt.Equal(first.LeaseObservedAt) || !got.LastUpdated.Equal(first.LastUpdated) {
		t.Errorf("an instance the delta did not carry: %s as of %s, want %s as of %s", got.LastUpdated, got.LeaseObservedAt, first.LastUpdated, first.LeaseObservedAt)
	}

	// A delta encoded long ago, which names stays with the lease it had
	// then: the lease of the whole read, shown later, is kept.
	older := stays
	older.renewed, older.action = t0.Add(-170*time.Second), actionModified
	next = func(bool) string {
		return answerJSON([]fakeLease{stays, comes}, []fakeLease{older}, true)
	}
	clock.Add(30 * time.Second)
	if got := instanceOf(t, readAt(t, rc), "stays"); !got.LastUpdated.Equal(first.LastUpdated) || !got.LeaseObservedAt.Equal(first.LeaseObservedAt) {
		t.Errorf("after an older delta: %s as of %s, want the whole read's %s as of %s", got.LastUpdated, got.LeaseObservedAt, first.LastUpdated, first.LeaseObservedAt)
	}
	if whole, delta := s.reads(); whole != 1 || delta != 2 {
		t.Errorf("%d whole and %d delta reads, want 1 and 2", whole, delta)
	}
}

// An answer whose every lease is old (nothing in it renewed lately: every
// instance frozen) shows them no earlier than the server's cache allows,
// so a registry of frozen instances is still judged; an instance read
// straight from the registry is shown as of the request.
func TestLeaseObservedAt_AnAnswerOfStaleLeasesIsAsOldAsTheServersCacheAllows(t *testing.T) {
	clock := &fakeClock{now: t0}
	frozen := fakeLease{id: "frozen", registered: t0.Add(-time.Hour), renewed: t0.Add(-time.Hour)}
	s := newLeaseServer(t, func(bool) string { return answerJSON([]fakeLease{frozen}, nil, false) })
	reg := readAt(t, fakeCache(t, s, clock))
	got := instanceOf(t, reg, "frozen")
	if want := t0.Add(-maxAnswerAge); !got.LeaseObservedAt.Equal(want) {
		t.Errorf("lease shown as of %s, want %s (the read less the server's cache, %s)", got.LeaseObservedAt, want, maxAnswerAge)
	}
	if ids := reg.ExpiredLeases("ORDERS"); !slices.Equal(ids, []string{"frozen"}) {
		t.Errorf("ExpiredLeases %v, want [frozen]", ids)
	}

	live, err := decodeInstance([]byte(`{"instance":`+frozen.json()+`}`), t0)
	if err != nil {
		t.Fatal(err)
	}
	if !live.LeaseObservedAt.Equal(t0) {
		t.Errorf("an instance read straight from the registry: lease shown as of %s, want the request's %s", live.LeaseObservedAt, t0)
	}
}

// leasesOf says what the registry holds of each lease of ORDERS.
func leasesOf(reg *Registry) string {
	var out []string
	for _, inst := range reg.Instances("orders") {
		out = append(out, fmt.Sprintf("%s: lastRenewalTimestamp t0%+v shown as of t0%+v", inst.InstanceID, inst.LastUpdated.Sub(t0), inst.LeaseObservedAt.Sub(t0)))
	}
	return strings.Join(out, "; ")
}
