"""Self-healing: a stage frozen (SIGSTOP of its whole process tree) and a broker restarted.

One stage run carries the three freezes, one after another, so the Spark start is paid once:
a short freeze inside a watched call (not a hang), a freeze past transaction.timeout.ms (the
broker fences the producer; the stage recovers in-process), and a freeze during which a second
instance takes over (the frozen one exits without publishing).
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import time
from datetime import datetime
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaException, TopicPartition
from confluent_kafka.admin import OffsetSpec

from logcount.connectors import kafka_io, stack
from tests.support.exact import assert_exact
from tests.support.inputs import build_input
from tests.support.metrics import label_sets, sample
from tests.support.ports import free_port
from tests.support.proc_tree import signal_tree, stop_at_crash_point
from tests.support.readers import end_offsets, group_offsets, held_topics, sink_offsets
from tests.support.run import cli, sink_args, stage_args, start_cli, wait_for

BATCH = 200
# The bound: from the moment the fault is healed to the next commit.
RESUME_S = 5.0
# A transaction timeout the short freeze stays under (the broker aborts a timed-out transaction
# at its next check, every 10 s) and the send_offsets watchdog (5 s + 2 s) is well over.
TXN_TIMEOUT_MS = 15_000
SHORT_FREEZE_S = 10.0
# How long a broker resumed after a stop past its session may serve from before its fence.
# Seen: it answered 0.18 s after SIGCONT, its controller fenced it 0.3 s later, and it led its
# partitions again 4.6 s after SIGCONT: the stage's clock had started 4 s early.
FENCE_SHOWS_S = 5.0



def _pid(service: stack.Kafka | stack.MariaDB) -> int:
    """The embedded service's pid: it runs (the stack fixture started it)."""
    pid = service.pid()
    assert pid is not None, f"{type(service).__name__} is not running"
    return pid


def _open_transaction(bootstrap: str, names) -> bool:
    """A transaction is open when a read_committed reader of the output or DLQ is held below
    the log end, or the group's offsets are unstable (offsets sent, transaction unresolved)."""
    if held_topics(bootstrap, (names.topic("out"), names.topic("dlq"))):
        return True
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": names.group, "log_level": 0})
    try:
        consumer.committed([TopicPartition(names.topic("in"), 0)], timeout=3)
        return False
    except KafkaException:  # UNSTABLE_OFFSET_COMMIT until the transaction ends
        return True
    finally:
        consumer.close()




def _log_time(line: str) -> float:
    """The epoch time of a log line ("2026-11-26 05:40:43,123 INFO ...", local time)."""
    stamp = " ".join(line.split()[:2])
    return datetime.strptime(stamp, "%Y-%m-%d %H:%M:%S,%f").timestamp()


def _commits_after(log_text: str, t: float) -> list[float]:
    return [_log_time(ln) for ln in log_text.splitlines()
            if re.search(r" batch \d+ committed", ln) and _log_time(ln) >= t]


