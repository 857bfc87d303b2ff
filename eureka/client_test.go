package eureka_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/eurekube/eurekube/eureka"
)

func TestRegister_KeepsEveryMetadataKeyAcrossReregistrations(t *testing.T) {
	c := newClient(t)
	inst := testInstance("meta-app", "pod-a")
	for i := 0; i < 3; i++ {
		inst.Metadata["round"] = fmt.Sprint(i)
		if err := c.Register(ctx(t), inst); err != nil {
			t.Fatalf("registration %d: %v", i, err)
		}
		got, err := c.Instance(ctx(t), inst.App, inst.InstanceID)
		if err != nil {
			t.Fatalf("read after registration %d: %v", i, err)
		}
		for k, v := range inst.Metadata {
			if got.Metadata[k] != v {
				t.Errorf("registration %d: metadata %q = %q, want %q (all: %v)", i, k, got.Metadata[k], v, got.Metadata)
			}
		}
	}
}

func TestRegister_ChangedStatusReachesTheServer(t *testing.T) {
	c := newClient(t)
	inst := testInstance("status-app", "pod-s")
	inst.Status = eureka.StatusStarting
	if err := c.Register(ctx(t), inst); err != nil {
		t.Fatal(err)
	}
	inst.Status = eureka.StatusUp
	if err := c.Register(ctx(t), inst); err != nil {
		t.Fatal(err)
	}
	got, err := c.Instance(ctx(t), inst.App, inst.InstanceID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != eureka.StatusUp {
		t.Fatalf("status after re-registration = %s, want UP", got.Status)
	}
}

// A registration that was delayed (a timed-out request the server still
// processes, a retry through another URL) arrives after a newer one: the
// server keeps the newer version because each carries its lastDirtyTimestamp.
func TestRegister_ADelayedOlderVersionDoesNotUndoANewerOne(t *testing.T) {
	c := newClient(t)
	inst := testInstance("dirty-app", "pod-d")
	older := time.Now().Add(-time.Second)
	inst.Status, inst.LastDirtyTimestamp = eureka.StatusUp, older.Add(500*time.Millisecond)
	if err := c.Register(ctx(t), inst); err != nil {
		t.Fatal(err)
	}
	inst.Status, inst.LastDirtyTimestamp = eureka.StatusStarting, older
	if err := c.Register(ctx(t), inst); err != nil {
		t.Fatal(err)
	}
	got, err := c.Instance(ctx(t), inst.App, inst.InstanceID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != eureka.StatusUp {
		t.Fatalf("status after a delayed older registration = %s, want UP (the newer version)", got.Status)
	}
}

// A heartbeat carrying the version the client last registered tells the
// client when the server holds an older one, so it registers again.
func TestHeartbeat_ServerHoldingAnOlderVersionIsErrNotFound(t *testing.T) {
	c := newClient(t)
	inst := testInstance("dirty-app", "pod-h")
	v1 := time.Now().Add(-time.Minute).Truncate(time.Millisecond)
	inst.LastDirtyTimestamp = v1
	if err := c.Register(ctx(t), inst); err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		version time.Time
		want    error
	}{
		"the version it holds":           {v1, nil},
		"an older version than it holds": {v1.Add(-time.Second), nil},
		"no version":                     {time.Time{}, nil},
		"a newer version than it holds":  {v1.Add(time.Millisecond), eureka.ErrNotFound},
	} {
		err := c.Heartbeat(ctx(t), inst.App, inst.InstanceID, tc.version)
		if tc.want == nil && err != nil || tc.want != nil && !errors.Is(err, tc.want) {
			t.Errorf("heartbeat with %s: %v, want %v", name, err, tc.want)
		}
	}
}

func TestHeartbeat_RenewsAKnownInstance(t *testing.T) {
	c := newClient(t)
	inst := testInstance("beat-app", "pod-b")
	if err := c.Register(ctx(t), inst); err != nil {
		t.Fatal(err)
	}
	if err := c.Heartbeat(ctx(t), inst.App, inst.InstanceID, time.Time{}); err != nil {
		t.Fatalf("heartbeat: %v", err)
	}
}

func TestHeartbeat_UnknownInstanceIsErrNotFoundThroughWrapping(t *testing.T) {
	c := newClient(t)
	err := c.Heartbeat(ctx(t), "beat-app", "no-such-instance", time.Time{})
	wrapped := fmt.Errorf("registrar loop: %w", err)
	if !errors.Is(wrapped, eureka.ErrNotFound) {
		t.Fatalf("heartbeat of an unknown instance: %v, want ErrNotFound", err)
	}
	if eureka.StatusCode(wrapped) != http.StatusNotFound {
		t.Fatalf("status code through wrapping = %d, want 404", eureka.StatusCode(wrapped))
	}
}

func TestCancel_RemovesTheInstance(t *testing.T) {
	c := newClient(t)
	inst := testInstance("cancel-app", "pod-c")
	if err := c.Register(ctx(t), inst); err != nil {
		t.Fatal(err)
	}
	if err := c.Cancel(ctx(t), inst.App, inst.InstanceID); err != nil {
		t.Fatalf("cancel: %v", err)
	}
	if _, err := c.Instance(ctx(t), inst.App, inst.InstanceID); !errors.Is(err, eureka.ErrNotFound) {
		t.Fatalf("read after cancel: %v, want ErrNotFound", err)
	}
	if err := c.Cancel(ctx(t), inst.App, inst.InstanceID); !errors.Is(err, eureka.ErrNotFound) {
		t.Fatalf("second cancel: %v, want ErrNotFound", err)
	}
}

func TestFailover_FirstURLDeadSecondServes(t *testing.T) {
	dead := closedPortURL(t)
	c := newClient(t, dead, realServer(t).URL())
	inst := testInstance("failover-app", "pod-f")
	if err := c.Register(ctx(t), inst); err != nil {
		t.Fatalf("register with the first URL dead: %v", err)
	}
	if err := c.Heartbeat(ctx(t), inst.App, inst.InstanceID, time.Time{}); err != nil {
		t.Fatalf("heartbeat with the first URL dead: %v", err)
	}
	if _, err := c.Instance(ctx(t), inst.App, inst.InstanceID); err != nil {
		t.Fatalf("read with the first URL dead: %v", err)
	}
}

func TestFailover_ServerAnswering500IsSkipped(t *testing.T) {
	// A fault the real server cannot produce on demand.
	broken := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "boom", http.StatusInternalServerError)
	}))
	defer broken.Close()
	c := newClient(t, broken.URL+"/eureka", realServer(t).URL())
	inst := testInstance("failover-app", "pod-500")
	if err := c.Register(ctx(t), inst); err != nil {
		t.Fatalf("register with the first server failing: %v", err)
	}
}

