"""What the tests read back: topics, offsets, the sink's stored positions.

`bootstrap`: the brokers' addresses, or a secured cluster's client settings (a dict that holds
`bootstrap.servers` and what it takes to log in).
"""

from __future__ import annotations

import json
import time
from collections import defaultdict

import pymysql
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, TopicPartition
from confluent_kafka.admin import OffsetSpec

from logcount.connectors import kafka_io

# error_log as the sink wrote it; the demo's verdict reads it too, so it lives in the store.
from logcount.connectors.sink_store import read_table

__all__ = ["read_table"]  # and the functions below

Bootstrap = str | dict


def _client(bootstrap: Bootstrap) -> tuple[str, dict]:
    if isinstance(bootstrap, dict):
        return bootstrap["bootstrap.servers"], bootstrap
    return bootstrap, {}


def read_all(bootstrap: Bootstrap, topic: str, committed_only: bool = True,
             timeout_s: float = 60.0) -> list:
    """Every record of `topic` in offset order per partition (read_committed by default)."""
    bootstrap, conf = _client(bootstrap)
    adm = kafka_io.admin(bootstrap, conf)
    parts = kafka_io.partitions_of(adm, topic) or []
    ends = kafka_io.list_offsets(adm, topic, parts, OffsetSpec.latest(), committed_only)
    todo = {p for p in parts if ends[p] > 0}
    consumer = Consumer({
        **conf, "bootstrap.servers": bootstrap, "group.id": f"reader-{time.time_ns()}",
        "isolation.level": "read_committed" if committed_only else "read_uncommitted",
        "enable.auto.commit": False, "enable.partition.eof": True,
    })
    out = []
    try:
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in todo])
        deadline = time.monotonic() + timeout_s
        while todo and time.monotonic() < deadline:
            for msg in consumer.consume(1000, 0.5):
                if (err := msg.error()) is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
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


def group_offsets(bootstrap: Bootstrap, group: str, topic: str,
                  timeout_s: float = 120.0) -> dict[int, int]:
    """The group's committed offsets. While a transaction that sent offsets for the group is
    still open (a crashed stage's), the broker calls them unstable and the fetch waits; keep
    asking until the transaction is resolved (aborted by a restart or its timeout)."""
    from logcount.core.errors import DependencyError

    bootstrap, conf = _client(bootstrap)
    adm = kafka_io.admin(bootstrap, conf)
    parts = kafka_io.partitions_of(adm, topic) or []
    c = Consumer({**conf, "bootstrap.servers": bootstrap, "group.id": group, "log_level": 0})
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


def end_offsets(bootstrap: Bootstrap, topic: str, committed_only: bool = True) -> dict[int, int]:
    """The end of each partition: the last stable offset, or with `committed_only` False the
    log end."""
    bootstrap, conf = _client(bootstrap)
    adm = kafka_io.admin(bootstrap, conf)
    parts = kafka_io.partitions_of(adm, topic) or []
    return kafka_io.list_offsets(adm, topic, parts, OffsetSpec.latest(), committed_only)


def held_topics(bootstrap: Bootstrap, topics) -> list[str]:
    """Topics whose read_committed end (last stable offset) is below the log end: an open
    transaction is holding their readers."""
    return [t for t in topics
            if end_offsets(bootstrap, t) != end_offsets(bootstrap, t, committed_only=False)]


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


def read_series_table(url, table: str, dims) -> dict[tuple[str, ...], int]:
    """A grouped counts table as {(minute, value, ...): count}; {} while there is none."""
    cols = ", ".join(f"`{d}`" for d in dims)
    conn = pymysql.connect(host=url.host, port=url.port, user=url.user, password=url.password,
                           database=url.database, charset="utf8mb4")
    try:
        with conn.cursor() as cur:
            try:
                cur.execute(f"SELECT log_time, {cols}, log_count FROM `{table}`")
            except pymysql.err.ProgrammingError:
                return {}
            return {(row[0].strftime("%Y-%m-%d %H:%M:00"), *row[1:-1]): int(row[-1])
                    for row in cur.fetchall()}
    finally:
        conn.close()
