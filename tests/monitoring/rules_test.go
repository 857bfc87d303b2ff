package monitoring_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	managerapp "github.com/eurekube/eurekube/manager"
	"github.com/eurekube/eurekube/webhook"
)

const rulesFile = "manifests/monitoring/prometheus-rules.yaml"

// prometheusRule is the part of a monitoring.coreos.com/v1 PrometheusRule
// the tests read.
type prometheusRule struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name      string `json:"name"`
		Namespace string `json:"namespace"`
	} `json:"metadata"`
	Spec struct {
		Groups []ruleGroup `json:"groups"`
	} `json:"spec"`
}

type ruleGroup struct {
	Name  string `json:"name"`
	Rules []rule `json:"rules"`
}

type rule struct {
	Alert       string            `json:"alert"`
	Record      string            `json:"record"`
	Expr        string            `json:"expr"`
	For         string            `json:"for"`
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
}

// alertRules reads the PrometheusRule's alerts.
func alertRules(t *testing.T) (prometheusRule, []rule) {
	t.Helper()
	data, err := os.ReadFile(repoFile(rulesFile))
	if err != nil {
		t.Fatal(err)
	}
	var pr prometheusRule
	if err := yaml.UnmarshalStrict(data, &pr); err != nil {
		t.Fatalf("%s: %v", rulesFile, err)
	}
	var alerts []rule
	for _, g := range pr.Spec.Groups {
		for _, r := range g.Rules {
			if r.Alert != "" {
				alerts = append(alerts, r)
			}
		}
	}
	if len(alerts) == 0 {
		t.Fatalf("%s has no alerts", rulesFile)
	}
	return pr, alerts
}

