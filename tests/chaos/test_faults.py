"""Deterministic faults: crash points, zombie fencing, a hung stage, missing dependencies."""

from __future__ import annotations

import signal
import time

import pytest

from logcount.pipeline.crash import CRASH_EXIT_CODE, POINTS
from tests.support.exact import assert_exact
from tests.support.inputs import build_input
from tests.support.readers import end_offsets, group_offsets
from tests.support.run import cli, sink_args, stage_args, start_cli, wait_for

BATCH = 500


@pytest.mark.parametrize("point", POINTS)
def test_crash_point_then_restart_is_exact(endpoints, names, mysql_db, point):
    inp = build_input(endpoints.bootstrap, names.topic("in"), names.txn_id + "-producer")
    total = sum(end_offsets(endpoints.bootstrap, names.topic("in")).values())
    assert total > 3 * BATCH
    # A short transaction timeout: the broker aborts the crashed stage's transaction soon, so
    # the group's offsets become readable (stable) for the check below before any restart.
    proc = cli(*stage_args(endpoints, names, "--once", "--max-records-per-batch", str(BATCH),
                           "--kafka-config", "transaction.timeout.ms=8000"),
               env={"LOGCOUNT_CRASH_AT": f"{point}:2"}, check=False)
    assert proc.returncode == CRASH_EXIT_CODE, proc.stderr[-2000:]
    # Batch 2 is in the group's offsets exactly when the crash came after its commit.
    done = sum(group_offsets(endpoints.bootstrap, names.group, names.topic("in")).values())
    assert done == (2 if point == "after_commit" else 1) * BATCH
    cli(*stage_args(endpoints, names, "--once", "--max-records-per-batch", str(BATCH)))
    cli(*sink_args(endpoints, names, mysql_db, "--once"))
    assert_exact(endpoints.bootstrap, names, inp.expected, url=mysql_db,
                 malformed=inp.malformed, sink_at_end=True)


def test_a_zombie_stage_is_fenced_and_results_stay_exact(endpoints, names, mysql_db, tmp_path):
    inp = build_input(endpoints.bootstrap, names.topic("in"), names.txn_id + "-producer",
                      n_plain=20_000, n_txn=1200)
    args = stage_args(endpoints, names, "--max-records-per-batch", "300",
                      "--trigger-interval", "0.2")
    old = start_cli(*args, log_path=tmp_path / "old.log")
    new = None
    try:
        wait_for(lambda: group_offsets(endpoints.bootstrap, names.group, names.topic("in")),
                 timeout_s=180, what="the old stage's first commit")
        new = start_cli(*args, log_path=tmp_path / "new.log")
        assert old.wait(180) == 1, "the fenced stage must exit non-zero"
        last = (tmp_path / "old.log").read_text().strip().splitlines()[-1]
        assert last.startswith("logcount: error:") and "fenced" in last, last
        ends = end_offsets(endpoints.bootstrap, names.topic("in"))
        wait_for(lambda: group_offsets(endpoints.bootstrap, names.group,
                                       names.topic("in")) == ends,
                 timeout_s=300, what="the new stage to finish the input")
        new.send_signal(signal.SIGTERM)
        assert new.wait(60) == 0
    finally:
        for p in (old, new):
            if p is not None and p.poll() is None:
                p.kill()
    cli(*sink_args(endpoints, names, mysql_db, "--once"))
    assert_exact(endpoints.bootstrap, names, inp.expected, url=mysql_db,
                 malformed=inp.malformed, sink_at_end=True)


def test_a_hung_kafka_call_replaces_the_clients_and_stays_exact(endpoints, names, mysql_db):
    """librdkafka's send_offsets_to_transaction can stay blocked long past its own timeout
    (#3013; seen in CI after a transaction coordinator was killed). The stage gives up on the
    call HANG_GRACE_S past its own timeout, replaces its Kafka clients (the new producer
    fences the hung one, whose open transaction - batch 2's records - is aborted), reads its
    state back and goes on in the same process: batch 2 is redone once, the results are exact."""
    inp = build_input(endpoints.bootstrap, names.topic("in"), names.txn_id + "-producer")
    proc = cli(*stage_args(endpoints, names, "--once", "--max-records-per-batch", str(BATCH)),
               env={"LOGCOUNT_CRASH_AT": "in_send_offsets:2", "LOGCOUNT_CRASH_MODE": "hang"},
               check=False, timeout=400)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "crash point in_send_offsets of batch 2: this thread hangs" in proc.stderr
    replaced = [ln for ln in proc.stderr.splitlines() if "replacing the stage's Kafka" in ln]
    assert len(replaced) == 1 and "send_offsets_to_transaction did not return" in replaced[0]
    assert sum(group_offsets(endpoints.bootstrap, names.group, names.topic("in")).values()) \
        == sum(end_offsets(endpoints.bootstrap, names.topic("in")).values())
    cli(*sink_args(endpoints, names, mysql_db, "--once"))
    assert_exact(endpoints.bootstrap, names, inp.expected, url=mysql_db,
                 malformed=inp.malformed, sink_at_end=True)


def test_an_unreachable_broker_is_retried_then_one_clear_line():
    t0 = time.monotonic()
    proc = cli("run", "--bootstrap-servers", "127.0.0.1:1", "--startup-timeout", "4",
               check=False, timeout=120)
    assert proc.returncode == 1
    assert time.monotonic() - t0 >= 4
    lines = proc.stderr.strip().splitlines()
    assert lines[-1].startswith("logcount: error: Kafka at 127.0.0.1:1 unreachable after 4s")
    assert "Connection refused" in lines[-1], "librdkafka's own reason, in the one line"
    assert sum("waiting for Kafka" in line for line in lines[:-1]) == 1, "one line, not one a try"


def test_mysql_refusing_the_password_is_one_clear_line(endpoints):
    url = endpoints.mysql
    proc = cli("sink", "--bootstrap-servers", endpoints.bootstrap, "--mysql-url",
               f"mysql://{url.user}:certainly-wrong@{url.host}:{url.port}/{url.database}",
               "--once", check=False, timeout=120)
    assert proc.returncode == 1
    err = proc.stderr.strip().splitlines()
    assert err[-1].startswith("logcount: error: MySQL") and "refused" in err[-1]
    assert "Traceback" not in proc.stderr
    assert "certainly-wrong" not in proc.stderr, "the password must never be printed"
