// Command testrun runs the Go tests of `make test` and leaves nothing
// running behind them, however they end.
//
// The packages named by -background each run as their own go test from
// the start (the end-to-end suite on the real node and the registrar
// suite spend most of their minutes waiting, not computing), and so do
// the packages named by -race, with the race detector (the controller
// suite), and the -beside command (lint); meanwhile it runs every other
// package (with -race-rest, with the race detector: their -short tests,
// the unit tier, run there once, not twice), then the fuzz targets, at the
// usual priority (-fuzztime is wall time); it prints
// each background job's output when it ends, and says how long the whole
// run took. The suites named by -first (the real node's, whose length is
// the run's) keep its priority; every other command runs in one cpu cgroup
// with -rest-shares (or, without it, at -nice), so it takes the cores they
// leave idle and yields them when they want them. The
// race detector needs cgo and a C compiler: the race runs
// get CGO_ENABLED=1, and the run stops at once when there is no compiler.
// Binaries the tests build for the node and the suites stay static: their
// builds set CGO_ENABLED=0 themselves.
//
// Everything the tests start descends from it: it is the child subreaper
// of its process tree, so a process orphaned by a test binary that died (an
// envtest kube-apiserver or etcd, a Eureka JVM) is reparented to it rather
// than to init. When the tests end, and on SIGINT, SIGTERM or SIGHUP, it
// interrupts every descendant (the node's suites tear the node down on
// SIGINT), waits for them, and kills what is still there. Every
// descendant carries EUREKUBE_TESTRUN in its environment, so a run killed
// with SIGKILL, which can clean nothing, is cleaned by the next one.
package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// runEnv marks the processes of a run: "<pid of testrun>".
const runEnv = "EUREKUBE_TESTRUN"

