#!/usr/bin/env bash
# Usage: maven-jar.sh DIR
# Builds the Spring Boot project in DIR with Maven and prints the path of its
# fat jar. The jar is cached outside the work tree under a key of the
# project's sources, so a second run (or a fresh clone on the same machine)
# builds nothing; Maven's own repository (~/.m2) is reused as usual.
set -euo pipefail

dir=$(cd "$1" && pwd)
name=$(basename "$dir")
cache=${EUREKUBE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/eurekube}
key=$(cd "$dir" && find pom.xml src -type f -print0 | sort -z | xargs -0 cat | sha256sum | cut -c1-12)
jar="$cache/$name-$key.jar"

if [ ! -f "$jar" ]; then
  command -v mvn >/dev/null || { echo "$name: mvn not found: install Maven (make deps)" >&2; exit 1; }
  command -v java >/dev/null || { echo "$name: java not found: install a JDK 17+ (make deps)" >&2; exit 1; }
  echo "building $name with Maven (first run only)" >&2
  start=$SECONDS
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  cp -r "$dir/pom.xml" "$dir/src" "$work/"
  (cd "$work" && mvn -q -B -ntp package -DskipTests >&2)
  mkdir -p "$cache"
  cp "$work/target/$name-0.0.1.jar" "$jar.tmp"
  mv "$jar.tmp" "$jar"
  echo "built $name in $((SECONDS - start))s" >&2
fi
echo "$jar"
