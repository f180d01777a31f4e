"""The random chaos run (exactly-once passes) and its control (at-least-once is caught)."""

from __future__ import annotations

import os
from dataclasses import replace

import pytest

from tests.support.harness import ChaosConfig, config_from_env, run_chaos


@pytest.fixture
def embedded(endpoints):
    if endpoints.kind != "embedded":
        pytest.skip("broker and MySQL bounces need the embedded stack")
    return endpoints


def test_chaos_exactly_once_is_exact(embedded, names, mysql_db, tmp_path):
    """The main run, with a second stage (--group-by service=key,level --level '*') and sink
    over the same input under the same kills: exact per series as well."""
    # Figures: docs/tuning.md#grouped-chaos-run
    cfg = replace(config_from_env("exactly-once"), grouped=True)
    report = run_chaos(embedded, names, mysql_db, cfg, tmp_path)
    print(report.summary(cfg.delivery))
    assert report.series_checked > 0
    assert report.faults["stage_sigkill"] + report.faults["stage_crash_point"] >= 10
    assert report.faults["stage_sigterm"] >= 3 and report.faults["sink_sigkill"] >= 5
    assert report.faults["broker_bounce"] >= 2 and report.faults["mysql_restart"] >= 2
    assert report.ok, report.summary(cfg.delivery)
    assert report.lost == report.duplicated == 0


def test_chaos_at_least_once_is_caught_over_counting(embedded, names, mysql_db, tmp_path):
    """The same chaos and the same checker with --delivery at-least-once: the checker must
    fail. A checker that never fails proves nothing. Its faults are the one at-least-once
    cannot survive (a crash after producing, before the offsets: the replayed batch counts
    twice), so a short run with two of them, a SIGKILL and a sink kill does. They die in a
    process's second batch: at-least-once replays from the group's offsets, and a group with
    none yet (a first batch after a run of kills on a busy machine) replays nothing."""
    cfg = config_from_env("at-least-once")
    if os.environ.get("LOGCOUNT_CHAOS_SCALE") != "full":
        cfg = ChaosConfig(lines=20_000, stage_sigkills=3, stage_sigterms=0, stage_crash_points=2,
                          crash_at=("after_produce:2",), sink_sigkills=1, broker_bounces=0,
                          mysql_restarts=0, batch=5_000, delivery="at-least-once",
                          duration_s=40.0, seed=12)
    report = run_chaos(embedded, names, mysql_db, cfg, tmp_path)
    print(report.summary(cfg.delivery))
    # Armed until they fire (tests/support/harness.py), so a busy machine cannot skip them.
    assert report.faults["crash_point_fired"] >= 1, report.faults
    assert not report.ok
    assert report.duplicated > 0, "at-least-once replays must show up as over-counting"


def test_chaos_at_256_partitions_with_stage_sigkills_is_exact(embedded, names, mysql_db,
                                                              tmp_path):
    """A production-shaped input (256 partitions, most batches touching all of them) under stage
    SIGKILLs and crash points at the worst moments, and sink kills: a batch's
    transaction carries only the partitions it wrote and the offsets that moved, and every
    restart's first commit sends all 256 offsets; the checker must still find it exact."""
    cfg = ChaosConfig(lines=60_000, partitions=256, stage_sigkills=5, stage_sigterms=1,
                      stage_crash_points=2, sink_sigkills=2, broker_bounces=0, mysql_restarts=0,
                      batch=10_000, duration_s=120.0, seed=30)
    report = run_chaos(embedded, names, mysql_db, cfg, tmp_path)
    print(report.summary(f"{cfg.delivery}, 256 partitions"))
    assert report.faults["stage_sigkill"] + report.faults["stage_crash_point"] >= 5
    assert report.ok, report.summary(cfg.delivery)
    assert report.lost == report.duplicated == 0