func main() {
	background := flag.String("background", "", "comma-separated packages, each run by its own go test from the start, beside the others")
	race := flag.String("race", "", "comma-separated packages, each run by its own go test -race from the start, beside the others")
	first := flag.String("first", "", "comma-separated packages of -background that keep the machine's priority: the suites whose length is the run's (the real node's); every other command runs at -nice")
	niceness := flag.Int("nice", 0, "the niceness (nice(1)) of every command but the -first suites and the fuzz targets: they use what those leave")
	restShares := flag.Int("rest-shares", 0, "run every command but the -first suites and the fuzz targets in one cpu cgroup with these shares (v1 cpu.shares, against 1,024 for the rest of the machine; 0: none), instead of -nice")
	raceRest := flag.Bool("race-rest", false, "run the other packages (all but -background and -race) with -race too")
	restParallel := flag.Int("rest-p", 0, "how many of the other packages' test binaries run at once (go test -p; 0: go test's default, one per core)")
	beside := flag.String("beside", "", "a shell command run from the start, beside the tests")
	fuzzTime := flag.String("fuzztime", "10s", "how long each fuzz target runs")
	fuzzWorkers := flag.Int("fuzzworkers", 0, "how many processes fuzz a target at once (0: one per core, as go test's -parallel)")
	grace := flag.Duration("grace", 90*time.Second, "how long interrupted tests may take to clean up before they are killed")
	fuzzOnly := flag.Bool("fuzz-only", false, "run only the fuzz targets")
	logs := flag.String("logs", "bin/test-logs", "directory for each -background and -race suite's whole go test -json output, passing tests' logs included")
	since := flag.Int64("since", 0, "Unix time the whole run began (builds and lint before this command), for the time it reports")
	flag.Parse()
	goTestFlags := flag.Args()

	start := time.Now()
	if *since > 0 {
		start = time.Unix(*since, 0)
	}
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		fail(start, fmt.Errorf("become the child subreaper: %w", err))
	}
	if left := leftovers(); len(left) > 0 {
		fmt.Printf("testrun: stopping %d processes a killed earlier run left: %s\n", len(left), describe(left))
		stopAll(left, 10*time.Second)
	}
	if err := os.Setenv(runEnv, strconv.Itoa(os.Getpid())); err != nil {
		fail(start, err)
	}
	accounting := ""
	if !*fuzzOnly {
		path := filepath.Join(*logs, "process-accounting")
		err := os.MkdirAll(*logs, 0o755)
		if err == nil {
			err = startAcct(path)
		}
		if err != nil {
			fmt.Printf("testrun: no CPU by command (process accounting needs root): %v\n", err)
		} else {
			accounting = path
		}
	}

	var rest *lane
	if *restShares > 0 && !*fuzzOnly {
		var err error
		if rest, err = newLane(laneName, *restShares); err != nil {
			fmt.Printf("testrun: every command at the usual priority: no cpu cgroup for the other lanes: %v\n", err)
			rest = nil
		} else if err := os.Setenv(spareCPUEnv, rest.usage); err != nil {
			fail(start, err)
		}
	}

	ctx, interrupt := context.WithCancelCause(context.Background())
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	go func() {
		// The go command waits for its test binary, which a signal to
		// this process alone would not reach: interrupt the whole tree.
		sig := <-signals
		interrupt(fmt.Errorf("interrupted by %v", sig))
		fmt.Printf("testrun: %v; stopping the tests\n", sig)
		stopAll(descendants(), *grace)
	}()
	var err error
	if *fuzzOnly {
		var fuzzed string
		fuzzed, err = fuzz(ctx, *fuzzTime, *fuzzWorkers)
		fmt.Printf("testrun: %s\n", fuzzed)
	} else {
		err = run(ctx, runOptions{background: splitList(*background), race: splitList(*race), raceRest: *raceRest,
			first: splitList(*first), niceness: *niceness, rest: rest, restParallel: *restParallel,
			beside: *beside, goTestFlags: goTestFlags, fuzzTime: *fuzzTime, fuzzWorkers: *fuzzWorkers, start: start, logs: *logs})
	}
	signal.Stop(signals)
	if ctx.Err() != nil {
		err = errors.Join(err, context.Cause(ctx))
	}
	cleanUp(*grace)
	if rest != nil {
		if rerr := rest.remove(); rerr != nil {
			fmt.Printf("testrun: %v\n", rerr)
		}
	}
	book.report(start)
	if accounting != "" {
		stopAcct()
		reportAcct(accounting)
	}
	if err != nil {
		fail(start, err)
	}
	fmt.Printf("testrun: passed in %ds\n", int(time.Since(start).Seconds()))
}

func fail(start time.Time, err error) {
	fmt.Fprintf(os.Stderr, "testrun: FAILED after %ds: %v\n", int(time.Since(start).Seconds()), err)
	os.Exit(1)
}

// runOptions are run's: the flags of the same names.
type runOptions struct {
	background, race []string
	raceRest         bool
	// first: the -background patterns left at testrun's priority;
	// niceness: every other command's (nice(1)), 0 for none.
	first    []string
	niceness int
	// rest: the cgroup every other command runs in, instead of niceness;
	// nil for none.
	rest *lane
	// restParallel: the other packages' go test -p, 0 for its default.
	restParallel int
	beside       string
	goTestFlags  []string
	fuzzTime     string
	fuzzWorkers  int
	// start is when the run began: the tests' timings count from it.
	start time.Time
	// logs is where each suite's whole -json output goes.
	logs string
}

