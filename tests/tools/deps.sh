#!/usr/bin/env bash
# Installs, idempotently, what the build and tests need that a machine may
# lack: a JDK 17+ and Maven for the Eureka server, a C compiler (gcc) for
# the race detector; as root, also what the test node runs (tests/node):
# containerd, runc, the CNI plugins and iptables. Go is assumed present (it
# builds this script's callers). Does nothing when everything is there.
set -euo pipefail

need=()
command -v java >/dev/null 2>&1 || need+=(openjdk-17-jdk-headless)
command -v mvn >/dev/null 2>&1 || need+=(maven)
command -v git >/dev/null 2>&1 || need+=(git)
# make test runs every package's tests but the node's suites with the race
# detector, which builds with cgo: a C compiler.
command -v "$(go env CC 2>/dev/null || echo gcc)" >/dev/null 2>&1 || need+=(gcc)
# The node needs root to run at all; without root its tests skip, so its
# packages are not asked for.
if [ "$(id -u)" -eq 0 ]; then
  command -v containerd >/dev/null 2>&1 || need+=(containerd)
  command -v runc >/dev/null 2>&1 || need+=(runc)
  [ -x /usr/lib/cni/bridge ] || need+=(containernetworking-plugins)
  command -v iptables >/dev/null 2>&1 || need+=(iptables)
fi
if [ ${#need[@]} -eq 0 ]; then
  exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "missing ${need[*]}: install them (apt-get install ${need[*]}) or run as root" >&2
  exit 1
fi
echo "installing ${need[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${need[@]}" >&2
