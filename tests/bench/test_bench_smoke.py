"""A small run of the whole benchmark harness, so that it cannot rot between real runs.

It asserts that every contender really processed the data (records counted by each), that the
latency probes were all seen through a read_committed reader (Kafka Streams', Structured
Streaming's and the stage's, at both rates, with their CPU and RSS), that recovery was measured,
and that the three outputs exist. The latency runs are short and not repeated here (the
combination of repeats is tests/unit/test_bench_report.py's): the smoke proves the harness.
Speed is not asserted here: goals are judged by `logcount bench` at full size
(docs/benchmarks.md), never by a timed test.
"""

import json

from logcount.bench.report import CONTENDERS
from logcount.bench.runner import (
    BENCH_SHAPES,
    DEFAULT_TRIGGER_S,
    PACED_INTERVAL_S,
    PARTITION_AXIS,
    SSS_TRIGGER_S,
)
from logcount.connectors import kafka_io
from tests.support.run import cli

LINES = 20_000


def test_bench_harness_end_to_end(endpoints, tmp_path):
    out = tmp_path / "bench"
    r = cli("bench", "--lines", str(LINES), "--out", str(out), "--bootstrap-servers",
            endpoints.bootstrap, "--latency-seconds", "4", "--latency-rate", "2000",
            "--latency-warmup-seconds", "1", "--latency-repeats", "1",
            "--large-factor", "2", "--quix-lines", "10000", timeout=1500)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    results = json.loads((out / "results.json").read_text())
    left = [t for t in kafka_io.admin(endpoints.bootstrap).list_topics(timeout=30).topics
            if results["topic_prefix"] in t]
    assert not left, f"the run's topics are deleted at its end: {left[:5]}"

    runs = results["runs"]
    for name in CONTENDERS:
        want = 10_000 if name == "quixstreams_eos" else LINES
        assert runs[name]["records"] == want, (name, runs[name])
        assert results["throughput_lines_per_s"][name] > 0
        assert runs[name]["cpu_seconds"] > 0
        # Cold start and steady state apart: every contender shows its first result
        # (at this size the stages fit in one batch, so their steady state may be absent).
        assert 0 < runs[name]["cold_start_s"] < runs[name]["wall_seconds"], (name, runs[name])
        assert runs[name]["checkpoints"] >= 1
    assert runs["logcount_eos_large"]["records"] == 2 * LINES
    for name in ("logcount_eos_1core", "logcount_eos_p1", "logcount_eos_p8"):
        assert runs[name]["records"] == LINES
    for trigger in ("0.5", "1.0"):
        lat = results["latency_ms"]["by_trigger"][trigger]
        assert lat["probes"] >= 50 and lat["probes_seen"] == lat["probes"], lat
    # Kafka Streams' output was checked against the generator's totals by the harness (a
    # difference fails the run), as logcount_eos's; both ran at the latency rate and a tenth.
    assert runs["kafka_streams_eos"]["output_verified"] and runs["logcount_eos"]["output_verified"]
    ran = {(x["contender"], x["trigger_interval_s"], x.get("min_batch_interval_s"),
            x["target_rate"]) for x in results["latency_runs"]}
    paced, default = PACED_INTERVAL_S, DEFAULT_TRIGGER_S
    sss = "spark_structured_streaming"
    assert ran == {("logcount_eos", 0.5, 0.0, 2000), ("logcount_eos", 1.0, 0.0, 2000),
                   ("logcount_eos", default, paced, 2000), ("kafka_streams_eos", None, None, 2000),
                   (sss, SSS_TRIGGER_S, None, 2000),
                   ("logcount_eos", 0.5, 0.0, 200), ("logcount_eos", default, paced, 200),
                   ("kafka_streams_eos", None, None, 200), (sss, SSS_TRIGGER_S, None, 200)}, ran
    for lat in results["latency_runs"]:
        assert lat["probes"] >= 50 and lat["probes_seen"] == lat["probes"], lat
        assert "p99_runs" not in lat, lat  # --latency-repeats 1: every row is one run
        assert lat["cpu_s_per_m_lines"] > 0 and lat["window_lines"] > 0, lat
        assert lat["jvm_rss_mb"] > 50 and lat["peak_rss_mb"] >= lat["jvm_rss_mb"], lat
    assert 0 < results["latency_ms"]["p50"] <= results["latency_ms"]["p99"]
    assert results["recovery_s"] > 0
    assert results["driver_rss_mb"]["small"] > 10 and results["driver_rss_mb"]["large"] > 10
    # Every log shape of the bench ran through the stage with its flags, its totals checked
    # against the generator's by the harness itself (a difference fails the run above).
    assert set(results["formats"]) == set(BENCH_SHAPES)
    for shape in BENCH_SHAPES:
        assert runs[f"logcount_fmt_{shape}"]["records"] == LINES, shape
    # The partitions axis: every width read every line, its probes all seen.
    for p in PARTITION_AXIS:
        if p != 4:
            assert runs[f"logcount_eos_p{p}"]["records"] == LINES, p
        row = results["partitions"][str(p)]
        assert row["latency_p99_ms"] > 0 and row["commit_p99_ms"] > 0, (p, row)
        assert row["probes"] >= 50 and row["probes_seen"] == row["probes"], (p, row)
    assert results["cores"] >= 1 and len(results["goals"]) == 21 + len(BENCH_SHAPES) + 3
    # The goals against Kafka Streams found the stage at its defaults and unpaced, and Kafka
    # Streams, at both rates: every figure is there, met or not.
    against_ks = [g for g in results["goals"] if g["goal"].startswith(("defaults:", "unpaced:"))]
    assert len(against_ks) == 7 and all(g["value"] is not None for g in against_ks), against_ks
    # Structured Streaming's goals found the stage at its cadence and SSS at both rates.
    against_sss = [g for g in results["goals"] if f"< {sss}'s" in g["goal"]]
    assert len(against_sss) == 4 and all(g["value"] is not None for g in against_sss), against_sss

    assert (out / "results.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    md = (out / "results.md").read_text()
    assert all(f"| {k} |" in md for k in CONTENDERS) and "| goal |" in md
    assert "cold start s (first result)" in md and "lines/s (steady state)" in md
    # Kafka Streams: a throughput row and a latency row per rate; the stage's 0.5 s trigger too.
    assert md.count("| kafka_streams_eos |") == 3 and "CPU-s per million lines" in md
    assert md.count("| logcount_eos, trigger 0.5 s |") == 2
    assert md.count(f"| logcount_eos, trigger {default:g} s, paced {paced:g} s |") == 2
    assert md.count(f"| {sss}, trigger {SSS_TRIGGER_S:g} s |") == 2
    assert all(f"| {shape} |" in md for shape in BENCH_SHAPES) and "x the seed format" in md