// run runs the tests, then the fuzz targets when they passed.
func run(ctx context.Context, o runOptions) error {
	goTestFlags := o.goTestFlags
	for _, f := range o.first {
		if !slices.Contains(o.background, f) {
			return fmt.Errorf("-first %s: not one of the -background packages (%s)", f, strings.Join(o.background, ","))
		}
	}
	if len(o.race) > 0 || o.raceRest {
		if err := raceReady(ctx); err != nil {
			return err
		}
	}
	all, err := goList(ctx, "./...")
	if err != nil {
		return err
	}
	type job struct {
		name string
		out  bytes.Buffer
		// log is the go test -json stream of a suite, nil for -beside.
		log  *jsonLog
		cost string // its wall and CPU time, once it ended
		done chan error
		// stopped: still running when the run had already failed, and
		// stopped for that, not failed on its own.
		stopped bool
	}
	var jobs []*job
	start := func(name string, cmd *exec.Cmd) error {
		j := &job{name: name, done: make(chan error, 1)}
		cmd.Stdout, cmd.Stderr = &j.out, &j.out
		if err := cmd.Start(); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		began := time.Now()
		go func() {
			err := cmd.Wait()
			j.cost = cost(cmd, began)
			j.done <- err
		}()
		jobs = append(jobs, j)
		return nil
	}
	// suite starts a go test -json: what it prints is kept as go test
	// prints it without -v, with each test's timing beside.
	startSuite := func(name string, cmd *exec.Cmd) error {
		j := &job{name: name, log: newJSONLog(o.start), done: make(chan error, 1)}
		cmd.Stderr = &j.out
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		// The whole stream, passing tests' logs and figures included, is
		// kept for reading afterwards.
		var stream io.Reader = stdout
		if err := os.MkdirAll(o.logs, 0o755); err != nil {
			return err
		}
		file, err := os.Create(filepath.Join(o.logs, strings.NewReplacer("/", "_", " ", "_", ".", "").Replace(name)+".json"))
		if err != nil {
			return err
		}
		stream = io.TeeReader(stdout, file)
		if err := cmd.Start(); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		began := time.Now()
		go func() {
			j.log.read(stream)
			_ = file.Close()
			err := cmd.Wait()
			j.log.finish()
			j.cost = cost(cmd, began)
			j.done <- err
		}()
		jobs = append(jobs, j)
		return nil
	}
	for _, b := range append(suites(o.background, false), suites(o.race, true)...) {
		pkgs, err := goList(ctx, b.pattern)
		if err != nil {
			return err
		}
		all = slices.DeleteFunc(all, func(p string) bool { return slices.Contains(pkgs, p) })
		var flags []string
		if b.race {
			flags = append(flags, "-race")
		}
		cmd := goTest(ctx, slices.Concat([]string{"-json"}, flags, goTestFlags, pkgs)...)
		if b.race {
			cmd.Env = raceEnv()
		}
		if !slices.Contains(o.first, b.pattern) {
			o.lower(cmd)
		}
		if err := startSuite(strings.Join(slices.Concat([]string{"go", "test"}, flags, pkgs), " "), cmd); err != nil {
			return err
		}
	}
	if len(o.race) > 0 || o.raceRest {
		// The tests that only compute skip themselves under -race
		// (harness.OnlyComputes): they run here, without it.
		pkgs, names, err := onlyComputes(ctx)
		if err != nil {
			return err
		}
		if len(names) > 0 {
			args := slices.Concat([]string{"-json", "-run", "^(" + strings.Join(names, "|") + ")$"}, goTestFlags, pkgs)
			cmd := goTest(ctx, args...)
			cmd.Env = append(os.Environ(), onlyComputesEnv+"=1")
			o.lower(cmd)
			if err := startSuite(fmt.Sprintf("go test (the %d tests that only compute, without -race)", len(names)), cmd); err != nil {
				return err
			}
		}
	}
	if o.beside != "" {
		cmd := exec.CommandContext(ctx, "bash", "-c", o.beside)
		cmd.Cancel = func() error { return nil }
		o.lower(cmd)
		if err := start(o.beside, cmd); err != nil {
			return err
		}
	}
	// Every other package, while the jobs above run; then the fuzz
	// targets.
	var errs []error
	var flags []string
	if o.raceRest {
		flags = append(flags, "-race")
	}
	if o.restParallel > 0 {
		flags = append(flags, "-p", strconv.Itoa(o.restParallel))
	}
	cmd := goTest(ctx, slices.Concat(flags, goTestFlags, all)...)
	if o.raceRest {
		cmd.Env = raceEnv()
	}
	o.lower(cmd)
	command := strings.Join(slices.Concat([]string{"go", "test"}, flags), " ")
	fmt.Printf("testrun: the other packages (%s)\n", command)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	began := time.Now()
	err = cmd.Run()
	fmt.Printf("testrun: the other packages took %s\n", cost(cmd, began))
	if err != nil {
		errs = append(errs, fmt.Errorf("%s: %w", command, err))
	} else {
		// Then the fuzz targets, one after another, at the usual priority:
		// -fuzztime is wall time (niced beside the node's stories, at
		// 95abf3a, 10 of 12 targets spent it all on their baseline).
		began = time.Now()
		fuzzed, err := fuzz(ctx, o.fuzzTime, o.fuzzWorkers)
		if err != nil {
			errs = append(errs, err)
		}
		book.mu.Lock()
		fuzzCPU := book.fuzz
		book.mu.Unlock()
		fmt.Printf("testrun: the fuzz targets took %ds, %ds of CPU; %s\n", int(time.Since(began).Seconds()), int(fuzzCPU.Seconds()), fuzzed)
	}
	stopping := false
	for _, j := range jobs {
		if len(errs) > 0 && ctx.Err() == nil {
			if !stopping {
				stopping = true
				for _, other := range jobs {
					select {
					case err := <-other.done:
						other.done <- err // finished before: its own outcome stands
					default:
						other.stopped = true
					}
				}
			}
			// Nothing can pass any more: stop the background suites
			// the way an interrupt does, so they clean up.
			for _, pid := range descendants() {
				_ = syscall.Kill(pid, syscall.SIGINT)
			}
		}
		err := <-j.done
		if j.log != nil {
			os.Stdout.Write(j.log.out.Bytes())
			fmt.Print(j.log.summary(j.name, 12))
		}
		os.Stdout.Write(j.out.Bytes())
		switch {
		case j.stopped:
			fmt.Printf("testrun: %s was stopped, not failed: the run had already failed\n", j.name)
			errs = append(errs, fmt.Errorf("%s: stopped because the run had already failed", j.name))
		case err != nil:
			errs = append(errs, fmt.Errorf("%s: %w", j.name, err))
		}
		if j.cost != "" {
			fmt.Printf("testrun: %s took %s\n", j.name, j.cost)
		}
	}
	if len(jobs) > 0 {
		fmt.Printf("testrun: each suite's whole output, passing tests' logs included (go test -json), is in %s\n", o.logs)
	}
	if kept := keptArtifacts(o.start); len(kept) > 0 {
		fmt.Printf("testrun: what the failed tests kept (pods' and the manager's logs, EndpointSlice timelines, every failed call): %s\n", strings.Join(kept, " "))
	}
	return errors.Join(errs...)
}

