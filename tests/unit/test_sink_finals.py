"""The sink's final tables, pure: decoding a final topic's records, the tables' DDL and INSERTs,
which table a window goes to, the kind and shape refusals, and the batch transaction on a fake
connection (what it skips, inserts and stores, and a duplicate key refused)."""

from __future__ import annotations

import pymysql
import pytest
from confluent_kafka import Message, TopicPartition

from logcount.connectors import sink_store
from logcount.connectors.mysql_sink import Sink, decode
from logcount.connectors.mysql_store import MySQLStore
from logcount.connectors.sink_store import Final, Total
from logcount.core.errors import ConfigError
from logcount.core.records import (
    FinalRecord,
    MinuteTotal,
    decode_record,
    encode_final,
    encode_total,
)
from logcount.core.settings import MySQLUrl, SinkSettings
from tests.support.fakes import Clock
from tests.support.sink_fakes import Consumers, FakeStore, FakeTopic, Journal

pytestmark = pytest.mark.unit

M0, M1, H1, D1 = ("2024-05-01 10:00:00", "2024-05-01 10:01:00", "2024-05-01 11:00:00",
                  "2024-05-02 10:00:00")


def final(offset: int, count: int, dims=(), end: str = M1, closed: bool = False,
          series: int = 0, partition: int = 0, start: str = M0) -> Final:
    return Final(partition, offset, start, count, dims, end, "1m",
                 sink_store.window_minutes(start, end), closed, series)


# Decoding: the records decide the kind.

def test_a_record_is_a_final_one_by_its_final_true_and_a_total_otherwise():
    _, total = encode_total(MinuteTotal(M0, 3, "ERROR", (("host", "a"),)))
    assert decode_record(total) == MinuteTotal(M0, 3, "ERROR", (("host", "a"),))
    series = FinalRecord(M0, M1, "1m", "*", 27, (("host", "web-1"),))
    closed = FinalRecord(M0, M1, "1m", "*", 31, closed=True, series=2)
    for r in (series, closed):
        assert decode_record(encode_final(r)[1]) == r
    assert decode_record(b'{"log_time": "x", "log_count": 1, "final": false}') == \
        MinuteTotal("x", 1, "")
    for bad in (b"[1, 2]", b"not json", b'{"final": true, "log_count": 1}', b'{"log_time": 1}'):
        with pytest.raises(ValueError):
            decode_record(bad)


def test_the_sink_decodes_a_final_record_at_its_position_with_its_window_length():
    _, value = encode_final(FinalRecord(M0, H1, "1h", "ERROR", 9, (("svc", "api"),)))
    got = decode(Message(topic="t-final", partition=2, offset=7, value=value))
    assert got == Final(2, 7, M0, 9, (("svc", "api"),), H1, "1h", 60, False, 0)
    _, value = encode_total(MinuteTotal(M0, 4, "ERROR"))
    assert decode(Message(topic="t", partition=0, offset=1, value=value)) == Total(0, 1, M0, 4)
    assert decode(Message(topic="t", partition=0, offset=1, value=b"junk")) is None


def test_a_window_is_whole_minutes():
    assert sink_store.window_minutes(M0, M1) == 1
    assert sink_store.window_minutes(M0, H1) == 60
    assert sink_store.window_minutes("2024-05-01 00:00:00", "2024-05-02 00:00:00") == 1440
    for start, end in ((M1, M0), (M0, M0), (M0, "2024-05-01 10:00:30"), (M0, "10:01")):
        with pytest.raises(ValueError):
            sink_store.window_minutes(start, end)


# The tables.

def test_minutes_go_to_the_table_and_each_rollup_length_to_one_of_its_own():
    assert [sink_store.final_table("fin", m) for m in (1, 60, 1440, 120, 90)] == [
        "fin", "fin_1h", "fin_1d", "fin_2h", "fin_90m"]
    assert sink_store.closed_table("fin") == "fin_closed"
    batch = [final(0, 1, end=D1), final(1, 1, end=H1), final(2, 1), final(3, 1, closed=True)]
    assert sink_store.final_tables("fin", batch) == ["fin", "fin_1d", "fin_1h"]


