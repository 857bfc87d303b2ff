package images

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// JVMApp is an image that runs a Java application (a Spring Boot fat jar)
// on a Java runtime linked with jlink from the host's JDK, beside the
// shared libraries that runtime needs (ldd) and the files every image of
// the project has: no shell, no package manager, user 65532:65532, so its
// pods pass Pod Security "restricted". It is not one of All(): the tests
// that run a JVM in a pod build it from an artifact (JVMArchive).
//
// Two layers: the runtime with its libraries, then the jar, so a changed
// application shares the runtime's layer.
type JVMApp struct {
	// Name is the image's name under Repository.
	Name string
	// Jar is the application's executable jar, run as java -jar /app.jar.
	Jar string
	// JavaHome is the JDK jlink links the runtime from (with its jmods);
	// default: the JDK of the java on PATH.
	JavaHome string
	// Modules the runtime holds; default JVMModules.
	Modules []string
	// Ports the application listens on (EXPOSE), TCP.
	Ports []int
	// Description is the org.opencontainers.image.description label.
	Description string
}

// JVMModules is a runtime for Spring Boot apps: Java SE, with the JDK's
// Unsafe access, elliptic curves for TLS, DNS for JNDI and zip file
// systems.
var JVMModules = []string{"java.se", "jdk.unsupported", "jdk.crypto.ec", "jdk.crypto.cryptoki", "jdk.management", "jdk.naming.dns", "jdk.zipfs"}

// JVMRuntimeDir is where the runtime lies in the image; its java is the
// entrypoint.
const JVMRuntimeDir = "/opt/java"

// jvmFormat changes whenever what JVMArchive writes does, so cached
// archives of an older shape are not reused.
const jvmFormat = "jvm-1"

// JVMArchive builds app's image once and writes it to
// dir/<name>-<key>.tar, tagged eurekube/<name>:<tag>, where key covers
// the jar, the JDK's release, the modules and the tag: a second call with
// the same inputs finds the archive and builds nothing. The jlinked runtime
// is cached beside it (dir/jvm-runtime-<key>).
func JVMArchive(app JVMApp, tag, dir string) (Archive, error) {
	spec := Spec{Name: app.Name, Package: app.Jar, Ports: app.Ports, Description: app.Description}
	if app.JavaHome == "" {
		java, err := exec.LookPath("java")
		if err != nil {
			return Archive{}, fmt.Errorf("image %s: java not found: install a JDK 17+ (make deps)", app.Name)
		}
		if java, err = filepath.EvalSymlinks(java); err != nil {
			return Archive{}, fmt.Errorf("image %s: %w", app.Name, err)
		}
		app.JavaHome = filepath.Dir(filepath.Dir(java))
	}
	if len(app.Modules) == 0 {
		app.Modules = JVMModules
	}
	release, err := os.ReadFile(filepath.Join(app.JavaHome, "release"))
	if err != nil {
		return Archive{}, fmt.Errorf("image %s: the JDK at %s: %w", app.Name, app.JavaHome, err)
	}
	runtimeKey := hashOf(jvmFormat, string(release), strings.Join(app.Modules, ","))
	jar, err := os.Open(app.Jar)
	if err != nil {
		return Archive{}, fmt.Errorf("image %s: %w", app.Name, err)
	}
	h := sha256.New()
	_, err = io.Copy(h, jar)
	jar.Close()
	if err != nil {
		return Archive{}, fmt.Errorf("image %s: %w", app.Name, err)
	}
	key := hashOf(runtimeKey, hex.EncodeToString(h.Sum(nil)), tag)
	ref := spec.Ref(tag)
	out := filepath.Join(dir, app.Name+"-"+key+".tar")
	if _, err := os.Stat(out); err == nil {
		return Archive{Spec: spec, Path: out, Ref: ref}, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return Archive{}, fmt.Errorf("image %s: %w", app.Name, err)
	}
	runtime := filepath.Join(dir, "jvm-runtime-"+runtimeKey)
	if err := jlink(app.JavaHome, runtime, app.Modules); err != nil {
		return Archive{}, fmt.Errorf("image %s: %w", app.Name, err)
	}
	ca, err := os.ReadFile(DefaultCABundle)
	if err != nil {
		return Archive{}, fmt.Errorf("image %s: CA bundle (Debian package ca-certificates): %w", app.Name, err)
	}
	created, err := CreatedFromEnv()
	if err != nil {
		return Archive{}, err
	}
	img, err := BuildJVM(spec, runtime, app.Jar, Metadata{Version: tag, Created: created, CABundle: ca})
	if err != nil {
		return Archive{}, err
	}
	t, err := name.NewTag(ref)
	if err != nil {
		return Archive{}, fmt.Errorf("image %s: reference %q: %w", app.Name, ref, err)
	}
	digest, err := img.Digest()
	if err != nil {
		return Archive{}, fmt.Errorf("image %s: %w", app.Name, err)
	}
	if err := tarball.WriteToFile(out+".tmp", t, img); err != nil {
		return Archive{}, fmt.Errorf("image %s: write %s: %w", app.Name, out, err)
	}
	if err := os.Rename(out+".tmp", out); err != nil {
		return Archive{}, fmt.Errorf("image %s: %w", app.Name, err)
	}
	return Archive{Spec: spec, Path: out, Ref: ref, Digest: digest}, nil
}