func TestUnavailable_EveryURLDeadIsErrUnavailableNamingTheURLs(t *testing.T) {
	dead1, dead2 := closedPortURL(t), closedPortURL(t)
	c := newClient(t, dead1, dead2)
	err := c.Heartbeat(ctx(t), "x", "y", time.Time{})
	if !errors.Is(err, eureka.ErrUnavailable) {
		t.Fatalf("err = %v, want ErrUnavailable", err)
	}
	for _, u := range []string{dead1, dead2} {
		if !strings.Contains(err.Error(), u) {
			t.Errorf("error %q does not name %s", err, u)
		}
	}
}

func TestInstances_SpringClientReadsWhatItNeeds(t *testing.T) {
	c := newClient(t)
	inst := testInstance("spring-app", "pod-sp")
	if err := c.Register(ctx(t), inst); err != nil {
		t.Fatal(err)
	}
	instances, err := realServer(t).SpringRead("SPRING-APP")
	if err != nil {
		t.Fatal(err)
	}
	if len(instances) != 1 {
		t.Fatalf("instances = %d, want 1", len(instances))
	}
	got := instances[0]
	checks := map[string][2]any{
		"hostName":            {got.HostName, "10.1.2.3"},
		"ipAddr":              {got.IPAddr, "10.1.2.3"},
		"vipAddress":          {got.VIPAddress, "spring-app"},
		"status":              {got.Status, "UP"},
		"port.$":              {fmt.Sprint(got.Port["$"]), "8080"},
		"port.@enabled":       {got.Port["@enabled"], "true"},
		"dataCenterInfo.name": {got.DataCenterInfo["name"], "MyOwn"},
		"metadata.zone":       {got.Metadata["zone"], "zone-a"},
	}
	for field, c := range checks {
		if c[0] != c[1] {
			t.Errorf("%s = %v, want %v", field, c[0], c[1])
		}
	}
}

