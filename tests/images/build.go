package images

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"os"
	"strconv"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// DefaultCABundle is the host's CA bundle (Debian's ca-certificates), copied
// into every image as distroless does, so a registrar can reach a Eureka
// server over HTTPS.
const DefaultCABundle = "/etc/ssl/certs/ca-certificates.crt"

// Metadata is what an image says about where it comes from.
type Metadata struct {
	// Version is the org.opencontainers.image.version label (the tag).
	Version string
	// Revision is the org.opencontainers.image.revision label (git commit).
	Revision string
	// Created stamps the config and every file; fixed for reproducibility.
	Created time.Time
	// CABundle is the PEM file installed at /etc/ssl/certs/ca-certificates.crt.
	CABundle []byte
}

// CreatedFromEnv is SOURCE_DATE_EPOCH when set (the reproducible-builds
// convention), else the Unix epoch.
func CreatedFromEnv() (time.Time, error) {
	v := os.Getenv("SOURCE_DATE_EPOCH")
	if v == "" {
		return time.Unix(0, 0).UTC(), nil
	}
	sec, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("SOURCE_DATE_EPOCH=%q: want seconds since the epoch", v)
	}
	return time.Unix(sec, 0).UTC(), nil
}

// Build assembles spec's image around binary, a static executable.
func Build(spec Spec, binary []byte, meta Metadata) (v1.Image, error) {
	if len(meta.CABundle) == 0 {
		return nil, fmt.Errorf("image %s: no CA bundle", spec.Name)
	}
	layerTar, err := rootFS(spec, binary, meta)
	if err != nil {
		return nil, fmt.Errorf("image %s: %w", spec.Name, err)
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, fmt.Errorf("image %s: layer: %w", spec.Name, err)
	}
	base := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	img, err := mutate.Append(base, mutate.Addendum{
		Layer: layer,
		History: v1.History{
			Created:   v1.Time{Time: meta.Created},
			CreatedBy: "eurekube tests/images: " + spec.Package,
			Comment:   "static binary " + spec.Entrypoint(),
		},
	})
	if err != nil {
		return nil, fmt.Errorf("image %s: %w", spec.Name, err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("image %s: config: %w", spec.Name, err)
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", "amd64"
	cf.Created = v1.Time{Time: meta.Created}
	cf.Config = v1.Config{
		User:         User,
		Entrypoint:   []string{spec.Entrypoint()},
		Env:          append([]string{"PATH=/", "SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt"}, spec.Env...),
		WorkingDir:   "/",
		Labels:       Labels(spec, meta),
		ExposedPorts: exposed(spec.Ports),
	}
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return nil, fmt.Errorf("image %s: config: %w", spec.Name, err)
	}
	return img, nil
}

// Labels are the OCI annotations every image carries.
func Labels(spec Spec, meta Metadata) map[string]string {
	return map[string]string{
		"org.opencontainers.image.title":       Repository + "/" + spec.Name,
		"org.opencontainers.image.description": spec.Description,
		"org.opencontainers.image.version":     meta.Version,
		"org.opencontainers.image.revision":    meta.Revision,
		"org.opencontainers.image.source":      Source,
		"org.opencontainers.image.licenses":    "Apache-2.0",
	}
}

func exposed(ports []int) map[string]struct{} {
	if len(ports) == 0 {
		return nil
	}
	m := make(map[string]struct{}, len(ports))
	for _, p := range ports {
		m[strconv.Itoa(p)+"/tcp"] = struct{}{}
	}
	return m
}

// passwd and group name root and distroless's nonroot user, so tools that
// look the running user up (and humans reading `id`) find a name.
const (
	passwd = "root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n"
	group  = "root:x:0:\nnonroot:x:65532:\n"
)

// rootFS is the image's only layer: a tar in a fixed order with fixed
// owners and times.
func rootFS(spec Spec, binary []byte, meta Metadata) ([]byte, error) {
	entries := []tarEntry{
		{name: "etc/", mode: 0o755},
		{name: "etc/group", mode: 0o644, data: []byte(group)},
		{name: "etc/passwd", mode: 0o644, data: []byte(passwd)},
		{name: "etc/ssl/", mode: 0o755},
		{name: "etc/ssl/certs/", mode: 0o755},
		{name: "etc/ssl/certs/ca-certificates.crt", mode: 0o644, data: meta.CABundle},
		{name: "home/", mode: 0o755},
		{name: "home/nonroot/", mode: 0o700, uid: 65532, gid: 65532},
		{name: "tmp/", mode: 0o1777},
		{name: spec.Name, mode: 0o755, data: binary},
	}
	for _, link := range spec.Links {
		entries = append(entries, tarEntry{name: link, mode: 0o777, target: spec.Entrypoint()})
	}
	return tarOf(entries, meta)
}

// tarEntry is a file, directory or symbolic link of a layer.
type tarEntry struct {
	name     string
	mode     int64
	uid, gid int
	data     []byte // nil for a directory or a link
	target   string // a symbolic link's
}

// tarOf is a layer of entries in their order, with fixed owners and
// times.
func tarOf(entries []tarEntry, meta Metadata) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Mode: e.mode, Uid: e.uid, Gid: e.gid, ModTime: meta.Created, Format: tar.FormatPAX}
		switch {
		case e.target != "":
			h.Typeflag, h.Linkname = tar.TypeSymlink, e.target
		case e.data == nil:
			h.Typeflag = tar.TypeDir
		default:
			h.Typeflag, h.Size = tar.TypeReg, int64(len(e.data))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(e.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
