"""logcount/bench/soak.py's pure parts: /proc and jcmd parsing, metrics, slopes, thirds, totals,
goals."""

import math

import pytest

from logcount.bench import soak
from logcount.bench.latency import probe_minute

# `jcmd PID GC.heap_info` of JDK 17, as printed for a stage's driver (Parallel GC) and for the
# embedded broker (G1), address ranges shortened; the first line is jcmd's own "PID:".
PARALLEL = """11105:
 PSYoungGen      total 638464K, used 136284K [0x00000000d5580000, 0x0000000100000000, ...)
  eden space 580096K, 23% used [0x00000000d5580000,0x00000000dda97138,0x00000000f8c00000)
  from space 58368K, 0% used [0x00000000fc700000,0x00000000fc700000,0x0000000100000000)
  to   space 59392K, 0% used [0x00000000f8c00000,0x00000000f8c00000,0x00000000fc600000)
 ParOldGen       total 258048K, used 62786K [0x0000000080000000, 0x000000008fc00000, ...)
  object space 258048K, 24% used [0x0000000080000000,0x0000000083d50868,0x000000008fc00000)
 Metaspace       used 33113K, committed 34304K, reserved 1114112K
  class space    used 4868K, committed 5504K, reserved 1048576K
"""
G1 = """21962:
 garbage-first heap   total 832512K, used 514195K [0x00000000c0000000, 0x0000000100000000)
  region size 1024K, 179 young (183296K), 2 survivors (2048K)
 Metaspace       used 54178K, committed 55424K, reserved 1114112K
  class space    used 6304K, committed 6848K, reserved 1048576K
"""


def test_heap_info_of_parallel_gc_sums_its_generations():
    got = soak.parse_heap_info(PARALLEL)
    # PSYoungGen + ParOldGen; eden, from, to and object space are parts of them, not summed
    assert got["heap_used_mb"] == round((136284 + 62786) / 1024, 1)
    assert got["heap_committed_mb"] == round((638464 + 258048) / 1024, 1)
    assert got["metaspace_used_mb"] == round(33113 / 1024, 1)
    assert got["metaspace_committed_mb"] == round(34304 / 1024, 1)
    assert got["class_space_used_mb"] == round(4868 / 1024, 1)


def test_heap_info_of_g1_and_of_nothing():
    got = soak.parse_heap_info(G1)
    assert got["heap_used_mb"] == round(514195 / 1024, 1)
    assert got["heap_committed_mb"] == round(832512 / 1024, 1)
    assert got["metaspace_used_mb"] == round(54178 / 1024, 1)
    assert soak.parse_heap_info("12345:\nCommand executed successfully\n") == {}


def test_proc_status_and_stat():
    status = "Name:\tjava\nVmHWM:\t 1200000 kB\nVmRSS:\t 1153024 kB\nThreads:\t259\n"
    assert soak.parse_status(status) == {"rss_kb": 1153024, "threads": 259}
    # comm may hold spaces and parentheses: the last ')' ends it
    assert soak.parse_stat("4242 (Executor (x) 1) S 4000 4242 4242 0 -1") == ("Executor (x) 1",
                                                                              4000)


def test_descendants_walks_the_tree_below_the_root_only():
    parents = {10: 1, 11: 10, 12: 11, 13: 10, 20: 1, 21: 20}
    assert soak.descendants(10, parents) == [11, 13, 12]
    assert soak.descendants(12, parents) == []


def test_metrics_sum_label_sets_and_skip_comments():
    text = """# HELP logcount_batches_committed_total batches committed
# TYPE logcount_batches_committed_total counter
logcount_batches_committed_total 120.0
logcount_batches_committed_created 1.7e+09
logcount_input_lag_records{partition="0"} 100.0
logcount_input_lag_records{partition="1"} 50.0
logcount_batch_spark_seconds_bucket{le="0.1"} 3.0
logcount_batch_spark_seconds_sum 12.5
logcount_batch_spark_seconds_count 120.0
"""
    got = soak.parse_metrics(text)
    assert got["logcount_batches_committed_total"] == 120
    assert got["logcount_input_lag_records"] == 150
    assert got["logcount_batch_spark_seconds_sum"] == 12.5


