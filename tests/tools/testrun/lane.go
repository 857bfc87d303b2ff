package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// spareCPUEnv names the file holding the CPU time the other lanes' group
// has used (harness.SpareCPUEnv; testrun does not import the harness).
const spareCPUEnv = "EUREKUBE_SPARE_CPU"

// laneName is the cgroup of the other lanes, under each hierarchy's root.
// One fixed name: a run killed with SIGKILL leaves it, the next one
// reuses it.
const laneName = "eurekube-testrun-rest"

// lane is a cpu cgroup holding every command but the -first suites and
// the fuzz targets: when the node's suites want the cores, the whole group
// (however many threads it runs) weighs its shares against their
// session's 1,024 (an autogroup), not each of its threads against each of
// theirs as niceness does, or as it did inside their session; when they
// do not, it takes all that is idle. make test gives it 1,024 (at 256, a
// -race test in it starved beside a CPU-bound job).
type lane struct {
	// procs: the cgroup.procs files a process joins (v1: the cpu and the
	// cpuacct hierarchies, when they are mounted apart).
	procs []string
	// dirs: the groups made, removed at the end.
	dirs []string
	// usage: the file spareCPUEnv names.
	usage string
}

// newLane makes the group name with shares (cgroup v1 cpu.shares; on v2
// the same proportion of cpu.weight's default 100).
func newLane(name string, shares int) (*lane, error) {
	if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err == nil {
		return newLaneV2(name, shares)
	}
	cpu, acct := "/sys/fs/cgroup/cpu", "/sys/fs/cgroup/cpuacct"
	if _, err := os.Stat(filepath.Join(cpu, "cpu.shares")); err != nil {
		return nil, fmt.Errorf("no cgroup v1 cpu hierarchy at %s: %w", cpu, err)
	}
	l := &lane{}
	for _, root := range []string{cpu, acct} {
		dir := filepath.Join(root, name)
		if slices.ContainsFunc(l.dirs, func(d string) bool { return sameFile(d, dir) }) {
			continue // cpu,cpuacct mounted together
		}
		if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			return nil, err
		}
		l.dirs = append(l.dirs, dir)
		l.procs = append(l.procs, filepath.Join(dir, "cgroup.procs"))
	}
	if err := os.WriteFile(filepath.Join(cpu, name, "cpu.shares"), []byte(strconv.Itoa(shares)), 0o644); err != nil {
		return nil, err
	}
	l.usage = filepath.Join(acct, name, "cpuacct.usage")
	if _, err := os.Stat(l.usage); err != nil {
		return nil, err
	}
	return l, nil
}

func newLaneV2(name string, shares int) (*lane, error) {
	root := "/sys/fs/cgroup"
	controllers, err := os.ReadFile(filepath.Join(root, "cgroup.subtree_control"))
	if err != nil {
		return nil, err
	}
	if !slices.Contains(strings.Fields(string(controllers)), "cpu") {
		if err := os.WriteFile(filepath.Join(root, "cgroup.subtree_control"), []byte("+cpu"), 0o644); err != nil {
			return nil, fmt.Errorf("enable the cpu controller: %w", err)
		}
	}
	dir := filepath.Join(root, name)
	if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return nil, err
	}
	weight := max(1, shares*100/1024)
	if err := os.WriteFile(filepath.Join(dir, "cpu.weight"), []byte(strconv.Itoa(weight)), 0o644); err != nil {
		return nil, err
	}
	return &lane{procs: []string{filepath.Join(dir, "cgroup.procs")}, dirs: []string{dir}, usage: filepath.Join(dir, "cpu.stat")}, nil
}

func sameFile(a, b string) bool {
	sa, err := os.Stat(filepath.Dir(a))
	if err != nil {
		return false
	}
	sb, err := os.Stat(filepath.Dir(b))
	return err == nil && os.SameFile(sa, sb)
}

// wrap makes args join the group before they run: a shell writes its own
// pid to each cgroup.procs and execs them, so that what they start is in
// the group from its first instruction, and the process accounting sees
// the command itself.
func (l *lane) wrap(args []string) []string {
	var join []string
	for _, p := range l.procs {
		join = append(join, "echo $$ > "+shellQuote(p))
	}
	return slices.Concat([]string{"sh", "-c", strings.Join(join, " && ") + ` && exec "$0" "$@"`}, args)
}

func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// remove removes the group once every process in it ended (the tests'
// processes are stopped before it is called).
func (l *lane) remove() error {
	var errs []error
	for _, dir := range slices.Backward(l.dirs) {
		var err error
		for range 50 {
			if err = os.Remove(dir); err == nil || errors.Is(err, os.ErrNotExist) {
				err = nil
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("remove the other lanes' cgroup: %w", err))
		}
	}
	return errors.Join(errs...)
}
