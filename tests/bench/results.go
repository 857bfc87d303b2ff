package bench

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"time"
)

// Sections of the report, in order.
const (
	SectionWebhook    = "Webhook"
	SectionRegistrar  = "Registrar"
	SectionReconciler = "Reconciler at scale"
	SectionGateway    = "Gateway"
)

// Results is one run: where and when it ran and what it measured.
type Results struct {
	Date     time.Time `json:"date"`
	Duration string    `json:"duration"`
	// Quick runs use smaller counts and shorter windows (BENCH_QUICK=1);
	// their figures are for development, not for the README.
	Quick       bool        `json:"quick"`
	Environment Environment `json:"environment"`
	Figures     []Figure    `json:"figures"`
	// Errors are the phases that failed; their figures are missing.
	Errors []string `json:"errors,omitempty"`
}

// Figure is one measured number beside its target and the anchor it is
// compared with, both from the same run.
type Figure struct {
	ID      string  `json:"id"`
	Section string  `json:"section"`
	Name    string  `json:"name"`
	Value   float64 `json:"value"`
	Unit    string  `json:"unit"`
	// Target is an upper bound in Unit; nil for figures without one.
	Target *float64 `json:"target_max,omitempty"`
	// TargetMin is a lower bound in Unit instead (a throughput); nil for
	// figures without one.
	TargetMin *float64 `json:"target_min,omitempty"`
	// Floor is the least Value could be on this machine, measured in the
	// same run, in Unit; nil when the figure has none.
	Floor *float64 `json:"floor,omitempty"`
	// FloorRatio is an upper bound of Value ÷ Floor, for a figure no
	// absolute bound can hold on a shared two-core machine: the target
	// moves with the floor the same run measures. nil for figures without.
	FloorRatio *float64 `json:"target_max_floor_ratio,omitempty"`
	// Ratio is Value ÷ Floor, set by Add when both are known.
	Ratio *float64 `json:"floor_ratio,omitempty"`
	Met   *bool    `json:"met,omitempty"`
	// Anchor is what the figure stands beside, measured in the same run.
	Anchor string `json:"anchor,omitempty"`
	// Method says how it was measured.
	Method string `json:"method,omitempty"`
	// Missed says, when the target is missed, by how much and why.
	Missed string `json:"missed,omitempty"`
	// IfMissed is the known reason a miss would have, from how the part
	// works; Add turns it into Missed when the target is missed.
	IfMissed string `json:"-"`
}

// targetText is the target as the report shows it: "≤ 10 ms", "≥ 2,000
// reads/s", "≤ 1.30 × the floor (13.9 s)", or "—".
func (f Figure) targetText() string {
	switch {
	case f.FloorRatio != nil && f.Floor != nil:
		return fmt.Sprintf("≤ %s × the floor (%s %s)", formatValue(*f.FloorRatio), formatValue(*f.FloorRatio**f.Floor), f.Unit)
	case f.FloorRatio != nil:
		return "≤ " + formatValue(*f.FloorRatio) + " × the floor"
	case f.Target != nil:
		return "≤ " + formatValue(*f.Target) + " " + f.Unit
	case f.TargetMin != nil:
		return "≥ " + formatValue(*f.TargetMin) + " " + f.Unit
	}
	return "—"
}

// measuredText is the figure as the report shows it, with its floor and
// its ratio to it beside it when it has one: "19.4 s (floor 10.7 s, 1.81 ×
// the floor)".
func (f Figure) measuredText() string {
	v := formatValue(f.Value) + " " + f.Unit
	switch {
	case f.Floor != nil && f.Ratio != nil:
		return fmt.Sprintf("%s (floor %s %s, %s × the floor)", v, formatValue(*f.Floor), f.Unit, formatValue(*f.Ratio))
	case f.FloorRatio != nil:
		return v + " (no floor measured)"
	}
	return v
}

// Max is a target: at most v.
func Max(v float64) *float64 { return &v }

// Min is a target: at least v.
func Min(v float64) *float64 { return &v }

// Add records f, judging it against its target.
func (r *Results) Add(f Figure) {
	if f.Floor != nil && *f.Floor > 0 {
		ratio := f.Value / *f.Floor
		f.Ratio = &ratio
	}
	if f.FloorRatio != nil {
		met := f.Ratio != nil && *f.Ratio <= *f.FloorRatio
		f.Met = &met
		switch {
		case f.Ratio == nil:
			f.Missed = "not judged: this run measured no floor"
		case !met:
			bound := *f.FloorRatio * *f.Floor
			f.Missed = fmt.Sprintf("%s × its floor of %s %s, against at most %s ×: missed by %s %s (%.0f %% over %s %s)",
				formatValue(*f.Ratio), formatValue(*f.Floor), f.Unit, formatValue(*f.FloorRatio), formatValue(f.Value-bound), f.Unit,
				100*(f.Value-bound)/bound, formatValue(bound), f.Unit)
		}
		if !met && f.IfMissed != "" {
			f.Missed += ": " + f.IfMissed
		}
	}
	if f.Target != nil {
		met := f.Value <= *f.Target
		f.Met = &met
		if !met {
			over := f.Value - *f.Target
			f.Missed = fmt.Sprintf("missed by %s %s", formatValue(over), f.Unit)
			if *f.Target > 0 {
				f.Missed += fmt.Sprintf(" (%.0f %% over the target)", 100*over / *f.Target)
			}
			if f.IfMissed != "" {
				f.Missed += ": " + f.IfMissed
			}
		}
	}
	if f.TargetMin != nil {
		met := f.Value >= *f.TargetMin
		f.Met = &met
		if !met {
			short := *f.TargetMin - f.Value
			f.Missed = fmt.Sprintf("short by %s %s", formatValue(short), f.Unit)
			if *f.TargetMin > 0 {
				f.Missed += fmt.Sprintf(" (%.0f %% under the target)", 100*short / *f.TargetMin)
			}
			if f.IfMissed != "" {
				f.Missed += ": " + f.IfMissed
			}
		}
	}
	r.Figures = append(r.Figures, f)
}

// Fail records that a phase could not be measured.
func (r *Results) Fail(phase string, err error) {
	r.Errors = append(r.Errors, fmt.Sprintf("%s: %v", phase, err))
}

// Write stores results.json and REPORT.md in dir.
func (r *Results) Write(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("write results: %w", err)
	}
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return fmt.Errorf("write results: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "results.json"), append(data, '\n'), 0o644); err != nil {
		return fmt.Errorf("write results: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "REPORT.md"), []byte(Report(r)), 0o644); err != nil {
		return fmt.Errorf("write report: %w", err)
	}
	return nil
}

// formatValue prints a figure with about three significant digits.
func formatValue(v float64) string {
	a := math.Abs(v)
	switch {
	case a == 0:
		return "0"
	case a >= 1000:
		return addThousands(fmt.Sprintf("%.0f", v))
	case a >= 100:
		return fmt.Sprintf("%.0f", v)
	case a >= 10:
		return fmt.Sprintf("%.1f", v)
	case a >= 1:
		return fmt.Sprintf("%.2f", v)
	default:
		return fmt.Sprintf("%.3f", v)
	}
}

// addThousands puts a comma between groups of three digits.
func addThousands(s string) string {
	neg := len(s) > 0 && s[0] == '-'
	if neg {
		s = s[1:]
	}
	var out []byte
	for i := range len(s) {
		if i > 0 && (len(s)-i)%3 == 0 {
			out = append(out, ',')
		}
		out = append(out, s[i])
	}
	if neg {
		return "-" + string(out)
	}
	return string(out)
}