def test_freezes_short_past_the_timeout_and_with_a_takeover(endpoints, names, mysql_db,
                                                           tmp_path):
    inp = build_input(endpoints.bootstrap, names.topic("in"), names.txn_id + "-producer")
    port = free_port()
    log_path = tmp_path / "stage.log"
    args = stage_args(endpoints, names, "--max-records-per-batch", str(BATCH),
                      "--trigger-interval", "0.2",
                      "--kafka-config", f"transaction.timeout.ms={TXN_TIMEOUT_MS}")
    # Batch 2: stopped inside the watched send_offsets_to_transaction (a short freeze);
    # batch 4: stopped with its transaction open (past the timeout); batch 7: the takeover.
    stage = start_cli(*args, "--metrics-port", str(port), log_path=log_path,
                      env={"LOGCOUNT_CRASH_AT": "in_send_offsets:2,after_send_offsets:4,"
                                                "after_send_offsets:7",
                           "LOGCOUNT_CRASH_MODE": "stop"})
    new = None
    try:
        # 1. A freeze shorter than the transaction timeout, but longer than the watchdog's
        # limit on the call it stopped in: neither a hang nor a fencing.
        stop_at_crash_point(stage)
        time.sleep(SHORT_FREEZE_S)
        signal_tree(stage.pid, signal.SIGCONT)
        wait_for(lambda: "batch 2 committed" in log_path.read_text(), timeout_s=60,
                 what="batch 2 to commit after the short freeze")
        text = log_path.read_text()
        assert "replacing the stage's Kafka clients" not in text, text[-3000:]
        assert re.search(r"did not run for \d+\.\ds \(stopped", text), "the freeze is named"
        assert sample(port, "logcount_kafka_hung_calls_total",
                      call="send_offsets_to_transaction") == 0
        assert label_sets(port, "logcount_producer_recoveries_total") == []

        # 2. Stopped with a transaction open until the broker has aborted it (fencing our
        # producer's epoch): the stage recovers in-process and commits within RESUME_S.
        stop_at_crash_point(stage)
        assert _open_transaction(endpoints.bootstrap, names), "batch 4's transaction is open"
        frozen_at = time.monotonic()
        wait_for(lambda: time.monotonic() - frozen_at >= 12
                 and not _open_transaction(endpoints.bootstrap, names),
                 timeout_s=90, step_s=1, what="the broker to abort the frozen transaction")
        resumed = time.time()
        signal_tree(stage.pid, signal.SIGCONT)
        wait_for(lambda: stage.poll() is not None or _commits_after(log_path.read_text(),
                                                                    resumed),
                 timeout_s=60, what="the next commit after the stage resumed")
        assert stage.poll() is None, log_path.read_text()[-3000:]
        took = _commits_after(log_path.read_text(), resumed)[0] - resumed
        text = log_path.read_text()
        fenced = [ln for ln in text.splitlines() if "producer fenced, cause" in ln]
        assert len(fenced) == 1 and "cause fenced_after_freeze" in fenced[0], fenced
        assert " WARNING " in fenced[0]
        assert sample(port, "logcount_producer_recoveries_total",
                      cause="fenced_after_freeze") == 1
        assert label_sets(port, "logcount_kafka_hung_calls_total") == []
        print(f"freeze past the transaction timeout: next commit {took:.2f}s after SIGCONT")
        assert took <= RESUME_S, f"resumed {took:.2f}s after SIGCONT"

        # 3. Frozen again; meanwhile a second instance takes the transactional id and finishes
        # the input. The frozen one, resumed, finds the other's claim and exits publishing
        # nothing.
        stop_at_crash_point(stage)
        new = start_cli(*args, log_path=tmp_path / "new.log")
        ends = end_offsets(endpoints.bootstrap, names.topic("in"))
        wait_for(lambda: group_offsets(endpoints.bootstrap, names.group,
                                       names.topic("in")) == ends,
                 timeout_s=240, what="the second instance to finish the input")
        written = {t: end_offsets(endpoints.bootstrap, names.topic(t)) for t in ("out", "dlq")}
        signal_tree(stage.pid, signal.SIGCONT)
        assert stage.wait(60) == 1
        last = log_path.read_text().strip().splitlines()[-1]
        assert last.startswith("logcount: error: another instance") and \
            "stops without publishing" in last, last
        assert {t: end_offsets(endpoints.bootstrap, names.topic(t))
                for t in ("out", "dlq")} == written, "the frozen instance published"
        new.send_signal(signal.SIGTERM)
        assert new.wait(60) == 0
    finally:
        for p in (stage, new):
            if p is not None and p.poll() is None:
                signal_tree(p.pid, signal.SIGCONT)
                p.kill()
    assert "Traceback" not in log_path.read_text()
    cli(*sink_args(endpoints, names, mysql_db, "--once"))
    assert_exact(endpoints.bootstrap, names, inp.expected, url=mysql_db,
                 malformed=inp.malformed, sink_at_end=True)


def _feed(bootstrap: str, topic: str, n: int, tag: str) -> None:
    """n ERROR lines of one minute, produced and flushed."""
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "log_level": 0})
    for i in range(n):
        p.produce(topic, f"2017-07-30 09:{i % 60:02d}:07 ERROR {tag} {i}".encode(),
                  partition=i % 4)
    assert p.flush(30) == 0


