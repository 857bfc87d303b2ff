#!/usr/bin/env bash
# Builds CoreDNS (github.com/coredns/coredns, with its default plugins, the
# kubernetes plugin among them) from its Go module, with no download other
# than the Go module proxy, into a versioned cache directory outside the
# work tree, so a fresh clone on the same machine reuses it. The node
# (tests/node) runs it as the cluster's DNS. Idempotent. Prints the binary's
# path.
#
# Not part of tests/tools/envtest's module: CoreDNS requires newer k8s.io
# libraries than the Kubernetes release built there, and `go install
# module@version` builds it with its own module graph.
set -euo pipefail

version=v1.15.0
go_version=$(go env GOVERSION)
cache=${EUREKUBE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/eurekube}
# The name changes whenever the pinned version, the Go toolchain or this
# script changes, so a stale binary is never reused.
key=$(sha256sum <"$0" | cut -c1-12)
bin="$cache/tools/coredns-$version-$go_version-$key"

if [ ! -x "$bin" ]; then
  echo "building coredns $version into $bin (first run only: minutes)" >&2
  start=$SECONDS
  mkdir -p "$cache/tools"
  gobin=$(mktemp -d "$cache/tools/coredns-build.XXXXXX")
  trap 'rm -rf "$gobin"' EXIT
  GOBIN=$gobin CGO_ENABLED=0 go install -trimpath -ldflags="-s -w" "github.com/coredns/coredns@$version"
  mv "$gobin/coredns" "$bin"
  echo "built coredns in $((SECONDS - start))s" >&2
fi
echo "$bin"
