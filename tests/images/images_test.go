package images_test

import (
	"archive/tar"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/eurekube/eurekube/tests/harness"
	"github.com/eurekube/eurekube/tests/images"
)

const (
	testTag      = "test"
	testRevision = "0123456789abcdef0123456789abcdef01234567"
)

// built compiles the binaries once for every test of the package, as `make
// build` does, and writes the archives from them.
var built = sync.OnceValues(func() (string, error) {
	root, err := harness.RepoRoot()
	if err != nil {
		return "", err
	}
	dir, err := os.MkdirTemp("", "eurekube-images-test-")
	if err != nil {
		return "", err
	}
	if err := images.Compile(root, filepath.Join(dir, "bin"), images.All()); err != nil {
		return "", err
	}
	_, err = images.WriteAll(images.All(), images.Options{
		BinDir: filepath.Join(dir, "bin"), OutDir: filepath.Join(dir, "images"),
		Tag: testTag, Revision: testRevision,
	})
	return dir, err
})

func TestMain(m *testing.M) {
	harness.SkipSuiteWhenShort("the four static binaries built and written into image archives")
	code := m.Run()
	if dir, err := built(); err == nil {
		os.RemoveAll(dir)
	}
	os.Exit(code)
}

// archive is what a test reads back from one written image.
type archive struct {
	path   string
	binary []byte            // the binary compiled for the image
	files  map[string][]byte // regular files of the layer
	modes  map[string]*tar.Header
	layers int
}

func readArchive(t *testing.T, spec images.Spec) archive {
	t.Helper()
	dir, err := built()
	if err != nil {
		t.Fatal(err)
	}
	a := archive{path: filepath.Join(dir, "images", spec.Name+".tar"), files: map[string][]byte{}, modes: map[string]*tar.Header{}}
	if a.binary, err = os.ReadFile(filepath.Join(dir, "bin", spec.Name)); err != nil {
		t.Fatal(err)
	}
	img, err := tarball.ImageFromPath(a.path, nil)
	if err != nil {
		t.Fatalf("read %s: %v", a.path, err)
	}
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	a.layers = len(layers)
	for _, l := range layers {
		rc, err := l.Uncompressed()
		if err != nil {
			t.Fatal(err)
		}
		tr := tar.NewReader(rc)
		for {
			h, err := tr.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			a.modes[h.Name] = h
			if h.Typeflag == tar.TypeReg {
				data, err := io.ReadAll(tr)
				if err != nil {
					t.Fatal(err)
				}
				a.files[h.Name] = data
			}
		}
		rc.Close()
	}
	return a
}

func TestArchives_RunAsNonRootFromTheirEntrypoint(t *testing.T) {
	harness.OnlyComputes(t)
	for _, spec := range images.All() {
		t.Run(spec.Name, func(t *testing.T) {
			a := readArchive(t, spec)
			img, err := tarball.ImageFromPath(a.path, nil)
			if err != nil {
				t.Fatal(err)
			}
			cf, err := img.ConfigFile()
			if err != nil {
				t.Fatal(err)
			}
			c := cf.Config
			if c.User != "65532:65532" {
				t.Errorf("user %q, want 65532:65532", c.User)
			}
			if want := []string{"/" + spec.Name}; fmt.Sprint(c.Entrypoint) != fmt.Sprint(want) || len(c.Cmd) != 0 {
				t.Errorf("entrypoint %q cmd %q, want %q and no cmd", c.Entrypoint, c.Cmd, want)
			}
			var ports []string
			for p := range c.ExposedPorts {
				ports = append(ports, p)
			}
			sort.Strings(ports)
			var want []string
			for _, p := range spec.Ports {
				want = append(want, fmt.Sprintf("%d/tcp", p))
			}
			sort.Strings(want)
			if fmt.Sprint(ports) != fmt.Sprint(want) {
				t.Errorf("exposed ports %v, want %v", ports, want)
			}
			if cf.OS != "linux" || cf.Architecture != "amd64" {
				t.Errorf("platform %s/%s, want linux/amd64", cf.OS, cf.Architecture)
			}
			for key, want := range map[string]string{
				"org.opencontainers.image.version":  testTag,
				"org.opencontainers.image.revision": testRevision,
				"org.opencontainers.image.source":   "https://github.com/eurekube/eurekube",
			} {
				if got := c.Labels[key]; got != want {
					t.Errorf("label %s = %q, want %q", key, got, want)
				}
			}
			if !strings.Contains(readManifestJSON(t, a.path), `"eurekube/`+spec.Name+`:`+testTag+`"`) {
				t.Errorf("%s is not tagged eurekube/%s:%s", a.path, spec.Name, testTag)
			}
		})
	}
}

