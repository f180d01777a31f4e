"""In-memory fakes of what the sink works through (connectors/sink_ports.py), for unit tests of
its loop in milliseconds: the topic as the broker sees it, the group consumer over it, a store
and MySQL as the sink's SQL uses it (for the real MySQLStore); the clock is the stage's
(tests/support/fakes.py). What the consumer and the stores commit goes into one `journal`.
Each fake of a protocol names it as its base, so mypy checks the fake against it."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence

import pymysql
from confluent_kafka import OFFSET_BEGINNING, KafkaError, Message, TopicPartition

from logcount.connectors import sink_store
from logcount.connectors.sink_ports import (
    ErrorCallback,
    Rebalance,
    SinkConsumer,
    SinkStore,
    TopicView,
)
from logcount.connectors.sink_store import Record, Total
from logcount.core.errors import TopicChangedError
from logcount.core.records import MinuteTotal, encode_total

TOPIC = "error-counts"
GROUP = "logcount-sink"
Journal = list[tuple[str, dict]]  # ("db commit" | "kafka commit", what it holds)


def record(partition: int, offset: int, minute: str, count: int) -> Message:
    _, value = encode_total(MinuteTotal(minute, count, "ERROR"))
    return Message(topic=TOPIC, partition=partition, offset=offset, value=value)


def end_of(partition: int, offset: int) -> Message:
    return Message(topic=TOPIC, partition=partition, offset=offset,
                   error=KafkaError(KafkaError._PARTITION_EOF))


class FakeTopic(TopicView):
    """sink_ports.TopicView: partitions of (minute, count) records, as a stage wrote them."""

    def __init__(self, log: Mapping[int, Sequence[tuple[str, int]]], topic_id: str = "id-1"):
        self.log = {p: list(rs) for p, rs in log.items()}
        self.id = topic_id
        self.up = True  # answers(): the broker serves the topic's offsets

    def partitions(self) -> list[int] | None:
        return sorted(self.log)

    def topic_id(self) -> str | None:
        return self.id

    def ends(self, partitions: Iterable[int], committed_only: bool) -> dict[int, int]:
        return {p: len(self.log[p]) for p in partitions}

    def answers(self) -> bool:
        return self.up


class FakeConsumer(SinkConsumer):
    """sink_ports.SinkConsumer over a FakeTopic. Each poll runs `on_poll(n)` (the test's script),
    then the rebalances queued (the subscription's first assignment: every partition), then
    returns `buffered` (records fetched before) and one record of each assigned partition from
    its position, or its end once (enable.partition.eof)."""

    def __init__(self, topic: FakeTopic, on_error: ErrorCallback, journal: Journal,
                 on_poll: Callable[[int], object] = lambda n: None) -> None:
        self.topic, self.on_error, self.journal, self.on_poll = topic, on_error, journal, on_poll
        self.positions: dict[int, int] = {}
        self.assigned_at: list[dict[int, int]] = []  # each assign()'s starting offsets
        self.rebalances: list[tuple[list[int], list[int]]] = []  # (revoke, assign)
        self.buffered: list[Message] = []
        self.ended: set[int] = set()
        self.polls = 0
        self.closed = threading.Event()

    def subscribe(self, topic: str, on_assign: Rebalance, on_revoke: Rebalance) -> None:
        assert topic == TOPIC
        self.assign_cb, self.revoke_cb = on_assign, on_revoke
        self.rebalance(assign=sorted(self.topic.log))

    def rebalance(self, revoke: Sequence[int] = (), assign: Sequence[int] = ()) -> None:
        self.rebalances.append((list(revoke), list(assign)))

    def consume(self, num_messages: int, timeout: float) -> list[Message]:
        self.polls += 1
        assert self.polls < 100, "the loop does not end"
        self.on_poll(self.polls)
        for revoke, assign in self.rebalances:
            if revoke:
                self.revoke_cb([TopicPartition(TOPIC, p) for p in revoke])
                for p in revoke:
                    self.positions.pop(p, None)
            if assign:
                self.assign_cb([TopicPartition(TOPIC, p) for p in assign])
        self.rebalances = []
        out, self.buffered = self.buffered, []
        for p, pos in sorted(self.positions.items()):
            if pos < len(self.topic.log[p]):
                out.append(record(p, pos, *self.topic.log[p][pos]))
                self.positions[p] = pos + 1
            elif p not in self.ended:
                out.append(end_of(p, pos))
                self.ended.add(p)
        return out

    def assign(self, parts: list[TopicPartition]) -> None:
        self.positions = {tp.partition: 0 if tp.offset == OFFSET_BEGINNING else tp.offset
                          for tp in parts}
        self.assigned_at.append(dict(self.positions))
        self.ended -= set(self.positions)

    def seek(self, tp: TopicPartition) -> None:
        self.positions[tp.partition] = 0 if tp.offset == OFFSET_BEGINNING else tp.offset
        self.ended.discard(tp.partition)

    def commit_async(self, offsets: list[TopicPartition]) -> None:
        self.journal.append(("kafka commit", {tp.partition: tp.offset for tp in offsets}))

    def lag(self, partitions: Iterable[int]) -> dict[int, int] | None:
        return {}

    def close(self) -> None:
        self.closed.set()


class Consumers:
    """sink_ports.ConsumerFactory: FakeConsumers over one topic, each one remembered."""

    def __init__(self, topic: FakeTopic, journal: Journal,
                 on_poll: Callable[[int], object] = lambda n: None) -> None:
        self.topic, self.journal, self.on_poll = topic, journal, on_poll
        self.made: list[FakeConsumer] = []

    def __call__(self, on_error: ErrorCallback) -> FakeConsumer:
        self.made.append(FakeConsumer(self.topic, on_error, self.journal, self.on_poll))
        return self.made[-1]


def newest(totals: Sequence[Total], stored: Mapping[int, int],
           ends: Mapping[int, int] | None) -> tuple[dict[str, int], dict[int, int]]:
    """sink_store.write_batch's rule: the last total per minute of the records at or past the
    stored offsets, and the next offsets (the ends reached included)."""
    last: dict[str, int] = {}
    nxt: dict[int, int] = {}
    for t in sorted(totals, key=lambda t: (t.partition, t.offset)):
        if t.offset >= stored.get(t.partition, 0):
            last[t.log_time] = t.log_count
            nxt[t.partition] = t.offset + 1
    for p, end in (ends or {}).items():
        if end > max(nxt.get(p, 0), stored.get(p, 0)):
            nxt[p] = end
    return last, nxt


class FakeStore(SinkStore):
    """sink_ports.SinkStore in memory: each apply one atomic commit, journalled."""

    def __init__(self, journal: Journal, offsets: Mapping[int, int] | None = None) -> None:
        self.journal = journal
        self.totals: dict[str, int] = {}
        self.offsets: dict[int, int] = dict(offsets or {})
        self.topic_id: str | None = None
        self.closed = False

    def ensure_schema(self, timeout_s: float | None = None) -> None:
        pass

    def load_offsets(self, group: str, topic: str) -> dict[int, int]:
        return dict(self.offsets)

    def reconcile_topic(self, group: str, topic: str, current_id: str | None,
                        ends: Mapping[int, int]) -> str | None:
        self.topic_id = current_id
        return None

    def apply(self, group: str, topic: str, records: Sequence[Record],
              ends: Mapping[int, int] | None = None,
              topic_id: str | None = None) -> dict[int, int]:
        if topic_id != self.topic_id:
            raise TopicChangedError(f"topic {topic} changed")
        last, nxt = newest([r for r in records if isinstance(r, Total)], self.offsets, ends)
        self.totals.update(last)
        self.offsets.update(nxt)
        self.journal.append(("db commit", {"totals": last, "offsets": nxt}))
        return nxt

    def close(self) -> None:
        self.closed = True


class FakeMySQL:
    """MySQL as connectors/sink_store.py's SQL uses it: committed tables, and per connection
    one open transaction applied only at its commit (dropped with the connection).
    `outage_at(sql, times)`: the first run of that statement, then the next `times - 1`
    statements, connects or commits, fail with a transient error (the server gone)."""

    def __init__(self, journal: Journal | None = None) -> None:
        self.journal = journal if journal is not None else []
        self.tables: set[str] = set()
        self.counts: dict[tuple, int] = {}
        self.offsets: dict[tuple[str, str, int], int] = {}
        self.topics: dict[tuple[str, str], str] = {}
        self.commits: list[list[tuple[str, list]]] = []  # each commit's writes
        self.writes: Counter[tuple] = Counter()  # committed writes per counts row (key, count)
        self.trigger: str | None = None
        self.failing = 0
        self.code = 2013

    def outage_at(self, sql: str, times: int, code: int = 2013) -> None:
        self.trigger, self.failing, self.code = sql, times, code

    def check(self, what: str) -> None:
        if self.trigger is not None and what == self.trigger:
            self.trigger = None  # the outage begins
        if self.trigger is None and self.failing > 0:
            self.failing -= 1
            raise pymysql.err.OperationalError(self.code, "Lost connection to server")

    def connect(self) -> FakeMySQLConn:
        self.check("connect")
        return FakeMySQLConn(self)

    def commit(self, writes: list[tuple[str, list]]) -> None:
        self.check("commit")
        self.commits.append(writes)
        totals, offsets = {}, {}
        for sql, rows in writes:
            for row in rows:
                if sql == sink_store.UPSERT_COUNTS:
                    self.counts[row[:-1]] = row[-1]
                    self.writes[tuple(row)] += 1
                    totals[row[0]] = row[-1]
                elif sql == sink_store.UPSERT_OFFSETS:
                    self.offsets[row[:3]] = row[3]
                    offsets[row[2]] = row[3]
                elif sql == sink_store.UPSERT_TOPIC:
                    self.topics[row[:2]] = row[2]
                elif sql == sink_store.DELETE_OFFSETS:
                    self.offsets = {k: v for k, v in self.offsets.items() if k[:2] != row}
        if totals or offsets:
            self.journal.append(("db commit", {"totals": totals, "offsets": offsets}))

    def stored_offsets(self, group: str = GROUP, topic: str = TOPIC) -> dict[int, int]:
        return {p: o for (g, t, p), o in self.offsets.items() if (g, t) == (group, topic)}


class FakeMySQLConn:
    def __init__(self, db: FakeMySQL) -> None:
        self.db = db
        self.pending: list[tuple[str, list]] = []

    def cursor(self) -> FakeMySQLCursor:
        return FakeMySQLCursor(self)

    def commit(self) -> None:
        writes, self.pending = self.pending, []
        self.db.commit(writes)

    def close(self) -> None:
        self.pending = []  # rolled back


class FakeMySQLCursor:
    def __init__(self, conn: FakeMySQLConn) -> None:
        self.conn, self.db = conn, conn.db
        self.rows: list[tuple] = []

    def __enter__(self) -> FakeMySQLCursor:
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def execute(self, sql: str, args: tuple = ()) -> None:
        self.db.check(sql)
        self.rows = []
        if sql.startswith("CREATE TABLE IF NOT EXISTS"):
            self.db.tables.add(sql.split()[5])  # DDL commits at once
        elif sql == sink_store.READ_COLUMNS:
            if args[0] in self.db.tables:
                self.rows = [("log_time",), ("log_count",)]
        elif sql in (sink_store.READ_OFFSETS, sink_store.LOCK_OFFSETS):
            self.rows = sorted((p, o) for (g, t, p), o in self.db.offsets.items()
                               if (g, t) == args)
        elif sql == sink_store.LOCK_TOPIC:
            found = self.db.topics.get(args)
            self.rows = [] if found is None else [(found,)]
        elif sql in (sink_store.UPSERT_TOPIC, sink_store.DELETE_OFFSETS):
            self.conn.pending.append((sql, [args]))
        else:
            raise AssertionError(f"SQL the fake does not know: {sql}")

    def executemany(self, sql: str, rows: Iterable[tuple]) -> None:
        self.db.check(sql)
        self.conn.pending.append((sql, list(rows)))

    def fetchone(self) -> tuple | None:
        return self.rows[0] if self.rows else None

    def fetchall(self) -> list[tuple]:
        return self.rows
