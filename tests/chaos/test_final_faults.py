"""--emit-final through the crash points: the stage dies at every point of a batch that closes
minutes, one process after another, and the final topic holds each minute's final record
exactly once with its exact total, read back record by record (Kafka's transactions_test.py
checks its output topic the same way: no duplicate, none missing)."""

from __future__ import annotations

import json
from collections import Counter
from datetime import datetime, timedelta

from confluent_kafka import Producer

from logcount.connectors import kafka_io
from logcount.core.records import decode_final
from logcount.pipeline.crash import CRASH_EXIT_CODE, POINTS
from tests.support.readers import read_all
from tests.support.run import cli, stage_args

PARTITIONS = 4
PER_PARTITION = 1000
PER_MINUTE = 25  # lines of one minute in each partition, in order: 40 minutes from 09:50
FIRST = datetime(2017, 7, 30, 9, 50)
BATCH = 500  # records a batch: 125 a partition, 5 minutes, so every batch closes minutes


def _input(bootstrap: str, topic: str) -> Counter:
    kafka_io.ensure_topic(kafka_io.admin(bootstrap), topic, PARTITIONS)
    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5})
    expected: Counter = Counter()
    for part in range(PARTITIONS):
        for i in range(PER_PARTITION):
            minute = f"{FIRST + timedelta(minutes=i // PER_MINUTE):%Y-%m-%d %H:%M}"
            level = "ERROR" if (i + part) % 3 else "WARN"
            p.produce(topic, f"{minute}:{i % 60:02d} {level} job {part}/{i}".encode(),
                      partition=part)
            expected[minute + ":00"] += level == "ERROR"
    assert p.flush(60) == 0
    return expected


def test_every_crash_point_in_closing_batches_leaves_each_final_record_exactly_once(
        endpoints, names):
    expected = _input(endpoints.bootstrap, names.topic("in"))
    final_topic = names.topic("final")
    args = stage_args(endpoints, names, "--once", "--max-records-per-batch", str(BATCH),
                      "--emit-final", "1m", "--final-topic", final_topic, "--rollup", "1h",
                      "--kafka-config", "transaction.timeout.ms=8000")
    for point in POINTS:  # each process commits a batch, then dies at `point` in the next
        proc = cli(*args, env={"LOGCOUNT_CRASH_AT": f"{point}:2"}, check=False)
        assert proc.returncode == CRASH_EXIT_CODE, (point, proc.stderr[-2000:])
    cli(*args)  # to the end
    windows: dict[tuple[str, str], dict] = {}
    for m in read_all(endpoints.bootstrap, final_topic):
        r = decode_final(m.value())
        w = windows.setdefault((r.window_start, r.window_end), {"total": None, "closed": None})
        assert m.key().decode() == r.window_start
        assert w["closed"] is None, f"{r.window_start}: a record after its closed record"
        if r.closed:
            assert r.series == 1 and r.count == w["total"], r
            w["closed"] = r
        else:
            assert w["total"] is None, f"{r.window_start}: its final total twice"
            w["total"] = r.count
    # Every partition's newest minute is 10:29: with a minute's grace 09:50-10:27 are closed,
    # and the hour 09:00-10:00 with them (a rollup once every minute of it is final).
    def text(t: datetime) -> str:
        return f"{t:%Y-%m-%d %H:%M}:00"

    minutes = [(text(FIRST + timedelta(minutes=m)), text(FIRST + timedelta(minutes=m + 1)))
               for m in range(38)]
    hour = ("2017-07-30 09:00:00", "2017-07-30 10:00:00")
    order = list(windows)
    assert [w for w in order if w != hour] == minutes
    assert order.index(hour) > order.index(minutes[9])  # published once its minutes are final
    assert {k: w["total"] for k, w in windows.items() if k != hour} == {
        (m, e): expected[m] for m, e in minutes}
    assert windows[hour]["total"] == sum(expected[m] for m, _ in minutes[:10])
    # The output topic's last totals are exact too, the closed minutes' equal to their finals.
    last = {m.key().decode(): json.loads(m.value())["log_count"]
            for m in read_all(endpoints.bootstrap, names.topic("out"))}
    assert last == dict(expected)
    assert not read_all(endpoints.bootstrap, names.topic("dlq"))  # nothing late, in order
