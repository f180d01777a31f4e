#!/usr/bin/env bash
# The docker demo, from nothing: ./scripts/docker-demo.sh up | status | down
#
#   up      sets up what is missing (the Docker engine, Compose v2, the base image and the
#           stand-in images when Docker Hub cannot be reached), starts docker/compose.yaml from
#           scratch, waits until error_log equals the generator's expectation, prints the table and
#           the verdict, and exits 0 when they are equal. The demo keeps running (the reader, the
#           metrics on :9108 and :9109, the Spark UI on :8080) until `down`.
#   status  the services, and the table against the expectation now.
#   down    stops and removes the demo (containers, network, volumes), and the Docker engine if
#           `up` started it.
#   compose ARGS...  docker compose with the files `up` chose, e.g. `compose logs -f reader`.
#
# Exit status: 0 done (for `up`: the table equals the expectation), 1 failed, 2 usage, 3 no Docker
# engine can be started on this machine (the docker test tier skips on it).
# Environment: LOGCOUNT_DOCKER_STANDINS=1 uses the stand-ins even when Docker Hub answers (=0:
# never); LOGCOUNT_DOCKER_WAIT (default 900) bounds the wait for the verdict, in seconds.
set -euo pipefail
cd "$(dirname "$0")/.."

state=.cache/docker                # the engine's pid file and log, Compose, the build log
mkdir -p "$state"
COMPOSE_VERSION=v2.28.1            # the newest Compose v2 whose Go module installs with `go install`
BASE_CI=logcount-ci/debian:bookworm-slim
wait_s=${LOGCOUNT_DOCKER_WAIT:-900}

say() { printf 'docker-demo: %s\n' "$*"; }
die() { printf 'docker-demo: error: %s\n' "$*" >&2; exit 1; }
no_engine() { printf 'docker-demo: no Docker engine: %s\n' "$*" >&2; exit 3; }
sudo_if_needed() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }
apt_install() {
  command -v apt-get >/dev/null || die "$1 is missing and apt-get is not here to install it"
  say "installing $* from Debian packages"
  sudo_if_needed apt-get update -qq
  sudo_if_needed env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
    --no-install-recommends "$@" > "$state/apt.log" 2>&1 || { cat "$state/apt.log" >&2; die "apt-get failed"; }
}
timed() {  # timed LABEL COMMAND...: run it, and say how long it took
  local label=$1 t0=$SECONDS; shift
  "$@"
  say "$label: $((SECONDS - t0)) s"
}

# --- 1. The engine --------------------------------------------------------------------------
engine_up() {
  docker info > /dev/null 2>&1 && return 0
  if ! command -v dockerd > /dev/null; then
    command -v apt-get > /dev/null || no_engine "dockerd is not installed and apt-get is not here"
    [ "$(id -u)" -eq 0 ] || sudo -n true 2> /dev/null \
      || no_engine "dockerd is not installed, and installing it needs root or sudo"
    apt_install docker.io iptables
  fi
  command -v docker > /dev/null || no_engine "the docker client is missing (Debian: apt-get install docker.io)"
  [ "$(id -u)" -eq 0 ] || sudo -n true 2> /dev/null || no_engine "starting dockerd needs root or sudo"
  say "starting dockerd (log: $state/dockerd.log; stopped by '$0 down')"
  # Its own pid file, so `down` stops exactly the engine `up` started and never a system one.
  sudo_if_needed dockerd --pidfile "$PWD/$state/dockerd.pid" > "$state/dockerd.log" 2>&1 &
  local started=$!
  # dockerd answers in 1-3 s; 60 s covers a loaded machine's first start of containerd. One that
  # exits (no privileges for its namespaces, say) is reported at once.
  for _ in $(seq 120); do
    docker info > /dev/null 2>&1 && return 0
    kill -0 "$started" 2> /dev/null || break
    sleep 0.5
  done
  tail -5 "$state/dockerd.log" >&2
  no_engine "dockerd did not start (log: $state/dockerd.log)"
}

engine_down() {
  local pid
  pid=$(cat "$state/dockerd.pid" 2>/dev/null) || return 0
  if kill -0 "$pid" 2> /dev/null; then
    say "stopping dockerd (pid $pid)"
    sudo_if_needed kill "$pid"
    # dockerd stops its containers and its containerd first: up to 15 s each on a busy machine.
    for _ in $(seq 60); do kill -0 "$pid" 2> /dev/null || break; sleep 0.5; done
    kill -0 "$pid" 2> /dev/null && die "dockerd (pid $pid) is still running after 30 s"
  fi
  rm -f "$state/dockerd.pid"
}

# --- 2. Compose v2 ----------------------------------------------------------------------------
compose_bin() {
  if docker compose version > /dev/null 2>&1; then echo "docker compose"; return; fi
  local bin=$state/bin/docker-compose
  if [ ! -x "$bin" ]; then
    # Debian 12 packages only Compose v1 (end of life; it rejects compose.yaml's `name:`). The
    # v2 plugin is one Go module: built here once (about 4 CPU-minutes), its caches deleted.
    command -v go > /dev/null || die "Docker Compose v2 is missing and Go is not here to build it"
    # To stderr: this function's stdout is the command it answers.
    say "building Docker Compose $COMPOSE_VERSION with go install (once; cached in $state/bin)" >&2
    local gotmp=$state/go
    GOBIN=$PWD/$state/bin GOMODCACHE=$PWD/$gotmp/mod GOCACHE=$PWD/$gotmp/cache GOFLAGS=-modcacherw \
      go install -ldflags "-X github.com/docker/compose/v2/internal.Version=$COMPOSE_VERSION" \
      "github.com/docker/compose/v2/cmd@$COMPOSE_VERSION" > "$state/go.log" 2>&1 \
      || { tail -20 "$state/go.log" >&2; die "go install of Docker Compose failed"; }
    mv "$state/bin/cmd" "$bin"
    rm -rf "$gotmp"
  fi
  echo "$bin"
}

