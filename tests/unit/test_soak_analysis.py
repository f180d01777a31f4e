"""logcount/bench/soak_analysis.py: slopes, thirds, the totals the output must hold, the goals,
native memory per category and the classes that grew."""

import pytest

from logcount.bench import soak_analysis
from logcount.bench.latency import probe_minute


def test_slope_per_hour_is_least_squares():
    ts = [0, 900, 1800, 2700, 3600]  # seconds
    assert soak_analysis.slope_per_hour(ts, [100, 105, 110, 115, 120]) == pytest.approx(20.0)
    # noise around a flat line: a small slope; a missing sample is skipped
    assert soak_analysis.slope_per_hour(ts, [100, 102, 98, 102, 98]) == pytest.approx(-1.6)
    assert soak_analysis.slope_per_hour(ts, [1, None, 2, None, 3]) == pytest.approx(2.0)
    assert soak_analysis.slope_per_hour([0], [1]) is None
    assert soak_analysis.slope_per_hour([5, 5], [1, 2]) is None


def test_thirds_and_summaries():
    assert soak_analysis.thirds(list(range(10))) == ([0, 1, 2], [7, 8, 9])
    assert soak_analysis.thirds([1, 2]) == ([], [])
    s = soak_analysis.summarize([0, 60, 120, 180, 240, 300], [10, 12, 11, 11, 14, None])
    assert s["first_third_mean"] == 11 and s["first_third_max"] == 12
    assert s["last_third_mean"] == 14 and s["last_third_max"] == 14  # None left out
    assert s["samples"] == 5
    # the second half's slope: the later half of the samples only (here the last 3 of 6)
    assert s["second_half_slope_per_hour"] == pytest.approx(soak_analysis.slope_per_hour(
        [180, 240, 300], [11, 14, None]))
    assert soak_analysis.second_half([1, 2, 3, 4, 5]) == [4, 5]
    # a heap that settles in the first half and is flat after: the whole window's slope says
    # growth, the second half's does not
    ts = [i * 300 for i in range(8)]
    settling = soak_analysis.summarize(ts, [600, 640, 660, 670, 671, 670, 671, 670])
    assert settling["slope_per_hour"] > 50 and abs(settling["second_half_slope_per_hour"]) < 5
    assert soak_analysis.summarize([0, 1], [float("nan"), 1])["first_third_mean"] is None


def test_expected_totals_add_cycles_the_partial_cycle_and_the_probes():
    per_cycle = {"2017-07-30 00:00:00": 3, "2017-07-30 00:01:00": 1}
    partial = {"2017-07-30 00:00:00": 2}
    want = soak_analysis.expected_totals(per_cycle, partial, cycles=4, probes=130, probe_minutes=60)
    assert want["2017-07-30 00:00:00"] == 14 and want["2017-07-30 00:01:00"] == 4
    # 130 probes over 60 minutes: the first 10 minutes 3 each, the other 50 twice
    assert want[probe_minute(0)] == 3 and want[probe_minute(9)] == 3
    assert want[probe_minute(10)] == 2 and want[probe_minute(59)] == 2
    assert sum(v for k, v in want.items() if k.startswith("2031")) == 130
    few = soak_analysis.expected_totals({}, {}, 0, probes=5, probe_minutes=60)
    assert len(few) == 5 and probe_minute(5) not in few
    # no whole cycle yet: only the partial one
    assert soak_analysis.expected_totals(per_cycle, partial, 0, 0) == partial


def test_diff_totals_names_each_difference():
    assert soak_analysis.diff_totals({"a": 1, "b": 2}, {"a": 1, "b": 2}) == []
    assert soak_analysis.diff_totals({"a": 1, "c": 5}, {"a": 2, "b": 3}) == [
        "a: got 1, want 2", "b: got None, want 3", "c: got 5, want None"]


def _series(**over) -> dict:
    flat = {"slope_per_hour": 1.0, "second_half_slope_per_hour": 1.0, "first_third_max": 100,
            "last_third_max": 100}
    out = {name: dict(flat) for name in soak_analysis.SERIES}
    for name, values in over.items():
        out[name].update(values)
    return out


