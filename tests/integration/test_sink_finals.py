"""`logcount sink` on the final topic (`run --emit-final`) through the real CLI, broker and
MariaDB: insert-only final tables exact row by row, grouped and not, closed windows with zero
lines included, the stage's hour rollup (`--rollup 1h`) in a table of its own; a sink SIGKILLed
inside its transaction and run again leaves no row twice and none missing; a duplicate key and a
table of running totals are refused in one line; rollup windows go to a table per length; a
topic of both kinds is refused.

The input is written here and the expected rows worked out by construction, never by the
project's parser: old (2024) timestamps and an hour of grace, so only the watermark closes
minutes (the clock would once every partition had been caught up for an hour).
"""

from __future__ import annotations

import json
import signal
from collections import Counter
from datetime import UTC, datetime, timedelta

import pymysql
from confluent_kafka import Producer

from logcount.connectors import kafka_io, sink_store
from logcount.core.records import FinalRecord, encode_final
from tests.support.readers import end_offsets, read_all
from tests.support.run import cli, sink_args, stage_args, start_cli, wait_for

PARTITIONS = 4
START = datetime(2024, 5, 1, 10, 0, tzinfo=UTC)
SERVICES = ["api", "web", "Web", "caf\u00e9"]
BUSY = 10  # minutes 10:00-10:09 have lines; 10:03 only WARN ones, 10:06 none at all
NEWEST = 125  # every partition's newest line is at 12:05: an hour's grace closes 10:00-11:04
CLOSED = 65  # and with them the hour 10:00-11:00 (--rollup 1h)
FMT = ["--json-time-field", "ts", "--json-level-field", "level"]


def _minute(i: int) -> str:
    return f"{START + timedelta(minutes=i):%Y-%m-%d %H:%M:00}"


def _input(bootstrap: str, topic: str) -> Counter:
    """JSON lines by service and level; the ERROR lines counted per (minute, service)."""
    kafka_io.ensure_topic(kafka_io.admin(bootstrap), topic, PARTITIONS)
    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5})
    expected: Counter = Counter()
    for m in range(BUSY):
        if m == 6:
            continue
        t = START + timedelta(minutes=m)
        for i in range(5 + 3 * m):
            service = SERVICES[(i * 3 + m) % len(SERVICES)]
            level = "WARN" if m == 3 else ("ERROR", "WARN", "error")[i % 3]
            line = {"ts": f"{t:%Y-%m-%dT%H:%M}:{i % 60:02d}Z", "level": level,
                    "service": service, "msg": f"request {i}"}
            p.produce(topic, json.dumps(line).encode(), partition=i % PARTITIONS)
            if level.upper() == "ERROR":
                expected[(_minute(m), service)] += 1
    t = START + timedelta(minutes=NEWEST)
    for part in range(PARTITIONS):
        line = {"ts": f"{t:%Y-%m-%dT%H:%M}:00Z", "level": "WARN", "service": "api", "msg": "x"}
        p.produce(topic, json.dumps(line).encode(), partition=part)
    assert p.flush(60) == 0
    return expected


def _query(url, sql: str, args: tuple = ()) -> list[tuple]:
    conn = pymysql.connect(host=url.host, port=url.port, user=url.user, password=url.password,
                           database=url.database, autocommit=True, charset="utf8mb4")
    try:
        with conn.cursor() as cur:
            cur.execute(sql, args)
            return list(cur.fetchall())
    finally:
        conn.close()


def _text(t: datetime) -> str:
    return t.strftime("%Y-%m-%d %H:%M:00")


def _rows(url, table: str, columns: str) -> list[tuple]:
    """The table's rows, datetimes as the records' text, in key order."""
    return sorted(tuple(_text(v) if isinstance(v, datetime) else v for v in row)
                  for row in _query(url, f"SELECT {columns} FROM `{table}`"))


def _closed_rows(series: dict[str, int], lines: dict[str, int]) -> list[tuple]:
    return sorted((_minute(m), _minute(m + 1), series[_minute(m)], lines[_minute(m)], "1h")
                  for m in range(CLOSED))


