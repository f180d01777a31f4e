"""bench/report.py and the pure helpers of the benchmark: goals, percentiles, the table."""

import pytest

from bench import phases, report
from bench.latency import percentile, probe_minute

pytestmark = pytest.mark.unit


def _run(steady: int | None, rss: float = 60.0, cold: float | None = 3.0) -> dict:
    return {"records": 1000, "seconds": 1.0, "wall_seconds": 2.0, "cpu_seconds": 1.5,
            "lines_per_s": 400, "wall_lines_per_s": 200, "lines_per_cpu_s": 700,
            "driver_rss_mb": rss, "jvm_rss_mb": 600.0, "steady_lines_per_s": steady,
            "cold_start_s": cold}


def _results(eos=500, jvm=1000, sss=500, quix=100, alos=515, first=5.0, p99=(300.0, 450.0),
             rec=5.0, large=66.0):
    runs = {"raw_jvm_consumer": _run(jvm), "raw_python_consumer": _run(300),
            "spark_structured_streaming": _run(sss), "quixstreams_eos": _run(quix),
            "logcount_eos": _run(eos, cold=first), "logcount_alos": _run(alos),
            "logcount_eos_1core": _run(300), "logcount_eos_p1": _run(200),
            "logcount_eos_p8": _run(480), "logcount_eos_large": _run(eos, rss=large)}
    lat = {str(t): {"p50": 200.0, "p99": p, "max": 2500.0, "probes": 10, "probes_seen": 10,
                    "rate_lines_per_s": 20000, "trigger_interval_s": t}
           for t, p in zip((0.5, 1.0), p99, strict=True)}
    return report.assemble(runs, lat, {"recovery_s": rec}, 1000, 10000, 1000, 2, 100)


def test_results_carry_the_keys_issues_5_and_15_name():
    r = _results()
    assert set(r["throughput_lines_per_s"]) == set(report.CONTENDERS)
    assert r["steady_lines_per_s"]["raw_jvm_consumer"] == 1000
    assert r["cold_start_s"]["logcount_eos"] == 5.0
    assert r["latency_ms"]["p50"] == 200.0 and r["latency_ms"]["p99"] == 300.0
    assert r["recovery_s"] == 5.0 and r["cores"] == 2
    assert r["driver_rss_mb"]["small"] == 60.0 and r["driver_rss_mb"]["large"] == 66.0


def test_goals_at_their_edges_are_met():
    assert all(g["met"] for g in _results()["goals"])


@pytest.mark.parametrize("change, goal", [
    ({"jvm": 1001}, "raw_jvm_consumer"), ({"sss": 501}, "spark_structured_streaming"),
    ({"quix": 101}, "quixstreams_eos"), ({"alos": 516}, "logcount_alos"),
    ({"first": 5.01}, "first commit"), ({"p99": (300.1, 450.0)}, "p99"),
    ({"rec": 5.01}, "recovery"), ({"large": 66.1}, "RSS"),
])
def test_each_goal_fails_just_past_its_edge(change, goal):
    missed = [g["goal"] for g in _results(**change)["goals"] if not g["met"]]
    assert len(missed) == 1 and goal in missed[0]


def test_latency_is_judged_on_the_best_trigger():
    g = next(g for g in _results(p99=(450.0, 280.0))["goals"] if "p99" in g["goal"])
    assert g["met"] and g["value"] == 280.0 and "trigger 1 s" in g["goal"]


def test_a_figure_the_run_could_not_give_is_not_met():
    # Everything fit in one batch: no steady state to compare, and the table says so.
    r = _results(eos=None)
    ratio_goals = [g for g in r["goals"] if "steady state" in g["goal"]]
    assert len(ratio_goals) == 4 and not any(g["met"] for g in ratio_goals)
    assert "| logcount_eos >= 0.5 x raw_jvm_consumer (steady state) | - | **no** |" in \
        report.markdown(r)


def test_markdown_shows_every_contender_and_the_verdicts():
    md = report.markdown(_results(sss=900))
    for k in report.CONTENDERS:
        assert f"| {k} |" in md
    assert "| logcount_eos >= 1 x spark_structured_streaming (steady state) | 0.56 | **no** |" \
        in md
    assert "| logcount_eos | 5.0 | 500 | 400 |" in md


