#!/usr/bin/env bash
# The docker demo, from nothing: ./scripts/docker-demo.sh up | status | down
#
#   up      sets up what is missing (the Docker engine, Compose v2, the base image and the
#           stand-in images when Docker Hub cannot be reached), starts docker/compose.yaml from
#           scratch, waits until error_log equals the generator's expectation and then until
#           error_log_final (the --emit-final stage's closed minutes) equals its generator's,
#           prints the tables and the verdicts, and exits 0 when both are equal. The demo keeps
#           running (the reader, the stage's and the sink's metrics, the Spark UI, at the URLs
#           it prints) until `down`.
#   status  the services, their URLs, and both tables against their expectations now.
#   down    stops and removes the demo (containers, network, volumes), and the Docker engine if
#           `up` started it.
#   compose ARGS...  docker compose with the files `up` chose, e.g. `compose logs -f reader`.
#
# Exit status: 0 done (for `up`: the table equals the expectation), 1 failed (a host port the
# user chose is taken, say), 2 usage (or a LOGCOUNT_DEMO_*_PORT that is not a port), 3 no Docker
# engine can be started on this machine (the docker test tier skips on it).
# Environment: LOGCOUNT_DOCKER_STANDINS=1 uses the stand-ins even when Docker Hub answers (=0:
# never); LOGCOUNT_DOCKER_WAIT (default 900) bounds the wait for the verdict, in seconds;
# LOGCOUNT_DEMO_SPARK_UI_PORT, LOGCOUNT_DEMO_STAGE_METRICS_PORT and
# LOGCOUNT_DEMO_SINK_METRICS_PORT choose the host ports (on 127.0.0.1) of the Spark UI and the
# metrics; unset, Docker picks free ones, and `up` and `status` print them.
set -euo pipefail
cd "$(dirname "$0")/.."

state=.cache/docker                # the engine's pid file and log, Compose, the build log
mkdir -p "$state"
COMPOSE_VERSION=v2.28.1            # the newest Compose v2 whose Go module installs with `go install`
BASE_CI=logcount-ci/debian:bookworm-slim
# MySQL itself for the mysql stand-in: Debian ships Oracle's MySQL only in sid (9.7 today), whose
# collations (utf8mb4_0900_bin), logins (caching_sha2_password) and SQL are mysql:8.4's.
MYSQL_BASE_CI=logcount-ci/debian:sid-mysql
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

# --- 0. Host ports ------------------------------------------------------------------------------
# What docker/compose.yaml publishes on the host, for the user only (the services talk over the
# demo's own network): service:container port:the variable that chooses the host port:path:what.
# tests/unit/test_compose.py holds this list and the compose file to each other.
PUBLISHED=(
  "spark-master:8080:LOGCOUNT_DEMO_SPARK_UI_PORT:/:the Spark UI"
  "stage:9108:LOGCOUNT_DEMO_STAGE_METRICS_PORT:/metrics:the stage's metrics"
  "sink:9109:LOGCOUNT_DEMO_SINK_METRICS_PORT:/metrics:the sink's metrics"
)

port_taken() {  # port_taken PORT: something accepts connections on 127.0.0.1:PORT
  # A connection rather than a test bind: it needs no privileges (ports below 1024), and it
  # reaches exactly the listeners that Docker's bind of 127.0.0.1:PORT collides with (0.0.0.0,
  # 127.0.0.1, a dual-stack [::]). A refused connection on loopback is immediate.
  timeout 3 bash -c 'exec 3<> "/dev/tcp/127.0.0.1/$1"' _ "$1" 2> /dev/null
}