func TestInstancesWithMetadata_ReturnsOnlyMarkedInstances(t *testing.T) {
	c := newClient(t)
	mine := testInstance("shared-app", "pod-mine")
	foreign := testInstance("shared-app", "vm-1")
	foreign.Metadata = map[string]string{"zone": "dc1"}
	other := testInstance("shared-app", "pod-other")
	other.Metadata[eureka.MetaCluster] = "cluster-2"
	for _, inst := range []eureka.Instance{mine, foreign, other} {
		if err := c.Register(ctx(t), inst); err != nil {
			t.Fatal(err)
		}
	}
	got, err := c.InstancesWithMetadata(ctx(t), "shared-app", map[string]string{
		eureka.MetaManagedBy: eureka.ManagedByValue,
		eureka.MetaCluster:   "cluster-1",
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].InstanceID != mine.InstanceID {
		t.Fatalf("marked instances = %v, want only %s", ids(got), mine.InstanceID)
	}
}

func TestInstances_UnknownAppIsEmpty(t *testing.T) {
	got, err := newClient(t).Instances(ctx(t), "never-registered")
	if err != nil || len(got) != 0 {
		t.Fatalf("Instances(unknown) = %v, %v; want empty, nil", got, err)
	}
}

func TestBadInput_ReturnsErrInvalidNeverExits(t *testing.T) {
	for _, tc := range []struct {
		name string
		urls []string
	}{
		{"no URL", nil},
		{"empty URL", []string{""}},
		{"malformed URL", []string{"http://[::1"}},
		{"relative URL", []string{"eureka/apps"}},
		{"unsupported scheme", []string{"ftp://eureka:8761/eureka"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := eureka.New(eureka.Options{URLs: tc.urls}); !errors.Is(err, eureka.ErrInvalid) {
				t.Fatalf("New(%q) = %v, want ErrInvalid", tc.urls, err)
			}
		})
	}
	c := newClient(t, closedPortURL(t)) // nothing is sent
	bad := testInstance("", "pod-x")
	calls := map[string]error{
		"register without app":  c.Register(ctx(t), bad),
		"heartbeat without app": c.Heartbeat(ctx(t), "", "id", time.Time{}),
		"heartbeat without id":  c.Heartbeat(ctx(t), "app", "", time.Time{}),
		"cancel without app":    c.Cancel(ctx(t), " ", "id"),
		"list without app":      func() error { _, err := c.Instances(ctx(t), ""); return err }(),
	}
	for name, err := range calls {
		if !errors.Is(err, eureka.ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
	}
}

func TestFailover_AHangingServerLeavesTheNextOneAShareOfAShortDeadline(t *testing.T) {
	// A fault the real server cannot produce on demand: it accepts the
	// connection and never answers.
	hanging := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		<-r.Context().Done()
	}))
	defer hanging.Close()
	inst := testInstance("shutdown-app", "pod-h")
	if err := newClient(t).Register(ctx(t), inst); err != nil {
		t.Fatal(err)
	}
	// The hanging server comes first, as when the server that answered last
	// stops answering; the per-request timeout is as long as the caller's
	// whole budget, as with the registrar's cancel on shutdown.
	c := newClient(t, hanging.URL+"/eureka", realServer(t).URL())
	budget, cancel := context.WithTimeout(context.Background(), requestTimeout)
	defer cancel()
	if err := c.Cancel(budget, inst.App, inst.InstanceID); err != nil {
		t.Fatalf("cancel with the first server hanging: %v", err)
	}
	if _, err := newClient(t).Instance(ctx(t), inst.App, inst.InstanceID); !errors.Is(err, eureka.ErrNotFound) {
		t.Fatalf("instance after the cancel: %v, want ErrNotFound", err)
	}
}

