"""The exactly-once stage and the MySQL sink, end to end against the real broker and MySQL."""

from __future__ import annotations

import signal
import time
from datetime import datetime

from confluent_kafka import Producer

from logcount.connectors import kafka_io
from logcount.core.batch_line import parse_batch_line
from tests.support.exact import assert_exact
from tests.support.inputs import build_input
from tests.support.metrics import metric, read_metrics
from tests.support.ports import free_port
from tests.support.readers import end_offsets, group_offsets, read_all, totals_history
from tests.support.run import cli, sink_args, stage_args, start_cli, wait_for


def test_mixed_input_is_counted_exactly_once(endpoints, names, mysql_db):
    inp = build_input(endpoints.bootstrap, names.topic("in"), names.txn_id + "-producer")
    assert inp.aborted_errors > 0 and inp.malformed, "the input must hold what it claims to"
    # A small cap: many batches, so totals are published several times and must only grow.
    proc = cli(*stage_args(endpoints, names, "--once", "--max-records-per-batch", "700"))
    assert "batch 3 committed" in proc.stderr, "expected several batches"
    cli(*sink_args(endpoints, names, mysql_db, "--once"))
    assert_exact(endpoints.bootstrap, names, inp.expected, url=mysql_db,
                 malformed=inp.malformed, sink_at_end=True)

    # Running again changes nothing: no new batch, the same table.
    again = cli(*stage_args(endpoints, names, "--once"))
    assert "batch 1 committed" not in again.stderr
    cli(*sink_args(endpoints, names, mysql_db, "--once"))
    assert_exact(endpoints.bootstrap, names, inp.expected, url=mysql_db,
                 malformed=inp.malformed, sink_at_end=True)


def test_kill_9_mid_run_then_restart_is_exact(endpoints, names, mysql_db, tmp_path):
    inp = build_input(endpoints.bootstrap, names.topic("in"), names.txn_id + "-producer",
                      n_plain=6000, n_txn=1200)
    stage = start_cli(*stage_args(endpoints, names, "--max-records-per-batch", "400",
                                  "--trigger-interval", "0.2"), log_path=tmp_path / "stage.log")
    try:
        # Kill once some batches are committed and more are still to come.
        wait_for(lambda: len(group_offsets(endpoints.bootstrap, names.group,
                                           names.topic("in"))) >= 2,
                 timeout_s=180, what="the first committed batches")
        stage.send_signal(signal.SIGKILL)
        stage.wait(30)
    finally:
        if stage.poll() is None:
            stage.kill()
    done = group_offsets(endpoints.bootstrap, names.group, names.topic("in"))
    ends = end_offsets(endpoints.bootstrap, names.topic("in"))
    assert done != ends, "the kill must land mid-run for this test to mean anything"
    cli(*stage_args(endpoints, names, "--once"))
    cli(*sink_args(endpoints, names, mysql_db, "--once"))
    assert_exact(endpoints.bootstrap, names, inp.expected, url=mysql_db,
                 malformed=inp.malformed, sink_at_end=True)


def test_sigterm_stops_the_stage_cleanly_with_exit_0(endpoints, names, tmp_path):
    build_input(endpoints.bootstrap, names.topic("in"), names.txn_id + "-producer",
                n_plain=400, n_txn=60)
    stage = start_cli(*stage_args(endpoints, names, "--trigger-interval", "0.2"),
                      log_path=tmp_path / "stage.log")
    wait_for(lambda: group_offsets(endpoints.bootstrap, names.group, names.topic("in")),
             timeout_s=180, what="a committed batch")
    stage.send_signal(signal.SIGTERM)
    assert stage.wait(60) == 0
    assert "stage stopped" in (tmp_path / "stage.log").read_text()


def test_an_output_topic_that_is_not_compacted_is_refused(endpoints, names):
    kafka_io.ensure_topic(kafka_io.admin(endpoints.bootstrap), names.topic("out"), 1,
                          {"cleanup.policy": "delete"})
    proc = cli(*stage_args(endpoints, names, "--once"), check=False)
    assert proc.returncode == 2
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("logcount: error: output topic") and "compact" in last


def test_bad_flag_is_one_line_and_exit_2():
    proc = cli("run", "--delivery", "maybe", check=False)
    assert proc.returncode == 2
    assert proc.stderr.strip().count("\n") == 0 and "--delivery" in proc.stderr


def test_metrics_move_with_the_stage(endpoints, names, tmp_path):
    inp = build_input(endpoints.bootstrap, names.topic("in"), names.txn_id + "-producer")
    port = free_port()
    stage = start_cli(*stage_args(endpoints, names, "--metrics-port", str(port),
                                  "--max-records-per-batch", "700", "--trigger-interval", "0.2"),
                      log_path=tmp_path / "stage.log")
    try:
        ends = end_offsets(endpoints.bootstrap, names.topic("in"))
        wait_for(lambda: group_offsets(endpoints.bootstrap, names.group,
                                       names.topic("in")) == ends,
                 timeout_s=180, what="the stage to drain")
        wait_for(lambda: metric(port, "logcount_input_lag_records") == 0, timeout_s=30,
                 what="lag 0")
        m = read_metrics(port)
        assert m.get("logcount_batches_committed_total", 0.0) >= 3
        assert m.get("logcount_records_read_total", 0.0) == inp.lines - inp.aborted_errors
        assert m.get("logcount_malformed_records_total", 0.0) == len(inp.malformed)
        assert m.get("logcount_batch_commit_seconds_count", 0.0) >= 3
    finally:
        stage.send_signal(signal.SIGTERM)
        assert stage.wait(60) == 0