# --- 3. Images: the public ones, or the stand-ins ----------------------------------------------
can_pull() {  # can_pull IMAGE: present, or pulled within 60 s
  docker image inspect "$1" > /dev/null 2>&1 || timeout 60 docker pull -q "$1" > /dev/null 2>&1
}

use_standins() {
  case ${LOGCOUNT_DOCKER_STANDINS:-} in
    1) return 0 ;;
    0) return 1 ;;
  esac
  local image
  for image in debian:bookworm-slim apache/kafka:4.3.1 mysql:8.4; do
    can_pull "$image" || { say "cannot pull $image: using the stand-ins (docker/compose.ci.yaml)"; return 0; }
  done
  return 1
}

base_image() {
  docker image inspect "$BASE_CI" > /dev/null 2>&1 && return 0
  command -v mmdebstrap > /dev/null || apt_install mmdebstrap
  say "building $BASE_CI from Debian packages with mmdebstrap (once)"
  # The host's CA certificates and pip/apt settings go in, so that builds on top of this base
  # reach the same package registries as the host (through the same TLS-inspecting proxy, if
  # there is one). Without them a build here cannot fetch anything.
  local hooks=() f
  [ -d /usr/local/share/ca-certificates ] \
    && hooks+=(--customize-hook='copy-in /usr/local/share/ca-certificates /usr/local/share/')
  [ -f /etc/pip.conf ] && hooks+=(--customize-hook='copy-in /etc/pip.conf /etc/')
  for f in /etc/apt/apt.conf.d/99*; do
    [ -f "$f" ] && hooks+=(--customize-hook="copy-in $f /etc/apt/apt.conf.d/")
  done
  mmdebstrap --variant=minbase --include=ca-certificates "${hooks[@]}" \
    --customize-hook='chroot "$1" update-ca-certificates > /dev/null' \
    bookworm - \
    "deb http://deb.debian.org/debian bookworm main" \
    "deb http://deb.debian.org/debian bookworm-updates main" \
    "deb http://deb.debian.org/debian-security bookworm-security main" \
    2> "$state/mmdebstrap.log" \
    | docker import --change 'CMD ["bash"]' - "$BASE_CI" > /dev/null \
    || { tail -20 "$state/mmdebstrap.log" >&2; die "mmdebstrap | docker import failed"; }
}

# --- The demo ---------------------------------------------------------------------------------
compose() {  # compose ARGS...: docker/compose.yaml, plus the stand-ins when `up` chose them
  local files=(-f docker/compose.yaml)
  [ -f "$state/standins" ] && files+=(-f docker/compose.ci.yaml)
  $COMPOSE "${files[@]}" "$@"
}

up() {
  local t0=$SECONDS
  timed "engine" engine_up
  local t=$SECONDS
  COMPOSE=$(compose_bin)
  say "compose: $($COMPOSE version --short 2>/dev/null || echo "$COMPOSE"), $((SECONDS - t)) s"
  rm -f "$state/standins"
  if use_standins; then
    touch "$state/standins"
    timed "base image" base_image
  fi
  # From scratch every time: a second `up` must not send the generator's lines twice.
  compose down --volumes --remove-orphans > /dev/null 2>&1 || true
  say "building the images (log: $state/build.log)"
  t=$SECONDS
  compose build > "$state/build.log" 2>&1 \
    || { tail -30 "$state/build.log" >&2; die "the image build failed (see $state/build.log)"; }
  say "images: $((SECONDS - t)) s"
  say "starting the demo"
  t=$SECONDS
  compose up --detach --quiet-pull > "$state/up.log" 2>&1 \
    || { cat "$state/up.log" >&2; compose ps -a >&2; die "compose up failed"; }
  say "compose up: $((SECONDS - t)) s"
  say "waiting for error_log to equal the generator's expectation (at most $wait_s s)"
  local rc=0
  t=$SECONDS
  compose run --rm -T check --timeout "$wait_s" || rc=$?
  say "verdict: $((SECONDS - t)) s"
  say "total: $((SECONDS - t0)) s"
  if [ "$rc" -ne 0 ]; then
    compose ps -a >&2
    say "the demo is left running for a look: '$0 status', '$0 down'"
    return 1
  fi
  say "running: metrics on http://localhost:9108/metrics (stage) and :9109 (sink), Spark UI on" \
      "http://localhost:8080, the reader in '${COMPOSE} -f docker/compose.yaml logs -f reader';" \
      "'$0 down' stops it"
}

status() {
  docker info > /dev/null 2>&1 || { say "the Docker engine is not running"; return 1; }
  COMPOSE=$(compose_bin)
  compose ps -a
  compose run --rm -T check --timeout 0
}

down() {
  if docker info > /dev/null 2>&1; then
    COMPOSE=$(compose_bin)
    compose down --volumes --remove-orphans
  fi
  engine_down
  rm -f "$state/standins"
}

case ${1:-} in
  up) up ;;
  status) status ;;
  down) down ;;
  compose) shift; COMPOSE=$(compose_bin); compose "$@" ;;
  *) echo "usage: $0 up | status | down | compose ARGS..." >&2; exit 2 ;;
esac
