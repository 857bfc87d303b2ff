package monitoring_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

const dashboardFile = "manifests/monitoring/dashboard.json"

// dashboard is the part of a Grafana dashboard's JSON model the tests read.
type dashboard struct {
	UID           string  `json:"uid"`
	Title         string  `json:"title"`
	SchemaVersion int     `json:"schemaVersion"`
	Panels        []panel `json:"panels"`
	Templating    struct {
		List []struct {
			Name  string `json:"name"`
			Type  string `json:"type"`
			Query any    `json:"query"`
		} `json:"list"`
	} `json:"templating"`
}

type panel struct {
	ID         int    `json:"id"`
	Type       string `json:"type"`
	Title      string `json:"title"`
	Datasource *struct {
		Type string `json:"type"`
		UID  string `json:"uid"`
	} `json:"datasource"`
	GridPos *struct {
		H, W, X, Y int
	} `json:"gridPos"`
	Targets []struct {
		RefID string `json:"refId"`
		Expr  string `json:"expr"`
	} `json:"targets"`
	Panels []panel `json:"panels"` // a collapsed row's
}

func readDashboard(t *testing.T) dashboard {
	t.Helper()
	data, err := os.ReadFile(repoFile(dashboardFile))
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	return d
}

// allPanels flattens rows into their panels.
func allPanels(ps []panel) []panel {
	var out []panel
	for _, p := range ps {
		out = append(out, p)
		out = append(out, allPanels(p.Panels)...)
	}
	return out
}

// minSchemaVersion is the schema of Grafana 10, the oldest the dashboard's
// panels (timeseries, stat) and datasource variable are written for.
const minSchemaVersion = 36

func TestDashboard_IsAValidGrafanaDashboard(t *testing.T) {
	d := readDashboard(t)
	if d.SchemaVersion < minSchemaVersion {
		t.Errorf("schemaVersion %d, want at least %d", d.SchemaVersion, minSchemaVersion)
	}
	if d.UID == "" || len(d.UID) > 40 {
		t.Errorf("uid %q: Grafana needs one of 1 to 40 characters, so links to the dashboard survive a re-import", d.UID)
	}
	if d.Title == "" {
		t.Error("the dashboard has no title")
	}
	ids := map[int]string{}
	for _, p := range allPanels(d.Panels) {
		if prev, dup := ids[p.ID]; dup || p.ID == 0 {
			t.Errorf("panel %q: id %d is zero or also %q's; Grafana needs unique panel ids", p.Title, p.ID, prev)
		}
		ids[p.ID] = p.Title
		if p.Title == "" || p.GridPos == nil {
			t.Errorf("panel %d: needs a title and a gridPos", p.ID)
		}
		if p.Type == "row" {
			continue
		}
		if p.Datasource == nil || p.Datasource.Type != "prometheus" || p.Datasource.UID != "${datasource}" {
			t.Errorf("panel %q: datasource %+v, want the Prometheus chosen in the dashboard's datasource variable", p.Title, p.Datasource)
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no target", p.Title)
		}
		for _, tg := range p.Targets {
			if strings.TrimSpace(tg.Expr) == "" || tg.RefID == "" {
				t.Errorf("panel %q: a target without an expression or refId", p.Title)
			}
		}
	}
}

// grafanaRangeRE matches Grafana's range variables, which Prometheus
// would not parse.
var grafanaRangeRE = regexp.MustCompile(`\$__(rate_interval|interval|range)|\$\{__(rate_interval|interval|range)\}`)

// labelValuesRE matches a query variable's label_values(selector, label).
var labelValuesRE = regexp.MustCompile(`^label_values\((.+),\s*[a-zA-Z_][a-zA-Z0-9_]*\)$`)

// dashboardExprs returns every PromQL expression of the dashboard, named
// by where it is, with Grafana's range variables replaced by a duration
// (variables inside label matchers are strings to Prometheus and stay).
func dashboardExprs(t *testing.T) map[string]string {
	t.Helper()
	d := readDashboard(t)
	exprs := map[string]string{}
	for _, p := range allPanels(d.Panels) {
		for _, tg := range p.Targets {
			exprs[fmt.Sprintf("panel %d %q target %s", p.ID, p.Title, tg.RefID)] = grafanaRangeRE.ReplaceAllString(tg.Expr, "5m")
		}
	}
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		q, ok := v.Query.(string)
		if m, isMap := v.Query.(map[string]any); isMap {
			q, ok = m["query"].(string)
		}
		sel := labelValuesRE.FindStringSubmatch(strings.TrimSpace(q))
		if !ok || sel == nil {
			t.Errorf("variable %s: query %v, want label_values(selector, label)", v.Name, v.Query)
			continue
		}
		exprs["variable "+v.Name] = sel[1]
	}
	return exprs
}

// Prometheus's PromQL parser is not in Eurekube's module graph, so the
// expressions go to promtool as recording rules, which it parses.
func TestDashboard_ExpressionsParse(t *testing.T) {
	exprs := dashboardExprs(t)
	var rules []map[string]string
	for where, expr := range exprs {
		rules = append(rules, map[string]string{"record": fmt.Sprintf("dashboard:expr_%d", len(rules)), "expr": expr})
		t.Logf("%s: %s", where, expr)
	}
	out, err := yaml.Marshal(map[string]any{"groups": []any{map[string]any{"name": "dashboard", "rules": rules}}})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "dashboard-rules.yaml")
	if err := os.WriteFile(path, out, 0o644); err != nil {
		t.Fatal(err)
	}
	run(t, filepath.Dir(path), promtool, "check", "rules", path)
}

func TestDashboard_UsesOnlyKnownMetrics(t *testing.T) {
	for where, expr := range dashboardExprs(t) {
		names := metricNames(expr)
		if len(names) == 0 {
			t.Errorf("%s: no metric found in %q", where, expr)
		}
		for _, name := range names {
			if err := knownMetric(name); err != nil {
				t.Errorf("%s: %s: %v", where, name, err)
			}
		}
	}
}
