"""The random chaos run with final minutes (--emit-final --rollup 1h): a file of its own, so
the suite's lanes run it beside the main chaos run rather than after it."""

from __future__ import annotations

import pytest

from tests.support.harness import ChaosConfig, run_chaos


@pytest.fixture
def embedded(endpoints):
    if endpoints.kind != "embedded":
        pytest.skip("broker bounces need the embedded stack")
    return endpoints


def test_chaos_with_final_minutes_publishes_each_closed_minute_once(embedded, names, mysql_db,
                                                                   tmp_path):
    """--emit-final --rollup 1h under the stage's SIGKILLs, crash points, a SIGTERM and a
    broker bounce: the final topic holds each closed minute and hour exactly once, exact. The
    input is a day of lines in time order; twelve hours of grace outlast any reordering the
    writer's two producers and a bounce can cause, so half the day closes by the watermark."""
    cfg = ChaosConfig(lines=40_000, stage_sigkills=5, stage_sigterms=1, stage_crash_points=2,
                      sink_sigkills=1, broker_bounces=1, mysql_restarts=0, batch=4_000,
                      duration_s=80.0, seed=23, emit_final="12h")
    report = run_chaos(embedded, names, mysql_db, cfg, tmp_path)
    print(report.summary(cfg.delivery))
    assert report.faults["stage_sigkill"] + report.faults["stage_crash_point"] >= 5
    assert report.faults["broker_bounce"] >= 1
    assert report.ok, report.summary(cfg.delivery)
    assert report.series_checked >= 600  # closed minutes and hours, each checked