def _commits(log: str) -> list[tuple[float, float, int]]:
    """(start time, end time, records) of each batch in a stage's log, in order. The end is the
    commit line's time, the start that less the batch's Spark and commit seconds: commit-to-commit
    gaps also carry the batches' own times (a CI run saw 3.47 s then 2.36 s under a 3 s pacing)."""
    out = []
    for line in log.splitlines():
        if b := parse_batch_line(line):
            t = datetime.strptime(line[:23], "%Y-%m-%d %H:%M:%S,%f").timestamp()
            out.append((t - b.spark_s - b.commit_s, t, b.records))
    return out


CAP, BACKLOG, TICKS, PER_TICK = 1000, 6000, 48, 20


def _paced_run(endpoints, names, tmp_path, *flags: str) -> list[tuple[float, float, int]]:
    """A backlog of BACKLOG lines (batches of CAP), then a steady input (PER_TICK lines every
    0.25 s for 12 s) through a stage with `flags`; every line counted once. Its batches."""
    topic = names.topic("in")
    kafka_io.ensure_topic(kafka_io.admin(endpoints.bootstrap), topic, 2)
    producer = Producer({"bootstrap.servers": endpoints.bootstrap})
    for i in range(BACKLOG):
        producer.produce(topic, b"2017-07-30 14:09:08 ERROR backlog %d" % i, partition=i % 2)
    producer.flush(30)
    log = tmp_path / "stage.log"
    stage = start_cli(*stage_args(endpoints, names, *flags, "--trigger-interval", "0.05",
                                  "--max-records-per-batch", str(CAP)), log_path=log)
    try:
        wait_for(lambda: group_offsets(endpoints.bootstrap, names.group, topic)
                 == end_offsets(endpoints.bootstrap, topic), timeout_s=180, what="the backlog")
        for t in range(TICKS):
            for i in range(PER_TICK):
                producer.produce(topic, b"2017-07-30 14:10:00 ERROR steady %d" % i,
                                 partition=(t + i) % 2)
            producer.flush(30)
            time.sleep(0.25)
        ends = end_offsets(endpoints.bootstrap, topic)
        wait_for(lambda: group_offsets(endpoints.bootstrap, names.group, topic) == ends,
                 timeout_s=60, what="the steady input")
    finally:
        stage.send_signal(signal.SIGTERM)
        assert stage.wait(60) == 0
    commits = _commits(log.read_text())
    n_backlog = BACKLOG // CAP
    assert [r for *_, r in commits[:n_backlog]] == [CAP] * n_backlog, commits
    assert sum(r for *_, r in commits[n_backlog:]) == TICKS * PER_TICK
    totals = {k: v[-1] for k, v in totals_history(
        read_all(endpoints.bootstrap, names.topic("out"))).items()}
    assert totals == {"2017-07-30 14:09:00": BACKLOG, "2017-07-30 14:10:00": TICKS * PER_TICK}
    return commits


def _backlog_not_paced(commits: list[tuple[float, float, int]], within: float) -> None:
    """Each backlog batch started well inside `within` of the last one's end, however long the
    batches took (a busy machine stretches them, not the waits between)."""
    n = BACKLOG // CAP
    idle = [b[0] - a[1] for a, b in zip(commits[:n - 1], commits[1:n], strict=True)]
    assert max(idle) < within, (idle, commits)


def test_pacing_spaces_a_caught_up_stages_batches_but_not_a_backlogs(endpoints, names,
                                                                      tmp_path):
    """--min-batch-interval: a backlog still runs batch after batch; once caught up, a steady
    input gets a batch at most every interval (what arrives meanwhile joins the next one), and
    every line is counted once."""
    interval = 3.0
    commits = _paced_run(endpoints, names, tmp_path, "--min-batch-interval", str(interval))
    _backlog_not_paced(commits, interval / 2)
    n_backlog = BACKLOG // CAP
    steady = commits[n_backlog:]
    # Start to start >= interval (less the planning, which the batch line does not time).
    gaps = [b[0] - a[0] for a, b in zip(commits[n_backlog - 1:], steady, strict=False)]
    assert gaps and min(gaps) >= interval - 0.6, gaps
    # 12 s of input in at most 12 / 3 + 2 batches (back to back it made one per tick or two),
    # and the stage did not starve it either.
    assert 3 <= len(steady) <= TICKS * 0.25 / interval + 2, steady


def test_a_latency_target_starts_each_batch_the_slowest_recent_one_before_it(endpoints, names,
                                                                             tmp_path):
    """--target-latency: a backlog runs back to back; once caught up, batch k+1 starts the
    target less the slowest recent caught-up batch after batch k's start (no earlier, no
    later), so a line written just after a batch began is committed within the target."""
    target = 2.0
    commits = _paced_run(endpoints, names, tmp_path, "--target-latency", f"{target:g}s")
    _backlog_not_paced(commits, target / 2)
    n_backlog = BACKLOG // CAP
    # The batch line times Spark and the commit; the cadence's length also has the plan and
    # the records' building (tens of ms): the slack below.
    lengths = [end - start for start, end, _ in commits]
    checked = 0
    for k in range(n_backlog, len(commits) - 1):
        gap = commits[k + 1][0] - commits[k][0]
        slowest = max(lengths[max(n_backlog - 1, k - 31):k + 1])
        if slowest >= target - 0.5:
            continue  # no room left: back to back, nothing to check
        assert target - slowest - 0.6 <= gap <= target - slowest + 0.4, (k, gap, slowest,
                                                                           commits)
        checked += 1
    assert checked >= 3, commits
    # 12 s of input: about 12 / (target - a batch) batches, not one per tick or two.
    assert len(commits) - n_backlog <= TICKS * 0.25 / (target / 2) + 2, commits
