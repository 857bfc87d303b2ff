package eureka_test

import (
	"errors"
	"testing"
	"time"

	"github.com/eurekube/eurekube/eureka"
)

// The status override as the real server applies it (see the package
// doc): each test states one fact the reconciler's cut-over and rollback
// (spec.traffic) and the registrar's first registration rely on.

// listed reads the instance straight from the registry and checks its
// status and override.
func listed(t *testing.T, c *eureka.Client, inst eureka.Instance, status, override eureka.Status, when string) {
	t.Helper()
	got, err := c.Instance(ctx(t), inst.App, inst.InstanceID)
	if err != nil {
		t.Fatalf("%s: read: %v", when, err)
	}
	if got.Status != status || got.OverriddenStatus != override {
		t.Fatalf("%s: listed %s with override %s, want %s with override %s", when, got.Status, got.OverriddenStatus, status, override)
	}
}

func register(t *testing.T, c *eureka.Client, inst eureka.Instance, status, override eureka.Status) {
	t.Helper()
	inst.Status, inst.OverriddenStatus = status, override
	if err := c.Register(ctx(t), inst); err != nil {
		t.Fatalf("register %s with override %q: %v", status, override, err)
	}
}

func TestRegister_CarryingOutOfServiceIsListedOutOfServiceFromTheFirstRead(t *testing.T) {
	c := newClient(t)
	inst := testInstance("standby-app", "pod-first")
	register(t, c, inst, eureka.StatusUp, eureka.StatusOutOfService)
	listed(t, c, inst, eureka.StatusOutOfService, eureka.StatusOutOfService, "the first read")
	// The app's listing, which callers read, agrees at once.
	all, err := c.Instances(ctx(t), inst.App)
	if err != nil {
		t.Fatal(err)
	}
	for _, got := range all {
		if got.InstanceID == inst.InstanceID && (got.Status != eureka.StatusOutOfService || got.OverriddenStatus != eureka.StatusOutOfService) {
			t.Fatalf("the app's listing shows %s with override %s, want OUT_OF_SERVICE with override OUT_OF_SERVICE", got.Status, got.OverriddenStatus)
		}
	}
}

func TestRegister_OverrideHidesOnlyUpAndSurvivesReregistration(t *testing.T) {
	c := newClient(t)
	inst := testInstance("standby-app", "pod-rereg")
	register(t, c, inst, eureka.StatusStarting, eureka.StatusOutOfService)
	listed(t, c, inst, eureka.StatusStarting, eureka.StatusOutOfService, "registered STARTING")
	for _, step := range []struct {
		status, want eureka.Status
	}{
		{eureka.StatusUp, eureka.StatusOutOfService},
		{eureka.StatusDown, eureka.StatusDown}, // a client-reported DOWN shows through
		{eureka.StatusUp, eureka.StatusOutOfService},
		{eureka.StatusStarting, eureka.StatusStarting},
	} {
		// Re-registrations carry no override: the server keeps its own.
		register(t, c, inst, step.status, "")
		listed(t, c, inst, step.want, eureka.StatusOutOfService, "re-registered "+string(step.status))
		if err := c.Heartbeat(ctx(t), inst.App, inst.InstanceID, time.Time{}); err != nil {
			t.Fatalf("heartbeat after re-registering %s: %v", step.status, err)
		}
		listed(t, c, inst, step.want, eureka.StatusOutOfService, "a heartbeat after re-registering "+string(step.status))
	}
}

// A registration's override is put-if-absent: it never replaces one set
// with PUT.
func TestRegister_OverrideNeverReplacesOneSetByPut(t *testing.T) {
	c := newClient(t)
	inst := testInstance("standby-app", "pod-absent")
	register(t, c, inst, eureka.StatusDown, "")
	// PUT stores no override on an instance already listed with its value,
	// so the instance is DOWN when UP is put.
	if err := c.SetStatusOverride(ctx(t), inst.App, inst.InstanceID, eureka.StatusUp); err != nil {
		t.Fatal(err)
	}
	register(t, c, inst, eureka.StatusUp, eureka.StatusOutOfService)
	listed(t, c, inst, eureka.StatusUp, eureka.StatusUp, "registered carrying OUT_OF_SERVICE over a PUT UP")
}