def test_a_final_table_is_the_counts_tables_key_with_the_window_and_grace():
    ddl = sink_store.final_ddl("fin", ("host", "level"), "utf8mb4_nopad_bin")
    assert ddl.count("VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin NOT NULL") == 2
    assert "PRIMARY KEY (log_time, `host`, `level`)" in ddl
    for col in ("log_time DATETIME", "log_count BIGINT", "window_end DATETIME", "grace VARCHAR"):
        assert col in ddl
    assert ddl.index("`level`") < ddl.index("log_count") < ddl.index("window_end") < \
        ddl.index("grace")
    plain = sink_store.final_ddl("fin", (), None)
    assert "PRIMARY KEY (log_time)" in plain and "VARCHAR(255)" not in plain
    assert plain.startswith("CREATE TABLE IF NOT EXISTS `fin` (")
    closed = sink_store.closed_ddl("fin")
    assert closed.startswith("CREATE TABLE IF NOT EXISTS `fin_closed` (")
    assert "PRIMARY KEY (window_start, window_end)" in closed
    with pytest.raises(ConfigError, match="4085-byte key"):
        sink_store.final_ddl("fin", ("a", "b", "c", "d"), "x")


def test_final_rows_are_plain_inserts_never_upserts():
    assert sink_store.insert_finals("fin_1h", ("host",)) == (
        "INSERT INTO `fin_1h` (log_time, `host`, log_count, window_end, grace) "
        "VALUES (%s, %s, %s, %s, %s)")
    assert sink_store.insert_closed("fin") == (
        "INSERT INTO `fin_closed` (window_start, window_end, series, log_count, grace) "
        "VALUES (%s, %s, %s, %s, %s)")
    for sql in (sink_store.insert_finals("fin", ()), sink_store.insert_closed("fin")):
        assert "DUPLICATE" not in sql and "REPLACE" not in sql


def test_names_are_checked_and_a_closed_table_name_must_fit_mysqls_64_characters():
    with pytest.raises(ConfigError, match="not a MySQL name"):
        sink_store.final_ddl("a`b", (), None)
    with pytest.raises(ConfigError, match="not a MySQL name"):
        sink_store.insert_finals("fin", ("x;y",))
    sink_store.closed_ddl("t" * 57)
    with pytest.raises(ConfigError, match="over 64 characters"):
        sink_store.closed_ddl("t" * 58)


def test_a_table_of_another_shape_is_refused_in_one_line_naming_both():
    sink_store.check_final_columns("fin", "out-final", ("host",),
                                   ["log_time", "HOST", "log_count", "window_end", "grace"])
    sink_store.check_final_columns("fin_closed", "out-final", None, sink_store.CLOSED_COLUMNS)
    cases = [(("host",), ["log_time", "host", "log_count"], "holds running totals"),
             ((), ["log_time", "host", "log_count", "window_end", "grace"], "other columns"),
             (None, ["window_start", "log_count"], "other columns")]
    for dims, columns, theirs in cases:
        with pytest.raises(ConfigError) as err:
            sink_store.check_final_columns("fin", "out-final", dims, columns)
        line = str(err.value)
        assert "\n" not in line and theirs in line and "table fin" in line
        assert "topic out-final" in line and "another --table" in line
    # and running totals meeting a final table
    with pytest.raises(ConfigError, match="MySQL table fin holds final records"):
        sink_store.check_columns("fin", "out", (), ["log_time", "log_count", "window_end",
                                                    "grace"])