func hashOf(parts ...string) string {
	h := sha256.New()
	for _, p := range parts {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))[:12]
}

// jlink links a runtime of modules from the JDK at javaHome into dir,
// unless dir already holds one.
func jlink(javaHome, dir string, modules []string) error {
	if _, err := os.Stat(filepath.Join(dir, "release")); err == nil {
		return nil
	}
	tmp := dir + ".tmp"
	if err := os.RemoveAll(tmp); err != nil {
		return err
	}
	cmd := exec.Command(filepath.Join(javaHome, "bin", "jlink"),
		"--module-path", filepath.Join(javaHome, "jmods"), "--add-modules", strings.Join(modules, ","),
		"--strip-debug", "--no-header-files", "--no-man-pages", "--compress=2", "--output", tmp)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("jlink (the JDK's jmods, Debian package openjdk-17-jdk-headless): %w\n%s", err, out)
	}
	return os.Rename(tmp, dir)
}

// BuildJVM assembles the image of spec around the runtime directory (a
// jlinked Java runtime) and the jar.
func BuildJVM(spec Spec, runtime, jar string, meta Metadata) (v1.Image, error) {
	if len(meta.CABundle) == 0 {
		return nil, fmt.Errorf("image %s: no CA bundle", spec.Name)
	}
	base, err := jvmBaseLayer(runtime, meta)
	if err != nil {
		return nil, fmt.Errorf("image %s: %w", spec.Name, err)
	}
	data, err := os.ReadFile(jar)
	if err != nil {
		return nil, fmt.Errorf("image %s: %w", spec.Name, err)
	}
	app, err := tarOf([]tarEntry{{name: "app.jar", mode: 0o644, data: data}}, meta)
	if err != nil {
		return nil, fmt.Errorf("image %s: %w", spec.Name, err)
	}
	img := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	for _, l := range []struct {
		tar     []byte
		comment string
	}{{base, "a Java runtime (jlink) and the shared libraries it needs"}, {app, "the application's jar"}} {
		layerTar := l.tar
		layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
			return io.NopCloser(bytes.NewReader(layerTar)), nil
		}, tarball.WithMediaType(types.OCILayer), tarball.WithCompressionLevel(gzip.BestSpeed))
		if err != nil {
			return nil, fmt.Errorf("image %s: layer: %w", spec.Name, err)
		}
		img, err = mutate.Append(img, mutate.Addendum{Layer: layer, History: v1.History{
			Created: v1.Time{Time: meta.Created}, CreatedBy: "eurekube tests/images: JVMArchive", Comment: l.comment,
		}})
		if err != nil {
			return nil, fmt.Errorf("image %s: %w", spec.Name, err)
		}
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("image %s: config: %w", spec.Name, err)
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", "amd64"
	cf.Created = v1.Time{Time: meta.Created}
	cf.Config = v1.Config{
		User:       User,
		Entrypoint: []string{JVMRuntimeDir + "/bin/java", "-jar", "/app.jar"},
		Env: []string{"PATH=" + JVMRuntimeDir + "/bin", "SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt",
			"JAVA_HOME=" + JVMRuntimeDir, "LD_LIBRARY_PATH=" + JVMRuntimeDir + "/lib:/lib/x86_64-linux-gnu:/usr/lib/x86_64-linux-gnu"},
		WorkingDir:   "/",
		Labels:       Labels(spec, meta),
		ExposedPorts: exposed(spec.Ports),
	}
	return mutate.ConfigFile(img, cf)
}

