"""--emit-final through the crash points: the stage dies at every point of a batch that closes
minutes, one process after another, and the final topic holds each minute's final record
exactly once with its exact total, read back record by record (Kafka's transactions_test.py
checks its output topic the same way: no duplicate, none missing)."""

from __future__ import annotations

import json
from collections import Counter

from confluent_kafka import Producer

from logcount.connectors import kafka_io
from logcount.core.records import decode_final
from logcount.pipeline.crash import CRASH_EXIT_CODE, POINTS
from tests.support.readers import read_all
from tests.support.run import cli, stage_args

PARTITIONS = 4
PER_PARTITION = 1000
PER_MINUTE = 25  # lines of one minute in each partition, in order: 40 minutes
BATCH = 500  # records a batch: 125 a partition, 5 minutes, so every batch closes minutes


def _input(bootstrap: str, topic: str) -> Counter:
    kafka_io.ensure_topic(kafka_io.admin(bootstrap), topic, PARTITIONS)
    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5})
    expected: Counter = Counter()
    for part in range(PARTITIONS):
        for i in range(PER_PARTITION):
            minute = f"2017-07-30 10:{i // PER_MINUTE:02d}"
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
                      "--emit-final", "1m", "--final-topic", final_topic,
                      "--kafka-config", "transaction.timeout.ms=8000")
    for point in POINTS:  # each process commits a batch, then dies at `point` in the next
        proc = cli(*args, env={"LOGCOUNT_CRASH_AT": f"{point}:2"}, check=False)
        assert proc.returncode == CRASH_EXIT_CODE, (point, proc.stderr[-2000:])
    cli(*args)  # to the end
    windows: dict[str, dict] = {}
    for m in read_all(endpoints.bootstrap, final_topic):
        r = decode_final(m.value())
        w = windows.setdefault(r.window_start, {"total": None, "closed": None})
        assert m.key().decode() == r.window_start
        assert w["closed"] is None, f"{r.window_start}: a record after its closed record"
        if r.closed:
            assert r.series == 1 and r.count == w["total"], r
            w["closed"] = r
        else:
            assert w["total"] is None, f"{r.window_start}: its final total twice"
            w["total"] = r.count
    # Every partition's newest minute is 10:39: with a minute's grace 10:00-10:37 are closed.
    minutes = [f"2017-07-30 10:{m:02d}:00" for m in range(38)]
    assert list(windows) == minutes
    assert {k: w["total"] for k, w in windows.items()} == {m: expected[m] for m in minutes}
    # The output topic's last totals are exact too, the closed minutes' equal to their finals.
    last = {m.key().decode(): json.loads(m.value())["log_count"]
            for m in read_all(endpoints.bootstrap, names.topic("out"))}
    assert last == dict(expected)
    assert not read_all(endpoints.bootstrap, names.topic("dlq"))  # nothing late, in order
