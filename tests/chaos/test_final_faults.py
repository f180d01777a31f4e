"""--emit-final through the crash points: the stage dies at every point of a batch that closes
minutes, one process after another, and the final topic holds each minute's final record
exactly once with its exact total, read back record by record (Kafka's transactions_test.py
checks its output topic the same way: no duplicate, none missing)."""

from __future__ import annotations

import json
import signal
import time
from collections import Counter
from datetime import datetime, timedelta

from confluent_kafka import Producer

from logcount.connectors import kafka_io
from logcount.core.records import decode_final
from logcount.pipeline.crash import CRASH_EXIT_CODE, POINTS
from tests.support.proc_tree import signal_tree, stop_at_crash_point
from tests.support.readers import end_offsets, group_offsets, read_all
from tests.support.run import cli, stage_args, start_cli, wait_for

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
    _check_finals(endpoints.bootstrap, names, final_topic, expected)


def _check_finals(bootstrap: str, names, final_topic: str, expected: Counter) -> None:
    """Each minute 09:50-10:27 and the hour 09:00-10:00 once, exact, its closed record last."""
    windows: dict[tuple[str, str], dict] = {}
    for m in read_all(bootstrap, final_topic):
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
            for m in read_all(bootstrap, names.topic("out"))}
    assert last == dict(expected)
    assert not read_all(bootstrap, names.topic("dlq"))  # nothing late, in order


# A transaction timeout the broker enforces soon (it checks every 10 s): a freeze past it.
TXN_TIMEOUT_MS = 8000


def test_a_freeze_past_the_transaction_timeout_and_a_takeover_publish_each_final_once(
        endpoints, names, tmp_path):
    """A stage frozen with a closing batch's transaction open until the broker aborts it, then
    resumed (it recovers in-process), then frozen again while a second instance takes the
    transactional id and finishes: the frozen one exits without publishing, and the final
    topic holds each minute once."""
    expected = _input(endpoints.bootstrap, names.topic("in"))
    final_topic = names.topic("final")
    args = stage_args(endpoints, names, "--max-records-per-batch", str(BATCH),
                      "--trigger-interval", "0.2", "--emit-final", "1m", "--final-topic",
                      final_topic, "--rollup", "1h",
                      "--kafka-config", f"transaction.timeout.ms={TXN_TIMEOUT_MS}")
    log = tmp_path / "stage.log"
    stage = start_cli(*args, log_path=log, env={
        "LOGCOUNT_CRASH_AT": "after_send_offsets:3,after_send_offsets:5",
        "LOGCOUNT_CRASH_MODE": "stop"})
    new = None
    try:
        stop_at_crash_point(stage)  # batch 3: its finals produced, its transaction open
        frozen = time.monotonic()
        wait_for(lambda: time.monotonic() - frozen > TXN_TIMEOUT_MS / 1000 + 12, timeout_s=60,
                 what="the broker to abort the frozen transaction")
        signal_tree(stage.pid, signal.SIGCONT)
        stop_at_crash_point(stage)  # batch 5, after recovering from the fencing
        assert "cause fenced_after_freeze" in log.read_text(), log.read_text()[-3000:]
        new = start_cli(*args, log_path=tmp_path / "new.log")
        ends = end_offsets(endpoints.bootstrap, names.topic("in"))
        wait_for(lambda: group_offsets(endpoints.bootstrap, names.group,
                                       names.topic("in")) == ends,
                 timeout_s=240, what="the second instance to finish the input")
        written = end_offsets(endpoints.bootstrap, final_topic)
        signal_tree(stage.pid, signal.SIGCONT)
        assert stage.wait(60) == 1, log.read_text()[-3000:]
        assert end_offsets(endpoints.bootstrap, final_topic) == written, "the zombie published"
        new.send_signal(signal.SIGTERM)
        assert new.wait(60) == 0
    finally:
        for p in (stage, new):
            if p is not None and p.poll() is None:
                signal_tree(p.pid, signal.SIGCONT)
                p.kill()
    _check_finals(endpoints.bootstrap, names, final_topic, expected)
