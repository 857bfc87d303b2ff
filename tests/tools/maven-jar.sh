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

# Class-data sharing: the tests start these JVMs dozens of times, and most
# of a start is loading and verifying the same classes. Next to the jar,
# once: the jar extracted (Spring Boot's tools jarmode, which CDS can read,
# unlike nested jars) and an archive of the classes a start loads, written
# by one training start that exits once its context is up. The harness
# runs the extracted jar with that archive when both are there; a JVM that
# cannot use the archive (another JDK) runs without it, as before.
cds="${jar%.jar}.cds"
if [ ! -d "$cds" ] && [ "${EUREKUBE_CDS:-1}" != 0 ]; then
  start=$SECONDS
  work=$(mktemp -d "$cache/.cds-XXXXXX")
  if java -Djarmode=tools -jar "$jar" extract --destination "$work/app" >"$work/extract.log" 2>&1; then
    app=$(ls "$work/app"/*.jar)
    mv "$app" "$work/app/app.jar"
    # Port 9 refuses: a client's first registry fetch fails at once.
    # The flags every test JVM runs with (tests/harness reads the same file).
    read -r -d '' -a flags <"$(dirname "$0")/../harness/jvm-test-flags" || true
    timeout 300 java "${flags[@]}" \
      -XX:ArchiveClassesAtExit="$work/app/app.jsa" -Dspring.context.exit=onRefresh \
      -jar "$work/app/app.jar" --server.port=0 --server.address=127.0.0.1 \
      --eureka.client.service-url.defaultZone=http://127.0.0.1:9/eureka/ >"$work/train.log" 2>&1 || true
    mv "$work/train.log" "$work/extract.log" "$work/app/"
    # Another build may have won the race: keep its directory.
    mv -T "$work/app" "$cds" 2>/dev/null || true
    echo "$name: class-data sharing archive $( [ -f "$cds/app.jsa" ] && echo written || echo 'not written (see train.log)') in $((SECONDS - start))s" >&2
  fi
  rm -rf "$work"
fi
echo "$jar"