def test_interval_figures_are_deltas_between_scrapes():
    prev = {"logcount_batches_committed_total": 100, "logcount_batch_spark_seconds_sum": 10.0,
            "logcount_batch_spark_seconds_count": 100, "logcount_batch_commit_seconds_sum": 1.0,
            "logcount_batch_commit_seconds_count": 100}
    cur = {"logcount_batches_committed_total": 250, "logcount_batch_spark_seconds_sum": 25.0,
           "logcount_batch_spark_seconds_count": 250, "logcount_batch_commit_seconds_sum": 2.5,
           "logcount_batch_commit_seconds_count": 250}
    assert soak.interval_figures(prev, cur, 15.0) == {
        "batches": 150, "batch_spark_ms": 100.0, "batch_commit_ms": 10.0, "batch_cycle_ms": 100.0}
    none = soak.interval_figures(cur, cur, 15.0)
    assert none["batches"] == 0 and none["batch_spark_ms"] is None
    assert none["batch_cycle_ms"] is None


def test_slope_per_hour_is_least_squares():
    ts = [0, 900, 1800, 2700, 3600]  # seconds
    assert soak.slope_per_hour(ts, [100, 105, 110, 115, 120]) == pytest.approx(20.0)
    # noise around a flat line: a small slope; a missing sample is skipped
    assert soak.slope_per_hour(ts, [100, 102, 98, 102, 98]) == pytest.approx(-1.6)
    assert soak.slope_per_hour(ts, [1, None, 2, None, 3]) == pytest.approx(2.0)
    assert soak.slope_per_hour([0], [1]) is None
    assert soak.slope_per_hour([5, 5], [1, 2]) is None


def test_thirds_and_summaries():
    assert soak.thirds(list(range(10))) == ([0, 1, 2], [7, 8, 9])
    assert soak.thirds([1, 2]) == ([], [])
    s = soak.summarize([0, 60, 120, 180, 240, 300], [10, 12, 11, 11, 14, None])
    assert s["first_third_mean"] == 11 and s["first_third_max"] == 12
    assert s["last_third_mean"] == 14 and s["last_third_max"] == 14  # None left out
    assert s["samples"] == 5
    assert soak.summarize([0, 1], [float("nan"), 1])["first_third_mean"] is None


def test_expected_totals_add_cycles_the_partial_cycle_and_the_probes():
    per_cycle = {"2017-07-30 00:00:00": 3, "2017-07-30 00:01:00": 1}
    partial = {"2017-07-30 00:00:00": 2}
    want = soak.expected_totals(per_cycle, partial, cycles=4, probes=130, probe_minutes=60)
    assert want["2017-07-30 00:00:00"] == 14 and want["2017-07-30 00:01:00"] == 4
    # 130 probes over 60 minutes: the first 10 minutes 3 each, the other 50 twice
    assert want[probe_minute(0)] == 3 and want[probe_minute(9)] == 3
    assert want[probe_minute(10)] == 2 and want[probe_minute(59)] == 2
    assert sum(v for k, v in want.items() if k.startswith("2031")) == 130
    few = soak.expected_totals({}, {}, 0, probes=5, probe_minutes=60)
    assert len(few) == 5 and probe_minute(5) not in few
    # no whole cycle yet: only the partial one
    assert soak.expected_totals(per_cycle, partial, 0, 0) == partial


def test_diff_totals_names_each_difference():
    assert soak.diff_totals({"a": 1, "b": 2}, {"a": 1, "b": 2}) == []
    assert soak.diff_totals({"a": 1, "c": 5}, {"a": 2, "b": 3}) == [
        "a: got 1, want 2", "b: got None, want 3", "c: got 5, want None"]


def _series(**over) -> dict:
    flat = {"slope_per_hour": 1.0, "first_third_max": 100, "last_third_max": 100}
    out = {name: dict(flat) for name in soak.SERIES}
    for name, values in over.items():
        out[name].update(values)
    return out


def test_goals_all_met_on_a_flat_run():
    got = soak.goals(_series(), (200.0, 210.0), 10_500, 20, True)
    assert all(g["met"] for g in got), got
    assert len(got) == 2 + 4 + 1 + 1 + 1


def test_goals_catch_growth_and_short_runs_are_not_judged_on_batches():
    got = soak.goals(_series(jvm_rss_mb={"slope_per_hour": 25.0},
                             jvm_threads={"last_third_max": 100 + soak.THREAD_TOLERANCE + 1},
                             python_fds={"last_third_max": 100 + soak.FD_TOLERANCE}),
                     (200.0, 221.0), 900, 1, False)
    by = {g["goal"]: g["met"] for g in got}
    assert by["JVM RSS slope <= 20 MB/hour"] is False
    assert by["Python driver RSS slope <= 20 MB/hour"] is True
    assert [m for k, m in by.items() if k.startswith("JVM threads")] == [False]
    assert [m for k, m in by.items() if k.startswith("Python open fds")] == [True]  # at the edge
    assert [m for k, m in by.items() if k.startswith("probe latency")] == [False]  # 1.105 x
    assert [m for k, m in by.items() if k.startswith("batches")] == [None]  # 1 minute
    assert [m for k, m in by.items() if k.startswith("output totals")] == [False]
    # a latency that fell is no regression; one that could not be measured is not met
    assert soak.goals(_series(), (200.0, 150.0), 0, 1, True)[6]["met"] is True
    assert soak.goals(_series(), (None, 150.0), 0, 1, True)[6]["met"] is False
    # 20 minutes with too few batches
    assert soak.goals(_series(), (200.0, 200.0), 9_999, 20, True)[7]["met"] is False


