#!/bin/sh
# jvm/fetch.sh POM_DIR OUT_DIR [-Dname=value ...]: copy a pom's dependencies into OUT_DIR with
# plain Maven. Used by scripts/setup.sh and by the Docker images, so both fetch the same way.
# Spark's parent pom declares an extra repository our machines cannot reach; jvm/settings.xml
# routes it to Maven Central, whose address is read from Maven's own super POM (nothing
# hard-coded). Maven's output goes to OUT_DIR.log and is shown only on failure.
set -eu
pom=$1 out=$2; shift 2
here=$(cd "$(dirname "$0")" && pwd)
central=$(unzip -p "$(dirname "$(readlink -f "$(command -v mvn)")")"/../lib/maven-model-builder-*.jar \
            org/apache/maven/model/pom-4.0.0.xml 2>/dev/null \
          | sed -n 's:.*<url>\(.*\)</url>.*:\1:p' | head -1) || central=
set -- -B -q -Dstyle.color=never -f "$pom/pom.xml" -s "$here/settings.xml" \
  dependency:copy-dependencies "-DoutputDirectory=$out" "$@"
[ -n "$central" ] && set -- "$@" "-Dlogcount.central.url=$central"
mkdir -p "$out"
mvn "$@" > "$out.log" 2>&1 || { cat "$out.log" >&2; exit 1; }