func TestApplications_ReadsEveryAppAsInstancesReadsEachOne(t *testing.T) {
	c := newClient(t)
	var registered []eureka.Instance
	for _, inst := range []eureka.Instance{testInstance("whole-a", "pod-1"), testInstance("whole-a", "pod-2"), testInstance("whole-b", "pod-3")} {
		if err := c.Register(ctx(t), inst); err != nil {
			t.Fatal(err)
		}
		registered = append(registered, inst)
	}
	reg, err := c.Applications(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, inst := range registered {
		pod := map[string]string{eureka.MetaPod: inst.Metadata[eureka.MetaPod]}
		want, err := c.InstancesWithMetadata(ctx(t), inst.App, pod)
		if err != nil {
			t.Fatal(err)
		}
		got := reg.InstancesWithMetadata(inst.App, pod)
		if len(got) != 1 || len(want) != 1 {
			t.Fatalf("%s: the registry lists %d, the app read %d; want 1 each", inst.InstanceID, len(got), len(want))
		}
		// Leases renew between the two reads, and each answer shows them
		// as of its own moment; everything else is equal.
		got[0].LastUpdated, want[0].LastUpdated = time.Time{}, time.Time{}
		got[0].LeaseObservedAt, want[0].LeaseObservedAt = time.Time{}, time.Time{}
		if !reflect.DeepEqual(got[0], want[0]) {
			t.Errorf("%s: from the registry %+v, from the app %+v", inst.InstanceID, got[0], want[0])
		}
	}
}

// startingPeer is a Eureka server that is starting: until it has synced
// from its peers it answers 403, with no body, to the registry reads it
// serves from its response cache (shouldAllowAccess in eureka-core's
// PeerAwareInstanceRegistryImpl), and takes everything else, here by
// passing it to the real server behind it. A fault the real server cannot
// produce on demand: the tests' standalone server has no peer to sync
// from, and opens for traffic at once.
type startingPeer struct {
	*httptest.Server
	starting       atomic.Bool
	refused, taken atomic.Int64
}

func newStartingPeer(t *testing.T, behind string) *startingPeer {
	t.Helper()
	target, err := url.Parse(behind)
	if err != nil {
		t.Fatal(err)
	}
	proxy := &httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) {
		r.SetURL(&url.URL{Scheme: target.Scheme, Host: target.Host})
	}}
	p := &startingPeer{}
	p.starting.Store(true)
	p.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// GET /apps, /apps/delta, /apps/{APP}, /vips/{v}, /svips/{v}; not
		// /apps/{APP}/{id}, read straight from the registry.
		parts := strings.Split(strings.TrimPrefix(r.URL.Path, "/eureka/"), "/")
		cached := parts[0] == "apps" && len(parts) <= 2 || parts[0] == "vips" || parts[0] == "svips"
		if r.Method == http.MethodGet && cached && p.starting.Load() {
			p.refused.Add(1)
			w.WriteHeader(http.StatusForbidden)
			return
		}
		p.taken.Add(1)
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(p.Close)
	return p
}

func (p *startingPeer) url() string { return p.URL + "/eureka" }

// A peer that is starting refuses registry reads with 403: the read moves
// on to the next URL, as Eureka's own client does, and succeeds there.
// The writes it takes.
func TestFailover_AServerStillStartingIsSkippedForReads(t *testing.T) {
	real := realServer(t).URL()
	starting := newStartingPeer(t, real)
	inst := testInstance("starting-app", "pod-1")
	c := newClient(t, starting.url(), real)
	if err := c.Register(ctx(t), inst); err != nil {
		t.Fatalf("register through a server that is starting: %v", err)
	}
	if starting.taken.Load() != 1 {
		t.Fatalf("the server that is starting took %d requests, want the registration", starting.taken.Load())
	}
	reg, err := c.Applications(ctx(t))
	if err != nil {
		t.Fatalf("read the registry with the first server starting: %v", err)
	}
	if got := reg.Instances(inst.App); len(got) != 1 || got[0].InstanceID != inst.InstanceID {
		t.Fatalf("the registry read from the second server lists %v, want %s", ids(got), inst.InstanceID)
	}
	// A new client starts with the first URL again.
	insts, err := newClient(t, starting.url(), real).Instances(ctx(t), inst.App)
	if err != nil || len(insts) != 1 {
		t.Fatalf("list %s with the first server starting: %v, %v", inst.App, ids(insts), err)
	}
	cached, err := eureka.NewRegistryCache(newClient(t, starting.url(), real), time.Minute).Registry(ctx(t))
	if err != nil || len(cached.Instances(inst.App)) != 1 {
		t.Fatalf("a RegistryCache's read with the first server starting: %v", err)
	}
	if n := starting.refused.Load(); n != 3 {
		t.Errorf("the server that is starting refused %d reads, want 3 (each was asked it first)", n)
	}
}

