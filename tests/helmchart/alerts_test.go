package helmchart

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// The chart renders its PrometheusRule from a copy of manifests/monitoring's.
const (
	monitoringRules = "manifests/monitoring/prometheus-rules.yaml"
	chartRules      = "charts/eurekube/files/prometheus-rules.yaml"
)

func TestAlerts_TheChartsRulesAreManifestsMonitorings(t *testing.T) {
	objs := render(t, releaseNamespace, "alerts: {enabled: true}\n")
	rule := objs.get(t, "PrometheusRule", "eurekube-alerts")
	got, _, _ := unstructured.NestedSlice(rule.Object, "spec", "groups")
	if len(got) == 0 {
		t.Fatalf("PrometheusRule eurekube-alerts has no groups: %s", toYAML(rule.Object))
	}
	if r := render(t, releaseNamespace, "").find("PrometheusRule", "eurekube-alerts"); r != nil {
		t.Errorf("alerts are off by default, yet the chart renders %s", key(r))
	}

	want, err := os.ReadFile(filepath.Join(tools.root, monitoringRules))
	if os.IsNotExist(err) {
		t.Skipf("%s does not exist: nothing to compare the chart's rules with", monitoringRules)
	}
	if err != nil {
		t.Fatal(err)
	}
	copied, err := os.ReadFile(filepath.Join(tools.root, chartRules))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(copied, want) {
		t.Errorf("%s differs from %s: run\n  cp %s %s\nand commit it", chartRules, monitoringRules, monitoringRules, chartRules)
	}
	// And what Prometheus gets is the same, as kustomize builds it.
	var groups []any
	for _, u := range kustomize(t, "monitoring").ofKind("PrometheusRule") {
		g, _, _ := unstructured.NestedSlice(u.Object, "spec", "groups")
		groups = append(groups, g...)
	}
	if !reflect.DeepEqual(normalize(got), normalize(groups)) {
		for _, d := range diff("spec.groups", groups, got) {
			t.Errorf("the chart's rule groups differ from manifests/monitoring's at %s", d)
		}
	}
}
