package harness_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/eurekube/eurekube/tests/harness"
)

func TestEureka_TakenPortIsAClearError(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	port := l.Addr().(*net.TCPAddr).Port
	_, err = harness.StartEureka(context.Background(), harness.EurekaOptions{Port: port})
	if err == nil || !strings.Contains(err.Error(), "port "+strconv.Itoa(port)+" is taken") {
		t.Fatalf("StartEureka on a taken port: %v, want an error saying the port is taken", err)
	}
}

// pickPortsEnv makes the test binary a second process that picks ports
// (TestFreePort_TwoProcessesNeverGetTheSamePort).
const pickPortsEnv = "EUREKUBE_TEST_PICK_PORTS"

// Two processes picking ports at once, as the suites do side by side,
// never get the same one: without the reservation, 300 picks each out of
// 15,000 ports would share about six. Run as root (as CI runs), the second
// process is another user's (nobody's), as a developer's run beside a CI
// user's would be.
func TestFreePort_TwoProcessesNeverGetTheSamePort(t *testing.T) {
	const picks = 300
	pick := func() []int {
		ports := make([]int, 0, picks)
		for range picks {
			port, err := harness.FreePort()
			if err != nil {
				t.Fatal(err)
			}
			ports = append(ports, port)
		}
		return ports
	}
	if os.Getenv(pickPortsEnv) != "" {
		for _, p := range pick() {
			fmt.Println("picked", p)
		}
		return
	}
	mine := map[int]bool{}
	for _, p := range pick() {
		if mine[p] {
			t.Fatalf("port %d picked twice by one process", p)
		}
		mine[p] = true
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestFreePort_TwoProcessesNeverGetTheSamePort$", "-test.count=1")
	cmd.Env = append(os.Environ(), pickPortsEnv+"=1")
	if os.Geteuid() == 0 {
		cmd = asNobody(t, cmd)
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the second process: %v\n%s", err, out)
	}
	theirs := 0
	for line := range strings.Lines(string(out)) {
		p, ok := strings.CutPrefix(strings.TrimSpace(line), "picked ")
		if !ok {
			continue
		}
		theirs++
		if port, _ := strconv.Atoi(p); mine[port] {
			t.Errorf("port %d handed to both processes", port)
		}
	}
	if theirs != picks {
		t.Fatalf("the second process picked %d ports, want %d:\n%s", theirs, picks, out)
	}
}

// asNobody runs cmd as the user nobody (65534), from a copy of its binary
// that user may run: go test's build directory is its owner's alone.
func asNobody(t *testing.T, cmd *exec.Cmd) *exec.Cmd {
	t.Helper()
	dir, err := os.MkdirTemp("", "eurekube-nobody-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	bin, err := os.ReadFile(cmd.Path)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, filepath.Base(cmd.Path))
	if err := os.WriteFile(path, bin, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	other := exec.Command(path, cmd.Args[1:]...)
	other.Env, other.Dir = append(cmd.Env, "HOME="+dir), dir
	other.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	return other
}
