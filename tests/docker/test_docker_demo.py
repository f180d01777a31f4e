"""The docker tier: the docker demo as a user runs it, and the fixtures' testcontainers path.

`scripts/docker-demo.sh up` from scratch (engine, Compose, images, `docker/compose.yaml`) on a
busy machine: host ports 8080, 9108 and 9109 (the ones the demo used to publish) are held by this
module for the whole run. Then the table is checked against an expectation recomputed here with
the independent parser of tests/support/reference.py, the Spark UI at the URL `up` printed, the
metrics of the stage and the sink at the ports Docker chose, and the reader's output. Then the stage
is killed twice while a second load arrives (`docker kill`, which an operator restarts, and a
SIGKILL of its process, which the restart policy restarts) and the table must be exact again.
With the engine up, the integration tier's core runs through testcontainers on the same images.
`down` must leave nothing running. Skipped, with the script's one line, where no Docker engine
can be started.
"""

from __future__ import annotations

import errno
import json
import os
import re
import socket
import subprocess
import sys
import time
import urllib.request
from collections import Counter
from datetime import datetime
from pathlib import Path

import pytest
import yaml

from logcount.formats.shapes import synthetic_lines, synthetic_records
from tests.support.metrics import read_metrics
from tests.support.reference import is_counted, reference_parse

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "docker-demo.sh"
SERVICES = yaml.safe_load((ROOT / "docker" / "compose.yaml").read_text())["services"]
NO_ENGINE = 3  # the script's exit status for "no Docker engine can be started here"
SECOND_LOAD = (60_000, 8)  # lines, seed: arrives while the stage is being killed
HELD_PORTS = (8080, 9108, 9109)  # the host ports the demo published before Docker chose them
# The grouped table: a fleet's Filebeat records (lines, seed), by host and level.
GROUPED_LOAD = (6000, 5)
GROUP_BY = "host=host.name,level"
GROUPED_TABLE = "error_log_by_host_level"
COLLATION_HOSTS = ("Web-1", "web-1", "pad", "pad ")


def _generator_load() -> tuple[int, int]:
    cmd = SERVICES["generator"]["command"]
    return int(cmd[cmd.index("--synthetic") + 1]), int(cmd[cmd.index("--seed") + 1])


def _expected(*loads: tuple[int, int]) -> dict[str, int]:
    counts: Counter = Counter()
    for n, seed in loads:
        for line in synthetic_lines(n, seed):
            parsed = reference_parse(line)
            if parsed is not None and is_counted(parsed[1]):
                counts[parsed[0]] += 1
    return dict(counts)


