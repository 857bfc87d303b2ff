package bench

import (
	"net/netip"
	"strings"
	"testing"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"
)

// A write is a new resourceVersion of a slice: an event that repeats the
// one seen (a re-watch from an older version) is none.
func TestSliceWatch_CountsWritesByResourceVersion(t *testing.T) {
	s := &sliceWatch{slices: map[string]*discoveryv1.EndpointSlice{}}
	slice := func(name, rv string, ips ...string) *discoveryv1.EndpointSlice {
		sl := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Name: name, ResourceVersion: rv}}
		for _, ip := range ips {
			sl.Endpoints = append(sl.Endpoints, discoveryv1.Endpoint{Addresses: []string{ip}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(ip != "10.0.0.2")}})
		}
		return sl
	}
	s.note(watch.Added, slice("a", "1", "10.0.0.1"))
	s.note(watch.Added, slice("b", "2", "10.0.0.2"))
	s.note(watch.Modified, slice("a", "3", "10.0.0.1", "10.0.0.3"))
	s.note(watch.Modified, slice("a", "3", "10.0.0.1", "10.0.0.3"))
	s.note(watch.Deleted, slice("c", "4"))
	s.note(watch.Deleted, slice("b", "5"))
	if got, want := s.writes(), (sliceWrites{creates: 2, updates: 1, deletes: 1}); got != want {
		t.Errorf("writes %+v, want %+v", got, want)
	}
	if got := s.writes().String(); got != "2 create, 1 update, 1 delete" {
		t.Errorf("writes read %q", got)
	}
	if n, ready, listed := s.endpoints("10.0.0.3"); n != 2 || !ready || !listed {
		t.Errorf("endpoints: %d, 10.0.0.3 ready %t listed %t", n, ready, listed)
	}
	if _, _, listed := s.endpoints("10.0.0.2"); listed {
		t.Error("a deleted slice's endpoint is still listed")
	}
	if s.count() != 1 {
		t.Errorf("%d slices, want 1", s.count())
	}
}

// The added instance sorts before every other, as text and as an address,
// and the instances of an app of 250 are distinct.
func TestChangedInstances_TheAddedOneSortsFirst(t *testing.T) {
	low := lowInstance()
	seen := map[string]bool{}
	for k := range 250 {
		inst := changedInstance(k)
		if seen[inst.IPAddr] {
			t.Fatalf("instance %d repeats %s", k, inst.IPAddr)
		}
		seen[inst.IPAddr] = true
		a, b := netip.MustParseAddr(low.IPAddr), netip.MustParseAddr(inst.IPAddr)
		if low.IPAddr >= inst.IPAddr || a.Compare(b) >= 0 || low.InstanceID >= inst.InstanceID {
			t.Errorf("%s does not sort before %s", low.IPAddr, inst.IPAddr)
		}
	}
}

// The figure is the worst change, beside the slices a re-cut writes and
// every change's writes.
func TestSliceWritesFigure_IsTheWorstChangeBesideTheSlices(t *testing.T) {
	var r Results
	addSliceWritesFigure(&r, "reconciler.import_2x3", Scenario{Name: "2 imported apps × 3 instances"}, importChanges{instances: 250, slices: 3, changes: []sliceChange{
		{what: "10.200.1.135 UP → DOWN", writes: sliceWrites{updates: 1}},
		{what: "10.200.0.10 added, sorting first", writes: sliceWrites{updates: 3}},
		{what: "10.200.1.93 cancelled", writes: sliceWrites{updates: 1}},
	}})
	f := r.Figures[0]
	if f.Value != 3 || f.Met == nil || *f.Met {
		t.Errorf("figure %v (met %v), want 3, missed", f.Value, f.Met)
	}
	for _, want := range []string{"250 instances has 3 slices", "10.200.0.10 added, sorting first: 3 (3 update;"} {
		if !strings.Contains(f.Anchor, want) {
			t.Errorf("anchor %q lacks %q", f.Anchor, want)
		}
	}
	if !strings.Contains(f.Missed, `"10.200.0.10 added, sorting first" wrote 3 of the import's 3 slices`) {
		t.Errorf("missed: %q", f.Missed)
	}
}
