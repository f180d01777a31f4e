"""The exactly-once stage and the MySQL sink, end to end against the real broker and MySQL."""

from __future__ import annotations

import json
import signal

import pytest

from connectors import kafka_io
from connectors.mysql_sink import read_table
from tests.helpers import (
    cli,
    end_offsets,
    group_offsets,
    read_all,
    sink_args,
    sink_offsets,
    stage_args,
    start_cli,
    totals_history,
    wait_for,
)
from tests.integration.input_builder import build_input

pytestmark = pytest.mark.integration


def assert_exact(endpoints, names, inp, url) -> None:
    """Every acceptance check of the stage and the sink, against an expectation built by
    construction (tests/integration/input_builder.py)."""
    expected = dict(inp.expected)
    out = read_all(endpoints.bootstrap, names.topic("out"))
    history = totals_history(out)
    for minute, totals in history.items():
        assert totals == sorted(totals), f"total of {minute} went down: {totals}"
    assert {k: v[-1] for k, v in history.items()} == expected, "output topic (last per key)"
    assert read_table(url) == expected, "MySQL error_log"
    out_ends = end_offsets(endpoints.bootstrap, names.topic("out"))
    assert sink_offsets(url, names) == {p: o for p, o in out_ends.items() if o > 0}, \
        "the sink's stored positions must reach the output's end (past the commit markers)"
    ends = end_offsets(endpoints.bootstrap, names.topic("in"))
    assert group_offsets(endpoints.bootstrap, names.group, names.topic("in")) == ends
    dlq = [json.loads(m.value()) for m in read_all(endpoints.bootstrap, names.topic("dlq"))]
    refs = [(d["partition"], d["offset"]) for d in dlq]
    assert len(refs) == len(set(refs)), "a malformed line is in the DLQ more than once"
    assert set(refs) == inp.malformed, "DLQ must hold every committed malformed line"
    assert all(d["topic"] == names.topic("in") and d["reason"] for d in dlq)


def test_mixed_input_is_counted_exactly_once(endpoints, names, mysql_db):
    inp = build_input(endpoints.bootstrap, names.topic("in"), names.txn_id + "-producer")
    assert inp.aborted_errors > 0 and inp.malformed, "the input must hold what it claims to"
    # A small cap: many batches, so totals are published several times and must only grow.
    proc = cli(*stage_args(endpoints, names, "--once", "--max-records-per-batch", "700"))
    assert "batch 3 committed" in proc.stderr, "expected several batches"
    cli(*sink_args(endpoints, names, mysql_db, "--once"))
    assert_exact(endpoints, names, inp, mysql_db)

    # Running again changes nothing: no new batch, the same table.
    again = cli(*stage_args(endpoints, names, "--once"))
    assert "batch 1 committed" not in again.stderr
    cli(*sink_args(endpoints, names, mysql_db, "--once"))
    assert_exact(endpoints, names, inp, mysql_db)


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
    assert_exact(endpoints, names, inp, mysql_db)


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


def _metric(port: int, name: str) -> float:
    import urllib.request

    body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    total = 0.0
    for line in body.splitlines():
        if line.startswith(name + " ") or line.startswith(name + "{"):
            total += float(line.rsplit(" ", 1)[1])
    return total


def test_metrics_move_with_the_stage(endpoints, names, tmp_path):
    import socket

    inp = build_input(endpoints.bootstrap, names.topic("in"), names.txn_id + "-producer")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    stage = start_cli(*stage_args(endpoints, names, "--metrics-port", str(port),
                                  "--max-records-per-batch", "700", "--trigger-interval", "0.2"),
                      log_path=tmp_path / "stage.log")
    try:
        ends = end_offsets(endpoints.bootstrap, names.topic("in"))
        wait_for(lambda: group_offsets(endpoints.bootstrap, names.group,
                                       names.topic("in")) == ends,
                 timeout_s=180, what="the stage to drain")
        wait_for(lambda: _metric(port, "logcount_input_lag_records") == 0, timeout_s=30,
                 what="lag 0")
        assert _metric(port, "logcount_batches_committed_total") >= 3
        assert _metric(port, "logcount_records_read_total") == inp.lines - inp.aborted_errors
        assert _metric(port, "logcount_malformed_records_total") == len(inp.malformed)
        assert _metric(port, "logcount_batch_commit_seconds_count") >= 3
    finally:
        stage.send_signal(signal.SIGTERM)
        assert stage.wait(60) == 0
