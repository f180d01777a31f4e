#!/usr/bin/env bash
# One-command set-up for a fresh Debian machine (Python 3.11, JDK 17, Maven): MariaDB server from
# Debian packages, the .venv with `logcount`, the JVM jars (Kafka broker, Spark's Kafka
# connector, Kafka Streams for the bench) from Maven Central into the git-ignored .cache/,
# toxiproxy, and promtool from Debian's prometheus package. Safe and quick to run again: each
# step is skipped when its stamp says it is already done for the current inputs.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

say() { printf 'setup: %s\n' "$*"; }
die() { printf 'setup: error: %s\n' "$*" >&2; exit 2; }

command -v java >/dev/null || die "java not found: install a JDK 17 (apt-get install openjdk-17-jdk-headless)"
command -v mvn >/dev/null || die "mvn not found: install Maven (apt-get install maven)"
python=${PYTHON:-python3}
"$python" -c 'import sys; sys.exit(sys.version_info < (3, 11))' \
  || die "$python is older than 3.11"

sudo_if_needed() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }

# 1. Debian packages: MariaDB server (the embedded stack starts its own instance; the package's
# service is unused) and prometheus (5. below), in one apt run in the background: downloads and
# dpkg, beside pip's and mvn's downloads below rather than before them. Figures: docs/tuning.md#set-up
mkdir -p .cache
debs=()
if ! command -v mariadbd >/dev/null && [ ! -x /usr/sbin/mariadbd ]; then
  command -v apt-get >/dev/null || die "mariadbd missing and apt-get not found"
  debs+=(mariadb-server)
fi
if ! command -v promtool >/dev/null || ! command -v prometheus >/dev/null; then
  if command -v apt-get >/dev/null; then
    debs+=(prometheus)
  else
    say "warning: prometheus missing and apt-get not found: its tests will be skipped"
  fi