def test_running_totals_and_final_records_in_one_topic_are_refused_in_one_line():
    total, fin = Total(0, 0, M0, 1), final(1, 1)
    assert sink_store.batch_kind("t", [total, total]) == sink_store.TOTALS
    assert sink_store.batch_kind("t", [fin]) == sink_store.FINALS
    assert sink_store.batch_kind("t", [], sink_store.FINALS) == sink_store.FINALS
    assert sink_store.batch_kind("t", []) is None
    cases: list[tuple[list[sink_store.Record], str | None]] = [
        ([total, fin], None), ([fin], sink_store.TOTALS), ([total], sink_store.FINALS)]
    for records, before in cases:
        with pytest.raises(ConfigError) as err:
            sink_store.batch_kind("t", records, before)
        assert "\n" not in str(err.value)
        assert "topic t: running totals and final records" in str(err.value)


# The batch transaction.

class Cursor:
    def __init__(self, conn: Conn) -> None:
        self.conn = conn
        self.rows: list[tuple] = []

    def __enter__(self) -> Cursor:
        return self

    def __exit__(self, *exc) -> None:
        pass

    def execute(self, sql: str, args=None) -> None:
        self.conn.calls.append((sql, args))
        self.rows = []
        if sql == sink_store.LOCK_TOPIC:
            self.rows = [] if self.conn.topic_id is None else [(self.conn.topic_id,)]
        elif sql == sink_store.LOCK_OFFSETS:
            self.rows = sorted(self.conn.offsets.items())
        elif sql == sink_store.READ_COLUMNS:
            self.rows = [(c,) for c in self.conn.tables.get(args[0], [])]
        elif sql == "SELECT VERSION()":
            self.rows = [("10.11.6-MariaDB",)]
        elif sql.startswith("SELECT 1 FROM"):
            self.rows = []  # empty
        elif sql.startswith("DROP TABLE"):
            self.conn.tables.pop(sql.split("`")[1])
        elif sql.startswith("CREATE TABLE"):
            name = sql.split("`")[1]
            self.conn.tables[name] = (sink_store.CLOSED_COLUMNS if name.endswith("_closed")
                                      else [ln.split()[0].strip("`") for ln in
                                            sql.splitlines()[1:-2]])

    def executemany(self, sql: str, rows) -> None:
        rows = list(rows)
        if self.conn.duplicate_in == sql:
            raise pymysql.err.IntegrityError(
                1062, "Duplicate entry '2024-05-01 10:00:00-a\nb' for key 'PRIMARY'")
        self.conn.calls.append((sql, rows))

    def fetchone(self):
        return self.rows[0] if self.rows else None

    def fetchall(self):
        return self.rows


class Conn:
    def __init__(self, topic_id: str | None = "A", offsets: dict[int, int] | None = None):
        self.topic_id, self.offsets = topic_id, offsets or {}
        self.calls: list = []
        self.tables: dict[str, list[str]] = {}
        self.duplicate_in: str | None = None
        self.commits = self.rollbacks = 0

    def cursor(self) -> Cursor:
        return Cursor(self)

    def commit(self) -> None:
        self.commits += 1

    def rollback(self) -> None:
        self.rollbacks += 1

    def writes(self) -> list[tuple[str, list]]:
        return [(s, a) for s, a in self.calls if s.startswith("INSERT")]


WEB, API = (("host", "web"),), (("host", "api"),)


def test_each_final_record_at_or_past_the_stored_offset_is_one_inserted_row_closed_ones_last():
    conn = Conn("A", {0: 2})
    batch = [final(3, 4, closed=True, series=2), final(0, 9, WEB), final(1, 9, API),
             final(2, 3, API), final(4, 30, WEB, end=H1), final(1, 5, WEB, partition=1),
             final(2, 5, closed=True, series=1, partition=1)]
    nxt, changed = sink_store.write_finals(conn, "g", "t-final", batch, {0: 6}, "A", "fin",
                                           ("host",))
    assert (nxt, changed) == ({0: 6, 1: 3}, None)
    assert conn.writes() == [
        (sink_store.insert_finals("fin", ("host",)),
         [(M0, "api", 3, M1, "1m"), (M0, "web", 5, M1, "1m")]),
        (sink_store.insert_finals("fin_1h", ("host",)), [(M0, "web", 30, H1, "1m")]),
        (sink_store.insert_closed("fin"), [(M0, M1, 2, 4, "1m"), (M0, M1, 1, 5, "1m")]),
        (sink_store.UPSERT_OFFSETS, [("g", "t-final", 0, 6), ("g", "t-final", 1, 3)])]