// jvmBaseLayer is the files every image has, the runtime under
// JVMRuntimeDir and each shared library its programs and libraries load
// from outside it, at the path ldd names (the dynamic loader included).
func jvmBaseLayer(runtime string, meta Metadata) ([]byte, error) {
	files := map[string]tarEntry{
		"etc/group":                         {mode: 0o644, data: []byte(group)},
		"etc/passwd":                        {mode: 0o644, data: []byte(passwd)},
		"etc/ssl/certs/ca-certificates.crt": {mode: 0o644, data: meta.CABundle},
		"home/nonroot/":                     {mode: 0o700, uid: 65532, gid: 65532},
		"tmp/":                              {mode: 0o1777},
	}
	var elves []string
	root := strings.TrimPrefix(JVMRuntimeDir, "/")
	err := filepath.WalkDir(runtime, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(runtime, p)
		if err != nil {
			return err
		}
		target := path.Join(root, filepath.ToSlash(rel))
		info, err := os.Stat(p) // a link's target: the image holds files
		if err != nil {
			return err
		}
		if info.IsDir() {
			files[target+"/"] = tarEntry{mode: 0o755}
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		mode := int64(0o644)
		if info.Mode()&0o111 != 0 {
			mode = 0o755
		}
		files[target] = tarEntry{mode: mode, data: data}
		if bytes.HasPrefix(data, []byte(elf.ELFMAG)) {
			elves = append(elves, p)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("runtime %s: %w", runtime, err)
	}
	libs, err := sharedLibraries(runtime, elves)
	if err != nil {
		return nil, err
	}
	for _, lib := range libs {
		data, err := os.ReadFile(lib) // through links: the library itself
		if err != nil {
			return nil, err
		}
		files[strings.TrimPrefix(lib, "/")] = tarEntry{mode: 0o755, data: data}
	}
	// Every parent directory, once.
	for name := range files {
		for dir := path.Dir(strings.TrimSuffix(name, "/")); dir != "."; dir = path.Dir(dir) {
			if _, ok := files[dir+"/"]; !ok {
				files[dir+"/"] = tarEntry{mode: 0o755}
			}
		}
	}
	names := make([]string, 0, len(files))
	for name := range files {
		names = append(names, name)
	}
	sort.Strings(names)
	entries := make([]tarEntry, len(names))
	for i, name := range names {
		e := files[name]
		e.name = name
		entries[i] = e
	}
	return tarOf(entries, meta)
}

// sharedLibraries are the libraries outside runtime that ldd finds for
// the ELF files, each once, by the path the loader opens.
func sharedLibraries(runtime string, elves []string) ([]string, error) {
	var libs []string
	for _, f := range elves {
		out, err := exec.Command("ldd", f).Output()
		if err != nil {
			// ldd refuses a file that is not dynamic: nothing to add.
			continue
		}
		sc := bufio.NewScanner(bytes.NewReader(out))
		for sc.Scan() {
			fields := strings.Fields(sc.Text())
			var p string
			switch {
			case len(fields) >= 3 && fields[1] == "=>":
				p = fields[2]
			case len(fields) >= 1 && strings.HasPrefix(fields[0], "/"):
				p = fields[0] // the dynamic loader
			}
			if !strings.HasPrefix(p, "/") || strings.HasPrefix(p, runtime+"/") || slices.Contains(libs, p) {
				continue // not found (loaded by the runtime itself), the vDSO, or the runtime's own
			}
			libs = append(libs, p)
		}
	}
	sort.Strings(libs)
	if len(libs) == 0 {
		return nil, fmt.Errorf("ldd found no shared library for %d files of %s (is ldd, Debian package libc-bin, installed?)", len(elves), runtime)
	}
	return libs, nil
}