func TestSetStatusOverride_TakesAnUpInstanceOutUntilRemovedWithUp(t *testing.T) {
	c := newClient(t)
	inst := testInstance("switch-app", "pod-switch")
	register(t, c, inst, eureka.StatusUp, "")
	listed(t, c, inst, eureka.StatusUp, eureka.StatusUnknown, "registered UP without override")
	if err := c.SetStatusOverride(ctx(t), inst.App, inst.InstanceID, eureka.StatusOutOfService); err != nil {
		t.Fatal(err)
	}
	listed(t, c, inst, eureka.StatusOutOfService, eureka.StatusOutOfService, "after PUT OUT_OF_SERVICE")
	register(t, c, inst, eureka.StatusUp, "")
	listed(t, c, inst, eureka.StatusOutOfService, eureka.StatusOutOfService, "re-registered UP")
	if err := c.RemoveStatusOverride(ctx(t), inst.App, inst.InstanceID, eureka.StatusUp); err != nil {
		t.Fatal(err)
	}
	listed(t, c, inst, eureka.StatusUp, eureka.StatusUnknown, "after DELETE with UP")
	if err := c.Heartbeat(ctx(t), inst.App, inst.InstanceID, time.Time{}); err != nil {
		t.Fatalf("heartbeat after the override is gone: %v", err)
	}
	listed(t, c, inst, eureka.StatusUp, eureka.StatusUnknown, "a heartbeat after DELETE with UP")
}

// PUT bypasses the rules that let a client-reported DOWN show through: the
// instance is listed OUT_OF_SERVICE (still out of traffic) until its client
// registers again.
func TestSetStatusOverride_OnADownInstanceListsItOutOfServiceUntilItRegistersAgain(t *testing.T) {
	c := newClient(t)
	inst := testInstance("switch-app", "pod-down-put")
	register(t, c, inst, eureka.StatusDown, "")
	if err := c.SetStatusOverride(ctx(t), inst.App, inst.InstanceID, eureka.StatusOutOfService); err != nil {
		t.Fatal(err)
	}
	listed(t, c, inst, eureka.StatusOutOfService, eureka.StatusOutOfService, "PUT OUT_OF_SERVICE on a DOWN instance")
	if err := c.Heartbeat(ctx(t), inst.App, inst.InstanceID, time.Time{}); err != nil {
		t.Fatal(err)
	}
	listed(t, c, inst, eureka.StatusOutOfService, eureka.StatusOutOfService, "a heartbeat")
	register(t, c, inst, eureka.StatusDown, "")
	listed(t, c, inst, eureka.StatusDown, eureka.StatusOutOfService, "re-registered DOWN")
}

// DELETE with a value lists that value whatever the client reported: UP
// given back to an instance whose client reported DOWN lists it UP, and
// heartbeats keep it UP, until its client registers again.
func TestRemoveStatusOverride_WithUpListsUpAnInstanceWhoseClientReportedDown(t *testing.T) {
	c := newClient(t)
	for name, tc := range map[string]struct {
		give, want eureka.Status
	}{
		"given back UP":               {eureka.StatusUp, eureka.StatusUp},
		"given back the listed DOWN":  {eureka.StatusDown, eureka.StatusDown},
		"given back nothing: UNKNOWN": {"", eureka.StatusUnknown},
	} {
		t.Run(name, func(t *testing.T) {
			inst := testInstance("switch-app", "pod-down-"+string(tc.give))
			register(t, c, inst, eureka.StatusDown, eureka.StatusOutOfService)
			listed(t, c, inst, eureka.StatusDown, eureka.StatusOutOfService, "registered DOWN carrying OUT_OF_SERVICE")
			if err := c.RemoveStatusOverride(ctx(t), inst.App, inst.InstanceID, tc.give); err != nil {
				t.Fatal(err)
			}
			listed(t, c, inst, tc.want, eureka.StatusUnknown, "after DELETE")
			if tc.want == eureka.StatusUp {
				if err := c.Heartbeat(ctx(t), inst.App, inst.InstanceID, time.Time{}); err != nil {
					t.Fatal(err)
				}
				listed(t, c, inst, eureka.StatusUp, eureka.StatusUnknown, "a heartbeat after DELETE with UP")
			}
			register(t, c, inst, eureka.StatusDown, "")
			listed(t, c, inst, eureka.StatusDown, eureka.StatusUnknown, "re-registered DOWN")
		})
	}
}

// DELETE without a value leaves the instance UNKNOWN: its next heartbeat
// is refused, and the client registers again with its own status.
func TestRemoveStatusOverride_WithoutValueMakesTheNextHeartbeatRegisterAgain(t *testing.T) {
	c := newClient(t)
	inst := testInstance("switch-app", "pod-novalue")
	register(t, c, inst, eureka.StatusUp, eureka.StatusOutOfService)
	if err := c.RemoveStatusOverride(ctx(t), inst.App, inst.InstanceID, ""); err != nil {
		t.Fatal(err)
	}
	listed(t, c, inst, eureka.StatusUnknown, eureka.StatusUnknown, "after DELETE without value")
	if err := c.Heartbeat(ctx(t), inst.App, inst.InstanceID, time.Time{}); !errors.Is(err, eureka.ErrNotFound) {
		t.Fatalf("heartbeat after DELETE without value: %v, want ErrNotFound", err)
	}
	register(t, c, inst, eureka.StatusUp, "")
	listed(t, c, inst, eureka.StatusUp, eureka.StatusUnknown, "registered again UP")
}

