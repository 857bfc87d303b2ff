#!/usr/bin/env bash
# Builds the helm command (helm.sh/helm/v4) from its Go module, with no
# download other than the Go module proxy, into a versioned cache directory
# outside the work tree, so a fresh clone on the same machine reuses it.
# Idempotent. Prints the binary's path.
set -euo pipefail

version=v4.3.1
go_version=$(go env GOVERSION)
cache=${EUREKUBE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/eurekube}
# The name changes whenever the pinned version, the Go toolchain or this
# script changes, so a stale binary is never reused.
key=$(sha256sum <"$0" | cut -c1-12)
bin="$cache/tools/helm-$version-$go_version-$key"

if [ ! -x "$bin" ]; then
  echo "building helm $version into $bin (first run only: minutes)" >&2
  start=$SECONDS
  mkdir -p "$cache/tools"
  gobin=$(mktemp -d "$cache/tools/helm-build.XXXXXX")
  trap 'rm -rf "$gobin"' EXIT
  GOBIN=$gobin CGO_ENABLED=0 go install -trimpath -ldflags="-s -w" "helm.sh/helm/v4/cmd/helm@$version"
  mv "$gobin/helm" "$bin"
  echo "built helm in $((SECONDS - start))s" >&2
fi
echo "$bin"
