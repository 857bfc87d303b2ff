#!/usr/bin/env bash
# Builds (or finds cached) what the tests and the sandbox run, and prints
# `export VAR=path` lines for the Makefile to eval. With --test-tools,
# also what only the tests use: Helm (the chart's tests), promtool (the
# alerts' tests), the Spring Cloud Kubernetes client and Spring Boot Admin
# (end-to-end stories); make run and make bench build neither (on a fresh
# machine the two Maven builds and their class-data archives took 91 s of
# the sandbox's longer lane).
#
# The builds run in two lanes at once. On a cold machine each build leaves
# a core idle part of the time (a Go link is mostly single-threaded, a
# Maven build mostly one JVM thread, a module download waits on the
# network); the other lane fills it. On a warm machine every build is a
# cache hit and this takes a second. A lane stops at its first failure;
# the script fails when either lane did, after both ended.
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
test_tools=false
case "${1:-}" in
  --test-tools) test_tools=true ;;
  "") ;;
  *) echo "usage: $0 [--test-tools]" >&2; exit 2 ;;
esac

out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

lane() { # lane VAR=script ...: runs each build in turn, its path in $out/VAR
  local spec var script
  for spec in "$@"; do
    var=${spec%%=*}
    script=${spec#*=}
    if ! "$root/$script" >"$out/$var"; then
      echo "$script failed" >&2
      return 1
    fi
  done
}

# Kubernetes from source is the longest build (about ten minutes cold):
# the other lane takes everything else.
a=(KUBEBUILDER_ASSETS=tests/tools/envtest/build.sh)
b=(EUREKUBE_EUREKA_JAR=tests/eureka-server/build.sh
  EUREKUBE_SPRING_CLIENT_JAR=tests/spring-client/build.sh)
if $test_tools; then
  b+=(EUREKUBE_SPRING_K8S_CLIENT_JAR=tests/spring-k8s-client/build.sh
    EUREKUBE_SPRING_BOOT_ADMIN_JAR=tests/spring-boot-admin/build.sh)
fi
b+=(EUREKUBE_CERT_MANAGER=tests/tools/certmanager/build.sh
  EUREKUBE_COREDNS=tests/tools/coredns/build.sh)
if $test_tools; then
  b+=(EUREKUBE_HELM=tests/tools/helm/build.sh)
  a+=(EUREKUBE_PROMTOOL=tests/tools/promtool/build.sh)
fi

lane "${a[@]}" &
pa=$!
lane "${b[@]}" &
pb=$!
failed=0
wait "$pa" || failed=1
wait "$pb" || failed=1
[ "$failed" -eq 0 ] || exit 1

for f in "$out"/*; do
  printf 'export %s=%q\n' "$(basename "$f")" "$(cat "$f")"
done
