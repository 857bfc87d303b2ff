// Command benchrun is `make bench`: it measures Eurekube beside what it is
// compared with and writes bench/results.json and bench/REPORT.md.
//
// BENCH_QUICK=1 uses small counts and short windows (a few minutes);
// BENCH_PHASES=registrar,webhook,reconciler,gateway picks phases; BENCH_BEFORE=REV
// also measures an older commit: its manager in the reconciler's scenarios
// and its BenchmarkHandler in the webhook phase. It refuses a tree with
// uncommitted changes: the report names the commit it measured.
package main

import (
	"context"
	"flag"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/sirupsen/logrus"

	"github.com/eurekube/eurekube/tests/bench"
)

func main() {
	out := flag.String("out", "bench", "directory for results.json and REPORT.md")
	work := flag.String("workdir", "", "directory for binaries, certificates and logs (default: a new temporary one)")
	quick := flag.Bool("quick", os.Getenv("BENCH_QUICK") != "" && os.Getenv("BENCH_QUICK") != "0", "small counts and short windows (also BENCH_QUICK=1)")
	phases := flag.String("phases", os.Getenv("BENCH_PHASES"), "comma-separated phases to run: "+strings.Join(bench.AllPhases, ",")+" (default all; also BENCH_PHASES)")
	before := flag.String("before", os.Getenv("BENCH_BEFORE"), "an older commit whose manager the reconciler's scenarios and whose BenchmarkHandler the webhook phase measure too, for the \"before\" figures (also BENCH_BEFORE)")
	scale := flag.String("scale", os.Getenv("BENCH_SCALE"), "comma-separated ids of the reconciler's scenarios to run, such as 1000x20,1000x20_upgrade,import_1000x10 (default all; also BENCH_SCALE)")
	allowDirty := flag.Bool("allow-dirty", false, "measure a tree with uncommitted changes (development only: -out must then name another directory than bench)")
	flag.Parse()

	log := logrus.New()
	log.SetFormatter(&logrus.TextFormatter{FullTimestamp: true})
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	if *allowDirty && filepath.Clean(*out) == "bench" {
		log.Fatal("-allow-dirty: name another -out than bench: bench/REPORT.md is the committed report of a commit")
	}
	o := bench.Options{Quick: *quick, OutDir: *out, WorkDir: *work, Before: *before, AllowDirty: *allowDirty, Log: log}
	if *scale != "" {
		o.Scenarios = strings.Split(*scale, ",")
	}
	if *phases != "" {
		o.Phases = strings.Split(*phases, ",")
	}
	for _, p := range o.Phases {
		if !slices.Contains(bench.AllPhases, p) {
			log.WithField("phase", p).Fatalf("unknown phase: want one of %s", strings.Join(bench.AllPhases, ", "))
		}
	}
	r, err := bench.Run(ctx, o)
	if r != nil {
		os.Stdout.WriteString(bench.FiguresTable(r))
	}
	if err != nil {
		log.WithError(err).Error("bench failed")
		os.Exit(1)
	}
	log.WithField("out", *out).Info("bench: wrote results.json and REPORT.md")
}
