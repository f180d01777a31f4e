"""`run --continuation-lines skip` on real stack traces, through the CLI on the real broker.

A real `java` program and a real `python3` program log ERROR and INFO lines in their recipe's
layout (log4j2's PatternLayout, Python's logging), log chained exceptions with their traces, write
one line that is neither, and die of an uncaught exception. The test knows each line it asked for:
the log lines (read back with strptime), the one garbage line (its marker); everything else the
programs printed is trace output. The stage must count exactly the log lines, put exactly the
garbage line in the DLQ, and count every trace line in `logcount_continuation_lines_total` and in
the batch's records; a restart with `--continuation-lines dlq` is refused.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from collections import Counter
from datetime import datetime
from pathlib import Path

import pytest

from tests.support.metrics import metric
from tests.support.ports import free_port
from tests.support.readers import last_totals, read_all
from tests.support.run import cli, stage_args, start_cli, wait_for

GARBAGE = b"GARBAGE: a line of neither kind"  # no exception name, no blank: stays malformed
LOG4J2_RE = (r"(?<time>\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}[.,]\d{1,9}) \[[^\]]*\] +"
             r"(?<level>[A-Za-z]+)")
PYTHON_RE = r"(?<time>\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2},\d{3}) - \S+ - (?<level>[A-Za-z]+) - "

JAVA = """\
import java.time.LocalDateTime;
import java.time.format.DateTimeFormatter;

public class Boom {
    static final DateTimeFormatter F = DateTimeFormatter.ofPattern("yyyy-MM-dd HH:mm:ss.SSS");
    static void log(String level, String msg) {
        System.out.println(LocalDateTime.now().format(F) + " [main] " + level
            + " com.example.Boom - " + msg);
    }
    static void inner() { throw new IllegalStateException("inner cause"); }
    static void middle() {
        try { inner(); } catch (IllegalStateException e) {
            throw new RuntimeException("outer failure", e);
        }
    }
    public static void main(String[] args) {
        for (int i = 0; i < 3; i++) {
            log("INFO ", "request " + i);
            try { middle(); } catch (RuntimeException e) {
                e.addSuppressed(new java.io.IOException("close failed"));
                log("ERROR", "request " + i + " failed");
                e.printStackTrace(System.out);
            }
        }
        System.out.println("GARBAGE: a line of neither kind");
        System.out.flush();
        middle();
    }
}
"""

PYTHON = """\
import logging
import sys

logging.basicConfig(stream=sys.stdout, level=logging.INFO,
                    format="%(asctime)s - %(name)s - %(levelname)s - %(message)s")
log = logging.getLogger("app.db")


class BoomError(Exception):
    pass


def inner():
    raise KeyError("missing")


def middle():
    try:
        inner()
    except KeyError as exc:
        try:
            raise ValueError("bad value") from exc
        except ValueError:
            raise BoomError("outer")


for i in range(3):
    log.info("request %d", i)
    try:
        middle()
    except BoomError:
        log.exception("request %d failed", i)
