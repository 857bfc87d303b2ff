package bench

import (
	"fmt"
	"strings"
	"time"
)

// Report renders results as REPORT.md: the environment, then one table per
// section with each figure beside its target and its anchor, then every
// missed target with by how much and why, then how each was measured.
func Report(r *Results) string {
	var b strings.Builder
	e := r.Environment
	b.WriteString("# Eurekube benchmarks\n\n")
	fmt.Fprintf(&b, "Written by `make bench` (tests/bench/cmd/benchrun) on %s in %s", r.Date.UTC().Format("2006-01-02 15:04 MST"), r.Duration)
	if r.Quick {
		b.WriteString(", **quick mode** (BENCH_QUICK=1: small counts and short windows, for development only)")
	}
	b.WriteString(". Every figure is beside its target and what it is compared with, measured in the same run on the same machine; the raw numbers are in `results.json`.\n\n")

	b.WriteString("## Machine and versions\n\n| | |\n| --- | --- |\n")
	fmt.Fprintf(&b, "| CPU | %s, %d cores |\n| memory | %.1f GiB |\n| kernel | Linux %s |\n", e.CPU, e.Cores, e.MemoryGiB, e.Kernel)
	fmt.Fprintf(&b, "| Go | %s |\n| Java | %s |\n| Kubernetes | %s, etcd %s |\n| Eureka | %s |\n| commit | %s |\n\n", e.Go, e.Java, e.Kubernetes, e.Etcd, e.Eureka, e.Commit)

	b.WriteString("## Load during the run\n\n")
	b.WriteString("Everything runs on this one machine: the API server, etcd, the Eureka server (JVM), the manager, the registrars and the load generators share its cores, so each figure includes that contention. Other processes (outside this run) busy more than 10 % of a core, sampled over one second at each point:\n\n")
	b.WriteString("| when | load average (1 min) | other busy processes |\n| --- | --- | --- |\n")
	for _, l := range e.Load {
		others := "none"
		if len(l.Others) > 0 {
			others = strings.Join(l.Others, ", ")
		}
		fmt.Fprintf(&b, "| %s | %.2f | %s |\n", l.When, l.LoadAvg1, others)
	}
	b.WriteString("\n")

	b.WriteString(FiguresTable(r))

	var missed []Figure
	for _, f := range r.Figures {
		if f.Missed != "" {
			missed = append(missed, f)
		}
	}
	b.WriteString("## Missed targets\n\n")
	if len(missed) == 0 {
		b.WriteString("None: every figure with a target met it.\n\n")
	}
	for _, f := range missed {
		fmt.Fprintf(&b, "- **%s — %s**: %s against %s; %s.\n", f.Section, f.Name, f.measuredText(), f.targetText(), f.Missed)
	}
	if len(missed) > 0 {
		b.WriteString("\n")
	}
	if len(r.Errors) > 0 {
		b.WriteString("## Phases that failed\n\nTheir figures are missing above.\n\n")
		for _, err := range r.Errors {
			fmt.Fprintf(&b, "- %s\n", err)
		}
		b.WriteString("\n")
	}

	b.WriteString("## How each figure was measured\n\n")
	for _, f := range r.Figures {
		if f.Method != "" {
			fmt.Fprintf(&b, "- **%s — %s**: %s\n", f.Section, f.Name, f.Method)
		}
	}
	return b.String()
}

// FiguresTable is the table of every figure, by section: the part the
// README copies.
func FiguresTable(r *Results) string {
	var b strings.Builder
	for _, section := range []string{SectionWebhook, SectionRegistrar, SectionReconciler, SectionGateway} {
		var rows []Figure
		for _, f := range r.Figures {
			if f.Section == section {
				rows = append(rows, f)
			}
		}
		if len(rows) == 0 {
			continue
		}
		fmt.Fprintf(&b, "## %s\n\n| figure | measured | target | | beside it, same run |\n| --- | --- | --- | --- | --- |\n", section)
		for _, f := range rows {
			target, verdict := f.targetText(), ""
			if f.Met != nil {
				verdict = "met"
				if !*f.Met {
					verdict = "**missed**"
				}
			}
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %s |\n", f.Name, f.measuredText(), target, verdict, f.Anchor)
		}
		b.WriteString("\n")
	}
	return b.String()
}

// roundDuration prints a run's length in whole seconds.
func roundDuration(d time.Duration) string {
	d = d.Round(time.Second)
	if d < time.Minute {
		return d.String()
	}
	return fmt.Sprintf("%d min %02d s", int(d.Minutes()), int(d.Seconds())%60)
}
