// Package repo finds Eurekube's source tree from a process started in it
// (a test binary runs in its package's directory), without reading source
// file paths from the binary: those are module paths, not directories,
// when it was built with -trimpath, as `make test` builds everything.
package repo

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
)

// Root returns the directory holding Eurekube's go.mod: the working
// directory or the nearest above it.
func Root() (string, error) {
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
			return "", errors.New("not inside the Eurekube repository (no go.mod of github.com/eurekube/eurekube above the working directory)")
		}
		dir = parent
	}
}
