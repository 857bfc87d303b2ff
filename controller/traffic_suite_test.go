package controller_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"

	"github.com/eurekube/eurekube/api/v1alpha1"
	"github.com/eurekube/eurekube/eureka"
	"github.com/eurekube/eurekube/tests/harness"
)

// Standby holds this cluster's instances OUT_OF_SERVICE (an override their
// registrars' re-registrations do not undo) and never touches a VM's or
// another cluster's; Serve puts them back in, except one whose registrar
// reports its app DOWN; the pods' annotation follows, for their
// registrars; the status tells where calls go.
func TestTraffic_StandbyHoldsThisClustersInstancesOutAndServeLetsThemBackIn(t *testing.T) {
	ns := newNamespace(t)
	s := newSyncer(t, ns, "orders")
	c := directClient(t, server.URL())
	others := foreign(t, c, s)
	var pods []*corev1.Pod
	var insts []eureka.Instance
	for i := 1; i <= 2; i++ {
		pod := newPod(t, ns, "orders", fmt.Sprintf("orders-%d", i), true, fmt.Sprintf("10.0.1.%d", i))
		pods, insts = append(pods, pod), append(insts, register(t, c, s, pod))
	}
	harness.Eventually(t, patience, "Serve: READY 2/2, calls to Both", func() error {
		got, err := getSyncer(s)
		if err != nil {
			return err
		}
		if got.Status.Ready != "2/2" || got.Status.TrafficTo != v1alpha1.TrafficToBoth || got.Status.Elsewhere != "2/2" {
			return fmt.Errorf("READY %s, elsewhere %s, calls to %q", got.Status.Ready, got.Status.Elsewhere, got.Status.TrafficTo)
		}
		return trafficCondition(got.Status, "Serving")
	})

	setTraffic(t, s, v1alpha1.TrafficStandby)
	out := map[string]eureka.Status{insts[0].InstanceID: eureka.StatusOutOfService, insts[1].InstanceID: eureka.StatusOutOfService}
	harness.Eventually(t, patience, "Standby: both instances OUT_OF_SERVICE, the pods annotated", func() error {
		if err := wantStatuses(c, out, insts...); err != nil {
			return err
		}
		if got, err := podTraffic(ns, pods...); err != nil || got[pods[0].Name] != "Standby" || got[pods[1].Name] != "Standby" {
			return fmt.Errorf("pods' %s: %v (%v)", v1alpha1.TrafficAnnotation, got, err)
		}
		return nil
	})
	if err := wantStatuses(c, map[string]eureka.Status{others[0].InstanceID: eureka.StatusUp, others[1].InstanceID: eureka.StatusUp}, others...); err != nil {
		t.Fatalf("Standby touched instances that are not this cluster's: %v", err)
	}
	// A registrar registering again (its app's health changed, or Eureka
	// forgot it) does not bring its instance back into traffic.
	register(t, c, s, pods[0])
	if err := wantStatuses(c, out, insts...); err != nil {
		t.Fatalf("after a re-registration: %v", err)
	}
	harness.Eventually(t, patience, "status: 2 OUT_OF_SERVICE, calls go Elsewhere, Synced, TrafficApplied StandingBy", func() error {
		got, err := getSyncer(s)
		if err != nil {
			return err
		}
		st := got.Status
		if st.OutOfServiceInstances != 2 || st.UpInstances != 0 || st.TrafficTo != v1alpha1.TrafficToElsewhere || st.Ready != "0/2" {
			return fmt.Errorf("OUT_OF_SERVICE %d, UP %d, calls to %q, READY %s", st.OutOfServiceInstances, st.UpInstances, st.TrafficTo, st.Ready)
		}
		if !meta.IsStatusConditionTrue(st.Conditions, v1alpha1.ConditionSynced) {
			return fmt.Errorf("not Synced: %+v", meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionSynced))
		}
		if err := trafficCondition(st, "StandingBy"); err != nil {
			return err
		}
		// The same view as a metric, per app and location.
		gauge, err := instanceGauge(ns, s.Name)
		if err != nil {
			return err
		}
		if gauge["ORDERS here OUT_OF_SERVICE"] != 2 || gauge["ORDERS here UP"] != 0 || gauge["ORDERS elsewhere UP"] != 2 {
			return fmt.Errorf("eurekube_syncer_instances: %v", gauge)
		}
		return nil
	})

	// The second pod's app fails while in Standby: its registrar reports
	// DOWN, which the override does not hide, and Serve must not make it
	// UP: it is left UNKNOWN (out of traffic) until its registrar, refused
	// at its next heartbeat, registers again with what its app says.
	down := insts[1]
	down.Status = eureka.StatusDown
	if err := c.Register(context.Background(), down); err != nil {
		t.Fatal(err)
	}
	if err := wantStatuses(c, map[string]eureka.Status{down.InstanceID: eureka.StatusDown}, down); err != nil {
		t.Fatalf("a DOWN reported under the override: %v", err)
	}
	setTraffic(t, s, v1alpha1.TrafficServe)
	back := map[string]eureka.Status{insts[0].InstanceID: eureka.StatusUp, insts[1].InstanceID: eureka.StatusUnknown}
	harness.Eventually(t, patience, "Serve again: the healthy instance UP, the failing one UNKNOWN, the pods annotated", func() error {
		if err := wantStatuses(c, back, insts...); err != nil {
			return err
		}
		if got, err := podTraffic(ns, pods...); err != nil || got[pods[0].Name] != "Serve" || got[pods[1].Name] != "Serve" {
			return fmt.Errorf("pods' %s: %v (%v)", v1alpha1.TrafficAnnotation, got, err)
		}
		return nil
	})
	// Its registrar's heartbeat is refused, so it registers again; UP now,
	// it stays UP: no override is left behind.
	up := insts[1]
	if err := c.Heartbeat(context.Background(), up.App, up.InstanceID, time.Time{}); !errors.Is(err, eureka.ErrNotFound) {
		t.Fatalf("the heartbeat of an UNKNOWN instance: %v, want ErrNotFound (register again)", err)
	}
	if err := c.Register(context.Background(), up); err != nil {
		t.Fatal(err)
	}
	if err := wantStatuses(c, map[string]eureka.Status{up.InstanceID: eureka.StatusUp}, up); err != nil {
		t.Fatalf("after Serve, a registration UP: %v", err)
	}
}
