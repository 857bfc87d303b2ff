#!/usr/bin/env bash
# Builds this Maven project (cached) and prints the path of its jar.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
exec "$here/../tools/maven-jar.sh" "$here"