// artifactsRoot is where a failed test keeps its artifacts, one directory
// per suite and test (harness.ArtifactsRoot; testrun does not import the
// harness).
const artifactsRoot = "bin/test-artifacts"

// keptArtifacts lists the test directories under artifactsRoot written
// since start.
func keptArtifacts(start time.Time) []string {
	dirs, _ := filepath.Glob(filepath.Join(artifactsRoot, "*", "*"))
	var out []string
	for _, d := range dirs {
		if fi, err := os.Stat(d); err == nil && fi.IsDir() && fi.ModTime().After(start) {
			out = append(out, d)
		}
	}
	return out
}

// cost is a command's wall time since began and the CPU time it and the
// descendants it waited for used (the go command waits for its compilers
// and test binaries, and they for what they start): where the machine's
// two cores went.
func cost(cmd *exec.Cmd, began time.Time) string {
	wall := int(time.Since(began).Seconds())
	if cmd.ProcessState == nil {
		return fmt.Sprintf("%ds", wall)
	}
	return fmt.Sprintf("%ds, %ds of CPU", wall, int(book.add(cmd).Seconds()))
}

// cpuBook is where the CPU of every command testrun waits for is
// written down, so that the rest of what its children used (getrusage's
// RUSAGE_CHILDREN) is known to be the orphans it reaped: the processes
// the tests started whose parents died first, reparented to testrun as
// the child subreaper (a pod's containers and their shims, a node's
// daemons, a JVM whose test binary was killed).
type cpuBook struct {
	mu     sync.Mutex
	waited time.Duration
	// fuzz is the part of waited that the fuzz phase's own commands used
	// (addFuzz): a suite that ends during that phase is not fuzzing.
	fuzz time.Duration
}

