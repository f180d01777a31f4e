"""The recipes of docs/log-formats.md on real programs' own output.

Each test starts the program (MariaDB, Prometheus, toxiproxy, Python's http.server; the stack's
Kafka broker and a stage's Spark driver), makes it log errors and warnings, captures what it
wrote, loads it with `logcount produce --file` and runs `logcount run --once` with the recipe.
The expectation is never the project's parser: each test reads the captured text with plain
Python (strptime, split, json, shlex) into per-minute counts and the lines that must go to the
DLQ, and the output topic and the DLQ must hold exactly that. MySQL 8 is the one exception: no
server runs here, so its lines are written in the format its manual documents.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import urllib.error
import urllib.request
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pymysql
import pytest

from logcount.connectors import kafka_io
from logcount.core.paths import home
from tests.support.names import Names
from tests.support.ports import free_port
from tests.support.readers import last_totals, read_all
from tests.support.run import cli, stage_args, wait_for

# A line as the test reads it: (its time, zone included; its level), or None when the recipe must
# send it to the DLQ.
Reading = tuple[datetime, str] | None


def _tool(name: str, path: str | None = None) -> str:
    found = path if path and os.access(path, os.X_OK) else shutil.which(name)
    if not found:
        (pytest.fail if os.environ.get("CI") else pytest.skip)(
            f"{name} not found: run scripts/setup.sh")
    return str(found)



@contextmanager
def _running(cmd: list[str], env: dict | None = None, **streams) -> Iterator[subprocess.Popen]:
    """The program, stopped by SIGTERM (then SIGKILL) on the way out; callers wait for a clean
    exit themselves where its last lines matter."""
    proc = subprocess.Popen(cmd, env={**os.environ, **(env or {})}, stdin=subprocess.DEVNULL,
                            **streams)
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=5):
            return True
    except OSError:
        return False


def _stop(proc: subprocess.Popen) -> None:
    proc.send_signal(signal.SIGTERM)
    proc.wait(60)


def _lines(raw: bytes) -> list[bytes]:
    """The records `produce --file` makes of the text: split on \\n, up to the last one."""
    return raw[:raw.rfind(b"\n") + 1].split(b"\n")[:-1]


def _minute(dt: datetime) -> str:
    return dt.astimezone(UTC).strftime("%Y-%m-%d %H:%M:00")


def _expect(lines: list[bytes], read: Callable[[str], Reading], levels: set[str]):
    """(per-minute counts of `levels`, lines for the DLQ, how many lines of each level)."""
    counts: Counter = Counter()
    malformed: list[bytes] = []
    seen: Counter = Counter()
    for line in lines:
        try:
            got = read(line.decode())
        except (ValueError, IndexError, AttributeError):  # a line not of the program's shape
            got = None
        if got is None:
            malformed.append(line)
            continue
        seen[got[1].upper()] += 1
        if got[1].upper() in levels:
            counts[_minute(got[0])] += 1
    return dict(counts), malformed, seen


def _count(endpoints, names: Names, lines: list[bytes], path: Path, flags: list[str],
           env: dict | None = None) -> tuple[dict[str, int], list[bytes], set[str]]:
    """produce --file, run --once with `flags`: (the last total per minute, the DLQ's lines,
    the output records' level labels)."""
    path.write_bytes(b"".join(line + b"\n" for line in lines))
    cli("produce", "--bootstrap-servers", endpoints.bootstrap, "--topic", names.topic("in"),
        "--file", str(path))
    cli(*stage_args(endpoints, names, "--once", "--metrics-port", "0", *flags), env=env)
    out = read_all(endpoints.bootstrap, names.topic("out"))
    values = {(m.partition(), m.offset()): m.value() or b""
              for m in read_all(endpoints.bootstrap, names.topic("in"))}
    dlq = [json.loads(m.value()) for m in read_all(endpoints.bootstrap, names.topic("dlq"))]
    return (last_totals(out), [values[(d["partition"], d["offset"])] for d in dlq],
            {json.loads(m.value())["level"] for m in out})


def _check(endpoints, names, lines, path, flags, read, levels: set[str], env=None) -> Counter:
    counts, malformed, seen = _expect(lines, read, levels)
    assert counts, f"no {levels} line was captured: the test provoked none"
    totals, dlq, labels = _count(endpoints, names, lines, path, flags, env)
    print(f"{path.stem}: {len(lines)} lines, {sum(counts.values())} counted over "
          f"{len(counts)} minutes, {len(malformed)} to the DLQ, levels {dict(seen)}")
    assert totals == counts, "output topic (last total per minute)"
    assert sorted(dlq) == sorted(malformed), "the DLQ holds exactly the lines the test cannot read"
    assert labels == {",".join(sorted(levels))}
    return seen


# --- MariaDB and MySQL 8 -------------------------------------------------------------------------

# MariaDB's error log, `YYYY-MM-DD HH:MM:SS THREAD [Level] message`, the hour padded with a space
# before 10:00 (`%2d`): the optional `[ ]` of the pattern takes that space.
MARIADB_RUN = ["--line-regex",
               r"(?<time>\d{4}-\d{2}-\d{2} [ \d]\d:\d{2}:\d{2}) \d+ \[(?<level>[A-Za-z]+)\] ",
               "--time-pattern", "yyyy-MM-dd [ ]H:mm:ss", "--level", "ERROR,Warning"]


def _read_mariadb(offset: timedelta) -> Callable[[str], Reading]:
    def read(text: str) -> Reading:
        # One space in a strptime format matches any run of spaces: the padded hour too.
        local = datetime.strptime(text[:19], "%Y-%m-%d %H:%M:%S")
        thread, label, _ = text[20:].split(" ", 2)
        if not (thread.isdigit() and label[:1] == "[" and label[-1:] == "]"):
            return None
        return local.replace(tzinfo=timezone(offset)), label[1:-1]
    return read


def test_mariadb_error_log(endpoints, names, tmp_path):
    """A throwaway mariadbd writes its error log (--log-error) in a zone where it is now about
    6 in the morning, so the log pads the hour whenever the test runs, and --timezone places it.
    Provoked: a plugin that does not exist (ERROR at start), failed logins (Warning)."""
    mariadbd = _tool("mariadbd", "/usr/sbin/mariadbd")
    install_db = _tool("mariadb-install-db")
    hours = 6 - datetime.now(UTC).hour  # east of UTC: from -17 to +6
    zone = f"{'+' if hours >= 0 else '-'}{abs(hours):02d}:00"
    data, sock, log = tmp_path / "data", tmp_path / "m.sock", tmp_path / "mariadb.err"
    user = ["--user=root"] if os.geteuid() == 0 else []
    subprocess.run([install_db, "--no-defaults", f"--datadir={data}", "--skip-test-db",
                    "--auth-root-authentication-method=normal", *user],
                   check=True, capture_output=True, timeout=120)
    cmd = [mariadbd, "--no-defaults", f"--datadir={data}", "--skip-networking",
           f"--socket={sock}", f"--pid-file={tmp_path / 'm.pid'}", f"--log-error={log}",
           "--innodb-buffer-pool-size=16M", "--plugin-load-add=nope", *user]
    # POSIX TZ counts hours west of UTC; the <name> is what the zone is called.
    with _running(cmd, env={"TZ": f"<{zone.replace(':', '')}>{-hours}"},
                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) as proc:
        wait_for(lambda: log.exists() and b"ready for connections" in log.read_bytes(), 60,
                 what="mariadbd ready")
        for user_name, password in (("ghost", "x"), ("root", "wrong"), ("ghost", "")):
            with pytest.raises(pymysql.err.OperationalError, match="Access denied"):
                pymysql.connect(unix_socket=str(sock), user=user_name, password=password)
        _stop(proc)
    lines = _lines(log.read_bytes())
    seen = _check(endpoints, names, lines, tmp_path / "mariadb.txt",
                  [*MARIADB_RUN, f"--timezone={zone}"],
                  _read_mariadb(timedelta(hours=hours)), {"ERROR", "WARNING"})
    assert seen["ERROR"] >= 2 and seen["WARNING"] >= 3 and seen["NOTE"], seen
    assert any(b"Access denied" in line for line in lines)


# MySQL 8's error log (log_sink_internal), written here in the format its reference manual
# documents ("Error Log Output Format": time thread [label] [err_code] [subsystem] msg). No
# MySQL server runs on this machine: these lines are not captured from one.
MYSQL8_DOCUMENTED_FORMAT = [
    b"2026-11-26T03:34:44.123456Z 0 [System] [MY-010116] [Server] /usr/sbin/mysqld (mysqld 8.4.3)"
    b" starting as process 1",
    b"2026-11-26T03:34:44.135794Z 1 [System] [MY-013576] [InnoDB] InnoDB initialization has"
    b" started.",
    b"2026-11-26T03:34:44.923406Z 0 [Warning] [MY-010068] [Server] CA certificate ca.pem is self"
    b" signed.",
    b"2026-11-26T03:34:44.963127Z 0 [Note] [MY-010253] [Server] IPv6 is available.",
    b"2026-11-26T03:35:02.209112Z 8 [Note] [MY-010926] [Server] Access denied for user"
    b" 'ghost'@'localhost' (using password: YES)",
    b"2026-11-26T03:35:59.999999Z 0 [ERROR] [MY-000067] [Server] unknown variable 'nope=1'.",
    b"2026-11-26T03:36:00.000001Z 0 [ERROR] [MY-010119] [Server] Aborting",
    # log_timestamps=SYSTEM: local time with its offset.
    b"2026-11-26T09:06:01.500000+05:30 0 [Warning] [MY-010055] [Server] IP address '10.0.0.7'"
    b" could not be resolved: Name or service not known",
    b"2026-11-26T03:36:02.412530Z 0 [System] [MY-010910] [Server] /usr/sbin/mysqld: Shutdown"
    b" complete (mysqld 8.4.3)  MySQL Community Server - GPL.",
]
MYSQL8_RUN = ["--line-regex", r"(?<time>\S+) \d+ \[(?<level>[A-Za-z]+)\] ",
              "--level", "ERROR,Warning"]


def _read_mysql8(text: str) -> Reading:
    stamp, thread, label, _ = text.split(" ", 3)
    if not (thread.isdigit() and label[:1] == "[" and label[-1:] == "]"):
        return None
    return datetime.fromisoformat(stamp), label[1:-1]


def test_mysql8_error_log_as_documented(endpoints, names, tmp_path):
    lines = MYSQL8_DOCUMENTED_FORMAT
    seen = _check(endpoints, names, lines, tmp_path / "mysql8.txt",
                  MYSQL8_RUN, _read_mysql8,
                  {"ERROR", "WARNING"})
    assert seen == {"SYSTEM": 3, "WARNING": 2, "NOTE": 2, "ERROR": 2}


# --- logfmt from Go services: Prometheus ---------------------------------------------------------

# go-kit's logfmt (Prometheus 2: `ts=... caller=... level=info`) and slog's (Prometheus 3:
# `time=... level=INFO source=...`): the time key, at most one key=value, then the level.
LOGFMT_RUN = ["--line-regex", r"(?:ts|time)=(?<time>\S+) (?:\S+ )?level=(?<level>[A-Za-z]+)",
              "--level", "error,warn"]


def _read_logfmt(text: str) -> Reading:
    fields = dict(kv.split("=", 1) for kv in shlex.split(text))
    stamp = fields.get("ts") or fields.get("time")
    if not stamp or not fields.get("level"):
        return None
    return datetime.fromisoformat(stamp), fields["level"]


def test_prometheus_logfmt(endpoints, names, tmp_path):
    """Prometheus at --log.level=debug (its start writes debug lines), a config reload that
    fails twice (level=error) and SIGTERM (level=warn)."""
    prometheus = _tool("prometheus")
    config = tmp_path / "prometheus.yml"
    config.write_text(
        "global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
        "scrape_configs: [{job_name: gone, static_configs: [{targets: ['127.0.0.1:9']}]}]\n")
    log = tmp_path / "prometheus.log"
    cmd = [prometheus, f"--config.file={config}", f"--storage.tsdb.path={tmp_path / 'tsdb'}",
           f"--web.listen-address=127.0.0.1:{free_port()}", "--log.level=debug"]
    with open(log, "wb") as err, _running(cmd, stdout=subprocess.DEVNULL, stderr=err) as proc:
        wait_for(lambda: b"Server is ready" in log.read_bytes(), 60, what="prometheus ready")
        config.write_text("scrape_configs: [\n")
        for n in (1, 2):
            proc.send_signal(signal.SIGHUP)
            wait_for(lambda n=n: log.read_bytes().count(b"Error reloading config") >= n, 30,
                     what="the failed reload")
        _stop(proc)
    seen = _check(endpoints, names, _lines(log.read_bytes()), tmp_path / "prometheus.txt",
                  LOGFMT_RUN, _read_logfmt, {"ERROR", "WARN"})
    assert seen["ERROR"] >= 2 and seen["WARN"] and seen["INFO"] and seen["DEBUG"], seen


# --- zerolog JSON: toxiproxy ---------------------------------------------------------------------

ZEROLOG_RUN = ["--json-time-field", "time", "--json-level-field", "level", "--level", "error,warn"]


def _read_zerolog(text: str) -> Reading:
    obj = json.loads(text)
    if not (isinstance(obj.get("time"), str) and isinstance(obj.get("level"), str)):
        return None
    return datetime.fromisoformat(obj["time"]), obj["level"]


def test_toxiproxy_zerolog(endpoints, names, tmp_path):
    """toxiproxy (its zerolog writes UTC times, whatever TZ says): a proxy to a closed port
    taken by clients (error), a listen address in use (warn), bad API calls (debug)."""
    server = _tool("toxiproxy-server", str(home() / ".cache" / "bin" / "toxiproxy-server"))
    api, listen = free_port(), free_port()
    log = tmp_path / "toxiproxy.log"
    with open(log, "wb") as out, _running([server, "-host", "127.0.0.1", "-port", str(api)],
                                          stdout=out, stderr=subprocess.STDOUT):
        def call(method: str, path: str, body: bytes | None = None) -> int:
            req = urllib.request.Request(f"http://127.0.0.1:{api}{path}", body, method=method)
            try:
                with urllib.request.urlopen(req, timeout=10) as resp:
                    return resp.status
            except urllib.error.HTTPError as exc:
                return exc.code

        wait_for(lambda: _answers(f"http://127.0.0.1:{api}/version"), 30, what="toxiproxy")
        proxy = {"name": "dead", "listen": f"127.0.0.1:{listen}", "upstream": "127.0.0.1:9"}
        assert call("POST", "/proxies", json.dumps(proxy).encode()) == 201
        assert call("POST", "/proxies", b"not json") == 400
        assert call("GET", "/proxies/missing") == 404
        busy = {**proxy, "name": "busy", "listen": f"127.0.0.1:{api}"}
        assert call("POST", "/proxies", json.dumps(busy).encode()) == 500
        for _ in range(3):
            with socket.create_connection(("127.0.0.1", listen), timeout=10) as s:
                s.recv(1)  # toxiproxy closes it once the upstream refuses
        wait_for(lambda: log.read_bytes().count(b'"level":"error"') >= 3, 30,
                 what="the refused upstreams")
    seen = _check(endpoints, names, _lines(log.read_bytes()), tmp_path / "toxiproxy.txt",
                  ZEROLOG_RUN, _read_zerolog, {"ERROR", "WARN"})
    assert seen["ERROR"] >= 3 and seen["WARN"] and seen["INFO"] and seen["DEBUG"], seen


# --- HTTP access log: Python's http.server -------------------------------------------------------

# The status' first digit is the level (--level 5: the 5xx per minute). http.server also writes
# `code 404, message ...` before an error's access line: the level `code`, never counted.
CLF_RUN = ["--line-regex", r'\S+ \S+ \S+ \[(?<time>[^\]]+)\] (?:".*" )?(?<level>\d|code)',
           "--time-pattern", "dd/MMM/yyyy HH:mm:ss", "--level", "5"]


def _read_clf(text: str) -> Reading:
    head, _, rest = text.partition("] ")
    when = datetime.strptime(head.split(" [", 1)[1], "%d/%b/%Y %H:%M:%S").replace(tzinfo=UTC)
    if rest.startswith('"'):
        status = rest.rsplit(" ", 2)[1]
        return (when, status[0]) if status.isdigit() and len(status) == 3 else None
    return (when, "code") if rest.startswith("code ") else None


def test_http_server_access_log(endpoints, names, tmp_path):
    """python3 -m http.server: a file, missing paths (404), unsupported methods (501), a bad
    HTTP version (505), a garbled request line (400) and a request line with a quote in it."""
    (tmp_path / "www").mkdir()
    (tmp_path / "www" / "index.html").write_text("hi\n")
    port = free_port()
    log = tmp_path / "http.log"
    cmd = [sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1",
           "--directory", str(tmp_path / "www")]
    requests = [b"GET / HTTP/1.1", b"GET /index.html HTTP/1.1", b"GET /nope HTTP/1.1",
                b"POST / HTTP/1.1", b"DELETE /index.html HTTP/1.1", b"GET / HTTP/9.9",
                b"GARBAGE", b'GET /a"b HTTP/1.1', b"GET /missing HTTP/1.0"]
    env = {"TZ": "UTC", "PYTHONUNBUFFERED": "1"}  # its "Serving HTTP" line says it listens
    with open(log, "wb") as err, _running(cmd, env=env, stdout=subprocess.PIPE,
                                          stderr=err) as proc:
        assert proc.stdout is not None
        assert proc.stdout.readline().startswith(b"Serving HTTP")
        for request in requests:
            with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
                s.sendall(request + b"\r\nHost: x\r\nConnection: close\r\n\r\n")
                while s.recv(4096):
                    pass
        _stop(proc)
    seen = _check(endpoints, names, _lines(log.read_bytes()), tmp_path / "http.txt",
                  CLF_RUN, _read_clf, {"5"})
    assert seen == {"2": 2, "4": 4, "5": 3, "CODE": 7}, seen


# --- the Kafka broker's and Spark's own logs -----------------------------------------------------

KAFKA_RUN = ["--level", "WARN,ERROR"]  # the default rule
SPARK_RUN = ["--line-regex", r"(?<time>\d{2}/\d{2}/\d{2} \d{2}:\d{2}:\d{2}) (?<level>[A-Za-z]+) ",
             "--time-pattern", "yy/MM/dd HH:mm:ss", "--level", "WARN,ERROR"]


def _read_kafka(text: str) -> Reading:
    """`[2026-11-26 05:43:21,209] ERROR message (logger)`; a stack trace's lines are not."""
    when = datetime.strptime(text[1:24], "%Y-%m-%d %H:%M:%S,%f").replace(tzinfo=UTC)
    level = text[26:].split(" ", 1)[0]
    return (when, level) if text[0] == "[" and text[24:26] == "] " and level.isalpha() else None


def _read_spark(text: str) -> Reading:
    """`26/11/26 05:43:10 ERROR JavaUtils: message`; the JVM's and Spark's other lines are not."""
    when = datetime.strptime(text[:17], "%y/%m/%d %H:%M:%S").replace(tzinfo=UTC)
    level = text[18:].split(" ", 1)[0]
    return (when, level) if text[17:18] == " " and level.isalpha() else None


def _garble(port: int, payload: bytes) -> None:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(payload)
        try:
            while s.recv(4096):
                pass
        except OSError:
            pass


def test_kafka_broker_and_spark_driver_logs(endpoints, names, tmp_path):
    """The embedded broker's log while it meets an HTTP request (WARN with a stack trace), a
    request with an unknown API key (ERROR, twice, with stack traces) and new topics (INFO),
    counted by a stage whose Spark driver is given a local dir it cannot create (ERRORs with
    stack traces in the driver log); that driver log is then counted by a second stage."""
    if endpoints.kind != "embedded":
        pytest.skip("the broker's log file is the embedded stack's")
    from logcount.connectors import stack

    broker_log = stack.Kafka().log_file
    mark = broker_log.stat().st_size
    _garble(stack.KAFKA_PORT, b"GET / HTTP/1.1\r\n\r\n")
    # Size, api key 9999, version 0, correlation id 1, no client id.
    _garble(stack.KAFKA_PORT, b"\x00\x00\x00\x0a\x27\x0f\x00\x00\x00\x00\x00\x01\xff\xff")
    kafka_io.ensure_topic(kafka_io.admin(endpoints.bootstrap), names.topic("in"), 4)
    wait_for(lambda: broker_log.read_bytes()[mark:].count(b"] ERROR ") >= 2
             and b"Leader " + names.topic("in").encode() in broker_log.read_bytes()[mark:],
             30, what="the broker's lines")
    lines = _lines(broker_log.read_bytes()[mark:])
    logs = tmp_path / "logs"
    env = {"LOGCOUNT_LOG_DIR": str(logs),
           "SPARK_LOCAL_DIRS": f"/proc/logcount-no-such-dir,{tmp_path / 'spark-local'}"}
    seen = _check(endpoints, names, lines, tmp_path / "kafka.txt", KAFKA_RUN,
                  _read_kafka, {"WARN", "ERROR"}, env=env)
    assert seen["ERROR"] >= 2 and seen["WARN"] and seen["INFO"], seen

    spark = _lines((logs / "logcount-run.log").read_bytes())
    seen = _check(endpoints, Names(names.prefix + "-spark"), spark, tmp_path / "spark.txt",
                  SPARK_RUN, _read_spark, {"WARN", "ERROR"})
    assert seen["ERROR"] and seen["WARN"], seen


def test_the_log_formats_doc_shows_each_recipe_verbatim():
    """docs/log-formats.md's "Recipes proven on real programs" shows these tests' flags, in their
    order (its --timezone is an example: the server's zone)."""
    doc = (home() / "docs" / "log-formats.md").read_text()
    section = doc.split("\n## Recipes proven on real programs\n", 1)[1].split("\n## ", 1)[0]
    shown = []
    for cmd in re.findall(r"```sh\n(logcount run[^\n]*)\n```", section):
        args = shlex.split(cmd)[2:]
        if "--timezone" in args:
            del args[args.index("--timezone"):args.index("--timezone") + 2]
        shown.append(args)
    assert shown == [MARIADB_RUN, MYSQL8_RUN, LOGFMT_RUN, ZEROLOG_RUN, CLF_RUN, KAFKA_RUN,
                     SPARK_RUN]
