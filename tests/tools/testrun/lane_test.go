package main

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/eurekube/eurekube/tests/harness"
)

// A command run in the other lanes' group is in it, and so is what it
// starts, in every hierarchy the group was made in; its CPU time shows in
// the file the story gate reads; and the group goes once the command
// ended.
func TestLane_TheCommandAndWhatItStartsRunInTheGroup(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("making a cgroup needs root (make test runs as root)")
	}
	// A name of its own: make test runs this test inside laneName.
	name := fmt.Sprintf("eurekube-testrun-lanetest-%d", os.Getpid())
	l, err := newLane(name, 128)
	if err != nil {
		t.Fatalf("newLane: %v", err)
	}
	removed := false
	t.Cleanup(func() {
		if !removed {
			_ = l.remove()
		}
	})
	// The shell's child spins a moment, then prints its own cgroups.
	args := l.wrap([]string{"sh", "-c", `sh -c 'i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done; cat /proc/$$/cgroup'`})
	out, err := exec.Command(args[0], args[1:]...).CombinedOutput()
	if err != nil {
		t.Fatalf("%q: %v: %s", args, err, out)
	}
	if in := strings.Count(string(out), ":/"+name+"\n"); in != len(l.dirs) {
		t.Errorf("the command's child is in the group in %d hierarchies, want %d (%s):\n%s", in, len(l.dirs), strings.Join(l.dirs, ", "), out)
	}
	used, err := os.ReadFile(l.usage)
	if err != nil || strings.TrimSpace(string(used)) == "0" || strings.HasPrefix(string(used), "usage_usec 0\n") {
		t.Errorf("%s says %q (%v): the group's CPU time is not counted", l.usage, used, err)
	}
	if err := l.remove(); err != nil {
		t.Fatal(err)
	}
	removed = true
	for _, dir := range l.dirs {
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Errorf("%s left behind (%v)", dir, err)
		}
	}
}

func TestSpareCPUEnvIsTheHarnesss(t *testing.T) {
	if spareCPUEnv != harness.SpareCPUEnv {
		t.Errorf("testrun sets %s, the harness reads %s", spareCPUEnv, harness.SpareCPUEnv)
	}
}