def test_goals_all_met_on_a_flat_run():
    got = soak_analysis.goals(_series(), (200.0, 210.0), 10_500, 20, True)
    assert all(g["met"] for g in got), got
    assert len(got) == 2 + 4 + 1 + 1 + 1


def test_goals_catch_growth_and_short_runs_are_not_judged_on_batches():
    got = soak_analysis.goals(
        _series(jvm_rss_mb={"second_half_slope_per_hour": 25.0},
                jvm_threads={"last_third_max": 100 + soak_analysis.THREAD_TOLERANCE + 1},
                python_fds={"last_third_max": 100 + soak_analysis.FD_TOLERANCE}),
        (200.0, 221.0), 900, 1, False)
    by = {g["goal"]: g["met"] for g in got}
    assert by["JVM RSS slope over the second half <= 20 MB/hour"] is False
    assert by["Python driver RSS slope over the second half <= 20 MB/hour"] is True
    assert [m for k, m in by.items() if k.startswith("JVM threads")] == [False]
    assert [m for k, m in by.items() if k.startswith("Python open fds")] == [True]  # at the edge
    assert [m for k, m in by.items() if k.startswith("probe latency")] == [False]  # 1.105 x
    assert [m for k, m in by.items() if k.startswith("batches")] == [None]  # 1 minute
    assert [m for k, m in by.items() if k.startswith("output totals")] == [False]
    # a latency that fell is no regression; one that could not be measured is not met
    assert soak_analysis.goals(_series(), (200.0, 150.0), 0, 1, True)[6]["met"] is True
    assert soak_analysis.goals(_series(), (None, 150.0), 0, 1, True)[6]["met"] is False
    # 20 minutes with too few batches
    assert soak_analysis.goals(_series(), (200.0, 200.0), 9_999, 20, True)[7]["met"] is False
    # the whole window's slope is reported, not judged: a settling first half is no leak
    settled = _series(jvm_rss_mb={"slope_per_hour": 80.0, "second_half_slope_per_hour": 2.0})
    assert soak_analysis.goals(settled, (200.0, 200.0), 10_000, 20, True)[1]["met"] is True


def test_a_paced_soak_is_judged_on_keeping_its_cadence():
    # at most a batch a second for 30 minutes: 1,800 possible, 90% of them kept is the goal
    def batch_goal(batches: int, minutes: float = 30, interval: float = 1.0) -> dict:
        return soak_analysis.goals(_series(), (900.0, 900.0), batches, minutes, True,
                                   interval)[7]

    assert batch_goal(1_620)["met"] is True and batch_goal(1_619)["met"] is False
    assert "1,620" in batch_goal(1_700)["goal"] and "1 s" in batch_goal(1_700)["goal"]
    assert batch_goal(100, minutes=2)["met"] is None  # short runs are not judged
    assert batch_goal(810, interval=2.0)["met"] is True  # 0.9 x 900
    # unpaced (0): the fixed count of the endurance goal
    assert batch_goal(9_999, interval=0.0)["met"] is False
    assert batch_goal(10_000, interval=0.0)["met"] is True


def test_native_memory_series_largest_first():
    samples = [{"nmt": {"Java Heap": 388.0, "Thread": 1.0}}, {"nmt": {"Java Heap": 390.0}},
               {"nmt": {"Java Heap": 392.0, "Thread": 1.0}}]
    series = soak_analysis.nmt_series([0, 1800, 3600], samples)
    assert list(series) == ["Java Heap", "Thread"]  # largest first
    assert series["Java Heap"]["slope_per_hour"] == 4.0 and series["Thread"]["samples"] == 2


def test_what_grew_in_the_class_histogram():
    first = {"[B": (13043, 794352), "java.lang.Class": (3002, 360856),
             "org.apache.spark.sql.X$$Lambda$123/0x0000000800c01234": (40, 1280)}
    last = {"[B": (13043, 800000), "java.lang.Class": (3002, 360856), "new.Leak": (10, 5000)}
    grew = soak_analysis.histogram_growth(first, last)
    assert [g["class"] for g in grew] == ["[B", "new.Leak"]  # unchanged and gone are left out
    assert grew[1] == {"class": "new.Leak", "instances": [0, 10], "bytes": [0, 5000],
                       "grew_bytes": 5000}
    assert soak_analysis.histogram_growth(first, last, top=1)[0]["class"] == "[B"
