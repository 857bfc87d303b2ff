package images

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// Options say where WriteAll finds the binaries and puts the archives.
type Options struct {
	// BinDir holds one static binary per image, named after the image.
	BinDir string
	// OutDir receives <name>.tar per image.
	OutDir string
	// Tag of every reference (eurekube/<name>:<tag>) and the version label.
	Tag string
	// Revision is the git commit the binaries were built from.
	Revision string
	// CABundle defaults to DefaultCABundle.
	CABundle string
}

// Archive is an image written to disk.
type Archive struct {
	Spec Spec
	// Path of the archive, Ref the reference it is tagged with.
	Path, Ref string
	// Digest is the image manifest's digest.
	Digest v1.Hash
}

// WriteAll builds every spec's image from opts.BinDir and writes it to
// opts.OutDir/<name>.tar.
func WriteAll(specs []Spec, opts Options) ([]Archive, error) {
	if opts.Tag == "" {
		return nil, fmt.Errorf("images: no tag")
	}
	if opts.CABundle == "" {
		opts.CABundle = DefaultCABundle
	}
	ca, err := os.ReadFile(opts.CABundle)
	if err != nil {
		return nil, fmt.Errorf("images: CA bundle (Debian package ca-certificates): %w", err)
	}
	created, err := CreatedFromEnv()
	if err != nil {
		return nil, err
	}
	meta := Metadata{Version: opts.Tag, Revision: opts.Revision, Created: created, CABundle: ca}
	if err := os.MkdirAll(opts.OutDir, 0o755); err != nil {
		return nil, fmt.Errorf("images: %w", err)
	}
	var out []Archive
	for _, spec := range specs {
		a, err := writeOne(spec, opts, meta)
		if err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	return out, nil
}

func writeOne(spec Spec, opts Options, meta Metadata) (Archive, error) {
	binary, err := os.ReadFile(filepath.Join(opts.BinDir, spec.Name))
	if err != nil {
		return Archive{}, fmt.Errorf("image %s: binary (make build, or go build -o %s %s): %w", spec.Name, opts.BinDir, spec.Package, err)
	}
	img, err := Build(spec, binary, meta)
	if err != nil {
		return Archive{}, err
	}
	ref := spec.Ref(opts.Tag)
	tag, err := name.NewTag(ref)
	if err != nil {
		return Archive{}, fmt.Errorf("image %s: reference %q: %w", spec.Name, ref, err)
	}
	digest, err := img.Digest()
	if err != nil {
		return Archive{}, fmt.Errorf("image %s: %w", spec.Name, err)
	}
	path := filepath.Join(opts.OutDir, spec.Name+".tar")
	// Written beside and renamed, so a reader never sees half an archive.
	if err := tarball.WriteToFile(path+".tmp", tag, img); err != nil {
		return Archive{}, fmt.Errorf("image %s: write %s: %w", spec.Name, path, err)
	}
	if err := os.Rename(path+".tmp", path); err != nil {
		return Archive{}, fmt.Errorf("image %s: %w", spec.Name, err)
	}
	return Archive{Spec: spec, Path: path, Ref: ref, Digest: digest}, nil
}

// Compile builds the specs' binaries into dir with the flags of `make
// build`: static (CGO_ENABLED=0), -trimpath, stripped. root is the
// repository.
func Compile(root, dir string, specs []Spec) error {
	args := []string{"build", "-trimpath", "-ldflags=-s -w", "-o", dir + string(filepath.Separator)}
	for _, s := range specs {
		args = append(args, s.Package)
	}
	cmd := exec.Command("go", args...)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("images: go %v: %w\n%s", args, err, out)
	}
	return nil
}