fi
apt_pid=
if [ ${#debs[@]} -gt 0 ]; then
  say "installing ${debs[*]} from Debian packages (in the background)"
  { sudo_if_needed apt-get update -qq \
      && sudo_if_needed env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
        --no-install-recommends "${debs[@]}"; } > .cache/apt.log 2>&1 &
  apt_pid=$!
fi

# 2. The virtualenv with logcount (editable, so the stack finds jars relative to the checkout) and
# the pyspark of constraints.txt.
stamp_of() { sha256sum "$@" | sha256sum | cut -c1-16; }
if [ ! -x .venv/bin/python ]; then
  say "creating .venv"
  "$python" -m venv .venv
fi
# The extras: test, and bench (`logcount bench`'s plots); in the stamp, so a change reinstalls.
extras=test,bench
want="$(stamp_of pyproject.toml constraints.txt) $extras"
if [ "$(cat .venv/.logcount-stamp 2>/dev/null)" != "$want" ]; then
  say "installing logcount and its dependencies into .venv"
  mkdir -p .cache
  # pip's own chatter (an editable-install warning) goes to a log, shown only on failure.
  { .venv/bin/pip install -q --upgrade pip \
      && .venv/bin/pip install -q -c constraints.txt -e ".[$extras]"; } \
    > .cache/pip.log 2>&1 || { cat .cache/pip.log >&2; die "pip install failed"; }
  echo "$want" > .venv/.logcount-stamp
fi

# 3. JVM jars, with jvm/fetch.sh (plain mvn; the Docker images fetch theirs the same way).
fetch_jars() {  # fetch_jars NAME POM_DIR [extra -D...]
  local name=$1 pom=$2; shift 2
  local out=.cache/jars/$name want
  want=$(printf '%s %s' "$(stamp_of "$pom/pom.xml" jvm/settings.xml)" "$*")
  if [ "$(cat "$out/.stamp" 2>/dev/null)" != "$want" ]; then
    say "fetching $name jars with mvn"
    rm -rf "$out.tmp" && mkdir -p "$out.tmp" .cache
    jvm/fetch.sh "$pom" "$root/$out.tmp" "$@" || die "mvn could not fetch the $name jars"
    rm -rf "$out" && mv "$out.tmp" "$out" && echo "$want" > "$out/.stamp"
  fi
}
fetch_jars kafka jvm/kafka-broker
fetch_jars kafka-streams jvm/kafka-streams  # the bench's kafka_streams_eos (logcount/bench/streams/)
# The connector at the pyspark the venv has (constraints.txt's on a fresh machine).
spark_version=$(.venv/bin/python -c 'import pyspark; print(pyspark.__version__)')
fetch_jars spark-kafka jvm/spark-kafka "-Dspark.version=$spark_version"

# A class-data-sharing archive for the Spark driver JVM (pipeline/cds.py): seconds off every
# stage start. Made once per JVM/pyspark/connector jars; without it Spark simply starts slower.
# It needs only the venv and the jars, so it builds beside the steps below and set-up waits for
# it at its end: quicker where cores are spare; on 2 cores toxiproxy's build takes both, and
# a fresh clone's set-up took 125 s against 120 s one after another (2026-11-29).
.venv/bin/python -m logcount.pipeline.cds_build >/dev/null &
cds_pid=$!

# 4. toxiproxy (TCP fault injection for the network-fault tests, tests/support/toxiproxy.py), built
# with `go install` into .cache/bin; Go's module and build caches stay in .cache/go. Without Go
# the tests that need it are skipped (under CI=true they fail); a failed build stops the set-up.
toxiproxy_version=v2.5.0
if [ ! -x .cache/bin/toxiproxy-server ] \
    || [ "$(cat .cache/bin/.toxiproxy-stamp 2>/dev/null)" != "$toxiproxy_version" ]; then
  if ! command -v go >/dev/null; then
    say "warning: go not found: the network-fault tests will be skipped"
  else
    say "building toxiproxy $toxiproxy_version with go install"
    mkdir -p .cache/bin .cache/go
    if env GOPATH="$root/.cache/go" GOCACHE="$root/.cache/go/cache" \
        GOMODCACHE="$root/.cache/go/mod" GOFLAGS=-modcacherw GOBIN="$root/.cache/bin" \
        go install "github.com/Shopify/toxiproxy/v2/cmd/server@$toxiproxy_version" \
        > .cache/go.log 2>&1; then
      mv -f .cache/bin/server .cache/bin/toxiproxy-server
      echo "$toxiproxy_version" > .cache/bin/.toxiproxy-stamp
    else
      cat .cache/go.log >&2
      die "go install of toxiproxy failed (the network-fault tests need it)"
    fi
  fi
fi

# 5. promtool and prometheus, from Debian's `prometheus` package (2.42 on Debian 12; installed by
# step 1): the tests check the alert rules in deploy/prometheus/ with promtool, and run the server
# binary in a temp dir to prove the logfmt recipe. The package's own service (a systemd unit and
# an init.d script) is stopped and disabled in case its install started it (under Docker's
# policy-rc.d it never starts). Without apt-get those tests are skipped (under CI=true they fail).
if [ -n "$apt_pid" ]; then
  wait "$apt_pid" || { cat .cache/apt.log >&2; die "apt-get install ${debs[*]} failed"; }
  if [[ " ${debs[*]} " == *" prometheus "* ]]; then
    if [ -d /run/systemd/system ]; then
      sudo_if_needed systemctl disable --now prometheus.service >/dev/null 2>&1 || true
    elif [ -x /etc/init.d/prometheus ]; then
      sudo_if_needed /etc/init.d/prometheus stop >/dev/null 2>&1 || true
      sudo_if_needed update-rc.d prometheus disable >/dev/null 2>&1 || true
    fi
    command -v promtool >/dev/null || die "the prometheus package installed no promtool"
    command -v prometheus >/dev/null || die "the prometheus package installed no prometheus"
  fi
fi

wait "$cds_pid" || say "warning: no CDS archive; Spark starts without it"

say "ready: .venv/bin/logcount (pyspark $spark_version, kafka $(ls .cache/jars/kafka | sed -n 's/^kafka_2.13-\(.*\)\.jar$/\1/p'))"
