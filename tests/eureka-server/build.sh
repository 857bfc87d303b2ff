#!/usr/bin/env bash
# Builds the Spring Cloud Eureka server of the tests with Maven and prints
# the path of its jar. The jar is cached outside the work tree under a key of
# the sources, so a second run (or a fresh clone on the same machine) builds
# nothing. Maven's own repository (~/.m2) is reused as usual.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
cache=${EUREKUBE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/eurekube}
key=$(cd "$here" && find pom.xml src -type f -print0 | sort -z | xargs -0 cat | sha256sum | cut -c1-12)
jar="$cache/eureka-server-$key.jar"

if [ ! -f "$jar" ]; then
  command -v mvn >/dev/null || { echo "eureka-server: mvn not found: install Maven (make deps)" >&2; exit 1; }
  command -v java >/dev/null || { echo "eureka-server: java not found: install a JDK 17+ (make deps)" >&2; exit 1; }
  echo "building the Eureka server with Maven (first run only)" >&2
  start=$SECONDS
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  cp -r "$here/pom.xml" "$here/src" "$work/"
  (cd "$work" && mvn -q -B -ntp package -DskipTests >&2)
  mkdir -p "$cache"
  cp "$work/target/eureka-server-0.0.1.jar" "$jar.tmp"
  mv "$jar.tmp" "$jar"
  echo "built the Eureka server in $((SECONDS - start))s" >&2
fi
echo "$jar"