def test_another_topic_id_in_mysql_inserts_nothing():
    conn = Conn("B")
    assert sink_store.write_finals(conn, "g", "t", [final(0, 1)], None, "A", "fin", ()) == (
        {}, "B")
    assert not conn.writes()


def test_a_row_already_there_is_refused_in_one_line_and_rolled_back():
    conn = Conn("A")
    conn.duplicate_in = sink_store.insert_finals("fin", ())
    with pytest.raises(ConfigError) as err:
        sink_store.write_finals(conn, "g", "t-final", [final(0, 1)], None, "A", "fin", ())
    line = str(err.value)
    assert "\n" not in line and "MySQL table fin already holds a row" in line
    assert "a\\nb" in line and "nothing written" in line
    assert conn.rollbacks == 1 and not any(s == sink_store.UPSERT_OFFSETS for s, _ in conn.calls)


def test_the_store_makes_the_final_tables_then_inserts_and_refuses_a_second_kind():
    conn = Conn("A")
    conn.tables["fin"] = ["log_time", "log_count"]  # as the start leaves --table: reshaped
    store = MySQLStore(MySQLUrl.parse("mysql://root@127.0.0.1:1/db"), table="fin",
                       connect=lambda: conn)
    batch = [final(0, 2, WEB), final(1, 2, closed=True, series=1),
             final(2, 20, WEB, end=H1), final(3, 20, closed=True, series=1, end=H1)]
    assert store.apply("g", "t-final", batch, None, "A") == {0: 4}
    assert conn.tables == {
        "fin": ["log_time", "host", "log_count", "window_end", "grace"],
        "fin_1h": ["log_time", "host", "log_count", "window_end", "grace"],
        "fin_closed": sink_store.CLOSED_COLUMNS}
    assert [s for s, _ in conn.writes()] == [
        sink_store.insert_finals("fin", ("host",)), sink_store.insert_finals("fin_1h", ("host",)),
        sink_store.insert_closed("fin"), sink_store.UPSERT_OFFSETS]
    with pytest.raises(ConfigError, match="running totals and final records"):
        store.apply("g", "t-final", [Total(0, 4, M0, 1)], None, "A")


def test_a_grouped_stage_s_first_windows_may_be_closed_records_alone():
    conn = Conn("A")
    store = MySQLStore(MySQLUrl.parse("mysql://root@127.0.0.1:1/db"), table="fin",
                       connect=lambda: conn)
    store.apply("g", "t-final", [final(0, 0, closed=True)], None, "A")
    assert set(conn.tables) == {"fin_closed"}  # the minutes' table comes with its first row
    store.apply("g", "t-final", [final(1, 3, API)], None, "A")
    assert conn.tables["fin"] == ["log_time", "host", "log_count", "window_end", "grace"]


def test_partitions_of_another_topic_handed_to_the_sink_are_refused_not_read():
    """A static member of a group that read another topic (the output topic's sink, then the
    final topic's in the same group) may be handed that topic's partitions back: read, its
    records would land in this topic's table and offsets."""
    journal: Journal = []
    topic, store, clock = FakeTopic({0: [(M0, 1)]}), FakeStore(journal), Clock()
    sink = Sink(SinkSettings(once=True, metrics_port=0), store=store,
                new_consumer=Consumers(topic, journal), open_topic=lambda: topic, clock=clock,
                sleep=clock.sleep)
    sink.start()
    assert sink.consumer is not None
    sink._on_assign(sink.consumer, [TopicPartition("error-counts-final", 0)])
    with pytest.raises(ConfigError) as err:
        sink.turn()
    line = str(err.value)
    assert "\n" not in line and "partitions of topic error-counts-final" in line
    assert "its own --group-id" in line
    assert not store.totals and not store.offsets