def _sink(endpoints, names, url, topic: str, table: str, *extra: str, check: bool = True):
    return cli(*sink_args(endpoints, names, url, "--once", "--topic", topic, "--table", table,
                          "--metrics-port", "0", *extra), check=check, timeout=180)


def _error_lines(stderr: str) -> list[str]:
    return [ln for ln in stderr.splitlines() if ln.startswith("logcount: error:")]


def test_grouped_finals_fill_insert_only_tables_once_and_a_duplicate_is_refused(
        endpoints, names, mysql_db):
    expected = _input(endpoints.bootstrap, names.topic("in"))
    final_topic = names.topic("final")
    cli(*stage_args(endpoints, names, "--once", *FMT, "--group-by", "service",
                    "--emit-final", "1h", "--final-topic", final_topic, "--rollup", "1h"))
    lines = Counter({_minute(m): 0 for m in range(CLOSED)})
    series = Counter({_minute(m): 0 for m in range(CLOSED)})
    for (minute, _), n in expected.items():
        lines[minute] += n
        series[minute] += 1
    assert series[_minute(3)] == series[_minute(6)] == 0 < series[_minute(0)]
    hour: Counter = Counter()
    for (_, service), n in expected.items():
        hour[service] += n
    assert len(read_all(endpoints.bootstrap, final_topic)) == (
        len(expected) + CLOSED + len(hour) + 1)

    _sink(endpoints, names, mysql_db, final_topic, "fin")
    want = sorted((minute, service, n, _text(datetime.strptime(minute, "%Y-%m-%d %H:%M:%S")
                                              + timedelta(minutes=1)), "1h")
                  for (minute, service), n in expected.items())
    assert _rows(mysql_db, "fin", "log_time, service, log_count, window_end, grace") == want
    assert _rows(mysql_db, "fin_1h", "log_time, service, log_count, window_end, grace") == [
        (_minute(0), service, n, _minute(60), "1h") for service, n in sorted(hour.items())]
    closed = sorted([*_closed_rows(series, lines),
                     (_minute(0), _minute(60), len(hour), sum(hour.values()), "1h")])
    cols = "window_start, window_end, series, log_count, grace"
    assert _rows(mysql_db, "fin_closed", cols) == closed
    # Only the named tables (the start's counts-shaped --table reshaped while empty), no
    # error_log; `Web` and `web` two rows (the binary collation).
    assert sorted(r[0] for r in _query(mysql_db, "SHOW TABLES")) == [
        "fin", "fin_1h", "fin_closed", "kafka_offsets", "kafka_topics"]
    assert {r[1] for r in want} >= {"Web", "web"}
    drained = {p: o for p, o in end_offsets(endpoints.bootstrap, final_topic).items() if o}
    stored = dict(_query(mysql_db, "SELECT kafka_partition, next_offset FROM kafka_offsets "
                                   "WHERE topic = %s", (final_topic,)))
    assert stored == drained

    # Again: nothing new to read, nothing written twice.
    _sink(endpoints, names, mysql_db, final_topic, "fin")
    assert _rows(mysql_db, "fin", "log_time, service, log_count, window_end, grace") == want
    assert _rows(mysql_db, "fin_closed", cols) == closed

    # Another group into the same tables: its first row is there already (not by its offsets):
    # one line, exit 2, nothing overwritten.
    dup = _sink(endpoints, names, mysql_db, final_topic, "fin", "--group-id",
                names.group + "-other", check=False)
    assert dup.returncode == 2, dup.stderr[-2000:]
    errors = _error_lines(dup.stderr)
    assert len(errors) == 1 and "MySQL table fin already holds a row" in errors[0], errors
    assert "nothing written" in errors[0]
    assert _rows(mysql_db, "fin", "log_time, service, log_count, window_end, grace") == want
    assert not _query(mysql_db, "SELECT * FROM kafka_offsets WHERE group_id = %s",
                      (names.group + "-other",))

    # The output topic's running totals into the final table: refused in one line.
    mixed = _sink(endpoints, names, mysql_db, names.topic("out"), "fin", "--group-id",
                  names.group + "-totals", check=False)
    assert mixed.returncode == 2, mixed.stderr[-2000:]
    errors = _error_lines(mixed.stderr)
    assert len(errors) == 1 and "MySQL table fin holds final records" in errors[0], errors


