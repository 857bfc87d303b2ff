#!/usr/bin/env bash
# Builds Prometheus's promtool, which tests/monitoring uses to check and
# unit-test the alerting rules in manifests/monitoring, from its Go module
# (no download other than the Go module proxy) into the tools cache the
# Makefile uses, so a fresh clone on the same machine reuses it. promtool is a
# built tool, not a dependency of Eurekube's go.mod. Prints the binary's path.
# The first build takes minutes.
set -euo pipefail

# remove_all_sd leaves out Prometheus's service discovery plugins (cloud SDKs,
# most of the build); promtool's rule checks and unit tests do not use them.
flags=(-trimpath -tags=remove_all_sd -ldflags="-s -w")

version=v0.316.0
module=github.com/prometheus/prometheus
tools=${EUREKUBE_CACHE:-$HOME/.cache/eurekube}/tools
bin="$tools/promtool-$version"

if [ ! -x "$bin" ]; then
  echo "building promtool $version into $bin (first run only, takes minutes)" >&2
  start=$SECONDS
  mkdir -p "$tools"
  gobin=$(mktemp -d)
  trap 'rm -rf "$gobin"' EXIT
  # go install refuses a module whose go.mod has replace directives; then
  # build inside the downloaded module, where they apply.
  if ! (cd "$gobin" && CGO_ENABLED=0 GOBIN="$gobin" GOFLAGS=-buildvcs=false \
    go install "${flags[@]}" "$module/cmd/promtool@$version"); then
    echo "go install failed; building from the downloaded module" >&2
    src=$(cd "$gobin" && go mod download -json "$module@$version" |
      awk -F'"' '$2=="Dir"{print $4}')
    (cd "$src" && CGO_ENABLED=0 GOFLAGS=-buildvcs=false \
      go build "${flags[@]}" -o "$gobin/promtool" ./cmd/promtool)
  fi
  mv "$gobin/promtool" "$bin.tmp"
  mv "$bin.tmp" "$bin"
  echo "built promtool in $((SECONDS - start))s" >&2
fi
echo "$bin"
