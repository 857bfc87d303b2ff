package eureka

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
	"time"
)

// TestAppState_ChangesExactlyWhenWhatAReaderSeesChanges: over generated
// registries and deltas (instances added, modified, deleted, listed again
// unchanged, or with only a newer lease, whose verdict may or may not
// turn), an app keeps its AppState through a delta exactly when its
// readers see the same thing after it: the same instances in the same
// order, but for their leases as last shown, and the same ExpiredLeases.
// This is what lets a thousand imports skip a delta that lists their
// instances again (Eureka's lists every instance registered in its last
// three minutes), and still follow every change they would write.
func TestAppState_ChangesExactlyWhenWhatAReaderSeesChanges(t *testing.T) {
	rng := rand.New(rand.NewPCG(44, 56))
	base := time.Date(2026, 12, 7, 8, 0, 0, 0, time.UTC)
	// A lease as last shown: observed 0–4 minutes after its LastUpdated,
	// so that some are past 90 s + an eviction period and some not.
	lease := func(inst *Instance) {
		inst.LastUpdated = base.Add(time.Duration(rng.IntN(60)) * time.Second)
		inst.LeaseObservedAt = inst.LastUpdated.Add(time.Duration(rng.IntN(240)) * time.Second)
	}
	instanceOf := func(app string, id int) Instance {
		inst := Instance{App: app, InstanceID: fmt.Sprintf("orders-%d", id), IPAddr: fmt.Sprintf("10.0.0.%d", id),
			Status: StatusUp, Port: 8080, PortEnabled: true, Metadata: map[string]string{"zone": "a"}}
		lease(&inst)
		return inst
	}
	instance := func(id int) Instance { return instanceOf("ORDERS", id) }
	seen := func(r *Registry) (insts []Instance, expired []string) {
		for _, inst := range r.Instances("orders") {
			inst.LastUpdated, inst.LeaseObservedAt = time.Time{}, time.Time{}
			insts = append(insts, inst)
		}
		return insts, r.ExpiredLeases("orders")
	}
	kept, changed := 0, 0
	for round := range 5000 {
		old := &Registry{apps: map[string][]Instance{}, versions: map[string]uint64{}}
		var insts []Instance
		for id := range rng.IntN(5) {
			insts = append(insts, instance(id))
		}
		if len(insts) > 0 {
			old.add(insts)
		}
		old.add([]Instance{instanceOf("STOCK", 99)}) // another app, which no delta names
		var changes []change
		for range rng.IntN(4) {
			id := rng.IntN(6)
			var inst Instance
			if i := slices.IndexFunc(insts, func(x Instance) bool { return x.InstanceID == fmt.Sprintf("orders-%d", id) }); i >= 0 {
				inst = insts[i]
				inst.Metadata = map[string]string{"zone": "a"} // a copy, as a decoded answer is
			} else {
				inst = instance(id)
			}
			switch rng.IntN(6) {
			case 0: // listed again as it was
			case 1, 2: // a later answer: a renewal, or only a later look
				if rng.IntN(2) == 0 {
					inst.LastUpdated = inst.LastUpdated.Add(time.Duration(rng.IntN(60)) * time.Second)
				}
				inst.LeaseObservedAt = inst.LeaseObservedAt.Add(time.Duration(rng.IntN(240)) * time.Second)
			case 3:
				inst.Status = StatusDown
			case 4:
				inst.Metadata["zone"] = "b"
			}
			action := []string{actionAdded, actionModified, actionDeleted}[rng.IntN(3)]
			changes = append(changes, change{action: action, instance: inst})
		}
		next := old.clone()
		next.apply("orders", changes)
		beforeInsts, beforeExpired := seen(old)
		afterInsts, afterExpired := seen(next)
		same := reflect.DeepEqual(beforeInsts, afterInsts) && slices.Equal(beforeExpired, afterExpired)
		if got := next.AppState("Orders") == old.AppState("ORDERS"); got != same {
			t.Fatalf("round %d: AppState kept %v, but a reader sees the same %v\nbefore %+v expired %v\nchanges %+v\nafter %+v expired %v",
				round, got, same, old.apps["ORDERS"], beforeExpired, changes, next.apps["ORDERS"], afterExpired)
		}
		if next.AppState("stock") != old.AppState("stock") {
			t.Fatalf("round %d: an app the delta did not name changed state", round)
		}
		if same {
			kept++
		} else {
			changed++
		}
	}
	// The generator reaches both sides, often.
	if kept < 500 || changed < 500 {
		t.Fatalf("%d rounds kept the state and %d changed it: the generator misses a side", kept, changed)
	}
}
