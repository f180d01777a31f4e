"""bench/report.py and the pure helpers of the benchmark: goals, percentiles, the table."""

import pytest

from bench import report
from bench.latency import percentile, probe_minute
from bench.runner import _ts

pytestmark = pytest.mark.unit


def _run(lps: int, rss: float = 60.0) -> dict:
    return {"records": 1000, "seconds": 1.0, "wall_seconds": 2.0, "cpu_seconds": 1.5,
            "lines_per_s": lps, "wall_lines_per_s": lps // 2, "lines_per_cpu_s": 700,
            "driver_rss_mb": rss, "jvm_rss_mb": 600.0}


def _results(eos=500, jvm=1000, sss=500, quix=100, alos=520, p99=1999.0, rec=15.0, large=66.0):
    runs = {"raw_jvm_consumer": _run(jvm), "raw_python_consumer": _run(300),
            "spark_structured_streaming": _run(sss), "quixstreams_eos": _run(quix),
            "logcount_eos": _run(eos), "logcount_alos": _run(alos),
            "logcount_eos_1core": _run(300), "logcount_eos_p1": _run(200),
            "logcount_eos_p8": _run(480), "logcount_eos_large": _run(eos, rss=large)}
    lat = {"0.5": {"p50": 800.0, "p99": p99, "max": 2500.0, "probes": 10, "probes_seen": 10,
                   "rate_lines_per_s": 20000, "trigger_interval_s": 0.5}}
    return report.assemble(runs, lat, {"recovery_s": rec}, 1000, 10000, 1000, 2, 100)


def test_results_carry_the_keys_issue_5_names():
    r = _results()
    assert set(r["throughput_lines_per_s"]) == set(report.CONTENDERS)
    assert r["latency_ms"]["p50"] == 800.0 and r["latency_ms"]["p99"] == 1999.0
    assert r["recovery_s"] == 15.0 and r["cores"] == 2
    assert r["driver_rss_mb"]["small"] == 60.0 and r["driver_rss_mb"]["large"] == 66.0


def test_goals_at_their_edges_are_met():
    assert all(g["met"] for g in _results()["goals"])


@pytest.mark.parametrize("change, goal", [
    ({"jvm": 1001}, "raw_jvm_consumer"), ({"sss": 501}, "spark_structured_streaming"),
    ({"quix": 101}, "quixstreams_eos"), ({"alos": 527}, "logcount_alos"),
    ({"p99": 2000.1}, "p99"), ({"rec": 15.01}, "recovery"), ({"large": 66.1}, "RSS"),
])
def test_each_goal_fails_just_past_its_edge(change, goal):
    missed = [g["goal"] for g in _results(**change)["goals"] if not g["met"]]
    assert len(missed) == 1 and goal in missed[0]


def test_markdown_shows_every_contender_and_the_verdicts():
    md = report.markdown(_results(sss=900))
    for k in report.CONTENDERS:
        assert f"| {k} |" in md
    assert "| logcount_eos >= 1 x spark_structured_streaming | 0.56 | **no** |" in md


def test_percentile_is_nearest_rank():
    values = list(range(1, 101))
    assert percentile(values, 50) == 50 and percentile(values, 99) == 99
    assert percentile([5.0], 99) == 5.0 and percentile([3, 1, 2], 50) == 2


def test_probe_minutes_are_distinct_and_far_from_the_data():
    minutes = {probe_minute(k) for k in range(5000)}
    assert len(minutes) == 5000 and min(minutes) == "2031-01-01 00:00:00"


def test_consumer_performance_timestamps_parse():
    assert _ts("2026-11-22 07:33:36:976") - _ts("2026-11-22 07:33:35:212") == pytest.approx(1.764)
    assert _ts("2026-12-01 00:00:00:000") - _ts("2026-11-30 23:59:59:500") == pytest.approx(0.5)