var book cpuBook

// add writes down the CPU of cmd, which has been waited for, and returns it.
func (b *cpuBook) add(cmd *exec.Cmd) time.Duration {
	if cmd.ProcessState == nil {
		return 0
	}
	cpu := cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	b.mu.Lock()
	defer b.mu.Unlock()
	b.waited += cpu
	return cpu
}

// addFuzz is add for a command of the fuzz phase.
func (b *cpuBook) addFuzz(cmd *exec.Cmd) time.Duration {
	cpu := b.add(cmd)
	b.mu.Lock()
	defer b.mu.Unlock()
	b.fuzz += cpu
	return cpu
}

// report prints where the CPU of the whole run went: the commands waited
// for (each suite's own line says its share), the fuzz phase, the orphans
// reaped, testrun itself. It reaps first: an orphan's CPU is counted when
// it is reaped.
func (b *cpuBook) report(start time.Time) {
	reap()
	var children, self unix.Rusage
	if unix.Getrusage(unix.RUSAGE_CHILDREN, &children) != nil || unix.Getrusage(unix.RUSAGE_SELF, &self) != nil {
		return
	}
	seconds := func(u unix.Rusage) time.Duration {
		return time.Duration(u.Utime.Nano() + u.Stime.Nano())
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	total := seconds(children) + seconds(self)
	orphans := max(seconds(children)-b.waited, 0)
	fmt.Printf("testrun: CPU, %ds in all over %ds: the commands it waited for %ds (the fuzz targets %ds of them), "+
		"the orphans it reaped (pods' containers, the node's daemons, processes whose parent died) %ds, testrun itself %ds; "+
		"the builds before it (make's artifacts step) are not counted\n",
		int(total.Seconds()), int(time.Since(start).Seconds()), int(b.waited.Seconds()), int(b.fuzz.Seconds()),
		int(orphans.Seconds()), int(seconds(self).Seconds()))
}

// suite is a -background or -race pattern, run by its own go test.
type suite struct {
	pattern string
	race    bool
}

func suites(patterns []string, race bool) []suite {
	var out []suite
	for _, p := range patterns {
		out = append(out, suite{pattern: p, race: race})
	}
	return out
}

// raceEnv is the environment of a go test -race: the race detector needs
// cgo, which an environment may have turned off.
func raceEnv() []string { return append(os.Environ(), "CGO_ENABLED=1") }

// raceReady says why go test -race cannot run here, or nil: it needs a C
// compiler (go env CC) to build with cgo.
func raceReady(ctx context.Context) error {
	cmd := exec.CommandContext(ctx, "go", "env", "CC")
	cmd.Env = raceEnv()
	out, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("go env CC: %w", err)
	}
	cc := strings.Fields(string(out))
	if len(cc) == 0 {
		return errors.New("the race detector needs cgo and a C compiler, and go env CC names none: install gcc (apt-get install gcc; make deps does as root)")
	}
	if _, err := exec.LookPath(cc[0]); err != nil {
		return fmt.Errorf("the race detector needs cgo and a C compiler, and there is no %s: install gcc (apt-get install gcc; make deps does as root)", cc[0])
	}
	return nil
}

// goCmd is a go command started unless ctx has ended. An interrupt does
// not kill it: the whole tree is interrupted instead (see main), and it
// ends once its test binary has cleaned up.
func goCmd(ctx context.Context, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Cancel = func() error { return nil }
	return cmd
}

