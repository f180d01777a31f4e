"""The sink's batch transaction on a fake connection: what it skips, what it writes, and that it
writes nothing for another incarnation of the topic."""

from __future__ import annotations

from logcount.connectors import sink_store
from logcount.connectors.sink_store import Total


class FakeCursor:
    def __init__(self, conn: FakeConn) -> None:
        self.conn = conn
        self.rows: list = []

    def __enter__(self) -> FakeCursor:
        return self

    def __exit__(self, *exc) -> None:
        pass

    def execute(self, sql: str, args=None) -> None:
        self.conn.calls.append((sql, args))
        if sql == sink_store.LOCK_TOPIC:
            self.rows = [] if self.conn.topic_id is None else [(self.conn.topic_id,)]
        elif sql == sink_store.LOCK_OFFSETS:
            self.rows = sorted(self.conn.offsets.items())

    def executemany(self, sql: str, rows) -> None:
        self.conn.calls.append((sql, list(rows)))

    def fetchone(self):
        return self.rows[0] if self.rows else None

    def fetchall(self):
        return self.rows


class FakeConn:
    def __init__(self, topic_id: str | None = None, offsets: dict[int, int] | None = None):
        self.topic_id = topic_id
        self.offsets = offsets or {}
        self.calls: list = []

    def cursor(self) -> FakeCursor:
        return FakeCursor(self)

    def writes(self, sql: str) -> list:
        return [args for s, args in self.calls if s == sql]


def test_the_last_total_of_a_minute_wins_and_replays_below_the_stored_offset_are_skipped():
    conn = FakeConn("A", {0: 5})
    totals = [Total(0, 7, "m2", 9), Total(0, 4, "m0", 99), Total(0, 5, "m1", 7),
              Total(0, 6, "m2", 8), Total(1, 0, "m3", 3)]
    nxt, changed = sink_store.write_batch(conn, "g", "t", totals, None, "A")
    assert (nxt, changed) == ({0: 8, 1: 1}, None)
    assert conn.writes(sink_store.UPSERT_COUNTS) == [[("m1", 7), ("m2", 9), ("m3", 3)]]
    assert conn.writes(sink_store.UPSERT_OFFSETS) == [[("g", "t", 0, 8), ("g", "t", 1, 1)]]


def test_an_end_past_the_last_record_is_stored_but_never_moves_an_offset_back():
    conn = FakeConn("A", {0: 5, 1: 9})
    nxt, _ = sink_store.write_batch(conn, "g", "t", [Total(0, 5, "m1", 1)], {0: 8, 1: 4}, "A")
    assert nxt == {0: 8}
    assert conn.writes(sink_store.UPSERT_OFFSETS) == [[("g", "t", 0, 8)]]


def test_another_topic_id_in_mysql_writes_nothing():
    conn = FakeConn("B", {0: 5})
    nxt, changed = sink_store.write_batch(conn, "g", "t", [Total(0, 5, "m1", 1)], {0: 6}, "A")
    assert (nxt, changed) == ({}, "B")
    assert not conn.writes(sink_store.UPSERT_COUNTS) and not conn.writes(sink_store.UPSERT_OFFSETS)


def test_a_drift_deletes_the_offsets_and_stores_the_new_id():
    conn = FakeConn("A", {0: 3})
    reason = sink_store.reconcile_topic(conn, "g", "t", "B", {0: 10})
    assert reason == "was recreated (id A in MySQL, B now)"
    assert conn.writes(sink_store.DELETE_OFFSETS) == [("g", "t")]
    assert conn.writes(sink_store.UPSERT_TOPIC) == [("g", "t", "B")]


def test_no_drift_keeps_the_offsets():
    conn = FakeConn("A", {0: 3})
    assert sink_store.reconcile_topic(conn, "g", "t", "A", {0: 10}) is None
    assert not conn.writes(sink_store.DELETE_OFFSETS) and not conn.writes(sink_store.UPSERT_TOPIC)
