"""Helpers for integration and chaos tests: run the CLI, read topics back, check offsets."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

import pymysql
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, TopicPartition
from confluent_kafka.admin import OffsetSpec

from logcount.connectors import kafka_io

LOGCOUNT = [sys.executable, "-m", "logcount.cli"]
ROOT = Path(__file__).resolve().parents[1]


def cli(*args: str, env: dict | None = None, timeout: float = 600,
        check: bool = True) -> subprocess.CompletedProcess:
    """Run `logcount ARGS...` as a real process; return it with its stderr."""
    proc = subprocess.run([*LOGCOUNT, *args], capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **(env or {})}, cwd=ROOT)
    if check and proc.returncode != 0:
        raise AssertionError(f"logcount {' '.join(args)} exited {proc.returncode}:\n"
                             f"{proc.stderr[-4000:]}")
    return proc


def start_cli(*args: str, env: dict | None = None, log_path: Path | None = None):
    out = open(log_path, "ab") if log_path else subprocess.DEVNULL  # noqa: SIM115
    return subprocess.Popen([*LOGCOUNT, *args], stdout=out, stderr=subprocess.STDOUT,
                            env={**os.environ, **(env or {})}, cwd=ROOT)


def stage_args(endpoints, names, *extra: str) -> list[str]:
    return ["run", "--bootstrap-servers", endpoints.bootstrap,
            "--input-topic", names.topic("in"), "--output-topic", names.topic("out"),
            "--dlq-topic", names.topic("dlq"), "--group-id", names.group,
            "--transactional-id", names.txn_id, "--master", "local[2]", *extra]


def sink_args(endpoints, names, url, *extra: str) -> list[str]:
    return ["sink", "--bootstrap-servers", endpoints.bootstrap, "--topic", names.topic("out"),
            "--group-id", names.group + "-sink", "--mysql-url", _url(url), *extra]


def _url(url) -> str:
    pw = f":{url.password}" if url.password else ""
    return f"mysql://{url.user}{pw}@{url.host}:{url.port}/{url.database}"


def read_all(bootstrap: str, topic: str, committed_only: bool = True,
             timeout_s: float = 60.0, conf: dict | None = None) -> list:
    """Every record of `topic` in offset order per partition (read_committed by default);
    `conf`: client settings of a secured cluster."""
    adm = kafka_io.admin(bootstrap, conf)
    parts = kafka_io.partitions_of(adm, topic) or []
    ends = kafka_io.list_offsets(adm, topic, parts, OffsetSpec.latest(), committed_only)
    todo = {p for p in parts if ends[p] > 0}
    consumer = Consumer({
        **(conf or {}), "bootstrap.servers": bootstrap, "group.id": f"reader-{time.time_ns()}",
        "isolation.level": "read_committed" if committed_only else "read_uncommitted",
        "enable.auto.commit": False, "enable.partition.eof": True,
    })
    out = []
    try:
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in todo])
        deadline = time.monotonic() + timeout_s
        while todo and time.monotonic() < deadline:
            for msg in consumer.consume(1000, 0.5):
                if msg.error():
                    if msg.error().code() == KafkaError._PARTITION_EOF:
                        todo.discard(msg.partition())
                    continue
                out.append(msg)
        assert not todo, f"did not reach the end of {topic} partitions {todo}"
    finally:
        consumer.close()
    return out


def totals_history(msgs) -> dict[str, list[int]]:
    """Per minute, every total the output topic published, in order."""
    hist: dict[str, list[int]] = defaultdict(list)
    for m in sorted(msgs, key=lambda m: (m.partition(), m.offset())):
        v = json.loads(m.value())
        assert m.key().decode() == v["log_time"]
        hist[v["log_time"]].append(v["log_count"])
    return dict(hist)


def last_totals(msgs) -> dict[str, int]:
    return {k: v[-1] for k, v in totals_history(msgs).items()}


def group_offsets(bootstrap: str, group: str, topic: str,
                  timeout_s: float = 120.0) -> dict[int, int]:
    """The group's committed offsets. While a transaction that sent offsets for the group is
    still open (a crashed stage's), the broker calls them unstable and the fetch waits; keep
    asking until the transaction is resolved (aborted by a restart or its timeout)."""
    from logcount.core.errors import DependencyError

    adm = kafka_io.admin(bootstrap)
    parts = kafka_io.partitions_of(adm, topic) or []
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "log_level": 0})
    deadline = time.monotonic() + timeout_s
    try:
        while True:
            try:
                return kafka_io.committed_offsets(c, topic, parts)
            except DependencyError:
                if time.monotonic() > deadline:
                    raise
    finally:
        c.close()


def end_offsets(bootstrap: str, topic: str) -> dict[int, int]:
    adm = kafka_io.admin(bootstrap)
    parts = kafka_io.partitions_of(adm, topic) or []
    return kafka_io.list_offsets(adm, topic, parts, OffsetSpec.latest())


def wait_for(pred, timeout_s: float, step_s: float = 0.25, what: str = "condition"):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        got = pred()
        if got:
            return got
        time.sleep(step_s)
    raise AssertionError(f"timed out after {timeout_s}s waiting for {what}")


def sink_offsets(url, names) -> dict[int, int]:
    """The sink's offsets as stored in MySQL ({} while the server or table is missing)."""
    try:
        conn = pymysql.connect(host=url.host, port=url.port, user=url.user,
                               password=url.password, database=url.database)
    except pymysql.err.MySQLError:
        return {}
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT kafka_partition, next_offset FROM kafka_offsets WHERE topic = %s",
                        (names.topic("out"),))
            return {int(p): int(o) for p, o in cur.fetchall()}
    except pymysql.err.MySQLError:  # no table yet, or the server is restarting
        return {}
    finally:
        conn.close()


def held_topics(bootstrap: str, topics) -> list[str]:
    """Topics whose read_committed end (last stable offset) is below the log end: an open
    transaction is holding their readers."""
    adm = kafka_io.admin(bootstrap)
    held = []
    for topic in topics:
        parts = kafka_io.partitions_of(adm, topic) or []
        stable = kafka_io.list_offsets(adm, topic, parts, OffsetSpec.latest(), True)
        high = kafka_io.list_offsets(adm, topic, parts, OffsetSpec.latest(), False)
        if stable != high:
            held.append(topic)
    return held
