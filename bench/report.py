"""The benchmark's results: assembled, judged against the goals, written as a table and a plot.

Pure except plot(), which writes a PNG.
"""

from __future__ import annotations

from pathlib import Path

CONTENDERS = ("raw_jvm_consumer", "raw_python_consumer", "spark_structured_streaming",
              "quixstreams_eos", "logcount_eos", "logcount_alos")

# (what, logcount_eos / that contender at least): issue 5's goals
RATIO_GOALS = (("raw_jvm_consumer", 0.5), ("spark_structured_streaming", 1.0),
               ("quixstreams_eos", 5.0), ("logcount_alos", 0.95))
P99_GOAL_MS = 2000
RECOVERY_GOAL_S = 15
RSS_GOAL = 1.1


def assemble(runs: dict[str, dict], latency: dict[str, dict], recovery: dict, lines: int,
             large_lines: int, quix_lines: int, cores: int, bench_seconds: int) -> dict:
    """results.json: the keys issue 5 names first, then everything behind them."""
    tp = {k: runs[k]["lines_per_s"] for k in CONTENDERS}
    half = latency.get("0.5", {})
    results = {
        "throughput_lines_per_s": tp,
        "wall_lines_per_s": {k: runs[k]["wall_lines_per_s"] for k in CONTENDERS},
        "lines_per_cpu_s": {k: runs[k]["lines_per_cpu_s"] for k in CONTENDERS},
        "latency_ms": {"p50": half.get("p50"), "p99": half.get("p99"), "by_trigger": latency},
        "recovery_s": recovery.get("recovery_s"),
        "driver_rss_mb": {"small": runs["logcount_eos"]["driver_rss_mb"],
                          "large": runs["logcount_eos_large"]["driver_rss_mb"],
                          "jvm_small": runs["logcount_eos"]["jvm_rss_mb"],
                          "jvm_large": runs["logcount_eos_large"]["jvm_rss_mb"]},
        "scaling_lines_per_s": {
            "spark_cores": {"1": runs["logcount_eos_1core"]["lines_per_s"],
                            "2": runs["logcount_eos"]["lines_per_s"]},
            "input_partitions": {"1": runs["logcount_eos_p1"]["lines_per_s"],
                                 "4": runs["logcount_eos"]["lines_per_s"],
                                 "8": runs["logcount_eos_p8"]["lines_per_s"]}},
        "cores": cores,
        "lines": lines, "large_lines": large_lines, "quix_lines": quix_lines,
        "bench_seconds": bench_seconds,
        "runs": runs,
    }
    results["goals"] = goals(results)
    return results


def goals(r: dict) -> list[dict]:
    tp = r["throughput_lines_per_s"]
    eos = tp["logcount_eos"]
    out = []
    for other, ratio in RATIO_GOALS:
        got = eos / tp[other] if tp[other] else float("inf")
        out.append({"goal": f"logcount_eos >= {ratio:g} x {other}", "value": round(got, 2),
                    "met": got >= ratio})
    p99 = r["latency_ms"]["p99"]
    out.append({"goal": f"p99 latency <= {P99_GOAL_MS} ms at a 0.5 s trigger", "value": p99,
                "met": p99 is not None and p99 <= P99_GOAL_MS})
    rec = r["recovery_s"]
    out.append({"goal": f"recovery <= {RECOVERY_GOAL_S} s", "value": rec,
                "met": rec is not None and rec <= RECOVERY_GOAL_S})
    rss = r["driver_rss_mb"]
    ratio = rss["large"] / rss["small"] if rss["small"] else float("inf")
    out.append({"goal": f"driver RSS large <= {RSS_GOAL} x small", "value": round(ratio, 2),
                "met": ratio <= RSS_GOAL})
    return out


def markdown(r: dict) -> str:
    runs = r["runs"]
    lines = [f"### Benchmark: {r['lines']:,} lines, {r['cores']} cores "
             f"(bench took {r['bench_seconds']} s)", "",
             "| contender | lines/s (processing) | lines/s (wall, with start-up) | "
             "lines per CPU-s | records | seconds | wall s |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    for k in CONTENDERS:
        x = runs[k]
        lines.append(f"| {k} | {x['lines_per_s']:,} | {x['wall_lines_per_s']:,} | "
                     f"{x['lines_per_cpu_s']:,} | {x['records']:,} | {x['seconds']} | "
                     f"{x['wall_seconds']} |")
    lat = r["latency_ms"]["by_trigger"]
    lines += ["", "| latency (produce -> seen by a read_committed reader) | p50 ms | p99 ms | "
              "max ms | probes seen | rate lines/s | p99 ms in the warm-up |",
              "|---|---:|---:|---:|---:|---:|---:|"]
    for t, x in lat.items():
        lines.append(f"| trigger {t} s | {x['p50']} | {x['p99']} | {x['max']} | "
                     f"{x['probes_seen']}/{x['probes']} | {x['rate_lines_per_s']:,} | "
                     f"{x.get('warmup_p99')} (first {x.get('warmup_seconds')} s) |")
    sc = r["scaling_lines_per_s"]
    rss = r["driver_rss_mb"]
    lines += ["", "| scaling (logcount_eos, lines/s) | |", "|---|---:|"]
    lines += [f"| {c} Spark core(s) | {v:,} |" for c, v in sc["spark_cores"].items()]
    lines += [f"| {p} input partition(s) | {v:,} |" for p, v in sc["input_partitions"].items()]
    lines += ["", f"Recovery (SIGKILL -> next committed batch): {r['recovery_s']} s. "
              f"Driver peak RSS (Python): {rss['small']} MB at {r['lines']:,} lines, "
              f"{rss['large']} MB at {r['large_lines']:,}; the Spark JVM (local mode: driver "
              f"and executors): {rss['jvm_small']} MB and {rss['jvm_large']} MB.", "",
              "| goal | value | met |", "|---|---:|---|"]
    lines += [f"| {g['goal']} | {g['value']} | {'yes' if g['met'] else '**no**'} |"
              for g in r["goals"]]
    return "\n".join(lines) + "\n"


def plot(r: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (a, b) = plt.subplots(1, 2, figsize=(13, 4.8), gridspec_kw={"width_ratios": [3, 2]})
    names = list(CONTENDERS)
    vals = [r["throughput_lines_per_s"][k] / 1000 for k in names]
    colors = ["#888", "#aaa", "#e8a33d", "#6a9fd4", "#2c7a3f", "#7fbf7b"]
    a.barh(names, vals, color=colors)
    for i, v in enumerate(vals):
        a.text(v, i, f" {v:,.0f}k", va="center", fontsize=8)
    a.invert_yaxis()
    a.set_xlabel("thousand lines/s (processing; higher is better)")
    a.set_title(f"Backlog of {r['lines']:,} lines, {r['cores']} cores")
    sc = r["scaling_lines_per_s"]
    labels = [f"{c} core" for c in sc["spark_cores"]] + [
        f"{p} part." for p in sc["input_partitions"]]
    svals = [v / 1000 for v in list(sc["spark_cores"].values())
             + list(sc["input_partitions"].values())]
    b.bar(labels, svals, color=["#2c7a3f"] * len(sc["spark_cores"])
          + ["#7fbf7b"] * len(sc["input_partitions"]))
    b.set_ylabel("thousand lines/s")
    lat = r["latency_ms"]
    b.set_title(f"logcount_eos by Spark cores and input partitions\n"
                f"latency p50 {lat['p50']:.0f} ms, p99 {lat['p99']:.0f} ms at a 0.5 s trigger",
                fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