// writeRuleGroups writes the PrometheusRule's groups as a Prometheus rule
// file, dir/rules.yaml, keeping of each rule's annotations only those keep
// says (all when keep is nil). Everything else is copied as written, so a
// field the tests do not model still reaches promtool.
func writeRuleGroups(t *testing.T, dir string, keep func(annotation string) bool) string {
	t.Helper()
	data, err := os.ReadFile(repoFile(rulesFile))
	if err != nil {
		t.Fatal(err)
	}
	var obj struct {
		Spec struct {
			Groups []map[string]any `json:"groups"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(data, &obj); err != nil {
		t.Fatalf("%s: %v", rulesFile, err)
	}
	if keep != nil {
		for _, g := range obj.Spec.Groups {
			rules, _ := g["rules"].([]any)
			for _, r := range rules {
				annotations, _ := r.(map[string]any)["annotations"].(map[string]any)
				for k := range annotations {
					if !keep(k) {
						delete(annotations, k)
					}
				}
			}
		}
	}
	out, err := yaml.Marshal(map[string]any{"groups": obj.Spec.Groups})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "rules.yaml")
	if err := os.WriteFile(path, out, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// The Helm chart renders this file's groups and compares them with it, so
// it stays one object, where the Prometheus Operator expects it.
func TestRules_FileIsOnePrometheusRuleInEurekubeSystem(t *testing.T) {
	data, err := os.ReadFile(repoFile(rulesFile))
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(data, []byte("\n---")) {
		t.Errorf("%s holds more than one YAML document; keep it a single PrometheusRule", rulesFile)
	}
	pr, _ := alertRules(t)
	if pr.APIVersion != "monitoring.coreos.com/v1" || pr.Kind != "PrometheusRule" || pr.Metadata.Name != "eurekube-alerts" || pr.Metadata.Namespace != "eurekube-system" {
		t.Errorf("%s is %s %s %s/%s, want monitoring.coreos.com/v1 PrometheusRule eurekube-system/eurekube-alerts",
			rulesFile, pr.APIVersion, pr.Kind, pr.Metadata.Namespace, pr.Metadata.Name)
	}
}

func TestRules_PassPromtoolCheck(t *testing.T) {
	path := writeRuleGroups(t, t.TempDir(), nil)
	out := run(t, filepath.Dir(path), promtool, "check", "rules", path)
	t.Log(strings.TrimSpace(out))
}

// The unit tests in testdata see each alert with its summary only: the
// summary is the line an operator reads first, and its templates are
// checked by what it renders; the longer annotations are checked by
// `promtool check rules`.
func TestRules_PassTheirUnitTests(t *testing.T) {
	dir := t.TempDir()
	writeRuleGroups(t, dir, func(annotation string) bool { return annotation == "summary" })
	tests, err := filepath.Glob(filepath.Join("testdata", "*.yaml"))
	if err != nil || len(tests) == 0 {
		t.Fatalf("no unit tests in testdata (%v)", err)
	}
	args := []string{"test", "rules"}
	for _, src := range tests {
		data, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, filepath.Base(src)), data, 0o644); err != nil {
			t.Fatal(err)
		}
		args = append(args, filepath.Base(src))
	}
	out := run(t, dir, promtool, args...)
	t.Log(strings.TrimSpace(out))
}

// unitTestFile is the part of a promtool unit test file the coverage check
// reads.
type unitTestFile struct {
	Tests []struct {
		Name          string `json:"name"`
		AlertRuleTest []struct {
			Alertname string `json:"alertname"`
			ExpAlerts []any  `json:"exp_alerts"`
		} `json:"alert_rule_test"`
	} `json:"tests"`
}

// An alert only tested firing could fire always; one only tested silent
// could never fire.
func TestRules_EveryAlertIsUnitTestedFiringAndNotFiring(t *testing.T) {
	firing, silent := map[string]bool{}, map[string]bool{}
	files, _ := filepath.Glob(filepath.Join("testdata", "*.yaml"))
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var u unitTestFile
		if err := yaml.Unmarshal(data, &u); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for _, tc := range u.Tests {
			for _, a := range tc.AlertRuleTest {
				if len(a.ExpAlerts) > 0 {
					firing[a.Alertname] = true
				} else {
					silent[a.Alertname] = true
				}
			}
		}
	}
	_, alerts := alertRules(t)
	for _, a := range alerts {
		if !firing[a.Alert] {
			t.Errorf("%s has no unit test in testdata where it fires", a.Alert)
		}
		if !silent[a.Alert] {
			t.Errorf("%s has no unit test in testdata where it stays silent", a.Alert)
		}
	}
}

// headingRE matches a Markdown heading's text.
var headingRE = regexp.MustCompile(`(?m)^#{1,6}\s+(.+?)\s*$`)

// Every alert tells the operator how urgent it is, what users notice and
// where its runbook is: a docs/operations.md section named after it.
func TestRules_EveryAlertHasSeverityAnnotationsAndARunbook(t *testing.T) {
	doc, err := os.ReadFile(repoFile("docs/operations.md"))
	if err != nil {
		t.Fatal(err)
	}
	var headings []string
	for _, m := range headingRE.FindAllStringSubmatch(string(doc), -1) {
		headings = append(headings, m[1])
	}
	_, alerts := alertRules(t)
	seen := map[string]bool{}
	for _, a := range alerts {
		if seen[a.Alert] {
			t.Errorf("alert %s is defined twice", a.Alert)
		}
		seen[a.Alert] = true
		if !strings.HasPrefix(a.Alert, "Eurekube") {
			t.Errorf("alert %s: name it Eurekube… so it sorts and routes with the others", a.Alert)
		}
		if s := a.Labels["severity"]; !slices.Contains([]string{"critical", "warning", "info"}, s) {
			t.Errorf("alert %s: severity label %q, want critical, warning or info", a.Alert, s)
		}
		for _, key := range []string{"summary", "description"} {
			if strings.TrimSpace(a.Annotations[key]) == "" {
				t.Errorf("alert %s has no %s annotation", a.Alert, key)
			}
		}
		if want := "docs/operations.md#" + strings.ToLower(a.Alert); a.Annotations["runbook"] != want {
			t.Errorf("alert %s: runbook annotation %q, want %q", a.Alert, a.Annotations["runbook"], want)
		}
		if !slices.Contains(headings, a.Alert) {
			t.Errorf("docs/operations.md has no section %q, the alert's runbook", a.Alert)
		}
		// The table of alerts in docs/operations.md repeats each severity.
		row := fmt.Sprintf("| [%s](#%s) | %s |", a.Alert, strings.ToLower(a.Alert), a.Labels["severity"])
		if !strings.Contains(string(doc), row) {
			t.Errorf("docs/operations.md's table of alerts has no row starting %q", row)
		}
	}
}

// The rules and the dashboard name the manager's Lease and webhook path,
// which the manager defines: the copies must agree, or they watch nothing.
func TestRulesAndDashboard_NameTheManagersLeaseAndWebhookPath(t *testing.T) {
	_, alerts := alertRules(t)
	var exprs strings.Builder
	for _, a := range alerts {
		exprs.WriteString(a.Expr)
	}
	for _, expr := range dashboardExprs(t) {
		exprs.WriteString(expr)
	}
	for _, want := range []string{
		`leader_election_master_status{name="` + managerapp.LeaderElectionID + `"}`,
		`webhook="` + webhook.Path + `"`,
	} {
		if !strings.Contains(exprs.String(), want) {
			t.Errorf("no alert selects %s; the manager's Lease is %q and its webhook path %q", want, managerapp.LeaderElectionID, webhook.Path)
		}
	}
	for _, m := range regexp.MustCompile(`leader_election_master_status\{name="([^"]*)"\}`).FindAllStringSubmatch(exprs.String(), -1) {
		if m[1] != managerapp.LeaderElectionID {
			t.Errorf("an expression selects the Lease %q, the manager's is %q", m[1], managerapp.LeaderElectionID)
		}
	}
	for _, m := range regexp.MustCompile(`webhook="([^"]*)"`).FindAllStringSubmatch(exprs.String(), -1) {
		if m[1] != webhook.Path {
			t.Errorf("an expression selects the webhook path %q, the manager serves %q", m[1], webhook.Path)
		}
	}
}
