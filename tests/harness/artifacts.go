package harness

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// ArtifactsRoot is where failed tests keep what explains them, relative to
// the repository's root: outside every temporary directory, so it outlives
// the run, beside the runner's bin/test-logs.
const ArtifactsRoot = "bin/test-artifacts"

// Artifacts is what one test keeps should it fail, in
// bin/test-artifacts/<suite>/<test>/ (a subtest's in its parent's, one
// directory per level of its name). Nothing is written while the test
// passes: each keeper registered with OnFailure runs only once the test
// has failed, and the directory is made by the first file written.
//
// The first Artifacts of a suite in a test binary removes the suite's
// directory: what is there is the last run's.
type Artifacts struct {
	t   testing.TB
	dir string

	mu      sync.Mutex
	written int
}

var clearedSuites sync.Map // suite → struct{}: its old artifacts removed

// NewArtifacts returns t's Artifacts for suite (such as "cluster"). When t
// has failed, its last cleanup names the directory (t.Log), so the failure
// message ends with where to look.
func NewArtifacts(t testing.TB, suite string) *Artifacts {
	t.Helper()
	root, err := RepoRoot()
	if err != nil {
		// No repository: keep them where the test runs, still outside a
		// temporary directory.
		root = "."
	}
	return newArtifacts(t, filepath.Join(root, ArtifactsRoot), suite)
}

func newArtifacts(t testing.TB, root, suite string) *Artifacts {
	suiteDir := filepath.Join(root, pathElement(suite))
	if _, done := clearedSuites.LoadOrStore(suiteDir, struct{}{}); !done {
		_ = os.RemoveAll(suiteDir)
	}
	a := &Artifacts{t: t, dir: filepath.Join(suiteDir, testPath(t.Name()))}
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		a.mu.Lock()
		n := a.written
		a.mu.Unlock()
		if n > 0 {
			t.Logf("artifacts of this failure (%d files): %s", n, a.dir)
		}
	})
	return a
}

// Dir is the test's artifacts directory (made by the first write).
func (a *Artifacts) Dir() string { return a.dir }

// OnFailure runs keep, once the test has failed, when the test's cleanups
// reach it: cleanups run last registered first, so register it right after
// starting what it reads, and it runs before that is stopped or deleted.
func (a *Artifacts) OnFailure(keep func(*Artifacts)) {
	a.t.Cleanup(func() {
		if a.t.Failed() {
			keep(a)
		}
	})
}

// Write writes data into the file name (a path under the directory), and
// says in the test's log why it could not.
func (a *Artifacts) Write(name string, data []byte) {
	if err := a.write(name, func(f *os.File) error { _, err := f.Write(data); return err }); err != nil {
		a.t.Logf("keep %s: %v", name, err)
	}
}

// Copy copies the file src into name.
func (a *Artifacts) Copy(name, src string) {
	if err := a.copyFile(name, src, 0); err != nil {
		a.t.Logf("keep %s: %v", name, err)
	}
}

// CopyFrom copies the file src from byte offset on into name: the part of a
// shared log written since the test began.
func (a *Artifacts) CopyFrom(name, src string, offset int64) {
	if err := a.copyFile(name, src, offset); err != nil {
		a.t.Logf("keep %s: %v", name, err)
	}
}

// CopyDir copies every regular file under the directory src into the
// directory name.
func (a *Artifacts) CopyDir(name, src string) {
	err := filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		return a.copyFile(filepath.Join(name, rel), path, 0)
	})
	if err != nil {
		a.t.Logf("keep %s: %v", name, err)
	}
}

// KeepLog keeps p's output as name once the test has failed; register it
// after p's own stop, as OnFailure says.
func (a *Artifacts) KeepLog(name string, p *Process) {
	a.OnFailure(func(a *Artifacts) { a.Copy(name, p.LogPath()) })
}

func (a *Artifacts) copyFile(name, src string, offset int64) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	if offset > 0 {
		if _, err := in.Seek(offset, io.SeekStart); err != nil {
			return err
		}
	}
	return a.write(name, func(f *os.File) error { _, err := io.Copy(f, in); return err })
}

func (a *Artifacts) write(name string, fill func(*os.File) error) error {
	path := filepath.Join(a.dir, filepath.Clean("/" + name)[1:])
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	err = fill(f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	a.mu.Lock()
	a.written++
	a.mu.Unlock()
	return nil
}

// testPath is a test's name as a relative path: a directory per level of
// subtests, each a safe file name.
func testPath(name string) string {
	parts := strings.Split(name, "/")
	for i, p := range parts {
		parts[i] = pathElement(p)
	}
	return filepath.Join(parts...)
}

// pathElement keeps letters, digits, '-', '_' and '.' and turns anything
// else into '_'; it is never "", "." or "..".
func pathElement(s string) string {
	b := []byte(s)
	for i, c := range b {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '-', c == '_', c == '.':
		default:
			b[i] = '_'
		}
	}
	if s := strings.Trim(string(b), "."); s != "" {
		return string(b)
	}
	return "_"
}

// KeepSuiteSetup copies the directory of logs of a suite's setup that
// failed (its TestMain's) into bin/test-artifacts/<suite>/setup/ and
// returns that directory.
func KeepSuiteSetup(suite, logs string) (string, error) {
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	dir := filepath.Join(root, ArtifactsRoot, pathElement(suite), "setup")
	if err := os.RemoveAll(dir); err != nil {
		return "", err
	}
	err = filepath.WalkDir(logs, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		rel, err := filepath.Rel(logs, path)
		if err != nil {
			return err
		}
		return copyFileTo(filepath.Join(dir, rel), path)
	})
	return dir, err
}

func copyFileTo(dst, src string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	_, err = io.Copy(out, in)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	return err
}
