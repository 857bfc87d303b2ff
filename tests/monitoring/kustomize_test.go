package monitoring_test

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/eurekube/eurekube/tests/harness"
)

// What `kubectl apply -k manifests/monitoring` creates: the PrometheusRule
// as written, and the dashboard in a ConfigMap that Grafana's sidecar
// loads.
func TestKustomization_BuildsTheRuleAndTheDashboardConfigMap(t *testing.T) {
	assets, err := harness.BuildArtifact("KUBEBUILDER_ASSETS", "tests/tools/envtest/build.sh")
	if err != nil {
		t.Fatal(err)
	}
	out := run(t, root, filepath.Join(assets, "kubectl"), "kustomize", "manifests/monitoring")

	type object struct {
		Kind     string `json:"kind"`
		Metadata struct {
			Name      string            `json:"name"`
			Namespace string            `json:"namespace"`
			Labels    map[string]string `json:"labels"`
		} `json:"metadata"`
		Spec any               `json:"spec"`
		Data map[string]string `json:"data"`
	}
	byKind := map[string]object{}
	for doc := range bytes.SplitSeq([]byte(out), []byte("\n---\n")) {
		var o object
		if err := yaml.Unmarshal(doc, &o); err != nil {
			t.Fatalf("kubectl kustomize output: %v\n%s", err, doc)
		}
		if _, dup := byKind[o.Kind]; dup {
			t.Errorf("more than one %s in the output", o.Kind)
		}
		byKind[o.Kind] = o
	}
	if len(byKind) != 2 {
		t.Errorf("kubectl kustomize manifests/monitoring made %d kinds of object, want a PrometheusRule and a ConfigMap:\n%s", len(byKind), out)
	}

	rule, ok := byKind["PrometheusRule"]
	if !ok || rule.Metadata.Name != "eurekube-alerts" || rule.Metadata.Namespace != "eurekube-system" {
		t.Errorf("no PrometheusRule eurekube-system/eurekube-alerts in the output:\n%s", out)
	}
	src, err := os.ReadFile(repoFile(rulesFile))
	if err != nil {
		t.Fatal(err)
	}
	var written object
	if err := yaml.Unmarshal(src, &written); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(rule.Spec, written.Spec) {
		t.Errorf("the built PrometheusRule's spec differs from %s", rulesFile)
	}

	cm, ok := byKind["ConfigMap"]
	if !ok || cm.Metadata.Name != "eurekube-dashboard" || cm.Metadata.Namespace != "eurekube-system" {
		t.Fatalf("no ConfigMap eurekube-system/eurekube-dashboard in the output:\n%s", out)
	}
	if cm.Metadata.Labels["grafana_dashboard"] != "1" {
		t.Errorf("the dashboard's ConfigMap has labels %v; Grafana's sidecar loads those labelled grafana_dashboard: \"1\"", cm.Metadata.Labels)
	}
	dash, err := os.ReadFile(repoFile(dashboardFile))
	if err != nil {
		t.Fatal(err)
	}
	if len(cm.Data) != 1 || cm.Data["eurekube.json"] != string(dash) {
		t.Errorf("the ConfigMap's data is not %s under the key eurekube.json (keys: %v)", dashboardFile, len(cm.Data))
	}
}
