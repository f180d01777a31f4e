"""A half-minute soak through `logcount bench --soak`, so that the endurance harness cannot rot.

It asserts that every series was sampled (the stage's and its JVM's /proc figures, the JVM's heap
through jcmd, its RSS by region, the batch figures from /metrics, the probe latency), that every
probe was seen and that the output totals equal what was produced, exactly. No speed and no
slope is asserted: a half minute is all warm-up for a JVM; the goals are judged by a run of 20
minutes or more (docs/benchmarks.md).
"""

import json

from logcount.bench.soak_analysis import SERIES
from logcount.bench.soak_sampling import REGIONS
from tests.support.run import cli

SAMPLE_S = 5
MINUTES = 0.5  # 6 samples: enough to see every series move; the suite runs this each time


def test_a_short_soak_samples_every_series_and_counts_exactly(endpoints, tmp_path):
    out = tmp_path / "soak"
    # 300 s: the run takes ~55 s (a session start, 3 s of warm-up, 30 s sampled, the drain,
    # the stop); a busy machine may double that, and a hung stage must still fail the test.
    # The defaults' cadence alone (both are one code path; --soak-modes' plans are unit-tested).
    r = cli("bench", "--soak", str(MINUTES), "--sample-seconds", str(SAMPLE_S), "--out", str(out),
            "--soak-modes", "defaults", "--bootstrap-servers", endpoints.bootstrap, timeout=300,
            check=False)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    result = json.loads((out / "soak.json").read_text())

    samples = result["samples"]
    assert len(samples) == int(MINUTES * 60 // SAMPLE_S)
    # The /proc and jcmd series in every interval; a batch's figures in every interval that ran
    # a batch (a loaded machine can take longer than an interval for one), probes where seen.
    with_batches = sum(1 for s in samples if s["batches"])
    for name, (_label, _unit, group, _axis) in SERIES.items():
        got = result["series"][name]["samples"]
        if group == "batch":
            assert got == with_batches >= 1, (name, result["series"][name])
        elif group == "latency":
            assert 1 <= got <= len(samples), (name, result["series"][name])
        else:
            assert got == len(samples), (name, result["series"][name])
        assert "slope_per_hour" in result["series"][name]
    row = samples[-1]
    assert row["python_rss_mb"] > 10 and row["jvm_rss_mb"] > row["jvm_heap_after_gc_mb"] > 0
    assert row["jvm_threads"] > row["python_threads"] > 0 and row["jvm_fds"] > 0
    assert row["jvm_metaspace_mb"] > 0 and row["batches"] > 0 and row["batch_cycle_ms"] > 0
    assert result["batches"] == sum(s["batches"] for s in samples) > 0
    # the JVM's RSS by region covers all of it (read a moment after VmRSS, across a full GC)
    regions = sum(row[f"jvm_rss_{k}_mb"] for k in REGIONS)
    assert abs(regions - row["jvm_rss_mb"]) < 0.15 * row["jvm_rss_mb"], row
    assert row["jvm_rss_heap_mb"] > 0 and row["jvm_rss_code_mb"] > 0 and row["jvm_rss_other_mb"] > 0

    totals = result["totals"]
    assert totals["exact"] and totals["differing"] == [] and totals["undelivered"] == 0, totals
    assert result["latency_ms"]["probes_seen"] == result["probes"] > 0
    assert {g["goal"] for g in result["goals"] if g["met"] is None} == {
        g["goal"] for g in result["goals"] if g["goal"].startswith("batches")}, "half a minute < 20"

    assert (out / "soak.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    md = (out / "soak.md").read_text()
    assert all(f"| {label} |" in md for label, *_ in SERIES.values()) and "| goal |" in md
    assert (out / "logs" / "soak_stage.log").stat().st_size > 0
