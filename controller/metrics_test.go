package controller

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/eurekube/eurekube/api/v1alpha1"
)

func TestSetAdaptationGauges_ASeriesGoesWithItsReasonAndItsSyncer(t *testing.T) {
	s := syncerFixture(func(s *v1alpha1.EurekaSyncer) { s.Namespace = "gauge-test" })
	count := func() int {
		ch := make(chan prometheus.Metric, 100)
		adaptationsGauge.Collect(ch)
		close(ch)
		return len(ch)
	}
	value := func(reason string) float64 {
		var m dto.Metric
		if err := adaptationsGauge.WithLabelValues("gauge-test", "orders", reason).Write(&m); err != nil {
			t.Fatal(err)
		}
		return m.GetGauge().GetValue()
	}
	base := count()
	setAdaptationGauges(s, []v1alpha1.PodAdaptations{{Reason: v1alpha1.AdaptationDrainDisabled, Pods: 2}, {Reason: v1alpha1.AdaptationPreStopComposed, Pods: 3}})
	if got := value("PreStopComposed"); got != 3 || count() != base+2 {
		t.Fatalf("PreStopComposed %v, %d series; want 3, %d", got, count(), base+2)
	}
	setAdaptationGauges(s, []v1alpha1.PodAdaptations{{Reason: v1alpha1.AdaptationPreStopComposed, Pods: 1}})
	if count() != base+1 {
		t.Fatalf("%d series after DrainDisabled went, want %d", count(), base+1)
	}
	forgetMetrics(s.Namespace, s.Name)
	if count() != base {
		t.Fatalf("%d series after the syncer went, want %d", count(), base)
	}
}

func TestImportGauges_ReadyAndTotalGoWithTheImport(t *testing.T) {
	value := func(condition string) float64 {
		var m dto.Metric
		if err := importEndpointsGauge.WithLabelValues("gauge-test", "payments", condition).Write(&m); err != nil {
			t.Fatal(err)
		}
		return m.GetGauge().GetValue()
	}
	count := func() int {
		ch := make(chan prometheus.Metric, 100)
		importEndpointsGauge.Collect(ch)
		close(ch)
		return len(ch)
	}
	base := count()
	setImportGauges("gauge-test", "payments", 2, 3)
	if ready, total := value("ready"), value("total"); ready != 2 || total != 3 || count() != base+2 {
		t.Fatalf("ready %v, total %v, %d series; want 2, 3, %d", ready, total, count(), base+2)
	}
	forgetImportMetrics("gauge-test", "payments")
	if count() != base {
		t.Fatalf("%d series after the import went, want %d", count(), base)
	}
}
