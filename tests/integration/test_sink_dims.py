"""`logcount sink --table` with `--group-by` output, through the real CLI, broker and MySQL.

The input is written with plain Python and the expected series worked out by construction;
MySQL's rows must equal the output topic's last total per key, values that a default collation
would merge (case, trailing space) or that SQL text would choke on kept apart and intact.
"""

from __future__ import annotations

import json
from collections import Counter

import pymysql
from confluent_kafka import Producer

from logcount.connectors import kafka_io
from tests.support.readers import read_all
from tests.support.run import cli, sink_args, stage_args

HOSTS = ["Web-1", "web-1", "pad", "pad ", "it's", "a|b", "line\nbreak", "; DROP TABLE x; --",
         "\u00e9" * 127 + "a", "\U0001f600" * 63 + "abc", ""]
SERVICES = ["api", "API"]


def _input(bootstrap: str, topic: str) -> Counter:
    kafka_io.ensure_topic(kafka_io.admin(bootstrap), topic, 2)
    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5})
    expected: Counter = Counter()
    for i in range(300):
        host, svc, mi = HOSTS[i % len(HOSTS)], SERVICES[i % 7 % 2], i % 2
        env = {"message": f"2024-05-01 10:0{mi}:{i % 60:02d} ERROR request {i} failed",
               "host": {"name": host}, "service": svc}
        p.produce(topic, json.dumps(env).encode())
        expected[(f"2024-05-01 10:0{mi}:00", host, svc)] += 1
    assert p.flush(60) == 0
    return expected


def _last_per_key(bootstrap: str, topic: str) -> dict[tuple[str, ...], int]:
    out = {}
    for m in read_all(bootstrap, topic):
        v = json.loads(m.value())
        assert list(v["dims"]) == ["host", "svc"]
        out[(v["log_time"], *v["dims"].values())] = v["log_count"]
    return out


def _query(url, sql: str) -> list[tuple]:
    conn = pymysql.connect(host=url.host, port=url.port, user=url.user, password=url.password,
                           database=url.database, autocommit=True, charset="utf8mb4")
    try:
        with conn.cursor() as cur:
            cur.execute(sql)
            return list(cur.fetchall())
    finally:
        conn.close()


def test_grouped_output_fills_a_table_of_distinct_series_and_refuses_another_shape(
        endpoints, names, mysql_db):
    expected = _input(endpoints.bootstrap, names.topic("in"))
    assert all(len(h.encode()) <= 255 for h in HOSTS) and len(HOSTS[-2].encode()) == 255
    cli(*stage_args(endpoints, names, "--once", "--json-line-field", "message",
                    "--group-by", "host=host.name,svc=service"))
    last = _last_per_key(endpoints.bootstrap, names.topic("out"))
    assert last == dict(expected)

    cli(*sink_args(endpoints, names, mysql_db, "--once", "--table", "t"))
    rows = {(t.strftime("%Y-%m-%d %H:%M:00"), h, s): n
            for t, h, s, n in _query(mysql_db, "SELECT log_time, host, svc, log_count FROM t")}
    assert rows == last
    assert len(rows) == len(HOSTS) * 2 * 2
    # the default table is untouched: only the one named by --table was created (at start in
    # today's shape, then reshaped for the grouped records while still empty)
    assert _query(mysql_db, "SHOW TABLES LIKE 'error_log'") == []

    # An existing table of another shape: one line naming both, exit 2, nothing written.
    _query(mysql_db, "CREATE TABLE other (log_time DATETIME NOT NULL, svc VARCHAR(255) NOT NULL,"
                     " log_count INT NOT NULL, PRIMARY KEY (log_time, svc))")
    _query(mysql_db, "CREATE TABLE plain (log_time DATETIME PRIMARY KEY, log_count INT NOT NULL)")
    # (an empty one of that shape, as a sink's start leaves it, is reshaped: table t above)
    _query(mysql_db, "INSERT INTO plain VALUES ('2024-05-01 10:00:00', 1)")
    for table, theirs in (("other", "has dimensions (svc)"), ("plain", "has no dimensions")):
        refused = cli(*sink_args(endpoints, names, mysql_db, "--once", "--table", table,
                                 "--group-id", f"{names.group}-{table}"), check=False)
        errors = [ln for ln in refused.stderr.splitlines() if ln.startswith("logcount: error:")]
        assert refused.returncode == 2, refused.stderr[-2000:]
        assert len(errors) == 1 and f"MySQL table {table} {theirs}" in errors[0], errors
        assert "records have dimensions (host, svc)" in errors[0]
        assert _query(mysql_db, f"SELECT COUNT(*) FROM {table}") == [(int(table == "plain"),)]
