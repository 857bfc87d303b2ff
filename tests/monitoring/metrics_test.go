package monitoring_test

import (
	"errors"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	// The manager's packages register their metrics in controller-runtime's
	// registry when imported: the controller's, the webhook's,
	// package manager's (the served certificate's expiry) and, through them,
	// controller-runtime's own (webhook requests, leader election).
	_ "github.com/eurekube/eurekube/controller"
	_ "github.com/eurekube/eurekube/manager"
	_ "github.com/eurekube/eurekube/webhook"
)

// externalMetrics are metrics of other programs the alerts and the
// dashboard use, each with why it is trusted to exist.
var externalMetrics = map[string]string{
	// cert-manager's controller exports it for every Certificate; the
	// manifests' certificates are issued by cert-manager.
	"certmanager_certificate_expiration_timestamp_seconds": "cert-manager's controller, per Certificate",
}

// registered reports whether controller-runtime's registry, the one the
// manager serves, holds a metric family of that name. Gather cannot say:
// it lists only vectors that have a series, and most have none until the
// manager runs. Registering a collector of the same name can: the registry
// refuses a second descriptor with a name it knows, whatever its labels.
func registered(name string) bool {
	probe := prometheus.NewGauge(prometheus.GaugeOpts{Name: name, Help: "monitoring test probe"})
	if err := metrics.Registry.Register(probe); err != nil {
		return true
	}
	metrics.Registry.Unregister(probe)
	return false
}

// knownMetric says whether name, as a PromQL selector writes it (a
// histogram's _bucket, _count or _sum series included), is a metric the
// manager (Eurekube's own and controller-runtime's) or an allowed external
// program exports, with an error saying where it was looked for when not.
// The registrar's metrics are served by each injected pod, not the
// manager; the alerts and the dashboard do not use them.
func knownMetric(name string) error {
	families := []string{name}
	for _, suffix := range []string{"_bucket", "_count", "_sum"} {
		if base, ok := strings.CutSuffix(name, suffix); ok {
			families = append(families, base)
		}
	}
	for _, f := range families {
		if registered(f) {
			return nil
		}
		if _, ok := externalMetrics[f]; ok {
			return nil
		}
	}
	return errors.New("no such metric: not registered by the manager (controller-runtime's registry), not in the external allowlist (tests/monitoring/metrics_test.go)")
}

// identRE matches what may be a metric name; numberRE a number or
// duration, whose letters are not names.
var (
	identRE  = regexp.MustCompile(`^[a-zA-Z_:][a-zA-Z0-9_:]*`)
	numberRE = regexp.MustCompile(`^[0-9.][0-9a-zA-Z_.+]*`)
)

// promqlKeywords are PromQL's operators, modifiers and aggregations (whose
// "(" may follow a by or without list) that read as names.
var promqlKeywords = []string{"and", "or", "unless", "bool", "offset", "by", "without", "on", "ignoring",
	"group_left", "group_right", "inf", "nan", "start", "end", "atan2",
	"sum", "min", "max", "avg", "group", "stddev", "stdvar", "count", "count_values", "bottomk", "topk",
	"quantile", "limitk", "limit_ratio"}

// metricNames returns the metric names a valid PromQL expression selects.
// It is a small lexer, not a parser (Prometheus's parser is not in
// Eurekube's module graph and promtool checks the syntax): it skips
// strings, label matchers ({...}), ranges ([...]), the label lists of by,
// without, on, ignoring and group_*, function and aggregation names (a
// name followed by "("), keywords and numbers.
func metricNames(expr string) []string {
	var names []string
	s := expr
	skipList := false // the next "(...)" is a label list
	for len(s) > 0 {
		switch c := s[0]; {
		case c == '"' || c == '\'' || c == '`':
			end := 1
			for end < len(s) && s[end] != c {
				if s[end] == '\\' && c != '`' {
					end++
				}
				end++
			}
			s = s[min(end+1, len(s)):]
		case c == '{' || c == '[' || c == '(' && skipList:
			closing := map[byte]byte{'{': '}', '[': ']', '(': ')'}[c]
			end := strings.IndexByte(s, closing)
			if end < 0 {
				return names
			}
			s, skipList = s[end+1:], false
		case numberRE.MatchString(s):
			s = s[len(numberRE.FindString(s)):]
		case identRE.MatchString(s):
			word := identRE.FindString(s)
			s = s[len(word):]
			rest := strings.TrimLeft(s, " \t\n")
			switch {
			case slices.Contains([]string{"by", "without", "on", "ignoring", "group_left", "group_right"}, word):
				skipList = true
			case slices.Contains(promqlKeywords, strings.ToLower(word)):
			case strings.HasPrefix(rest, "("):
			default:
				if !slices.Contains(names, word) {
					names = append(names, word)
				}
			}
		default:
			s = s[1:]
		}
	}
	return names
}

func TestMetricNames_FindsSelectorsOnly(t *testing.T) {
	for _, tc := range []struct {
		expr string
		want []string
	}{
		{`up`, []string{"up"}},
		{`sum without (op, result) (rate(a_total{result="error",x=~"a|b"}[5m])) / on (pod) group_left (node) b > 0.5`, []string{"a_total", "b"}},
		{`histogram_quantile(0.99, sum by (le) (rate(c_bucket{le!="1e3"}[$__rate_interval])))`, []string{"c_bucket"}},
		{`d - time() < 7 * 24 * 3600 or absent(e{name="f"}) unless count(g offset 1h) > bool 1e3`, []string{"d", "e", "g"}},
		{`max without (pod) (h) + on () group_right () sum(i)`, []string{"h", "i"}},
	} {
		if got := metricNames(tc.expr); !slices.Equal(got, tc.want) {
			t.Errorf("metricNames(%q) = %q, want %q", tc.expr, got, tc.want)
		}
	}
}

func TestMetrics_AlertsUseOnlyKnownMetrics(t *testing.T) {
	_, alerts := alertRules(t)
	for _, a := range alerts {
		names := metricNames(a.Expr)
		if len(names) == 0 {
			t.Errorf("alert %s: no metric found in %q", a.Alert, a.Expr)
		}
		for _, name := range names {
			if err := knownMetric(name); err != nil {
				t.Errorf("alert %s: %s: %v", a.Alert, name, err)
			}
		}
	}
}

func TestMetrics_KnownMetricRefusesUnknownNames(t *testing.T) {
	for _, name := range []string{"eurekube_syncer_instance", "eurekube_no_such_metric_total", "controller_runtime_webhook_latency"} {
		if knownMetric(name) == nil {
			t.Errorf("knownMetric(%q) accepted a metric that does not exist", name)
		}
	}
	for _, name := range []string{"eurekube_syncer_instances", "eurekube_eureka_request_duration_seconds_bucket",
		"controller_runtime_webhook_requests_total", "leader_election_master_status"} {
		if err := knownMetric(name); err != nil {
			t.Errorf("knownMetric(%q): %v", name, err)
		}
	}
}
