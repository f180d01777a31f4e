"""The sink's batch transaction on a fake connection: what it skips, what it writes, and that it
writes nothing for another incarnation of the topic."""

from __future__ import annotations

import pytest

from logcount.connectors import sink_store
from logcount.connectors.sink_store import Total
from logcount.core.errors import ConfigError


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


# The grouped table: its DDL, its upsert and the column check are pure text.

def test_without_dimensions_the_table_and_upsert_are_todays_exactly():
    assert sink_store.counts_ddl("error_log", (), None) == sink_store.COUNTS_DDL
    assert sink_store.upsert_counts("error_log", ()) == sink_store.UPSERT_COUNTS
    assert "INSERT INTO `t2` (log_time, log_count)" in sink_store.upsert_counts("t2", ())


def test_a_grouped_table_has_a_binary_no_pad_column_per_dimension_all_in_the_key():
    ddl = sink_store.counts_ddl("t", ("host", "key"), "utf8mb4_nopad_bin")
    assert ddl.count("VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin NOT NULL") == 2
    assert "PRIMARY KEY (log_time, `host`, `key`)" in ddl
    assert ddl.index("`host`") < ddl.index("`key`") < ddl.index("log_count")
    assert sink_store.upsert_counts("t", ("host", "key")) == (
        "INSERT INTO `t` (log_time, `host`, `key`, log_count) VALUES (%s, %s, %s, %s) "
        "ON DUPLICATE KEY UPDATE log_count = VALUES(log_count)")


def test_the_collation_follows_the_server():
    assert sink_store.binary_collation("10.11.6-MariaDB-0+deb12u1") == "utf8mb4_nopad_bin"
    assert sink_store.binary_collation("8.4.3") == "utf8mb4_0900_bin"


def test_three_dimensions_fit_innodbs_key_and_four_do_not():
    assert "PRIMARY KEY" in sink_store.counts_ddl("t", ("a", "b", "c"), "x")
    with pytest.raises(ConfigError, match="4085-byte key, over InnoDB's 3072"):
        sink_store.counts_ddl("t", ("a", "b", "c", "d"), "x")


@pytest.mark.parametrize("name", ["a`b", "1a", "a b", "", "x;DROP"])
def test_names_from_records_or_flags_never_reach_the_sql_unchecked(name):
    with pytest.raises(ConfigError, match="not a MySQL name"):
        sink_store.counts_ddl("t", (name,), "x")
    with pytest.raises(ConfigError, match="not a MySQL name"):
        sink_store.upsert_counts(name, ())


def test_the_column_check_names_both_shapes_in_one_line():
    sink_store.check_columns("t", "out", ("host",), ["log_time", "HOST", "log_count"])
    sink_store.check_columns("t", "out", (), ["log_time", "log_count"])
    cases = [(("host",), ["log_time", "svc", "log_count"], "dimensions (host)", "(svc)"),
             ((), ["log_time", "svc", "log_count"], "no dimensions", "(svc)"),
             (("host",), ["log_time", "log_count"], "dimensions (host)", "has no dimensions")]
    for dims, columns, ours, theirs in cases:
        with pytest.raises(ConfigError) as err:
            sink_store.check_columns("t", "out", dims, columns)
        line = str(err.value)
        assert "\n" not in line and ours in line and theirs in line and "table t" in line


def test_records_of_two_shapes_in_one_batch_are_refused():
    grouped = Total(0, 1, "m", 1, (("host", "a"),))
    assert sink_store.batch_dims("out", [grouped, grouped]) == ("host",)
    assert sink_store.batch_dims("out", []) == ()
    with pytest.raises(ConfigError, match="no dimensions and with dimensions \\(host\\)"):
        sink_store.batch_dims("out", [grouped, Total(0, 2, "m", 1)])


def test_grouped_totals_keep_the_last_per_series_values_bound_as_parameters():
    conn = FakeConn("A", {})
    web, web_lower = (("host", "Web-1"),), (("host", "web-1"),)
    totals = [Total(0, 0, "m1", 1, web), Total(0, 1, "m1", 2, web_lower),
              Total(0, 2, "m1", 3, web), Total(1, 0, "m1", 4, (("host", "'; DROP TABLE x; --"),))]
    sink_store.write_batch(conn, "g", "t", totals, None, "A", "tab", ("host",))
    sql = sink_store.upsert_counts("tab", ("host",))
    assert conn.writes(sql) == [[("m1", "'; DROP TABLE x; --", 4), ("m1", "Web-1", 3),
                                 ("m1", "web-1", 2)]]