// Without an override, DELETE changes nothing, with or without a value.
func TestRemoveStatusOverride_WithoutAnOverrideChangesNothing(t *testing.T) {
	c := newClient(t)
	inst := testInstance("switch-app", "pod-none")
	register(t, c, inst, eureka.StatusUp, "")
	for _, give := range []eureka.Status{"", eureka.StatusDown} {
		if err := c.RemoveStatusOverride(ctx(t), inst.App, inst.InstanceID, give); err != nil {
			t.Fatal(err)
		}
		listed(t, c, inst, eureka.StatusUp, eureka.StatusUnknown, "DELETE with "+string(give)+" and no override")
	}
	if err := c.Heartbeat(ctx(t), inst.App, inst.InstanceID, time.Time{}); err != nil {
		t.Fatal(err)
	}
}

func TestCancel_DropsTheOverride(t *testing.T) {
	c := newClient(t)
	inst := testInstance("standby-app", "pod-cancel")
	register(t, c, inst, eureka.StatusUp, eureka.StatusOutOfService)
	if err := c.Cancel(ctx(t), inst.App, inst.InstanceID); err != nil {
		t.Fatal(err)
	}
	register(t, c, inst, eureka.StatusUp, "")
	listed(t, c, inst, eureka.StatusUp, eureka.StatusUnknown, "registered again after the cancel")
}

func TestStatusOverride_UnknownInstanceIsErrNotFound(t *testing.T) {
	c := newClient(t)
	if err := c.SetStatusOverride(ctx(t), "switch-app", "no-such-instance", eureka.StatusOutOfService); !errors.Is(err, eureka.ErrNotFound) {
		t.Errorf("set on an unknown instance: %v, want ErrNotFound", err)
	}
	for _, give := range []eureka.Status{"", eureka.StatusUp} {
		if err := c.RemoveStatusOverride(ctx(t), "switch-app", "no-such-instance", give); !errors.Is(err, eureka.ErrNotFound) {
			t.Errorf("remove (%q) on an unknown instance: %v, want ErrNotFound", give, err)
		}
	}
}

// The override calls fail over like every other call and report
// themselves under their own names.
func TestStatusOverride_FailsOverAndIsObserved(t *testing.T) {
	ops := &opCounter{ops: map[string]int{}}
	c, err := eureka.New(eureka.Options{URLs: []string{closedPortURL(t), realServer(t).URL()}, Timeout: requestTimeout, Observer: ops})
	if err != nil {
		t.Fatal(err)
	}
	inst := testInstance("switch-app", "pod-failover")
	register(t, newClient(t), inst, eureka.StatusUp, "")
	if err := c.SetStatusOverride(ctx(t), inst.App, inst.InstanceID, eureka.StatusOutOfService); err != nil {
		t.Fatalf("set with the first URL dead: %v", err)
	}
	if err := c.RemoveStatusOverride(ctx(t), inst.App, inst.InstanceID, eureka.StatusUp); err != nil {
		t.Fatalf("remove: %v", err)
	}
	// The dead URL is tried once; then the live one is preferred.
	if got := ops.String(); got != "map[remove_status_override:1 set_status_override:2]" {
		t.Fatalf("requests %s", got)
	}
}

// The server answers 500 to a status it cannot parse, which the client
// would take for an unavailable server: such input is refused before
// anything is sent.
func TestStatusOverride_BadStatusIsErrInvalidNothingSent(t *testing.T) {
	c := newClient(t, closedPortURL(t))
	bad := testInstance("switch-app", "pod-bad")
	bad.OverriddenStatus = "out-of-service"
	for name, err := range map[string]error{
		"set nothing":             c.SetStatusOverride(ctx(t), "switch-app", "id", ""),
		"set an unknown status":   c.SetStatusOverride(ctx(t), "switch-app", "id", "BOGUS"),
		"remove giving BOGUS":     c.RemoveStatusOverride(ctx(t), "switch-app", "id", "BOGUS"),
		"set without app":         c.SetStatusOverride(ctx(t), "", "id", eureka.StatusOutOfService),
		"remove without id":       c.RemoveStatusOverride(ctx(t), "switch-app", " ", eureka.StatusUp),
		"register a bad override": c.Register(ctx(t), bad),
	} {
		if !errors.Is(err, eureka.ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
	}
}

// PUT stores nothing on an instance already listed with its value: a
// client-reported change then shows as if there had been no PUT.
func TestSetStatusOverride_OfTheListedStatusStoresNothing(t *testing.T) {
	c := newClient(t)
	inst := testInstance("switch-app", "pod-same")
	register(t, c, inst, eureka.StatusUp, "")
	if err := c.SetStatusOverride(ctx(t), inst.App, inst.InstanceID, eureka.StatusUp); err != nil {
		t.Fatal(err)
	}
	listed(t, c, inst, eureka.StatusUp, eureka.StatusUnknown, "PUT UP on an UP instance")
	register(t, c, inst, eureka.StatusDown, "")
	listed(t, c, inst, eureka.StatusDown, eureka.StatusUnknown, "re-registered DOWN")
}