// goTest is go test with args, without go test's own vet pass: make lint
// vets every package with its tests (go vet ./..., every analyzer, where go
// test runs a few), and go test's pass, on a cold build cache, runs vet over
// every dependency once more for each build configuration (plain, -race,
// each fuzz binary's). A cold run without it ran 6,591 → 2,406 vet
// processes, 289 → 91 CPU-seconds (d8b3915 → d3b49d9). Warm, its results
// are cached, and skipping it changes nothing.
func goTest(ctx context.Context, args ...string) *exec.Cmd {
	return goCmd(ctx, slices.Concat([]string{"test", "-vet=off"}, args)...)
}

// lower runs cmd in the other lanes' cgroup (o.rest) when there is one,
// else at niceness o.niceness.
func (o runOptions) lower(cmd *exec.Cmd) {
	if o.rest == nil {
		lower(cmd, o.niceness)
		return
	}
	sh, err := exec.LookPath("sh")
	if err != nil {
		fmt.Printf("testrun: %s runs at the usual priority: %v\n", cmd.Args[0], err)
		return
	}
	cmd.Args = o.rest.wrap(slices.Concat([]string{cmd.Path}, cmd.Args[1:]))
	cmd.Path = sh
}

// lower makes cmd run at niceness n (nice(1) execs it, so what it starts
// inherits the niceness and the process accounting sees the command
// itself), when n > 0. The run's length is its slowest lane's, the real
// node's suites (-first); everything else has room to wait: with a
// niceness of 10 the scheduler gives it about a tenth of a core that a
// -first suite wants, and all the cores the -first suites leave idle.
func lower(cmd *exec.Cmd, n int) {
	if n <= 0 {
		return
	}
	nice, err := exec.LookPath("nice")
	if err != nil {
		fmt.Printf("testrun: %s runs at the usual priority: %v\n", cmd.Args[0], err)
		return
	}
	cmd.Args = slices.Concat([]string{"nice", "-n", strconv.Itoa(n), cmd.Path}, cmd.Args[1:])
	cmd.Path = nice
}

func goList(ctx context.Context, pattern string) ([]string, error) {
	cmd := exec.CommandContext(ctx, "go", "list", pattern)
	out, err := cmd.Output()
	book.add(cmd)
	if err != nil {
		return nil, fmt.Errorf("go list %s: %w", pattern, err)
	}
	return strings.Fields(string(out)), nil
}

// onlyComputesEnv tells the TestMains of the job that runs only the tests
// that only compute (harness.OnlyComputesEnv; testrun does not import the
// harness).
const onlyComputesEnv = "EUREKUBE_ONLY_COMPUTES"

// onlyComputesFunc is a test that begins with harness.OnlyComputes(t).
var onlyComputesFunc = regexp.MustCompile(`(?m)^func (Test[A-Za-z0-9_]*)\(t \*testing\.T\) \{\n\tharness\.OnlyComputes\(t\)`)

// testFuncs are the functions of a package's test files that a pattern
// found: its first group, the name.
type testFuncs struct {
	pkg, dir string
	names    []string
}

// findTestFuncs reads the test files of every package of the module and
// returns, for each package with any, the functions re finds; add writes
// down the go list's CPU.
func findTestFuncs(ctx context.Context, re *regexp.Regexp, add func(*exec.Cmd) time.Duration) ([]testFuncs, error) {
	list := exec.CommandContext(ctx, "go", "list", "-f", "{{.ImportPath}} {{.Dir}}", "./...")
	out, err := list.Output()
	add(list)
	if err != nil {
		return nil, fmt.Errorf("go list: %w", err)
	}
	var found []testFuncs
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		pkg, dir, _ := strings.Cut(line, " ")
		files, _ := filepath.Glob(filepath.Join(dir, "*_test.go"))
		t := testFuncs{pkg: pkg, dir: dir}
		for _, f := range files {
			src, err := os.ReadFile(f)
			if err != nil {
				return nil, err
			}
			for _, m := range re.FindAllSubmatch(src, -1) {
				t.names = append(t.names, string(m[1]))
			}
		}
		if len(t.names) > 0 {
			found = append(found, t)
		}
	}
	return found, nil
}

