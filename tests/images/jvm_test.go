package images_test

import (
	"archive/tar"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/eurekube/eurekube/tests/harness"
	"github.com/eurekube/eurekube/tests/images"
)

// The JVM image holds everything java needs: unpacked alone, its java
// runs (in a chroot of it, as root) with nothing of the host. Its jar is
// any file here: the test runs java -version, not the app.
func TestJVMArchive_JavaRunsFromTheImagesOwnFiles(t *testing.T) {
	harness.OnlyComputes(t)
	if _, err := exec.LookPath("jlink"); err != nil {
		t.Skip("no jlink: install a JDK 17+ (make deps)")
	}
	dir := t.TempDir()
	// The runtime and archive are cached where the suites cache what they
	// build, so jlink runs once per JDK, not in every run.
	cache := dir
	if c := os.Getenv("EUREKUBE_CACHE"); c != "" {
		cache = filepath.Join(c, "images-test")
	}
	jar := filepath.Join(dir, "app.jar")
	if err := os.WriteFile(jar, []byte("not a jar"), 0o644); err != nil {
		t.Fatal(err)
	}
	app := images.JVMApp{Name: "jvm-test", Jar: jar, Modules: []string{"java.base"}, Ports: []int{8080}}
	a, err := images.JVMArchive(app, testTag, cache)
	if err != nil {
		t.Fatal(err)
	}
	again, err := images.JVMArchive(app, testTag, cache)
	if err != nil || again.Path != a.Path {
		t.Fatalf("a second build wrote %s (%v), want the cached %s", again.Path, err, a.Path)
	}
	img, err := tarball.ImageFromPath(a.Path, nil)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cf.Config.User != images.User || strings.Join(cf.Config.Entrypoint, " ") != images.JVMRuntimeDir+"/bin/java -jar /app.jar" {
		t.Errorf("user %q, entrypoint %q", cf.Config.User, cf.Config.Entrypoint)
	}
	root := filepath.Join(dir, "rootfs")
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range layers {
		rc, err := l.Uncompressed()
		if err != nil {
			t.Fatal(err)
		}
		unpack(t, rc, root)
		rc.Close()
	}
	for _, f := range []string{"app.jar", "opt/java/bin/java", "lib64/ld-linux-x86-64.so.2", "lib/x86_64-linux-gnu/libc.so.6", "etc/passwd"} {
		if _, err := os.Stat(filepath.Join(root, f)); err != nil {
			t.Errorf("the image lacks /%s: %v", f, err)
		}
	}
	if os.Geteuid() != 0 {
		t.Log("not root: java not run in a chroot of the image")
		return
	}
	cmd := exec.Command("chroot", root, images.JVMRuntimeDir+"/bin/java", "-version")
	cmd.Env = cf.Config.Env
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("java -version in the image: %v\n%s", err, out)
	}
	t.Logf("in the image: %s", strings.SplitN(string(out), "\n", 2)[0])
}

func unpack(t *testing.T, r io.Reader, root string) {
	t.Helper()
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(root, h.Name)
		switch h.Typeflag {
		case tar.TypeDir:
			err = os.MkdirAll(p, 0o755)
		case tar.TypeReg:
			if err = os.MkdirAll(filepath.Dir(p), 0o755); err == nil {
				var data []byte
				if data, err = io.ReadAll(tr); err == nil {
					err = os.WriteFile(p, data, os.FileMode(h.Mode)&0o777)
				}
			}
		default:
			t.Fatalf("%s: unexpected type %c", h.Name, h.Typeflag)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}