print("GARBAGE: a line of neither kind", flush=True)
sys.stdout.flush()
middle()
"""


def _capture(cmd: list[str], cwd: Path) -> list[bytes]:
    """What the program printed (stdout and its dying stderr), one record per line."""
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, timeout=300,
                          env={**os.environ, "TZ": "UTC"})
    assert proc.returncode == 1, proc.stderr[-2000:]  # it died of its uncaught exception
    text = proc.stdout + proc.stderr
    return text[:text.rfind(b"\n") + 1].split(b"\n")[:-1]


def java_lines(tmp_path: Path) -> list[bytes]:
    java = shutil.which("java")
    if java is None:
        (pytest.fail if os.environ.get("CI") else pytest.skip)("java not found")
    (tmp_path / "Boom.java").write_text(JAVA)
    return _capture([str(java), "Boom.java"], tmp_path)


def python_lines(tmp_path: Path) -> list[bytes]:
    (tmp_path / "boom.py").write_text(PYTHON)
    return _capture([sys.executable, "boom.py"], tmp_path)


def _read(line: bytes, layout: str) -> tuple[str, str] | None:
    """(minute, level) of a line the program logged, else None: strptime on its prefix."""
    text = line.decode("utf-8", "replace")
    try:
        if layout == "java":  # 2026-11-26 09:52:01.123 [main] ERROR com.example.Boom - msg
            when = datetime.strptime(text[:23], "%Y-%m-%d %H:%M:%S.%f")
            thread, level = text[24:].split()[:2]
            ok = thread == "[main]"
        else:  # 2026-11-26 09:52:01,123 - app.db - ERROR - msg
            when = datetime.strptime(text[:23], "%Y-%m-%d %H:%M:%S,%f")
            _, name, level = text[23:].split(" - ")[:3]
            ok = name == "app.db"
    except ValueError:
        return None
    return (when.strftime("%Y-%m-%d %H:%M:00"), level) if ok else None


@pytest.mark.parametrize("layout", ["java", "python"])
def test_real_traces_are_continuation_lines(endpoints, names, tmp_path, layout):
    lines = java_lines(tmp_path) if layout == "java" else python_lines(tmp_path)
    read = [_read(line, layout) for line in lines]
    expected = Counter(r[0] for r in read if r is not None and r[1] == "ERROR")
    logged = sum(r is not None for r in read)
    garbage = [line for line in lines if line == GARBAGE]
    traces = len(lines) - logged - len(garbage)
    assert sum(expected.values()) == 3 and logged == 6 and len(garbage) == 1
    assert traces > 20 and any(line.startswith((b"Caused by:", b"ValueError: ",
                                                b"Traceback")) for line in lines)
    path = tmp_path / f"{layout}.log"
    path.write_bytes(b"".join(line + b"\n" for line in lines))
    cli("produce", "--bootstrap-servers", endpoints.bootstrap, "--topic", names.topic("in"),
        "--file", str(path))

    port = free_port()
    regex = LOG4J2_RE if layout == "java" else PYTHON_RE
    flags = ["--line-regex", regex, "--metrics-port", str(port)]
    stage = start_cli(*stage_args(endpoints, names, *flags, "--continuation-lines", "skip"),
                      log_path=tmp_path / "stage.log")
    try:
        wait_for(lambda: metric(port, "logcount_records_read_total", down=0) == len(lines), 180,
                 what="the stage to read every line")
        assert metric(port, "logcount_continuation_lines_total") == traces
        assert metric(port, "logcount_malformed_records_total") == 1
        assert metric(port, "logcount_counted_lines_total") == sum(expected.values())
    finally:
        stage.send_signal(signal.SIGTERM)
        assert stage.wait(60) == 0
    log = (tmp_path / "stage.log").read_text()
    assert f"records {len(lines)}, malformed 1, late 0, continuation {traces}," in log, log[-3000:]

    assert last_totals(read_all(endpoints.bootstrap, names.topic("out"))) == dict(expected)
    dlq = [json.loads(m.value()) for m in read_all(endpoints.bootstrap, names.topic("dlq"))]
    values = {(m.partition(), m.offset()): m.value()
              for m in read_all(endpoints.bootstrap, names.topic("in"))}
    assert [values[(d["partition"], d["offset"])] for d in dlq] == garbage

    # The same output topic under the default is refused: its totals were counted with skip.
    before = len(read_all(endpoints.bootstrap, names.topic("out")))
    refused = cli(*stage_args(endpoints, names, "--once", "--line-regex", regex,
                              "--metrics-port", "0"), check=False)
    assert refused.returncode == 2, refused.stderr[-2000:]
    last = refused.stderr.strip().splitlines()[-1]
    assert last.startswith("logcount: error: ") and (
        "--continuation-lines 'skip', this start has 'dlq'" in last), last
    assert len(read_all(endpoints.bootstrap, names.topic("out"))) == before  # nothing published