// A delta that the server read last refuses with 403 (it restarted, and is
// starting; a server with deltas disabled answers the same) is an answer,
// as it is to Eureka's own client: the cache reads the registry whole
// instead, and the whole read moves on to the next server.
func TestFailover_ADeltaRefusedWith403IsFollowedByAWholeReadFromTheNextServer(t *testing.T) {
	real := realServer(t).URL()
	peer := newStartingPeer(t, real)
	peer.starting.Store(false)
	ops := &opCounter{ops: map[string]int{}}
	c, err := eureka.New(eureka.Options{URLs: []string{peer.url(), real}, Timeout: requestTimeout, Observer: ops})
	if err != nil {
		t.Fatal(err)
	}
	cache := eureka.NewRegistryCache(c, 0) // every reader reads
	if _, err := cache.Registry(ctx(t)); err != nil {
		t.Fatal(err)
	}
	peer.starting.Store(true)
	inst := testInstance("restarted-app", "pod-1")
	if err := newClient(t).Register(ctx(t), inst); err != nil {
		t.Fatal(err)
	}
	reg, err := cache.Registry(ctx(t))
	if err != nil {
		t.Fatalf("read after the server restarted: %v", err)
	}
	if got := reg.Instances(inst.App); len(got) != 1 {
		t.Fatalf("the read after the refused delta lists %v, want %s", ids(got), inst.InstanceID)
	}
	// The first whole read and the refused one through the peer, the
	// whole read from the real server, one delta: the peer's refusal.
	if got := ops.String(); got != "map[applications:3 delta:1]" || peer.refused.Load() != 2 {
		t.Fatalf("requests %s, %d refused by the peer; want map[applications:3 delta:1], 2", got, peer.refused.Load())
	}
}

// refusing answers 403 to every request, as a gateway or Spring Security
// refusing this caller does: a fault the real server never produces (it
// answers 403 only to reads while it is starting).
func refusing(t *testing.T) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "Forbidden", http.StatusForbidden)
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/eureka"
}

// A 403 from every server is still the servers' refusal, naming each and
// why a server may refuse.
func TestRejected_A403FromEveryServerIsTheirRefusal(t *testing.T) {
	first, second := refusing(t), refusing(t)
	_, err := newClient(t, first, second).Applications(ctx(t))
	if !errors.Is(err, eureka.ErrRejected) || errors.Is(err, eureka.ErrUnavailable) || eureka.StatusCode(err) != http.StatusForbidden {
		t.Fatalf("every server answering 403: %v (status %d), want ErrRejected with status 403", err, eureka.StatusCode(err))
	}
	for _, want := range []string{first, second, "refused the read", "while it starts"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
}

// A write refused with 403 is not sent to the next server: Eureka answers
// no write with 403, so it is the refusal of what authorizes requests,
// which another URL must not be asked to get around. Reads move on.
func TestRejected_AWriteRefusedWith403IsNotSentToTheNextServer(t *testing.T) {
	gateway := refusing(t)
	c := newClient(t, gateway, realServer(t).URL())
	inst := testInstance("refused-app", "pod-1")
	err := c.Register(ctx(t), inst)
	if !errors.Is(err, eureka.ErrRejected) || eureka.StatusCode(err) != http.StatusForbidden || !strings.Contains(err.Error(), gateway) {
		t.Fatalf("register refused with 403: %v, want ErrRejected with status 403 naming %s", err, gateway)
	}
	if _, err := newClient(t).Instance(ctx(t), inst.App, inst.InstanceID); !errors.Is(err, eureka.ErrNotFound) {
		t.Fatalf("the refused registration reached the next server: %v", err)
	}
	if _, err := c.Applications(ctx(t)); err != nil {
		t.Fatalf("a read with the first server refusing: %v", err)
	}
}
