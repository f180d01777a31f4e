"""Counting per series through the real CLI and broker: `logcount run --once --group-by ...`.

The input records are written here with plain Python and the expected counts worked out by
construction (the values each record was built from), never by the project's parser. Each test
reads the output topic back: the key is the JSON array of the minute and the values, the value
adds `dims`, and the last record per key is that series' exact total, through a restart.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from collections import Counter

from confluent_kafka import Producer

from logcount.connectors import kafka_io
from tests.support.readers import read_all
from tests.support.run import cli, stage_args


def _write(bootstrap: str, topic: str, records: list[tuple[bytes | None, bytes]]) -> None:
    kafka_io.ensure_topic(kafka_io.admin(bootstrap), topic, 2)
    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5})
    for key, value in records:
        p.produce(topic, value, key=key)
    assert p.flush(60) == 0


def _series(bootstrap: str, topic: str) -> dict[tuple[str, ...], int]:
    """The output topic's last total per key, keyed (minute, *values); each value checked
    against its key."""
    out: dict[tuple[str, ...], int] = {}
    for m in read_all(bootstrap, topic):
        key = tuple(json.loads(m.key()))
        v = json.loads(m.value())
        assert key == (v["log_time"], *v["dims"].values()), (m.key(), m.value())
        assert m.key() == json.dumps(list(key), ensure_ascii=False,
                                     separators=(",", ":")).encode()
        out[key] = v["log_count"]
    return out


HOSTS = ["web-1", "Web-1", "pad ", "db|1", 'q"x\ny', "caf\u00e9", None, 42]
LEVELS = ["ERROR", "INFO", "warn", "Error"]
KEYS = [b"k1", None, b"\xffk"]


def _filebeat(rng: random.Random, n: int, expected: Counter) -> list[tuple[bytes | None, bytes]]:
    """Filebeat envelopes; `expected` gains (minute, host, LEVEL, key text) per record."""
    out = []
    for i in range(n):
        host, level, key = rng.choice(HOSTS), rng.choice(LEVELS), rng.choice(KEYS)
        mi, sec = rng.randrange(3), rng.randrange(60)
        env: dict = {"@timestamp": "2024-05-01T10:00:00Z",
                     "message": f"2024-05-01 10:0{mi}:{sec:02d} {level} request {i} failed"}
        if host is not None:
            env["host"] = {"name": host}
        out.append((key, json.dumps(env).encode()))
        host_text = "" if host is None else str(host)
        key_text = "" if key is None else key.decode("utf-8", "replace")
        expected[(f"2024-05-01 10:0{mi}:00", host_text, level.upper(), key_text)] += 1
    return out


def test_filebeat_by_host_level_and_key_with_every_level_through_a_restart(endpoints, names):
    rng = random.Random(39)
    expected: Counter = Counter()
    bad = [(None, b"not json"),
           (b"k1", json.dumps({"message": "2024-05-01 10:00:00 ERROR x",
                               "host": {"name": {"nested": 1}}}).encode()),
           (None, json.dumps({"message": "2024-05-01 10:00:00 ERROR x",
                              "host": {"name": ["a"]}}).encode())]
    _write(endpoints.bootstrap, names.topic("in"), _filebeat(rng, 700, expected) + bad)
    flags = ["--once", "--json-line-field", "message", "--level", "*",
             "--group-by", "host=host.name,level,k=key"]
    cli(*stage_args(endpoints, names, *flags))
    assert _series(endpoints.bootstrap, names.topic("out")) == dict(expected)

    # A restart restores the series: totals go on from where they were, never recounted.
    _write(endpoints.bootstrap, names.topic("in"), _filebeat(rng, 300, expected))
    second = cli(*stage_args(endpoints, names, *flags))
    assert "recount" not in second.stderr
    assert _series(endpoints.bootstrap, names.topic("out")) == dict(expected)
    assert len(expected) > 50
    out = read_all(endpoints.bootstrap, names.topic("out"))
    assert {json.loads(m.value())["level"] for m in out} == {"*"}
    assert list(json.loads(out[0].value())["dims"]) == ["host", "level", "k"]
    dlq = sorted(json.loads(m.value())["reason"]
                 for m in read_all(endpoints.bootstrap, names.topic("dlq")))
    assert dlq == ["invalid dimension", "invalid dimension", "not a JSON object"]


LOGGER_RE = r"(?<time>\S+ \S+) (?<level>\w+) (?<logger>\S+)"


def _logger_lines(counts: dict[str, int]) -> list[tuple[bytes | None, bytes]]:
    return [(None, f"2024-05-01 10:00:{i % 60:02d} ERROR {logger} boom".encode())
            for logger, n in counts.items() for i in range(n)]


def test_a_regex_group_with_a_bound_on_series_overflows_into_other(endpoints, names):
    flags = ["--once", "--line-regex", LOGGER_RE, "--group-by", "logger", "--max-series", "2"]
    m = "2024-05-01 10:00:00"
    _write(endpoints.bootstrap, names.topic("in"), _logger_lines({"com.a": 5, "com.b": 3}))
    cli(*stage_args(endpoints, names, *flags))
    assert _series(endpoints.bootstrap, names.topic("out")) == {(m, "com.a"): 5, (m, "com.b"): 3}

    _write(endpoints.bootstrap, names.topic("in"),
           _logger_lines({"com.a": 1, "com.c": 4, "com.d": 2, "__other__": 1}))
    second = cli(*stage_args(endpoints, names, *flags))
    assert "--max-series 2 reached" in second.stderr and "logger" in second.stderr
    # named tuples stay named; new ones (and a literal __other__) count under the overflow
    assert _series(endpoints.bootstrap, names.topic("out")) == {
        (m, "com.a"): 6, (m, "com.b"): 3, (m, "__other__"): 7}
    shown = cli("state", "show", *stage_args(endpoints, names, *flags)[1:], "--json")
    report = json.loads(shown.stdout)
    assert report["series"] == 2 and report["minutes"] == 3
    assert report["start"]["action"] == "resume"

    # another bound is another identity: refused, one line, exit 2
    refused = cli(*stage_args(endpoints, names, "--once", "--line-regex", LOGGER_RE,
                              "--group-by", "logger", "--max-series", "3"), check=False)
    assert refused.returncode == 2 and "--max-series" in refused.stderr


def test_a_state_written_by_the_release_without_group_by_resumes_without_a_recount(
        endpoints, names, tmp_path):
    """The first run is the installed release (the virtualenv's logcount, not this tree),
    the second this tree's: the output records keep their bytes and nothing is recounted."""
    lines = [f"2024-05-01 10:0{i % 3}:{i % 60:02d} {'ERROR' if i % 4 else 'INFO'} x".encode()
             for i in range(120)]
    _write(endpoints.bootstrap, names.topic("in"), [(None, v) for v in lines[:80]])
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    release = subprocess.run([sys.executable, "-m", "logcount.cli",
                              *stage_args(endpoints, names, "--once")],
                             capture_output=True, text=True, timeout=600, env=env, cwd=tmp_path)
    assert release.returncode == 0, release.stderr[-3000:]
    _write(endpoints.bootstrap, names.topic("in"), [(None, v) for v in lines[80:]])
    ours = cli(*stage_args(endpoints, names, "--once"))
    assert "recount" not in ours.stderr and "WARNING" not in ours.stderr, ours.stderr[-3000:]
    expected = Counter(v[:16].decode() + ":00" for v in lines if b" ERROR " in v)
    last = {}
    for m in read_all(endpoints.bootstrap, names.topic("out")):
        last[m.key()] = m.value()
    assert last == {k.encode(): json.dumps({"log_time": k, "log_count": n, "level": "ERROR"})
                    .encode() for k, n in expected.items()}
