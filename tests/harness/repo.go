package harness

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
)

// RepoRoot returns the directory holding Eurekube's go.mod.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if data, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil && bytes.HasPrefix(data, []byte("module github.com/eurekube/eurekube\n")) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("harness: not inside the Eurekube repository (no go.mod of github.com/eurekube/eurekube above the working directory)")
		}
		dir = parent
	}
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

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
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
