#!/usr/bin/env bash
# Builds the envtest control plane (kube-apiserver, kube-controller-manager,
# etcd), the node's kubelet, kube-proxy and kube-scheduler (tests/node), and
# the kubectl of the same release from their Go modules, with no
# download other than the Go module proxy. Binaries land in a versioned cache
# directory outside the work tree, so a fresh clone on the same machine reuses
# them; bin/k8s links to it.
# Prints the directory to use as KUBEBUILDER_ASSETS.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
kube=$(awk '$1=="k8s.io/kubernetes"{print $2; exit}' "$here/go.mod")
etcd=$(awk '$1=="go.etcd.io/etcd/server/v3"{print $2; exit}' "$here/go.mod")
go_version=$(go env GOVERSION)
cache=${EUREKUBE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/eurekube}
# The key changes whenever a pinned version, the Go toolchain, the module
# graph or this script changes, so a stale binary is never reused.
key=$(cat "$here/go.mod" "$here/go.sum" "$0" | sha256sum | cut -c1-12)

# Stamp the release into the Kubernetes binaries as the release build does, so
# `kubectl version` and the API server's /version report it instead of
# v0.0.0-master (which kubectl refuses to parse).
minor=${kube#v1.}
minor=${minor%%.*}
ldflags="-s -w"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  ldflags+=" -X $pkg.gitVersion=$kube -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
  ldflags+=" -X $pkg.gitTreeState=clean"
done
dir="$cache/k8s-$kube-etcd-$etcd-$go_version-$key"

# The binaries and their packages. What is missing is built by one go
# build: it compiles the packages they share once, and links one binary
# while it compiles the next, which keeps both cores busy (a link is mostly
# single-threaded).
names=(etcd kube-apiserver kube-controller-manager kubectl kube-scheduler kube-proxy kubelet)
pkgs=(go.etcd.io/etcd/server/v3 k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager
  k8s.io/kubernetes/cmd/kubectl k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kube-proxy k8s.io/kubernetes/cmd/kubelet)
missing=()
for i in "${!names[@]}"; do
  [ -x "$dir/${names[$i]}" ] || missing+=("$i")
done
if [ ${#missing[@]} -gt 0 ]; then
  mkdir -p "$dir"
  out=$(mktemp -d "$dir/.build.XXXXXX")
  trap 'rm -rf "$out"' EXIT
  build=()
  for i in "${missing[@]}"; do
    build+=("${pkgs[$i]}")
  done
  echo "building ${#missing[@]} binaries of Kubernetes $kube and etcd $etcd into $dir (first run only: about ten minutes)" >&2
  start=$SECONDS
  (cd "$here" && CGO_ENABLED=0 go build -trimpath -ldflags="$ldflags" -o "$out/" "${build[@]}")
  for i in "${missing[@]}"; do
    # go build names a binary after its package's last element, before a
    # major version suffix: etcd's go.etcd.io/etcd/server/v3 is "server".
    base=${pkgs[$i]%/v3}
    mv "$out/${base##*/}" "$dir/${names[$i]}"
  done
  echo "built them in $((SECONDS - start))s" >&2
fi

mkdir -p "$root/bin"
ln -sfn "$dir" "$root/bin/k8s"
echo "$dir"