def _locked_insert(url, table: str) -> tuple[int, int] | None:
    """(thread id, rows its transaction modified) of the sink's connection while it waits for
    the lock on `table` in its INSERT, or None while none does."""
    rows = _query(url, "SELECT p.ID, t.trx_rows_modified FROM information_schema.PROCESSLIST p "
                       "JOIN information_schema.INNODB_TRX t ON t.trx_mysql_thread_id = p.ID "
                       "WHERE p.DB = %s AND p.INFO LIKE %s",
                  (url.database, f"INSERT INTO `{table}`%"))
    return (int(rows[0][0]), int(rows[0][1])) if rows else None


def test_ungrouped_finals_exactly_once_through_a_sigkill_inside_the_transaction(
        endpoints, names, mysql_db, tmp_path):
    expected = _input(endpoints.bootstrap, names.topic("in"))
    final_topic = names.topic("final")
    cli(*stage_args(endpoints, names, "--once", *FMT, "--emit-final", "1h",
                    "--final-topic", final_topic))
    per_minute = Counter({_minute(m): 0 for m in range(CLOSED)})
    for (minute, _), n in expected.items():
        per_minute[minute] += n
    want = sorted((minute, n, _minute(i + 1), "1h")
                  for i, (minute, n) in enumerate(sorted(per_minute.items())))
    closed = _closed_rows(Counter({m: 1 for m in per_minute}), per_minute)
    assert per_minute[_minute(3)] == per_minute[_minute(6)] == 0

    # The closed table exists (as the sink makes it) and another session holds it: the sink's
    # batch inserts its minute rows, then waits in the closed rows' INSERT. Killed there.
    holder = pymysql.connect(host=mysql_db.host, port=mysql_db.port, user=mysql_db.user,
                             password=mysql_db.password, database=mysql_db.database,
                             autocommit=True)
    log = tmp_path / "sink.log"
    try:
        with holder.cursor() as cur:
            cur.execute(sink_store.closed_ddl("finu"))
            cur.execute("LOCK TABLES `finu_closed` WRITE")
        proc = start_cli(*sink_args(endpoints, names, mysql_db, "--topic", final_topic,
                                    "--table", "finu", "--metrics-port", "0"), log_path=log)
        try:
            thread, modified = wait_for(lambda: _locked_insert(mysql_db, "finu_closed"),
                                        timeout_s=120, what="the sink's closed rows' INSERT")
            assert modified > 0, "minute rows were written in the transaction"
            proc.send_signal(signal.SIGKILL)
            proc.wait(30)
        finally:
            if proc.poll() is None:
                proc.kill()
        with holder.cursor() as cur:
            cur.execute("UNLOCK TABLES")
    finally:
        holder.close()
    # The server notices its client gone and rolls the transaction back: what is in MySQL is
    # exactly the records below the stored offset (none, unless a poll ended before the first
    # closed record), the killed transaction's rows gone with it.
    wait_for(lambda: not _query(mysql_db, "SELECT 1 FROM information_schema.PROCESSLIST "
                                          "WHERE ID = %s", (thread,)),
             timeout_s=60, what="the killed sink's connection to end")
    stored = dict(_query(mysql_db, "SELECT kafka_partition, next_offset FROM kafka_offsets "
                                   "WHERE topic = %s", (final_topic,)))
    applied = [json.loads(m.value()) for m in read_all(endpoints.bootstrap, final_topic)
               if m.offset() < stored.get(m.partition(), 0)]
    assert _rows(mysql_db, "finu", "log_time, log_count, window_end, grace") == sorted(
        (v["log_time"], v["log_count"], v["window_end"], v["grace"]) for v in applied
        if not v.get("closed")), log.read_text()[-2000:]
    assert _query(mysql_db, "SELECT COUNT(*) FROM finu_closed") == [(0,)]
    # the killed transaction's rows are not there
    assert len([v for v in applied if not v.get("closed")]) + modified <= CLOSED

    # Run again, twice: every row once, none missing.
    for _ in range(2):
        _sink(endpoints, names, mysql_db, final_topic, "finu")
        assert _rows(mysql_db, "finu", "log_time, log_count, window_end, grace") == want
        assert _rows(mysql_db, "finu_closed",
                     "window_start, window_end, series, log_count, grace") == closed
    drained = {p: o for p, o in end_offsets(endpoints.bootstrap, final_topic).items() if o}
    assert dict(_query(mysql_db, "SELECT kafka_partition, next_offset FROM kafka_offsets "
                                 "WHERE topic = %s", (final_topic,))) == drained


