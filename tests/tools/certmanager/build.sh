#!/usr/bin/env bash
# Builds tests/tools/certmanager — cert-manager's controllers and cainjector
# from the cert-manager module that Eurekube's go.mod requires — into a
# versioned cache directory outside the work tree, so a fresh clone on the
# same machine reuses it. Prints the binary's path.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
cd "$root"
version=$(go list -m -f '{{.Version}}' github.com/cert-manager/cert-manager)
go_version=$(go env GOVERSION)
cache=${EUREKUBE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/eurekube}
# The key changes whenever the module graph, the tool's sources or this
# script change, so a stale binary is never reused.
key=$(cat go.mod go.sum "$here"/*.go "$0" | sha256sum | cut -c1-12)
dir="$cache/cert-manager-$version-$go_version-$key"
bin="$dir/certmanager"

if [ ! -x "$bin" ]; then
  echo "building cert-manager $version (tests/tools/certmanager) into $dir (first run only)" >&2
  start=$SECONDS
  mkdir -p "$dir"
  CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o "$bin.tmp" ./tests/tools/certmanager
  mv "$bin.tmp" "$bin"
  echo "built cert-manager in $((SECONDS - start))s" >&2
fi
echo "$bin"