def script(*args: str, timeout: float = 600, check: bool = True,
           stdin: str | None = None) -> subprocess.CompletedProcess:
    # As a user runs it: no LOGCOUNT_DEMO_*_PORT, so Docker chooses the host ports.
    env = {k: v for k, v in os.environ.items() if not k.startswith("LOGCOUNT_DEMO_")}
    proc = subprocess.run([str(SCRIPT), *args], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=timeout, input=stdin)
    if check and proc.returncode != 0:
        raise AssertionError(f"docker-demo.sh {' '.join(args)} exited {proc.returncode}:\n"
                             f"{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return proc


def compose(*args: str, timeout: float = 300, check: bool = True, stdin: str | None = None) -> str:
    return script("compose", *args, timeout=timeout, check=check, stdin=stdin).stdout


def table() -> dict[str, int]:
    out = compose("exec", "-T", "mysql", "mysql", "-uroot", "-plogcount", "-N", "-B", "-e",
                  "SELECT DATE_FORMAT(log_time, '%Y-%m-%d %H:%i:00'), log_count "
                  "FROM logcount.error_log", check=False)
    return {m: int(c) for m, c in (line.split("\t") for line in out.splitlines() if "\t" in line)}


def wait_until(pred, timeout_s: float, what: str, step_s: float = 3.0):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if value := pred():
            return value
        time.sleep(step_s)
    raise AssertionError(f"timed out after {timeout_s:.0f} s waiting for {what}")


def host_port(service: str) -> int | None:
    """The host port of the service's published port, as Docker has it now: None while the
    container is not running, and a new one after each restart (Docker chooses again)."""
    container_port = SERVICES[service]["ports"][0].rsplit(":", 1)[1]
    out = compose("port", service, container_port, check=False).strip()
    return int(out.rsplit(":", 1)[1]) if out else None


def container_state(service: str) -> dict:
    cid = compose("ps", "-q", service).strip()
    out = subprocess.run(["docker", "inspect", "--format",
                          "{{.State.Pid}} {{.RestartCount}} {{.State.Status}}", cid],
                         capture_output=True, text=True, check=True).stdout.split()
    return {"pid": int(out[0]), "restarts": int(out[1]), "status": out[2]}


@pytest.fixture(scope="module")
def busy_ports():
    """Listen on the ports a demo would like, on every address, for the module's whole run (as a
    Spark master, Jenkins or a dev server would). One that something else already holds is just
    as busy."""
    held = []
    for port in HELD_PORTS:
        sock = socket.socket()
        # A connection of an earlier run in TIME_WAIT must not stop the hold; a listener does.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("0.0.0.0", port))
            sock.listen()
            held.append(sock)
        except OSError as exc:
            sock.close()
            if exc.errno != errno.EADDRINUSE:
                raise
    try:
        yield HELD_PORTS
    finally:
        for sock in held:
            sock.close()


@pytest.fixture(scope="module")
def demo(busy_ports):
    for port in busy_ports:  # held by the fixture, or by something else: busy either way
        with socket.socket() as probe:
            assert probe.connect_ex(("127.0.0.1", port)) == 0, f"port {port} is not busy"
    up = script("up", timeout=45 * 60, check=False)
    if up.returncode == NO_ENGINE:
        script("down", check=False)
        reason = (up.stderr.strip().splitlines() or ["no Docker engine"])[-1]
        pytest.skip(f"docker tier skipped: {reason}")
    try:
        yield up
    finally:
        script("down", timeout=300, check=False)


def test_up_from_scratch_ends_with_the_table_equal_to_the_expectation(demo):
    assert demo.returncode == 0, f"{demo.stdout[-3000:]}\n{demo.stderr[-3000:]}"
    assert "RESULT: error_log EQUALS the expectation" in demo.stdout
    # The generator's expectation came from the parser under test; hold the table against the
    # independent one too.
    assert table() == _expected(_generator_load())


def test_the_spark_ui_is_at_the_url_up_printed_not_on_the_busy_port(demo, busy_ports):
    url = re.search(r"the Spark UI: +(http://127\.0\.0\.1:(\d+)/)", demo.stdout)
    assert url, demo.stdout[-3000:]
    assert int(url.group(2)) not in busy_ports
    with urllib.request.urlopen(url.group(1) + "json/", timeout=10) as r:
        master = json.load(r)
    assert master["status"] == "ALIVE"
    assert "ALIVE" in [w["state"] for w in master["workers"]]
    for service in ("stage", "sink"):
        printed = re.search(rf"the {service}'s metrics: +http://127\.0\.0\.1:(\d+)/metrics",
                            demo.stdout)
        assert printed, demo.stdout[-3000:]
        assert int(printed.group(1)) not in busy_ports


def _port(service: str) -> int:
    port = host_port(service)
    assert port is not None, f"{service} is not running"
    return port


def test_the_metrics_of_the_stage_and_the_sink(demo):
    n, _ = _generator_load()
    stage = read_metrics(_port("stage"), timeout=10)
    assert stage["logcount_records_read_total"] == n
    assert stage["logcount_batches_committed_total"] >= 1
    assert stage["logcount_malformed_records_total"] > 0  # the generator writes ~1 % malformed
    sink = read_metrics(_port("sink"), timeout=10)
    assert sink["logcount_sink_records_applied_total"] >= 1
    assert sink["logcount_sink_batches_written_total"] >= 1


def test_the_reader_shows_the_table(demo):
    expected = _expected(_generator_load())
    want = f"{len(expected)}\t{sum(expected.values())}"
    # The reader prints "minutes<TAB>errors" every 5 s.
    wait_until(lambda: want in compose("logs", "--no-log-prefix", "reader"), 60,
               f"the reader to print {want!r}")


def test_the_compose_mysql_takes_a_grouped_table_with_values_a_default_collation_merges(demo):
    """A grouped stage and `sink --table` (in a container of the demo's image, on the demo's
    network) into the compose stack's MySQL: the table equals the generator's per-series
    expectation plus records whose hosts differ only by case or a trailing space, each a row."""
    n, seed = GROUPED_LOAD
    marker = "== the expectation of the generator =="
    steps = [
        f"logcount produce --synthetic {n} --seed {seed} --shape filebeat --dimensions "
        f"--topic grouped-logs --partitions 2 --expect /tmp/series.json "
        f"--expect-group-by {GROUP_BY} --level '*'",
        "logcount produce --file - --topic grouped-logs",
        f"logcount run --once --master 'local[2]' --input-topic grouped-logs --output-topic "
        f"grouped-counts --dlq-topic grouped-dlq --group-id grouped --metrics-port 0 "
        f"--json-line-field message --level '*' --group-by {GROUP_BY}",
        f"logcount sink --once --topic grouped-counts --group-id grouped-sink --metrics-port 0 "
        f"--table {GROUPED_TABLE} --mysql-url mysql://root:logcount@mysql:3306/logcount",
        f"echo '{marker}'", "cat /tmp/series.json",
    ]
    lines, collation_rows = _collation_records()
    done = compose("run", "--rm", "--no-deps", "-T", "--entrypoint", "sh", "generator", "-c",
                   " && ".join(steps), stdin="".join(line + "\n" for line in lines))
    doc = json.loads(done.split(marker, 1)[1])
    assert doc["group_by"] == {"host": "host.name", "level": "level"} and len(doc["series"]) > 50
    expected = Counter({(s["minute"], s["dims"]["host"], s["dims"]["level"]): s["count"]
                        for s in doc["series"]})
    expected.update(collation_rows)

    def query(sql: str) -> list[list[str]]:
        out = compose("exec", "-T", "mysql", "mysql", "-uroot", "-plogcount", "-N", "-B",
                      "logcount", "-e", sql)
        return [line.split("\t") for line in out.splitlines()]

    rows = {(m, bytes.fromhex(h).decode(), lv): int(c) for m, h, lv, c in query(
        "SELECT DATE_FORMAT(log_time, '%Y-%m-%d %H:%i:00'), HEX(host), level, log_count "
        f"FROM {GROUPED_TABLE}")}
    assert rows == dict(expected)
    assert {h for _, h, _ in rows} >= set(COLLATION_HOSTS)
    # The server is MySQL (mysql:8.4, or the stand-in: MySQL from Debian sid), never MariaDB,
    # and the key's collation its binary NO PAD one, utf8mb4_0900_bin.
    ((version,),) = query("SELECT VERSION()")
    collations = {c for (c,) in query(
        "SELECT COLLATION_NAME FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = 'logcount' "
        f"AND TABLE_NAME = '{GROUPED_TABLE}' AND COLLATION_NAME IS NOT NULL")}
    assert "mariadb" not in version.lower(), version
    assert collations == {"utf8mb4_0900_bin"}, (version, collations)


def _collation_records() -> tuple[list[str], Counter]:
    """Filebeat envelopes whose hosts a default collation would merge; their series by
    construction."""
    lines: list[str] = []
    rows: Counter[tuple[str, str, str]] = Counter()
    for i in range(48):
        host, level = COLLATION_HOSTS[i % 4], ("ERROR", "WARN", "INFO")[i % 3]
        minute = f"2017-07-30 09:0{i % 2}"
        lines.append(json.dumps({"message": f"{minute}:{i:02d} {level} request {i} failed",
                                 "host": {"name": host}}))
        rows[(f"{minute}:00", host, level)] += 1
    return lines, rows


def _final_rows(sql: str) -> list[list[str]]:
    out = compose("exec", "-T", "mysql", "mysql", "-uroot", "-plogcount", "-N", "-B", "-e", sql,
                  check=False)
    return [line.split("\t") for line in out.splitlines() if "\t" in line]


def test_the_final_minutes_are_exact_once_each_and_closed_through_the_quiet_one(demo):
    """The second stage (--emit-final 1m) on the last 5 minutes' lines: error_log_final holds one
    row per minute, with no gap from its first to the minute after the last line (closed by the
    clock with zero), each equal to what the independent parser counts in the topic's lines, and
    each closed once in error_log_final_closed."""
    assert "RESULT: error_log_final EQUALS the expectation" in demo.stdout
    rows = _final_rows("SELECT DATE_FORMAT(log_time, '%Y-%m-%d %H:%i:00'), log_count "
                       "FROM logcount.error_log_final ORDER BY log_time")
    table = {m: int(n) for m, n in rows}
    assert len(table) == len(rows)  # insert-only: a minute once
    minutes = sorted(table)
    first, last = datetime.fromisoformat(minutes[0]), datetime.fromisoformat(minutes[-1])
    assert len(minutes) == int((last - first).total_seconds() // 60) + 1, "a gap"
    # The generator's lines again (its span begins at the first minute: thousands of lines a
    # minute, so it has an ERROR line), counted by the independent parser.
    cmd = SERVICES["generator-final"]["command"]
    n, seed, span = (int(cmd[cmd.index(f) + 1]) for f in ("--synthetic", "--seed", "--recent"))
    counted: Counter = Counter()
    for r in synthetic_records("seed", n, seed, span_minutes=span, start=first):
        parsed = reference_parse(r.value)
        if parsed is not None and is_counted(parsed[1]):
            counted[parsed[0]] += 1
    assert min(counted) == minutes[0] and max(counted) < minutes[-1]
    assert table == {m: counted.get(m, 0) for m in minutes}
    closed = _final_rows("SELECT DATE_FORMAT(window_start, '%Y-%m-%d %H:%i:00'), log_count "
                         "FROM logcount.error_log_final_closed "
                         "WHERE window_end = window_start + INTERVAL 1 MINUTE")
    assert sorted(m for m, _ in closed) == minutes
    assert {m: int(n) for m, n in closed} == table


def test_a_killed_stage_restarts_and_the_table_is_exact_again(demo):
    first = _generator_load()
    n, seed = SECOND_LOAD
    loader = subprocess.Popen(
        [str(SCRIPT), "compose", "run", "--rm", "-T", "generator", "produce", "--synthetic",
         str(n), "--seed", str(seed), "--topic", "logs", "--partitions", "4"],
        cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    # An operator's kill: docker does not restart a container it was told to kill, so start it.
    subprocess.run(["docker", "kill", compose("ps", "-q", "stage").strip()], check=True,
                   capture_output=True)
    assert loader.wait(timeout=300) == 0, loader.communicate()[1]
    compose("start", "stage")
    # A crash: the process dies under the stage's feet (as the OOM killer would), while it is
    # catching up on the second load; `restart: on-failure` brings it back.
    before = container_state("stage")
    # Asked each time: the restarted container has a new host port.
    wait_until(lambda: _answers(host_port("stage")), 180, "the restarted stage's /healthz")
    os.kill(before["pid"], 9)
    wait_until(lambda: container_state("stage")["restarts"] > before["restarts"], 120,
               "the restart policy to restart the stage")
    expected = _expected(first, SECOND_LOAD)
    wait_until(lambda: table() == expected, 600, "error_log to equal both loads' expectation")
    # The output topic's totals never go down, and the sink took each once: the table is
    # exactly the expectation, no minute more.
    assert table() == expected


def _answers(port: int | None) -> bool:
    if port is None:
        return False
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=3):
            return True
    except OSError:
        return False


def test_the_integration_core_runs_through_testcontainers(demo):
    """Both fixture paths are real: with the engine up, the core integration tests run on
    Kafka and MySQL containers (the stand-ins where Docker Hub cannot be reached)."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("LOGCOUNT_BOOTSTRAP_SERVERS", "LOGCOUNT_MYSQL_URL")}
    env.update(LOGCOUNT_TEST_STACK="testcontainers",
               # Ryuk (the reaper container) is another image to pull; the fixture stops its
               # containers itself.
               TESTCONTAINERS_RYUK_DISABLED="true")
    if (ROOT / ".cache" / "docker" / "standins").exists():
        ci = yaml.safe_load((ROOT / "docker" / "compose.ci.yaml").read_text())["services"]
        images = {s: ci[s]["image"] for s in ("kafka", "mysql")}
        env.update(LOGCOUNT_TEST_KAFKA_IMAGE=images["kafka"],
                   LOGCOUNT_TEST_MYSQL_IMAGE=images["mysql"])
    proc = subprocess.run(
        # The tests of the stack itself (the broker's read_committed, transactions and fencing)
        # and of the stage and sink against MySQL, drift included: every fixture a container
        # stands in for. The stage's own behaviour (test_stage.py) does not depend on where its
        # broker runs, and the embedded run has it.
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", "integration",
         "tests/integration/test_stack.py", "tests/integration/test_sink_drift.py"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=1200)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    # Every test of the two files but test_stack.py's two of the embedded stack's own CLI.
    passed = re.search(r"(\d+) passed", proc.stdout)
    assert passed and int(passed.group(1)) >= 8, proc.stdout[-2000:]


def test_down_leaves_nothing_running(demo):
    started_engine = (ROOT / ".cache" / "docker" / "dockerd.pid").exists()
    script("down", timeout=300)
    if started_engine:
        # The containers' shims exit a moment after dockerd does.
        wait_until(lambda: subprocess.run(["pgrep", "dockerd|containerd"],
                                          capture_output=True).returncode == 1,
                   30, "dockerd, containerd and their shims to exit", step_s=1)
    else:  # an engine this tier did not start stays, with none of the demo's containers
        out = subprocess.run(["docker", "ps", "-aq", "--filter", "label=com.docker.compose."
                              "project=logcount"], capture_output=True, text=True).stdout
        assert out.strip() == ""