// onlyComputes finds the tests that skip themselves under the race
// detector because they only compute, and their packages.
func onlyComputes(ctx context.Context) (pkgs, names []string, err error) {
	found, err := findTestFuncs(ctx, onlyComputesFunc, book.add)
	for _, t := range found {
		pkgs = append(pkgs, t.pkg)
		names = append(names, t.names...)
	}
	return pkgs, names, err
}

var fuzzFunc = regexp.MustCompile(`(?m)^func (Fuzz[A-Za-z0-9_]*)\(`)

// fuzz runs every fuzz target of the module for fuzzTime, with workers
// processes (0: go test's default, one per core).
//
// It says how many targets fuzzed: a target whose baseline (its seed
// corpus, run once instrumented) takes the whole -fuzztime fuzzes nothing,
// and is named.
func fuzz(ctx context.Context, fuzzTime string, workers int) (fuzzed string, err error) {
	found, err := findTestFuncs(ctx, fuzzFunc, book.addFuzz)
	if err != nil {
		return "", err
	}
	targets, baselineOnly := 0, []string{}
	defer func() {
		fuzzed = fmt.Sprintf("%d of %d targets fuzzed", targets-len(baselineOnly), targets)
		if len(baselineOnly) > 0 {
			fuzzed += fmt.Sprintf(" (%s: only their baseline, in %s)", strings.Join(baselineOnly, ", "), fuzzTime)
		}
	}()
	for _, pkg := range found {
		dir := pkg.dir
		for _, target := range pkg.names {
			fmt.Printf("fuzz %s %s (%s)\n", dir, target, fuzzTime)
			args := []string{"-run", "^$", "-fuzz", "^" + target + "$", "-fuzztime", fuzzTime}
			if workers > 0 {
				args = append(args, "-parallel", strconv.Itoa(workers))
			}
			var output bytes.Buffer
			cmd := goTest(ctx, append(args, dir)...)
			cmd.Stdout = io.MultiWriter(os.Stdout, &output)
			cmd.Stderr = cmd.Stdout
			err := cmd.Run()
			book.addFuzz(cmd)
			targets++
			if err == nil && !strings.Contains(output.String(), "now fuzzing") {
				baselineOnly = append(baselineOnly, target)
				fmt.Printf("testrun: fuzz %s: its baseline took the whole %s: nothing was fuzzed\n", target, fuzzTime)
			}
			if err != nil && ctx.Err() == nil && coordinatorDeadline(output.String(), target) {
				// Not the target's failure: replay its corpus (seeds
				// and testdata/fuzz) to be sure nothing known fails.
				fmt.Printf("testrun: fuzz %s: Go's fuzzing coordinator reported its own -fuzztime deadline as a failure, with no failing input (golang/go#75804, fixed in Go 1.27; it happens when a starved worker misses the deadline); replaying the target's corpus instead\n", target)
				replay := goTest(ctx, "-run", "^"+target+"$", dir)
				replay.Stdout, replay.Stderr = os.Stdout, os.Stderr
				err = replay.Run()
				book.addFuzz(replay)
			}
			if err != nil {
				return "", fmt.Errorf("fuzz %s: %w", target, err)
			}
		}
	}
	return "", nil
}

// coordinatorDeadline says whether a fuzz run's output is Go's fuzzing
// coordinator reporting its -fuzztime deadline as target's failure
// (golang/go#75804): the bare "context deadline exceeded" under the
// target's FAIL line, and no failing input written. A real finding always
// writes its input to testdata/fuzz.
func coordinatorDeadline(output, target string) bool {
	bare := regexp.MustCompile(`(?m)^--- FAIL: ` + regexp.QuoteMeta(target) + ` \([0-9.]+s\)\n\s+context deadline exceeded\n(FAIL|exit status)`)
	return bare.MatchString(output) && !strings.Contains(output, "Failing input written to")
}