func TestArchives_HoldTheBuiltBinaryAndNoShell(t *testing.T) {
	harness.OnlyComputes(t)
	for _, spec := range images.All() {
		t.Run(spec.Name, func(t *testing.T) {
			a := readArchive(t, spec)
			if a.layers != 1 {
				t.Errorf("%d layers, want 1", a.layers)
			}
			inImage, ok := a.files[spec.Name]
			if !ok {
				t.Fatalf("no /%s in the image; files: %v", spec.Name, keys(a.files))
			}
			if got, want := sha256.Sum256(inImage), sha256.Sum256(a.binary); got != want {
				t.Errorf("/%s sha256 %s, the built binary's %s", spec.Name, hex.EncodeToString(got[:]), hex.EncodeToString(want[:]))
			}
			for _, link := range spec.Links {
				if h, ok := a.modes[link]; !ok || h.Typeflag != tar.TypeSymlink {
					t.Errorf("no link /%s to the entrypoint", link)
				}
			}
			// The entrypoint is the only executable file: no shell, no
			// busybox, nothing an attacker could exec into.
			for name, h := range a.modes {
				base := filepath.Base(strings.TrimSuffix(name, "/"))
				if strings.HasPrefix(name, "bin/") || strings.HasPrefix(name, "usr/") || base == "sh" || base == "bash" || base == "busybox" {
					t.Errorf("image holds %s", name)
				}
				if h.Typeflag == tar.TypeReg && h.Mode&0o111 != 0 && name != spec.Name {
					t.Errorf("%s is executable", name)
				}
				if h.Typeflag == tar.TypeSymlink {
					if !slices.Contains(spec.Links, name) || h.Linkname != spec.Entrypoint() {
						t.Errorf("%s links to %s; only the spec's links to the entrypoint are allowed", name, h.Linkname)
					}
					continue
				}
				if h.Typeflag != tar.TypeReg && h.Typeflag != tar.TypeDir {
					t.Errorf("%s is neither a file nor a directory (type %c)", name, h.Typeflag)
				}
			}
			if !strings.Contains(string(a.files["etc/passwd"]), ":65532:65532:") {
				t.Errorf("/etc/passwd does not name user 65532:\n%s", a.files["etc/passwd"])
			}
		})
	}
}

// An image is its binary and a few hundred KiB beside it (the CA bundle):
// nothing gets in by accident.
func TestArchives_AreTheBinaryAndLittleElse(t *testing.T) {
	harness.OnlyComputes(t)
	const overhead = 512 << 10
	for _, spec := range images.All() {
		t.Run(spec.Name, func(t *testing.T) {
			a := readArchive(t, spec)
			var others int
			for name, data := range a.files {
				if name != spec.Name {
					others += len(data)
				}
			}
			if others > overhead {
				t.Errorf("%d bytes beside the binary, want at most %d", others, overhead)
			}
			fi, err := os.Stat(a.path)
			if err != nil {
				t.Fatal(err)
			}
			if limit := int64(len(a.binary)) + overhead; fi.Size() > limit {
				t.Errorf("archive %d bytes, want at most the binary (%d) plus %d", fi.Size(), len(a.binary), overhead)
			}
			t.Logf("%s: binary %.1f MiB, archive %.1f MiB", spec.Name, float64(len(a.binary))/(1<<20), float64(fi.Size())/(1<<20))
		})
	}
}

func TestArchives_AreReproducible(t *testing.T) {
	harness.OnlyComputes(t)
	dir, err := built()
	if err != nil {
		t.Fatal(err)
	}
	again := t.TempDir()
	archives, err := images.WriteAll(images.All(), images.Options{
		BinDir: filepath.Join(dir, "bin"), OutDir: again, Tag: testTag, Revision: testRevision,
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range archives {
		first, second := fileSHA256(t, filepath.Join(dir, "images", a.Spec.Name+".tar")), fileSHA256(t, a.Path)
		if first != second {
			t.Errorf("%s: two builds from the same binary differ: %s, %s", a.Spec.Name, first, second)
		}
	}
}

func readManifestJSON(t *testing.T, path string) string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err != nil {
			t.Fatalf("%s: no manifest.json: %v", path, err)
		}
		if h.Name == "manifest.json" {
			data, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			return string(data)
		}
	}
}

func fileSHA256(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