def test_a_broker_restart_resumes_stage_and_sink_within_5s(endpoints, names, mysql_db,
                                                         tmp_path):
    if endpoints.kind != "embedded":
        pytest.skip("restarts the embedded stack's broker")
    inp = build_input(endpoints.bootstrap, names.topic("in"), names.txn_id + "-producer")
    stage_log, sink_log = tmp_path / "stage.log", tmp_path / "sink.log"
    stage = start_cli(*stage_args(endpoints, names, "--trigger-interval", "0.2"),
                      log_path=stage_log)
    sink = start_cli(*sink_args(endpoints, names, mysql_db), log_path=sink_log)
    try:
        ends = end_offsets(endpoints.bootstrap, names.topic("in"))
        wait_for(lambda: group_offsets(endpoints.bootstrap, names.group,
                                       names.topic("in")) == ends,
                 timeout_s=240, what="the stage to count the input")
        kafka = stack.Kafka()
        kafka.down(log=lambda line: None)  # SIGTERM: a clean broker shutdown
        time.sleep(3)
        kafka.up(log=lambda line: None)  # returns once the broker answers metadata
        answered = time.time()
        _feed(endpoints.bootstrap, names.topic("in"), 100, "after-restart")
        for i in range(100):
            inp.expected[f"2017-07-30 09:{i % 60:02d}:00"] += 1
        ends = end_offsets(endpoints.bootstrap, names.topic("in"))
        wait_for(lambda: stage.poll() is not None or _commits_after(stage_log.read_text(),
                                                                    answered),
                 timeout_s=60, what="the stage's first commit after the restart")
        stage_took = _commits_after(stage_log.read_text(), answered)[0] - answered
        print(f"broker restart: stage committed {stage_took:.2f}s after the broker answered")

        def sink_done() -> bool:
            out = end_offsets(endpoints.bootstrap, names.topic("out"))
            return group_offsets(endpoints.bootstrap, names.group, names.topic("in")) == ends \
                and sink_offsets(mysql_db, names) == {p: o for p, o in out.items() if o > 0}

        wait_for(lambda: stage.poll() is not None or sink.poll() is not None or sink_done(),
                 timeout_s=60, step_s=0.1, what="the sink to store the new totals")
        sink_took = time.time() - answered
        assert stage.poll() is None and sink.poll() is None
        print(f"broker restart: sink stored {sink_took:.2f}s after the broker answered")
        assert stage_took <= RESUME_S, stage_log.read_text()[-3000:]
        assert sink_took <= RESUME_S, sink_log.read_text()[-3000:]
        stage.send_signal(signal.SIGTERM)
        sink.send_signal(signal.SIGTERM)
        assert stage.wait(60) == 0 and sink.wait(60) == 0
    finally:
        for p in (stage, sink):
            if p.poll() is None:
                p.kill()
    for path in (stage_log, sink_log):
        assert "Traceback" not in path.read_text()
    # The sink: one line when the outage begins, one when it is over, not one per retry.
    text = sink_log.read_text()
    assert text.count("waiting for the broker") == 1, text[-3000:]
    assert text.count("answers again") == 1, text[-3000:]
    assert_exact(endpoints.bootstrap, names, inp.expected, url=mysql_db,
                 malformed=inp.malformed, sink_at_end=True)


# A restarted sink's own start (imports, MySQL, the broker) takes a few seconds; the killed
# one's member held the partitions for its whole 45 s session before static membership.
SINK_TAKES_BACK_S = 15.0