port_holder() {  # port_holder PORT: "NAME (pid N)" listening on PORT, when this user can see it
  local users inode fd pid
  users=$(ss -Hltnp "sport = :$1" 2> /dev/null | grep -o 'users:(("[^"]*",pid=[0-9]*' | head -1) \
    || true
  if [ -n "$users" ]; then
    local name=${users#users:((\"}
    echo "${name%%\"*} (pid ${users##*pid=})"
    return 0
  fi
  # No ss, or it shows no process: the listening socket's inode, then the process with that fd.
  inode=$(awk -v port=":$(printf '%04X' "$1")" '$4 == "0A" && substr($2, length($2) - 4) == port \
    { print $10; exit }' /proc/net/tcp /proc/net/tcp6 2> /dev/null) || true
  [ -n "$inode" ] && [ "$inode" != 0 ] || return 1
  fd=$(find /proc/[0-9]*/fd -maxdepth 1 -lname "socket:\[$inode\]" -print -quit 2> /dev/null) \
    || true
  [ -n "$fd" ] || return 1
  pid=${fd#/proc/}
  pid=${pid%%/*}
  echo "$(cat "/proc/$pid/comm" 2> /dev/null || echo '?') (pid $pid)"
}

taken_line() {  # taken_line PORT [VAR WHAT]: "host port P (VAR: WHAT) is taken by X; ..."
  local by
  by=$(port_holder "$1") && by="by $by" || by="(by a process this user cannot see)"
  if [ -z "${2:-}" ]; then printf 'host port %s is taken %s' "$1" "$by"; return; fi
  printf 'host port %s (%s: %s) is taken %s; %s' "$1" "$2" "$3" "$by" \
    "choose another with $2=PORT, or unset it for a free one"
}

check_ports() {  # every host port the user chose is a port, chosen once, and free
  local entry svc cport var path what port ours=
  local -A chosen=()
  for entry in "${PUBLISHED[@]}"; do
    IFS=: read -r svc cport var path what <<< "$entry"
    port=${!var:-}
    [ -n "$port" ] || continue
    if ! [[ $port =~ ^[0-9]{1,5}$ ]] || [ "$port" -lt 1 ] || [ "$port" -gt 65535 ]; then
      printf 'docker-demo: error: %s=%s is not a port (%s)\n' "$var" "$port" \
        "1-65535; unset: Docker picks a free one" >&2
      exit 2
    fi
    [ -z "${chosen[$port]:-}" ] \
      || die "host port $port is chosen twice: ${chosen[$port]} and $var"
    chosen[$port]=$var
    port_taken "$port" || continue
    # This demo's own from an earlier `up` is fine: `up` takes the old demo down first. Asked
    # of the engine only when a port is taken, and only if one already answers.
    [ -n "$ours" ] || ours=$(docker ps --filter label=com.docker.compose.project=logcount \
      --format '{{.Ports}}' 2> /dev/null || true)
    [[ $ours != *":$port->"* ]] || continue
    die "$(taken_line "$port" "$var" "$what")"
  done
}

up_failed() {  # after a failed `compose up`: one line that names a taken port, when that was it
  local addr port entry svc cport var path what chose= chose_what=
  addr=$(grep -m1 -E 'address already in use|port is already allocated' "$state/up.log" \
    | grep -oE '([0-9]{1,3}\.){3}[0-9]{1,3}:[0-9]+' | head -1) || true
  [ -n "$addr" ] || die "compose up failed (log: $state/up.log)"
  port=${addr##*:}
  for entry in "${PUBLISHED[@]}"; do
    IFS=: read -r svc cport var path what <<< "$entry"
    [ "${!var:-}" != "$port" ] || { chose=$var; chose_what=$what; }
  done
  # Without a variable that chose it, Docker chose it: taken in the moment between its choice
  # and its bind. Another `up` chooses again.
  [ -n "$chose" ] \
    || die "compose up failed: $(taken_line "$port") (a port Docker chose; run up again)"
  die "compose up failed: $(taken_line "$port" "$chose" "$chose_what")"
}

urls() {  # the URLs of the published ports, as Docker has them now
  local entry svc cport var path what addr
  for entry in "${PUBLISHED[@]}"; do
    IFS=: read -r svc cport var path what <<< "$entry"
    # Empty while the container is not running; a restarted container gets a new port unless
    # a variable chose it.
    addr=$(compose port "$svc" "$cport" 2> /dev/null) || true
    [ -n "$addr" ] && say "$(printf '%-20s http://%s%s' "$what:" "$addr" "$path")"
  done
  return 0
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
  # Per machine, not per checkout (like pip's and Maven's caches): a fresh clone, CI's included,
  # does not fetch or build it again.
  local cache=${XDG_CACHE_HOME:-$HOME/.cache}/logcount
  local deb=$cache/docker-compose-debian13 bin=$cache/docker-compose-$COMPOSE_VERSION
  [ -x "$deb" ] && { echo "$deb"; return; }
  [ -x "$bin" ] && { echo "$bin"; return; }
  mkdir -p "$cache"
  # Debian 12 packages only Compose v1 (end of life; it rejects compose.yaml's `name:`), Debian
  # 13 the v2 plugin: one static binary, fetched signed by apt in seconds, where the Go build
  # below takes about 4 CPU-minutes. Figures: docs/tuning.md#docker-compose
  if compose_from_debian13 "$deb"; then echo "$deb"; return; fi
  # No Debian 13 archive here: the v2 plugin is one Go module, built once, its caches deleted.
  command -v go > /dev/null || die "Docker Compose v2 is missing and Go is not here to build it"
  # To stderr: this function's stdout is the command it answers.
  say "building Docker Compose $COMPOSE_VERSION with go install (once; cached in $cache)" >&2
  local gotmp=$state/go
  mkdir -p "$state/bin"
  # Bounded: a module download that stalls would otherwise hold `up` (and a CI run) for good.
  GOBIN=$PWD/$state/bin GOMODCACHE=$PWD/$gotmp/mod GOCACHE=$PWD/$gotmp/cache GOFLAGS=-modcacherw \
    timeout 1200 go install -ldflags "-X github.com/docker/compose/v2/internal.Version=$COMPOSE_VERSION" \
    "github.com/docker/compose/v2/cmd@$COMPOSE_VERSION" > "$state/go.log" 2>&1 \
    || { tail -20 "$state/go.log" >&2; die "go install of Docker Compose failed"; }
  mv "$state/bin/cmd" "$bin.tmp" && mv "$bin.tmp" "$bin"
  rm -rf "$gotmp"
  echo "$bin"
}

compose_from_debian13() {  # compose_from_debian13 DEST: Debian 13's docker-compose plugin at DEST
  command -v apt-get > /dev/null && command -v dpkg-deb > /dev/null || return 1
  local apt=$state/apt-debian13
  rm -rf "$apt" && mkdir -p "$apt/lists/partial" "$apt/cache/archives/partial" "$apt/deb"
  # Its own lists and sources, signed by the machine's Debian keyring: the machine's apt is not
  # touched, and nothing is installed; only the plugin is unpacked from the package.
  echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian trixie main" \
    > "$apt/sources.list"
  local opts=(-o "Dir::Etc::SourceList=$PWD/$apt/sources.list" -o Dir::Etc::SourceParts=/dev/null
              -o "Dir::State::Lists=$PWD/$apt/lists" -o "Dir::Cache=$PWD/$apt/cache"
              -o APT::Sandbox::User=root)
  say "fetching Docker Compose v2 from Debian 13's package (once; cached as $1)" >&2
  if ! { apt-get -qq "${opts[@]}" update \
         && (cd "$apt/deb" && apt-get -qq "${opts[@]}" download docker-compose) \
         && dpkg-deb -x "$apt"/deb/docker-compose_*.deb "$apt/root"; } > "$state/apt-compose.log" 2>&1
  then
    say "Debian 13's docker-compose could not be fetched ($(tail -1 "$state/apt-compose.log"))" >&2
    rm -rf "$apt"; return 1
  fi
  local plugin=$apt/root/usr/libexec/docker/cli-plugins/docker-compose
  if ! "$plugin" version 2> /dev/null | grep -q "version v\?2\."; then
    say "Debian 13's docker-compose is not Compose v2 here: building it instead" >&2
    rm -rf "$apt"; return 1
  fi
  mv "$plugin" "$1.tmp" && mv "$1.tmp" "$1"
  rm -rf "$apt"
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

debian_image() {  # debian_image TAG LOG WHAT MMDEBSTRAP-ARGS...: TAG, once, from mmdebstrap's tar
  local tag=$1 log=$state/$2 what=$3
  shift 3
  docker image inspect "$tag" > /dev/null 2>&1 && return 0
  command -v mmdebstrap > /dev/null || apt_install mmdebstrap
  say "building $tag ($what) with mmdebstrap (once)"
  mmdebstrap --variant=minbase "$@" 2> "$log" \
    | docker import --change 'CMD ["bash"]' - "$tag" > /dev/null \
    || { tail -20 "$log" >&2; die "mmdebstrap ($what) | docker import failed"; }
}

base_image() {
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
  debian_image "$BASE_CI" mmdebstrap.log "Debian packages" \
    --include=ca-certificates "${hooks[@]}" \
    --customize-hook='chroot "$1" update-ca-certificates > /dev/null' \
    bookworm - \
    "deb http://deb.debian.org/debian bookworm main" \
    "deb http://deb.debian.org/debian bookworm-updates main" \
    "deb http://deb.debian.org/debian-security bookworm-security main"
}

mysql_base_image() {
  # Check-Valid-Until off: a mirror that serves a frozen copy of sid (ours does) has a Release
  # file past its Valid-Until date, which apt refuses by default. The packages are still signed.
  # The package's own data directory goes (190 MB): the stand-in's entrypoint makes its own.
  debian_image "$MYSQL_BASE_CI" mmdebstrap-mysql.log "MySQL from Debian sid" \
    --include=mysql-server,mysql-client \
    --aptopt='Acquire::Check-Valid-Until "false"' \
    --customize-hook='rm -rf "$1"/var/lib/mysql/*' \
    sid - "deb http://deb.debian.org/debian sid main"
}

# --- The demo ---------------------------------------------------------------------------------
compose() {  # compose ARGS...: docker/compose.yaml, plus the stand-ins when `up` chose them
  local files=(-f docker/compose.yaml)
  [ -f "$state/standins" ] && files+=(-f docker/compose.ci.yaml)
  $COMPOSE "${files[@]}" "$@"
}

up() {
  local t0=$SECONDS
  # Before anything is installed or started: a taken port is one line, not a failed `compose up`.
  check_ports
  timed "engine" engine_up
  local t=$SECONDS
  COMPOSE=$(compose_bin)
  say "compose: $($COMPOSE version --short 2>/dev/null || echo "$COMPOSE"), $((SECONDS - t)) s"
  rm -f "$state/standins"
  if use_standins; then
    touch "$state/standins"
    timed "base image" base_image
    timed "mysql base image" mysql_base_image
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
    || { cat "$state/up.log" >&2; compose ps -a >&2; up_failed; }
  say "compose up: $((SECONDS - t)) s"
  urls
  say "waiting for error_log to equal the generator's expectation (at most $wait_s s)"
  local rc=0
  t=$SECONDS
  compose run --rm -T check --timeout "$wait_s" || rc=$?
  say "verdict: $((SECONDS - t)) s"
  if [ "$rc" -eq 0 ]; then
    # The final minutes close a GRACE (1m) after the minute after the last line: by now, or soon.
    say "waiting for error_log_final to hold every minute, closed (at most $wait_s s)"
    t=$SECONDS
    compose run --rm -T check-final --timeout "$wait_s" || rc=$?
    say "final verdict: $((SECONDS - t)) s"
  fi
  say "total: $((SECONDS - t0)) s"
  if [ "$rc" -ne 0 ]; then
    compose ps -a >&2
    say "the demo is left running for a look: '$0 status', '$0 down'"
    return 1
  fi
  urls
  say "running: the reader in '$0 compose logs -f reader'; '$0 status' prints the URLs" \
      "again (a container that restarts gets a new port unless a LOGCOUNT_DEMO_*_PORT chose" \
      "it); '$0 down' stops it"
}

status() {
  docker info > /dev/null 2>&1 || { say "the Docker engine is not running"; return 1; }
  COMPOSE=$(compose_bin)
  compose ps -a
  urls
  local rc=0
  compose run --rm -T check --timeout 0 || rc=$?
  compose run --rm -T check-final --timeout 0 || rc=$?
  return "$rc"
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