def _publish(bootstrap: str, topic: str, records: list[tuple[bytes, bytes]], txn_id: str):
    """In one committed transaction, as the stage publishes."""
    kafka_io.ensure_topic(kafka_io.admin(bootstrap), topic, 1)
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id,
                  "transaction.timeout.ms": 30000, "log_level": 3})
    p.init_transactions(30)
    p.begin_transaction()
    for key, value in records:
        p.produce(topic, key=key, value=value)
    p.commit_transaction(30)


def test_rollup_windows_go_to_a_table_per_length_and_a_topic_of_both_kinds_is_refused(
        endpoints, names, mysql_db):
    """Final records of a minute, an hour and a day (the shapes --rollup publishes), written
    here with the records' own encoder."""
    windows = [("2024-05-01 10:00:00", "2024-05-01 10:01:00"),
               ("2024-05-01 10:00:00", "2024-05-01 11:00:00"),
               ("2024-05-01 00:00:00", "2024-05-02 00:00:00")]
    counts = {"web-1": 3, "web-2": 4}
    records = []
    for i, (start, end) in enumerate(windows):
        for host, n in counts.items():
            records.append(encode_final(FinalRecord(start, end, "1m", "ERROR", n * 10 ** i,
                                                    (("host", host),))))
        records.append(encode_final(FinalRecord(start, end, "1m", "ERROR",
                                                sum(counts.values()) * 10 ** i, closed=True,
                                                series=len(counts))))
    topic = names.topic("final")
    _publish(endpoints.bootstrap, topic, records, names.txn_id)
    _sink(endpoints, names, mysql_db, topic, "r")
    for table, (start, end), scale in zip(("r", "r_1h", "r_1d"), windows, (1, 10, 100),
                                          strict=True):
        assert _rows(mysql_db, table, "log_time, host, log_count, window_end, grace") == [
            (start, host, n * scale, end, "1m") for host, n in sorted(counts.items())]
    assert _rows(mysql_db, "r_closed", "window_start, window_end, series, log_count, grace") == \
        sorted((s, e, 2, 7 * scale, "1m") for (s, e), scale in zip(windows, (1, 10, 100),
                                                                    strict=True))

    # A running total and final records in one topic: one line, exit 2, nothing written.
    both = names.topic("both")
    total = json.dumps({"log_time": "2024-05-01 10:00:00", "log_count": 1, "level": "ERROR"})
    _publish(endpoints.bootstrap, both, [(b"2024-05-01 10:00:00", total.encode()), *records],
             names.txn_id + "-both")
    # (a group of its own: a static member of the first group may be handed back that
    # group's assignment, the other topic's partition)
    refused = _sink(endpoints, names, mysql_db, both, "b", "--group-id", names.group + "-both",
                    check=False)
    assert refused.returncode == 2, refused.stderr[-2000:]
    errors = _error_lines(refused.stderr)
    assert len(errors) == 1 and "running totals and final records" in errors[0], errors
    assert not _query(mysql_db, "SELECT * FROM kafka_offsets WHERE topic = %s", (both,))
