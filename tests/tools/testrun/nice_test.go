package main

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

// TestLower_TheCommandAndWhatItStartsRunNicer runs a shell lowered by 7:
// it and the process it starts run 7 nicer than the test, and a command
// left alone (n = 0) keeps the test's niceness.
func TestLower_TheCommandAndWhatItStartsRunNicer(t *testing.T) {
	own := niceness(t, strconv.Itoa(os.Getpid()))
	if own+7 > 19 {
		t.Skipf("the test already runs at niceness %d", own)
	}
	for _, n := range []int{0, 7} {
		// The shell's child reads its own niceness.
		cmd := exec.Command("sh", "-c", `sh -c 'cut -d" " -f19 /proc/$$/stat'`)
		lower(cmd, n)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("lower(%d): %v", n, err)
		}
		got, err := strconv.Atoi(strings.TrimSpace(string(out)))
		if err != nil {
			t.Fatalf("lower(%d): %q: %v", n, out, err)
		}
		if got != own+n {
			t.Errorf("lower(%d): the child runs at niceness %d, want %d", n, got, own+n)
		}
	}
}

// niceness reads a process's niceness from /proc/<pid>/stat.
func niceness(t *testing.T, pid string) int {
	t.Helper()
	data, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		t.Skip("no /proc:", err)
	}
	// The command name, in parentheses, may hold spaces: count from after it.
	rest := string(data[strings.LastIndexByte(string(data), ')')+2:])
	n, err := strconv.Atoi(strings.Fields(rest)[16])
	if err != nil {
		t.Fatal(err)
	}
	return n
}