def test_a_killed_sink_restarted_takes_its_partitions_back_at_once(endpoints, names, mysql_db,
                                                                   tmp_path):
    inp = build_input(endpoints.bootstrap, names.topic("in"), names.txn_id + "-producer")
    cli(*stage_args(endpoints, names, "--once"))
    out = tmp_path / "sink.log"

    def sink_done() -> bool:
        ends = end_offsets(endpoints.bootstrap, names.topic("out"))
        return sink_offsets(mysql_db, names) == {p: o for p, o in ends.items() if o > 0}

    sink = start_cli(*sink_args(endpoints, names, mysql_db), log_path=out)
    others: list[subprocess.Popen] = []  # the sinks started beside it
    try:
        wait_for(lambda: sink.poll() is not None or sink_done(), timeout_s=120,
                 what="the sink to store the totals")
        assert sink.poll() is None
        sink.kill()  # SIGKILL: its member never leaves the group
        sink.wait(30)
        _feed(endpoints.bootstrap, names.topic("in"), 100, "after-kill")
        for i in range(100):
            inp.expected[f"2017-07-30 09:{i % 60:02d}:00"] += 1
        cli(*stage_args(endpoints, names, "--once"))
        assert not sink_done()
        started = time.time()
        sink = start_cli(*sink_args(endpoints, names, mysql_db), log_path=tmp_path / "again.log")
        wait_for(lambda: sink.poll() is not None or sink_done(), timeout_s=120, step_s=0.1,
                 what="the restarted sink to store the new totals")
        took = time.time() - started
        assert sink.poll() is None
        print(f"sink killed and restarted: stored {took:.2f}s after its start")
        assert took <= SINK_TAKES_BACK_S, (tmp_path / "again.log").read_text()[-3000:]
        # A second sink of the same group and host, so the same id: the first one goes, saying so.
        third = start_cli(*sink_args(endpoints, names, mysql_db, "--metrics-port", "0"),
                          log_path=tmp_path / "third.log")
        others.append(third)
        assert sink.wait(60) == 1
        last = (tmp_path / "again.log").read_text().strip().splitlines()[-1]
        assert last.startswith("logcount: error: sink consumer:") and \
            "same group.instance.id" in last, last
        third.send_signal(signal.SIGTERM)
        assert third.wait(60) == 0
    finally:
        for p in (sink, *others):
            if p.poll() is None:
                p.kill()
    for log in ("again.log", "third.log"):
        assert "Traceback" not in (tmp_path / log).read_text()
    assert_exact(endpoints.bootstrap, names, inp.expected, url=mysql_db,
                 malformed=inp.malformed, sink_at_end=True)


def _serves(bootstrap: str, topic: str) -> bool:
    """The broker answers the offsets of every partition of `topic`, first and last (as the
    stage's plan and state read ask)."""
    try:
        adm = kafka_io.admin(bootstrap)
        parts = kafka_io.partitions_of(adm, topic) or []
        for spec in (OffsetSpec.earliest(), OffsetSpec.latest()):
            kafka_io.list_offsets(adm, topic, parts, spec)
        return True
    except Exception:  # noqa: BLE001 - any failure means "not yet"
        return False


def _new_lines(path: Path, since: int) -> list[str]:
    return path.read_text().splitlines()[since:]