def test_plot_writes_a_png(tmp_path):
    report.plot(_results(eos=None), tmp_path / "r.png")
    assert (tmp_path / "r.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_percentile_is_nearest_rank():
    values = list(range(1, 101))
    assert percentile(values, 50) == 50 and percentile(values, 99) == 99
    assert percentile([5.0], 99) == 5.0 and percentile([3, 1, 2], 50) == 2


def test_probe_minutes_are_distinct_and_far_from_the_data():
    minutes = {probe_minute(k) for k in range(5000)}
    assert len(minutes) == 5000 and min(minutes) == "2031-01-01 00:00:00"


def test_consumer_performance_timestamps_parse():
    ts = phases.jvm_time
    assert ts("2026-11-22 07:33:36:976") - ts("2026-11-22 07:33:35:212") == pytest.approx(1.764)
    assert ts("2026-12-01 00:00:00:000") - ts("2026-11-30 23:59:59:500") == pytest.approx(0.5)


def test_stage_checkpoints_add_up_committed_batches():
    lines = [(2.0, "INFO starting"),
             (7.5, "INFO batch 1 committed: offsets {0: 0->50000}; records 200000, malformed 3"),
             (9.0, "WARN something else, records 99,"),
             (10.5, "INFO batch 2 committed: offsets {0: 5->9}; records 800000, malformed 0")]
    cps = phases.stage_checkpoints(lines)
    assert cps == [(7.5, 200_000), (10.5, 1_000_000)]
    assert phases.split(cps) == {"cold_start_s": 7.5, "steady_lines_per_s": 266_667,
                                 "steady_records": 800_000, "steady_seconds": 3.0,
                                 "checkpoints": 2}


def test_progress_and_jvm_rows_make_checkpoints():
    assert phases.progress_checkpoints([(1.0, "progress 1"), (1.2, "x progress 5"),
                                        (2.0, "progress 100000\n")]) == [(1.0, 1), (2.0, 100_000)]
    spawned = phases.jvm_time("2026-11-23 10:00:00:000")
    rows = [(9.9, "time, threadId, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, ..."),
            (9.9, "2026-11-23 10:00:01:250, 0, 12.5, 100.0, 150000, 1500000.0, 300, 0, 1, 1"),
            (9.9, "2026-11-23 10:00:01:750, 0, 60.1, 95.2, 1650000, 3000000.0, 0, 500, 1, 1")]
    cps = phases.jvm_checkpoints(rows, spawned)
    assert cps == [(pytest.approx(1.25), 150_000), (pytest.approx(1.75), 1_650_000)]
    assert phases.split(cps)["steady_lines_per_s"] == 3_000_000


def test_one_checkpoint_has_a_cold_start_and_no_steady_state():
    assert phases.split([(4.2, 20_000)])["cold_start_s"] == 4.2
    assert phases.split([(4.2, 20_000)])["steady_lines_per_s"] is None
    assert phases.split([])["cold_start_s"] is None


def test_the_partitions_axis_is_judged_widest_against_four_at_its_edges():
    def judged(tp256: int, commit: float, lat256: float) -> list[bool]:
        runs = {"logcount_eos": {**_run(1000), "slowest_commit_s": 0.2},
                "logcount_eos_p256": {**_run(tp256), "slowest_commit_s": 0.3}}
        lat = {"4": {"p99": 200.0, "commit_p99_ms": 40.0, "rate_lines_per_s": 20000},
               "256": {"p99": lat256, "commit_p99_ms": commit, "rate_lines_per_s": 20000}}
        table = report.partitions_table(runs, lat)
        assert table["256"]["slowest_commit_s"] == 0.3 and table["4"]["latency_p99_ms"] == 200
        return [g["met"] for g in report._wide_goals(table)]

    assert judged(800, 250.0, 250.0) == [True, True, True]
    assert judged(799, 250.1, 250.5) == [False, False, False]
    assert report._wide_goals({"4": {}}) == [], "no axis run: no such goals"
