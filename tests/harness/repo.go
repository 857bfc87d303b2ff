package harness

import (
	"bytes"
	_ "embed"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/eurekube/eurekube/internal/repo"
)

// RepoRoot returns the directory holding Eurekube's go.mod.
func RepoRoot() (string, error) {
	root, err := repo.Root()
	if err != nil {
		return "", fmt.Errorf("harness: %w", err)
	}
	return root, nil
}

var buildMu sync.Mutex

// BuildArtifact returns env's value when set, else runs the repository
// script that builds (or finds cached) the artifact and prints its path.
func BuildArtifact(env, script string) (string, error) {
	if v := os.Getenv(env); v != "" {
		return v, nil
	}
	buildMu.Lock()
	defer buildMu.Unlock()
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	cmd := exec.Command(filepath.Join(root, script))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("%s failed (set %s to skip it): %w\n%s", script, env, err, tail(stderr.String(), 2000))
	}
	path := strings.TrimSpace(string(out))
	if i := strings.LastIndexByte(path, '\n'); i >= 0 {
		path = path[i+1:]
	}
	return path, nil
}

// Ports FreePort picks from: below the kernel's ephemeral range (32768 and
// up by default), where a port asked for with :0 or taken by an outgoing
// connection comes from, and below the NodePort range (30000-32767). A
// port picked with :0 is free when picked, but a JVM binds it tens of
// seconds later on a busy machine, and by then any of the thousands of
// connections the suites open may hold it (seen: Eureka failing to start
// on a port a parallel package's client had taken).
const (
	freePortLow  = 15000
	freePortHigh = 29999
)

// FreePort returns a TCP port, free on every address a moment ago, that no
// outgoing connection will take, and that no other FreePort of any process
// on this machine returns while this process lives (reservePort).
func FreePort() (int, error) {
	for range 100 {
		port := freePortLow + rand.IntN(freePortHigh-freePortLow+1)
		if !reservePort(port) {
			continue
		}
		l, err := net.Listen("tcp", net.JoinHostPort("0.0.0.0", strconv.Itoa(port)))
		if err != nil {
			continue
		}
		l.Close()
		return port, nil
	}
	return 0, fmt.Errorf("find a free port: none of 100 tried from %d to %d was free", freePortLow, freePortHigh)
}

// portHolder says what listens on port now, as ss sees it, for an error
// about a port already taken; empty when ss cannot tell.
func portHolder(port int) string {
	out, err := exec.Command("ss", "-Htlnp", fmt.Sprintf("sport = :%d", port)).Output()
	if err != nil || len(bytes.TrimSpace(out)) == 0 {
		return ""
	}
	return fmt.Sprintf("\nlistening on port %d now (ss -tlnp): %s", port, strings.TrimSpace(string(out)))
}

// PortReservations is the directory where FreePort's picks are locked, one
// file per port, shared by every test process of the machine.
var PortReservations = filepath.Join(os.TempDir(), "eurekube-ports")

// reserved holds the locked files open: a lock lasts as long as the
// process that took it, and the kernel lets it go when that process ends,
// however it ends.
var reserved struct {
	sync.Mutex
	files []*os.File
}

// reservePort locks port's file in PortReservations, and is false when
// another picker holds it: a port is picked in one process and bound by a
// JVM tens of seconds later, and two processes (the suites run side by
// side), or two picks of one, could otherwise both be handed it in that
// time. Seen: a Spring client failing to start on a port already in use.
// Without the directory, the bind check alone decides.
//
// The directory is shared by every user, as /tmp is (world-writable and
// sticky: no user removes another's file), and a file is opened read-only,
// which flock needs no more than: a CI user's run and a developer's beside
// it lock the same ports.
func reservePort(port int) bool {
	if err := os.MkdirAll(PortReservations, 0o777); err != nil {
		return true
	}
	// MkdirAll's mode passes the umask and drops the sticky bit; the
	// directory's owner sets both (another user cannot, and need not).
	_ = os.Chmod(PortReservations, os.ModeSticky|0o777)
	f, err := os.OpenFile(filepath.Join(PortReservations, strconv.Itoa(port)), os.O_CREATE|os.O_RDONLY, 0o444)
	if err != nil {
		return true
	}
	// flock locks an open file description: a second open of the same
	// file, in this process too, cannot take it.
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return false
	}
	reserved.Lock()
	reserved.files = append(reserved.files, f)
	reserved.Unlock()
	return true
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}

// BuildTemp builds pkg (BuildBinary) into a new temporary directory, for a
// suite's TestMain; cleanup removes the directory.
func BuildTemp(pkg string) (bin string, cleanup func(), err error) {
	dir, err := os.MkdirTemp("", "eurekube-"+filepath.Base(pkg)+"-")
	if err != nil {
		return "", nil, err
	}
	if bin, err = BuildBinary(pkg, dir); err != nil {
		os.RemoveAll(dir)
		return "", nil, err
	}
	return bin, func() { os.RemoveAll(dir) }, nil
}

// BuildBinary compiles a main package of the repository (such as
// "./cmd/registrar") statically into dir and returns the binary's path.
func BuildBinary(pkg, dir string) (string, error) {
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	out := filepath.Join(dir, filepath.Base(pkg))
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", out, pkg)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if msg, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build %s: %w\n%s", pkg, err, msg)
	}
	return out, nil
}

// jvmTestFlags start every JVM the harness runs: tests start them often,
// so they trade peak speed for start-up time. tests/tools/maven-jar.sh
// trains the class-data sharing archives with the same file.
var jvmTestFlags = strings.Fields(jvmTestFlagsFile)

//go:embed jvm-test-flags
var jvmTestFlagsFile string

// JavaJar is the java arguments that run jar: the extracted copy and the
// class-data sharing archive that tests/tools/maven-jar.sh writes beside
// it when both are there (a start then needs about half the CPU), the jar
// itself otherwise.
func JavaJar(jar string) []string {
	cds := strings.TrimSuffix(jar, ".jar") + ".cds"
	archive, app := filepath.Join(cds, "app.jsa"), filepath.Join(cds, "app.jar")
	if _, err := os.Stat(archive); err != nil {
		return []string{"-jar", jar}
	}
	if _, err := os.Stat(app); err != nil {
		return []string{"-jar", jar}
	}
	// -Xshare:auto (the default): a JVM that cannot map the archive runs
	// without it. Its warnings would only fill the logs.
	return []string{"-XX:SharedArchiveFile=" + archive, "-Xlog:cds=off", "-Xlog:cds+dynamic=off", "-jar", app}
}
