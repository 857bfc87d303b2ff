package eureka_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
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
