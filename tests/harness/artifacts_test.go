package harness

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fakeT is a test whose failure and cleanups the test drives.
type fakeT struct {
	testing.TB
	name     string
	failed   bool
	cleanups []func()
	logs     []string
}

func (f *fakeT) Name() string                 { return f.name }
func (f *fakeT) Failed() bool                 { return f.failed }
func (f *fakeT) Helper()                      {}
func (f *fakeT) Cleanup(fn func())            { f.cleanups = append(f.cleanups, fn) }
func (f *fakeT) Logf(format string, a ...any) { f.logs = append(f.logs, format) }

// end runs the cleanups as testing does: last registered first.
func (f *fakeT) end() {
	for i := len(f.cleanups) - 1; i >= 0; i-- {
		f.cleanups[i]()
	}
}

func TestArtifacts_APassingTestWritesNothing(t *testing.T) {
	root := t.TempDir()
	ft := &fakeT{name: "TestPasses"}
	a := newArtifacts(ft, root, "suite")
	a.OnFailure(func(a *Artifacts) { a.Write("never.txt", []byte("x")) })
	ft.end()
	if entries, _ := os.ReadDir(root); len(entries) != 0 {
		t.Fatalf("a passing test wrote %v", entries)
	}
	if len(ft.logs) != 0 {
		t.Fatalf("a passing test logged %q", ft.logs)
	}
}

func TestArtifacts_AFailedTestKeepsItsFilesAndNamesTheDirectory(t *testing.T) {
	root := t.TempDir()
	stale := filepath.Join(root, "suite", "TestOld", "old.txt")
	if err := os.MkdirAll(filepath.Dir(stale), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(stale, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	src := filepath.Join(t.TempDir(), "proxy.log")
	if err := os.WriteFile(src, []byte("before\nafter\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ft := &fakeT{name: "TestFails/sub case: one"}
	a := newArtifacts(ft, root, "suite")
	a.OnFailure(func(a *Artifacts) {
		a.Write("calls/failed.txt", []byte("a call"))
		a.CopyFrom("proxy.log", src, int64(len("before\n")))
	})
	ft.failed = true
	ft.end()

	dir := filepath.Join(root, "suite", "TestFails", "sub_case__one")
	if a.Dir() != dir {
		t.Fatalf("Dir() = %s, want %s", a.Dir(), dir)
	}
	for name, want := range map[string]string{"calls/failed.txt": "a call", "proxy.log": "after\n"} {
		got, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil || string(got) != want {
			t.Errorf("%s: %q, %v; want %q", name, got, err, want)
		}
	}
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Errorf("the last run's artifacts are still there: %v", err)
	}
	if len(ft.logs) != 1 || !strings.Contains(ft.logs[0], "artifacts of this failure") {
		t.Errorf("logged %q, want the directory named once", ft.logs)
	}
}

func TestArtifacts_NamesAreSafePaths(t *testing.T) {
	for name, want := range map[string]string{
		"TestA":         "TestA",
		"TestA/b c":     filepath.Join("TestA", "b_c"),
		"TestA/../..":   filepath.Join("TestA", "_", "_"),
		"TestA/x:y'z#1": filepath.Join("TestA", "x_y_z_1"),
	} {
		if got := testPath(name); got != want {
			t.Errorf("testPath(%q) = %q, want %q", name, got, want)
		}
	}
}