def test_broker_and_mariadb_stopped_30s_and_mariadb_killed(endpoints, names, mysql_db,
                                                          tmp_path):
    """One stage and sink run through three faults: the broker SIGSTOPped 30 s, MariaDB
    SIGSTOPped 30 s, MariaDB SIGKILLed and started again. Each resumes within RESUME_S of the
    heal, says so once per outage, and the totals end exact."""
    if endpoints.kind != "embedded":
        pytest.skip("stops the embedded stack's broker and MariaDB")
    inp = build_input(endpoints.bootstrap, names.topic("in"), names.txn_id + "-producer",
                      n_plain=400, n_txn=120)
    stage_log, sink_log = tmp_path / "stage.log", tmp_path / "sink.log"
    stage = start_cli(*stage_args(endpoints, names, "--trigger-interval", "0.2",
                                  "--metrics-port", "0"), log_path=stage_log)
    sink = start_cli(*sink_args(endpoints, names, mysql_db, "--metrics-port", "0"),
                     log_path=sink_log)
    kafka, db = stack.Kafka(), stack.MariaDB()
    fed = 0

    def feed() -> None:
        nonlocal fed
        _feed(endpoints.bootstrap, names.topic("in"), 60, f"fault-{fed}")
        for i in range(60):
            inp.expected[f"2017-07-30 09:{i % 60:02d}:00"] += 1
        fed += 1

    def stage_done() -> bool:
        ends = end_offsets(endpoints.bootstrap, names.topic("in"))
        return group_offsets(endpoints.bootstrap, names.group, names.topic("in")) == ends

    def sink_done() -> bool:
        out = end_offsets(endpoints.bootstrap, names.topic("out"))
        return sink_offsets(mysql_db, names) == {p: o for p, o in out.items() if o > 0}

    def resumed(healed: float, what: str) -> float:
        wait_for(lambda: stage.poll() is not None or sink.poll() is not None
                 or (stage_done() and sink_done()), timeout_s=60, step_s=0.1, what=what)
        assert stage.poll() is None and sink.poll() is None
        return time.time() - healed

    took = {}
    try:
        wait_for(lambda: stage_done() and sink_done(), timeout_s=240, what="the first counts")
        seen = len(sink_log.read_text().splitlines())
        # 1. The broker stopped: nothing answers, connections stay open.
        os.kill(_pid(kafka), signal.SIGSTOP)
        time.sleep(30)
        os.kill(_pid(kafka), signal.SIGCONT)
        continued = time.time()
        # A KRaft broker stopped past its session is fenced by its controller and registers
        # again on resume: it answers metadata at once, but serves partitions only after that.
        # The stage's clock starts when the broker serves the input's offsets again.
        serving = lambda: all(_serves(endpoints.bootstrap, t) for t in (  # noqa: E731
            names.topic("in"), names.topic("out"), names.topic("out") + "-state"))
        # Right after SIGCONT it may still serve from before the fence, for a moment: the
        # clock starts once the fence has shown (or FENCE_SHOWS_S passed without one).
        deadline = time.monotonic() + FENCE_SHOWS_S
        while time.monotonic() < deadline and serving():
            time.sleep(0.1)
        wait_for(serving, timeout_s=60, step_s=0.1, what="the broker to serve partitions again")
        healed = time.time()
        print(f"broker stopped 30 s: serves partitions {healed - continued:.2f}s after SIGCONT")
        feed()
        wait_for(lambda: _commits_after(stage_log.read_text(), healed), timeout_s=60,
                 what="the stage's commit after the broker resumed")
        took["broker stopped 30 s: stage"] = _commits_after(stage_log.read_text(), healed)[0] \
            - healed
        took["broker stopped 30 s: sink"] = resumed(healed, "stage and sink after the broker")
        assert sum("waiting for the broker" in ln for ln in _new_lines(sink_log, seen)) <= 1
        # 2. MariaDB stopped while the stage keeps publishing: the sink waits, then writes.
        seen = len(sink_log.read_text().splitlines())
        os.kill(_pid(db), signal.SIGSTOP)
        feed()
        time.sleep(30)
        os.kill(_pid(db), signal.SIGCONT)
        healed = time.time()
        took["MariaDB stopped 30 s: sink"] = resumed(healed, "the sink after MariaDB resumed")
        lines = _new_lines(sink_log, seen)
        assert sum("waiting for MySQL" in ln for ln in lines) == 1, lines
        assert sum("MySQL at" in ln and "answers again" in ln for ln in lines) == 1, lines
        # 3. MariaDB killed and started again.
        seen = len(sink_log.read_text().splitlines())
        db.kill()
        feed()
        time.sleep(3)
        db.up(log=lambda line: None)
        healed = time.time()
        took["MariaDB SIGKILLed, restarted: sink"] = resumed(healed, "the sink after the restart")
        lines = _new_lines(sink_log, seen)
        assert sum("waiting for MySQL" in ln for ln in lines) == 1, lines
        assert sum("MySQL at" in ln and "answers again" in ln for ln in lines) == 1, lines
        stage.send_signal(signal.SIGTERM)
        sink.send_signal(signal.SIGTERM)
        assert stage.wait(60) == 0 and sink.wait(60) == 0
    finally:
        for sig_target in (kafka.pid(), db.pid()):
            if sig_target is not None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(sig_target, signal.SIGCONT)
        for p in (stage, sink):
            if p.poll() is None:
                p.kill()
    for fault, seconds in took.items():
        print(f"{fault}: resumed {seconds:.2f}s after the heal")
    for path in (stage_log, sink_log):
        assert "Traceback" not in path.read_text()
    assert_exact(endpoints.bootstrap, names, inp.expected, url=mysql_db,
                 malformed=inp.malformed, sink_at_end=True)
    slow = {f: s for f, s in took.items() if s > RESUME_S}
    assert not slow, slow