// cleanUp interrupts every process left below this one, waits up to grace
// for them to end, and kills the rest.
func cleanUp(grace time.Duration) {
	left := descendants()
	if len(left) == 0 {
		return
	}
	fmt.Printf("testrun: stopping %d processes the tests left: %s\n", len(left), describe(left))
	stopAll(left, grace)
	reap()
}

// stopAll sends SIGINT to pids, waits up to grace, then SIGKILLs what is
// left. It does not reap: exec.Cmd.Wait must still see its own children.
func stopAll(pids []int, grace time.Duration) {
	for _, pid := range pids {
		_ = syscall.Kill(pid, syscall.SIGINT)
	}
	deadline := time.Now().Add(grace)
	for time.Now().Before(deadline) && slices.ContainsFunc(pids, alive) {
		time.Sleep(200 * time.Millisecond)
	}
	for _, pid := range pids {
		if alive(pid) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// reap collects the exit status of any child that ended (orphans that
// were reparented here included), once no exec.Cmd waits any more.
func reap() {
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
		if pid <= 0 || err != nil {
			return
		}
	}
}

// alive says whether pid is a process that has not ended (zombies have).
func alive(pid int) bool {
	state, _, ok := stat(pid)
	return ok && state != "Z"
}

// stat is the state letter and parent of pid from /proc/PID/stat.
func stat(pid int) (state string, ppid int, ok bool) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return "", 0, false
	}
	// pid (comm) state ppid ...; comm may hold spaces and parentheses.
	rest := string(data[bytes.LastIndexByte(data, ')')+2:])
	fields := strings.Fields(rest)
	if len(fields) < 2 {
		return "", 0, false
	}
	ppid, err = strconv.Atoi(fields[1])
	return fields[0], ppid, err == nil
}

// pids lists every process on the machine.
func pids() []int {
	entries, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range entries {
		if pid, err := strconv.Atoi(e.Name()); err == nil {
			out = append(out, pid)
		}
	}
	return out
}

// descendants are the living processes below this one.
func descendants() []int {
	parent := map[int]int{}
	for _, pid := range pids() {
		if state, ppid, ok := stat(pid); ok && state != "Z" {
			parent[pid] = ppid
		}
	}
	me := os.Getpid()
	var out []int
	for pid := range parent {
		for p := parent[pid]; p > 1; p = parent[p] {
			if p == me {
				out = append(out, pid)
				break
			}
		}
	}
	slices.Sort(out)
	return out
}

// leftovers are the living processes of earlier runs whose testrun is
// gone.
func leftovers() []int {
	var out []int
	for _, pid := range pids() {
		run, ok := environ(pid, runEnv)
		if !ok || pid == os.Getpid() {
			continue
		}
		if owner, err := strconv.Atoi(run); err == nil && owner != os.Getpid() && !alive(owner) && alive(pid) {
			out = append(out, pid)
		}
	}
	return out
}

// environ reads one variable of pid's initial environment.
func environ(pid int, name string) (string, bool) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
	if err != nil {
		return "", false
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 64<<10), len(data)+1)
	sc.Split(func(data []byte, atEOF bool) (int, []byte, error) {
		if i := bytes.IndexByte(data, 0); i >= 0 {
			return i + 1, data[:i], nil
		}
		if atEOF && len(data) > 0 {
			return len(data), data, nil
		}
		return 0, nil, nil
	})
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+"="); ok {
			return v, true
		}
	}
	return "", false
}

// describe names pids by their command, for the log.
func describe(pids []int) string {
	names := make([]string, 0, len(pids))
	for _, pid := range pids {
		comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
		names = append(names, fmt.Sprintf("%s[%d]", strings.TrimSpace(string(comm)), pid))
	}
	return strings.Join(names, " ")
}

func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}