def test_markdown_has_every_series_and_goal():
    samples = [{"t": 15.0 * i, **{name: 1.0 for name in soak.SERIES}} for i in range(1, 7)]
    series = {name: soak.summarize([s["t"] for s in samples], [s[name] for s in samples])
              for name in soak.SERIES}
    r = {"minutes": 1.5, "rate_lines_per_s": 2000, "cores": 2, "trigger_interval_s": 0.05,
         "sample_seconds": 15.0, "warmup_seconds": 9.0, "batches": 600, "batches_per_s": 6.67,
         "lines_produced": 180_000, "achieved_rate": 2000, "probes": 1800,
         "latency_ms": {"p50": 150.0, "p99": 300.0, "probes_seen": 1800},
         "totals": {"verdict": "exact"}, "jcmd_seconds_mean": 0.5, "series": series,
         "samples": samples, "goals": soak.goals(series, (150.0, 150.0), 600, 1.5, True)}
    md = soak.markdown(r)
    assert all(f"| {label} |" in md for label, *_ in soak.SERIES.values())
    assert "| goal | value | met |" in md and "not judged" in md and "**no**" not in md
    assert not math.isnan(series["jvm_rss_mb"]["slope_per_hour"])


def test_warmup_is_a_tenth_of_a_short_run_and_a_minute_at_most():
    assert soak.warmup_seconds(1) == 6
    assert soak.warmup_seconds(20) == soak.DEFAULT_WARMUP_S


NMT = """30988:

Native Memory Tracking:

(Omitting categories weighting less than 1KB)

Total: reserved=7842510KB, committed=484726KB
       malloc: 10118KB #61056
       mmap:   reserved=7832392KB, committed=474608KB

-                 Java Heap (reserved=6172672KB, committed=397312KB)
                            (mmap: reserved=6172672KB, committed=397312KB)

-                     Class (reserved=1048783KB, committed=1359KB)
                            (classes #2498)
                            (malloc=207KB #3913) (at peak)

-                    Thread (reserved=19506KB, committed=890KB)
                            (thread #19)
                            (stack: reserved=19456KB, committed=840KB)
"""
HISTOGRAM = """30988:
 num     #instances         #bytes  class name (module)
-------------------------------------------------------
   1:         13043         794352  [B (java.base@17.0.15)
   2:          3002         360856  java.lang.Class (java.base@17.0.15)
   3:            40           1280  org.apache.spark.sql.X$$Lambda$123/0x0000000800c01234
Total         16085        1156488
"""


def test_native_memory_summary_per_category():
    got = soak.parse_nmt(NMT)
    assert got == {"Total": round(484726 / 1024, 1), "Java Heap": 388.0,
                   "Class": round(1359 / 1024, 1), "Thread": round(890 / 1024, 1)}
    samples = [{"nmt": {"Java Heap": 388.0, "Thread": 1.0}}, {"nmt": {"Java Heap": 390.0}},
               {"nmt": {"Java Heap": 392.0, "Thread": 1.0}}]
    series = soak.nmt_series([0, 1800, 3600], samples)
    assert list(series) == ["Java Heap", "Thread"]  # largest first
    assert series["Java Heap"]["slope_per_hour"] == 4.0 and series["Thread"]["samples"] == 2


def test_class_histogram_and_what_grew():
    first = soak.parse_histogram(HISTOGRAM)
    assert first["[B"] == (13043, 794352) and len(first) == 3
    assert first["org.apache.spark.sql.X$$Lambda$123/0x0000000800c01234"] == (40, 1280)
    last = {"[B": (13043, 800000), "java.lang.Class": (3002, 360856), "new.Leak": (10, 5000)}
    grew = soak.histogram_growth(first, last)
    assert [g["class"] for g in grew] == ["[B", "new.Leak"]  # unchanged and gone are left out
    assert grew[1] == {"class": "new.Leak", "instances": [0, 10], "bytes": [0, 5000],
                       "grew_bytes": 5000}
    assert soak.histogram_growth(first, last, top=1)[0]["class"] == "[B"
