"""The benchmark's results: assembled, judged against the goals, written as a table and a plot.

Pure except plot(), which writes a PNG.
"""

from __future__ import annotations

import math
import statistics
from pathlib import Path

from logcount.core.settings import RunSettings

CONTENDERS = ("raw_jvm_consumer", "raw_python_consumer", "spark_structured_streaming",
              "quixstreams_eos", "kafka_streams_eos", "logcount_eos", "logcount_alos")

# (other, logcount_eos's steady state / the other's at least): the goals against the raw JVM
# consumer and at-least-once, the first goals that still stand (Structured Streaming, Quix
# Streams) and the goal against Kafka Streams
RATIO_GOALS = (("raw_jvm_consumer", 0.5), ("spark_structured_streaming", 1.0),
               ("quixstreams_eos", 5.0), ("kafka_streams_eos", 1.0), ("logcount_alos", 0.97))
# Each log shape's steady state against the seed format's (logcount_eos), at least: other log
# formats may cost, but not more than half the seed format's pace.
FORMAT_RATIO_GOAL = 0.5
FIRST_COMMIT_GOAL_S = 5.0
# The goals against Kafka Streams ("cheap by default"), judged on the latency runs at the
# latency rate and at a tenth of it (_peer_goals says which run each takes); cold start as a
# ratio within one run, since seconds depend on the machine.
PEER = "kafka_streams_eos"
SSS = "spark_structured_streaming"
CPU_RATIO_GOAL = 1.0
DEFAULTS_P99_GOAL_MS = 1500
UNPACED_CPU_RATIO_GOAL = 2.5
PEAK_RSS_GOAL_MB = 700
COLD_START_RATIO_GOAL = 1.25
P99_GOAL_MS = 300
RECOVERY_GOAL_S = 5.0
RSS_GOAL = 1.1
# The goals for the widest input of the partitions axis (shaped like a production log topic)
# against 4 partitions.
WIDE_THROUGHPUT_GOAL = 0.8
WIDE_COMMIT_P99_GOAL_MS = 250
WIDE_LATENCY_GOAL = 1.25


def assemble(runs: dict[str, dict], latency: dict[str, dict], recovery: dict, lines: int,
             large_lines: int, quix_lines: int, cores: int, bench_seconds: int,
             formats: dict[str, str] | None = None,
             partitions: dict[str, dict] | None = None,
             latency_runs: list[dict] | None = None) -> dict:
    """results.json: the keys of the project's first goals first, then everything behind them.
    `latency` is the stage's latency runs at the latency rate by trigger; `latency_runs` every
    contender's at every rate, with CPU and RSS (logcount/bench/runner.py Bench.measure)."""
    tp = {k: runs[k]["lines_per_s"] for k in CONTENDERS}
    half = latency.get("0.5", {})
    results = {
        "throughput_lines_per_s": tp,
        "steady_lines_per_s": {k: runs[k].get("steady_lines_per_s") for k in CONTENDERS},
        "cold_start_s": {k: runs[k].get("cold_start_s") for k in CONTENDERS},
        "wall_lines_per_s": {k: runs[k]["wall_lines_per_s"] for k in CONTENDERS},
        "lines_per_cpu_s": {k: runs[k]["lines_per_cpu_s"] for k in CONTENDERS},
        "latency_ms": {"p50": half.get("p50"), "p99": half.get("p99"), "by_trigger": latency},
        "latency_runs": latency_runs or [],
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
        "formats": format_table(runs, formats or {}),
        "partitions": partitions_table(runs, partitions or {}),
        "runs": runs,
    }
    results["goals"] = goals(results)
    return results


def format_table(runs: dict[str, dict], formats: dict[str, str]) -> dict[str, dict]:
    """{shape: steady lines/s and its ratio to the seed format's} for the shapes run
    (`formats`: shape -> its run's label)."""
    seed = runs.get("logcount_eos", {}).get("steady_lines_per_s")
    out = {}
    for shape, label in formats.items():
        steady = runs[label].get("steady_lines_per_s")
        out[shape] = {"kind": runs[label].get("format_kind"), "steady_lines_per_s": steady,
                      "ratio_to_seed": round(steady / seed, 2) if steady and seed else None}
    return out


def axis_label(partitions: int | str) -> str:
    """The throughput run's label at a width of the partitions axis: the 4-partition figure is
    the main run's, logcount_eos."""
    return "logcount_eos" if int(partitions) == 4 else f"logcount_eos_p{partitions}"


def partitions_table(runs: dict[str, dict], latency: dict[str, dict]) -> dict[str, dict]:
    """{input partitions: steady and processing lines/s, slowest commit, latency and commit p99}
    (`latency`: partitions -> that latency run; the 4-partition throughput is logcount_eos)."""
    out = {}
    for p, lat in latency.items():
        run = runs.get(axis_label(p), {})
        out[p] = {"steady_lines_per_s": run.get("steady_lines_per_s"),
                  "lines_per_s": run.get("lines_per_s"),
                  "slowest_commit_s": run.get("slowest_commit_s"),
                  "latency_p99_ms": lat.get("p99"), "commit_p99_ms": lat.get("commit_p99_ms"),
                  "rate_lines_per_s": lat.get("rate_lines_per_s"),
                  "probes": lat.get("probes"), "probes_seen": lat.get("probes_seen"),
                  "cpu_s_per_m_lines": lat.get("cpu_s_per_m_lines"),
                  "peak_rss_mb": lat.get("peak_rss_mb")}
    return out


def wide_goals(table: dict[str, dict]) -> list[dict]:
    if "4" not in table or len(table) < 2:
        return []
    base, widest = table["4"], max(table, key=int)
    wide = table[widest]

    def ratio(a, b):
        return a / b if a and b else None

    def shown(x):
        return None if x is None else round(x, 2)

    tp = ratio(wide["steady_lines_per_s"], base["steady_lines_per_s"])
    lat = ratio(wide["latency_p99_ms"], base["latency_p99_ms"])
    commit = wide["commit_p99_ms"]
    return [
        _goal(f"steady state at {widest} input partitions >= {WIDE_THROUGHPUT_GOAL:g} x at 4",
              shown(tp), tp is not None and tp >= WIDE_THROUGHPUT_GOAL),
        _goal(f"commit p99 <= {WIDE_COMMIT_P99_GOAL_MS} ms at {widest} input partitions",
              commit, commit is not None and commit <= WIDE_COMMIT_P99_GOAL_MS),
        _goal(f"latency p99 at {widest} input partitions <= {WIDE_LATENCY_GOAL:g} x at 4",
              shown(lat), lat is not None and lat <= WIDE_LATENCY_GOAL),
    ]


def goals(r: dict) -> list[dict]:
    """Each goal with its value and verdict; a figure the run could not give is not met."""
    steady = r["steady_lines_per_s"]
    eos = steady["logcount_eos"]
    out = []
    for other, ratio in RATIO_GOALS:
        got = eos / steady[other] if eos and steady[other] else None
        out.append(_goal(f"logcount_eos >= {ratio:g} x {other} (steady state)",
                         None if got is None else round(got, 2), got is not None and got >= ratio))
    first, peer_first = r["cold_start_s"]["logcount_eos"], r["cold_start_s"].get(PEER)
    out.append(_goal(f"first commit <= {FIRST_COMMIT_GOAL_S:g} s after process start", first,
                     first is not None and first <= FIRST_COMMIT_GOAL_S))
    out.append(_ratio_goal(f"cold start (first result) <= {COLD_START_RATIO_GOAL:g} x {PEER}'s "
                           f"({_n(first)} against {_n(peer_first)} s)",
                           first / peer_first if first and peer_first else None,
                           COLD_START_RATIO_GOAL))
    # The lowest p99 of the triggers run (the trigger is the user's choice), among the repeated
    # runs when there are any (a single run's p99 is not compared with a median).
    best = min(judged(r["latency_ms"]["by_trigger"].values()), key=lambda x: x["p99"],
               default=None)
    p99 = best["p99"] if best else None
    rate = f"{best['rate_lines_per_s']:,}" if best else "?"
    trigger = f"{best['trigger_interval_s']:g}" if best else "?"
    out.append(_goal(f"p99 latency <= {P99_GOAL_MS} ms at {rate} lines/s (trigger {trigger} s)",
                     p99, p99 is not None and p99 <= P99_GOAL_MS))
    rec = r["recovery_s"]
    out.append(_goal(f"recovery <= {RECOVERY_GOAL_S:g} s", rec,
                     rec is not None and rec <= RECOVERY_GOAL_S))
    rss = r["driver_rss_mb"]
    ratio = rss["large"] / rss["small"] if rss["small"] else float("inf")
    out.append(_goal(f"driver RSS large <= {RSS_GOAL} x small", round(ratio, 2),
                     ratio <= RSS_GOAL))
    for shape, x in r.get("formats", {}).items():
        got = x["ratio_to_seed"]
        out.append(_goal(f"{shape} ({x['kind']}) >= {FORMAT_RATIO_GOAL:g} x the seed format "
                         f"(steady state)", got, got is not None and got >= FORMAT_RATIO_GOAL))
    lat_runs = r.get("latency_runs", [])
    return out + _peer_goals(lat_runs) + _sss_goals(lat_runs) + wide_goals(r.get("partitions", {}))


def judged(runs) -> list[dict]:
    """The latency rows a goal may pick: the repeated ones (report.combine_runs) when any are
    among `runs`, else all."""
    runs = list(runs)
    repeated = [x for x in runs if x.get("p99_runs")]
    return repeated or runs


def at_defaults(run: dict) -> bool:
    """A stage latency run at the default trigger and cadence (`logcount run` as shipped)."""
    return (run.get("trigger_interval_s") == RunSettings.trigger_interval
            and run.get("min_batch_interval_s") == RunSettings.min_batch_interval)


def _peer_goals(runs: list[dict]) -> list[dict]:
    """The goals against Kafka Streams from the latency runs, at the highest rate run and at the
    lowest; not met where a run is missing. At its defaults the stage is judged on its run at
    the default trigger and cadence. Unpaced (--min-batch-interval 0) the trigger is the user's
    choice: the stage is judged on its cheapest unpaced run whose p99 is no higher than Kafka
    Streams' (or, when none is, on its lowest p99), repeated runs only when there are any."""
    rates = sorted({x["target_rate"] for x in runs})
    high, low = (rates[-1], rates[0]) if len(rates) > 1 else (rates[-1] if rates else None, None)

    def of(contender: str, rate: int | None) -> list[dict]:
        return [x for x in runs if x["contender"] == contender and x["target_rate"] == rate
                and not math.isnan(x["p99"])]

    def cpu_ratio(stage: dict | None, peer: dict | None) -> float | None:
        """Unrounded: a goal is judged on the figure, shown rounded (`_ratio_goal`)."""
        a, b = (stage or {}).get("cpu_s_per_m_lines"), (peer or {}).get("cpu_s_per_m_lines")
        return a / b if a and b else None

    def at(rate: int | None) -> str:
        return "?" if rate is None else f"{rate:,}"

    def peer_at(rate: int | None) -> dict | None:
        return min(judged(of(PEER, rate)), key=lambda x: x["p99"], default=None)

    out = []
    for rate in (high, low):
        stage = next((x for x in of("logcount_eos", rate) if at_defaults(x)), None)
        cpu, p99 = cpu_ratio(stage, peer_at(rate)), (stage or {}).get("p99")
        out += [_ratio_goal(f"defaults: CPU per line at {at(rate)} lines/s <= "
                            f"{CPU_RATIO_GOAL:g} x {PEER}'s", cpu, CPU_RATIO_GOAL),
                _goal(f"defaults: p99 latency at {at(rate)} lines/s <= {DEFAULTS_P99_GOAL_MS:,} "
                      f"ms", p99, p99 is not None and p99 <= DEFAULTS_P99_GOAL_MS)]
        if rate == high:
            rss = (stage or {}).get("peak_rss_mb")
            out.append(_goal(f"defaults: peak RSS, Python driver + JVM, at {at(rate)} lines/s "
                             f"<= {PEAK_RSS_GOAL_MB} MB", rss,
                             rss is not None and rss <= PEAK_RSS_GOAL_MB))
    peer = peer_at(high)
    peer_p99 = (peer or {}).get("p99")
    unpaced = judged(x for x in of("logcount_eos", high) if not x.get("min_batch_interval_s"))
    within = [x for x in unpaced if peer_p99 is not None and x["p99"] <= peer_p99
              and x.get("cpu_s_per_m_lines")]
    stage = (min(within, key=lambda x: x["cpu_s_per_m_lines"], default=None)
             or min(unpaced, key=lambda x: x["p99"], default=None))
    how = run_setting(stage) if stage else "?"
    cpu, p99 = cpu_ratio(stage, peer), (stage or {}).get("p99")
    return [*out,
            _goal(f"unpaced: p99 latency at {at(high)} lines/s <= {PEER}'s ({_n(peer_p99)} ms; "
                  f"{how})", p99, p99 is not None and peer_p99 is not None and p99 <= peer_p99),
            _ratio_goal(f"unpaced: CPU per line at {at(high)} lines/s <= "
                        f"{UNPACED_CPU_RATIO_GOAL:g} x {PEER}'s ({how})", cpu,
                        UNPACED_CPU_RATIO_GOAL)]


def _sss_goals(runs: list[dict]) -> list[dict]:
    """The goals against Structured Streaming, at the highest rate run and at the lowest: the
    stage at the cadence of SSS's trigger (its paced runs, the stage's defaults; the cheapest if
    several) below SSS's CPU per line and p99. Not met where a run is missing."""
    rates = sorted({x["target_rate"] for x in runs})
    out = []
    for rate in ([rates[-1], rates[0]] if len(rates) > 1 else [*rates, None]):
        def of(contender: str, rate: int | None = rate) -> list[dict]:
            return [x for x in runs if x["contender"] == contender and x["target_rate"] == rate
                    and not math.isnan(x["p99"])]

        sss = min(of(SSS), key=lambda x: x["p99"], default=None)
        cadence = (sss or {}).get("trigger_interval_s")
        stage = min((x for x in of("logcount_eos") if cadence
                     and x.get("min_batch_interval_s") == cadence and x.get("cpu_s_per_m_lines")),
                    key=lambda x: x["cpu_s_per_m_lines"], default=None)
        a, b = (stage or {}).get("cpu_s_per_m_lines"), (sss or {}).get("cpu_s_per_m_lines")
        cpu = round(a / b, 2) if a and b else None
        p99, sss_p99 = (stage or {}).get("p99"), (sss or {}).get("p99")
        how = run_setting(stage) if stage else "?"
        at = "?" if rate is None else f"{rate:,}"
        # Judged on the figures, shown rounded: 0.996 x shows as 1.0 and is still below.
        out += [_goal(f"CPU per line at {at} lines/s < {SSS}'s ({how})", cpu,
                      bool(a and b and a < b)),
                _goal(f"p99 latency at {at} lines/s < {SSS}'s ({_n(sss_p99)} ms; {how})", p99,
                      p99 is not None and sss_p99 is not None and p99 < sss_p99)]
    return out


# How a latency setting's repeated runs combine: the median of a figure, its worst, or its sum.
_MEDIAN = ("p50", "rate_lines_per_s", "cpu_s_per_m_lines", "commit_p99_ms", "warmup_p99")
_WORST = ("max", "peak_rss_mb", "jvm_rss_mb")
_SUM = ("probes", "probes_seen", "window_lines", "window_cpu_seconds", "batches")


def combine_runs(runs: list[dict]) -> dict:
    """Repeated latency runs of one setting -> one row (pure): the median of each run's p50,
    p99, rate, CPU per line and commit p99, the worst max and peak RSS, the sums of the counts,
    and each run's p99 and CPU in `p99_runs` and `cpu_runs`. One p99 of a 60 s run is decided
    by its slowest few batches, so a setting is judged on the median of several runs. A run
    that missed probes counts as an infinite p99 (a stalled run cannot hide behind the others),
    and of an even count the higher middle run is taken, so the median is always a real run's."""
    if len(runs) == 1:
        return runs[0]
    out = dict(runs[0])

    def values(key):
        return [x[key] for x in runs if x.get(key) is not None
                and not (isinstance(x[key], float) and math.isnan(x[key]))]

    def p99_of(x: dict) -> float:
        p99 = x.get("p99")
        whole = x.get("probes_seen") == x.get("probes")
        return math.inf if p99 is None or math.isnan(p99) or not whole else p99

    for key in _MEDIAN:
        xs = values(key)
        out[key] = round(statistics.median_high(xs), 1) if xs else None
    worst = statistics.median_high([p99_of(x) for x in runs])
    out["p99"] = math.nan if math.isinf(worst) else worst
    for key in _WORST:
        xs = values(key)
        out[key] = max(xs) if xs else None
    for key in _SUM:
        xs = values(key)
        out[key] = round(sum(xs), 2) if xs else None
    out["repeats"] = len(runs)
    out["p99_runs"] = [x["p99"] for x in runs]
    out["cpu_runs"] = [x.get("cpu_s_per_m_lines") for x in runs]
    return out


def combine_throughput(runs: list[dict]) -> dict:
    """Repeated `run --once` runs of one input -> one row (pure): the median (the higher middle
    of an even count, a real run's) of steady and processing lines/s, the slowest commit of
    any, and each run's steady figure in `steady_runs`. A run that gave no steady figure counts
    as 0, so a failed run cannot hide behind the others."""
    if len(runs) == 1:
        return runs[0]
    out = dict(runs[0])
    for key in ("steady_lines_per_s", "lines_per_s"):
        out[key] = statistics.median_high([x.get(key) or 0 for x in runs])
    commits = [x["slowest_commit_s"] for x in runs if x.get("slowest_commit_s") is not None]
    out["slowest_commit_s"] = max(commits) if commits else None
    out["repeats"] = len(runs)
    out["steady_runs"] = [x.get("steady_lines_per_s") for x in runs]
    return out


def _p99_cell(x: dict) -> str:
    """A row's p99; for repeated runs, the median with each run's in brackets."""
    runs = x.get("p99_runs")
    if not runs or len(runs) < 2:
        return f"{x['p99']}"
    return f"{x['p99']} ({' / '.join(f'{v:g}' for v in runs)})"


def run_setting(run: dict) -> str:
    """How a stage's latency run was set: its trigger, and its pacing when it had one."""
    t, m = run.get("trigger_interval_s"), run.get("min_batch_interval_s")
    return ("" if t is None else f"trigger {t:g} s") + (f", paced {m:g} s" if m else "")


def _goal(goal: str, value, met: bool) -> dict:
    return {"goal": goal, "value": value, "met": met}


def _ratio_goal(goal: str, ratio: float | None, limit: float) -> dict:
    """A ratio's goal: judged on the ratio itself, shown to two decimals (a rounded 2.504 must not
    pass as 2.5); None: not met."""
    return _goal(goal, None if ratio is None else round(ratio, 2),
                 ratio is not None and ratio <= limit)


def _n(x) -> str:
    return "-" if x is None else f"{x:,}"


def latency_rows(r: dict) -> list[tuple[str, dict]]:
    """(row name, run) for every latency run; a results.json from before the runs against Kafka
    Streams has only the stage's by trigger."""
    runs = r.get("latency_runs") or [
        {"contender": "logcount_eos", **x} for x in r["latency_ms"]["by_trigger"].values()]
    return [(x["contender"] + (f", {run_setting(x)}" if run_setting(x) else ""), x)
            for x in runs]


# The latency panel's contenders, short enough that ten runs' labels do not overlap.
_SHORT = {"logcount_eos": "logcount", PEER: "Kafka\nStreams", SSS: "Struct.\nStreaming"}


def tick_label(name: str, run: dict) -> str:
    """A latency row's x label (pure): the contender's short name, each of its settings and its
    rate in thousand lines/s, one short item a line."""
    contender, *settings = name.split(", ")
    parts = [_SHORT.get(contender, contender), *(x.replace("trigger ", "t ") for x in settings)]
    if "target_rate" in run:
        parts.append(f"{run['target_rate'] / 1000:g}k/s")
    return "\n".join(parts)


def partitions_markdown(table: dict[str, dict]) -> list[str]:
    """The partitions axis (partitions_table) as markdown table lines."""
    return ["| input partitions (logcount_eos, same run) | lines/s (steady state) | "
            "lines/s (processing) | slowest commit s (backlog) | latency p99 ms | "
            "commit p99 ms (latency run) | CPU-s per million lines (latency run) | "
            "peak RSS MB (latency run) |", "|---:|---:|---:|---:|---:|---:|---:|---:|",
            *(f"| {p} | {_n(x['steady_lines_per_s'])} | {_n(x['lines_per_s'])} | "
              f"{_n(x['slowest_commit_s'])} | {_n(x['latency_p99_ms'])} | "
              f"{_n(x['commit_p99_ms'])} | {_n(x.get('cpu_s_per_m_lines'))} | "
              f"{_n(x.get('peak_rss_mb'))} |" for p, x in table.items())]


def markdown(r: dict) -> str:
    runs = r["runs"]
    lines = [f"### Benchmark: {r['lines']:,} lines, {r['cores']} cores "
             f"(bench took {r['bench_seconds']} s)", "",
             "| contender | cold start s (first result) | lines/s (steady state) | "
             "lines/s (processing) | lines/s (wall, with start-up) | lines per CPU-s | records | "
             "seconds | wall s |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for k in CONTENDERS:
        x = runs[k]
        lines.append(f"| {k} | {_n(x.get('cold_start_s'))} | "
                     f"{_n(x.get('steady_lines_per_s'))} | {x['lines_per_s']:,} | "
                     f"{x['wall_lines_per_s']:,} | {x['lines_per_cpu_s']:,} | "
                     f"{x['records']:,} | {x['seconds']} | {x['wall_seconds']} |")
    lines += ["", "| latency (produce -> seen by a read_committed reader) | rate lines/s | "
              "p50 ms | p99 ms (median; each run's) | max ms | probes seen | "
              "CPU-s per million lines | peak RSS MB (JVM) | p99 ms in the warm-up |",
              "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for name, x in latency_rows(r):
        lines.append(f"| {name} | {x['rate_lines_per_s']:,} | {x['p50']} | {_p99_cell(x)} | "
                     f"{x['max']} | {x['probes_seen']}/{x['probes']} | "
                     f"{_n(x.get('cpu_s_per_m_lines'))} | {_n(x.get('peak_rss_mb'))} "
                     f"({_n(x.get('jvm_rss_mb'))}) | "
                     f"{x.get('warmup_p99')} (first {x.get('warmup_seconds')} s) |")
    sc = r["scaling_lines_per_s"]
    rss = r["driver_rss_mb"]
    lines += ["", "| scaling (logcount_eos, lines/s) | |", "|---|---:|"]
    lines += [f"| {c} Spark core(s) | {v:,} |" for c, v in sc["spark_cores"].items()]
    lines += [f"| {p} input partition(s) | {v:,} |" for p, v in sc["input_partitions"].items()]
    if r.get("formats"):
        lines += ["", "| log shape (logcount_eos, same run) | rule | lines/s (steady state) | "
                  "x the seed format |", "|---|---|---:|---:|",
                  f"| seed | default, fast path | "
                  f"{_n(r['steady_lines_per_s']['logcount_eos'])} | 1 |"]
        lines += [f"| {shape} | {x['kind']} | {_n(x['steady_lines_per_s'])} | "
                  f"{_n(x['ratio_to_seed'])} |" for shape, x in r["formats"].items()]
    if r.get("partitions"):
        lines += ["", *partitions_markdown(r["partitions"])]
    lines += ["", f"Recovery (SIGKILL -> next committed batch): {r['recovery_s']} s. "
              f"Driver peak RSS (Python): {rss['small']} MB at {r['lines']:,} lines, "
              f"{rss['large']} MB at {r['large_lines']:,}; the Spark JVM (local mode: driver "
              f"and executors): {rss['jvm_small']} MB and {rss['jvm_large']} MB.", "",
              "| goal | value | met |", "|---|---:|---|"]
    lines += [f"| {g['goal']} | {_n(g['value'])} | {'yes' if g['met'] else '**no**'} |"
              for g in r["goals"]]
    return "\n".join(lines) + "\n"


def plot(r: dict, path: Path) -> None:
    """results.png: steady-state and processing throughput, cold start, latency, scaling."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ((a, b), (c, d)) = plt.subplots(2, 2, figsize=(13, 8.5))
    names = list(CONTENDERS)
    steady = [(r["steady_lines_per_s"][k] or 0) / 1000 for k in names]
    whole = [r["throughput_lines_per_s"][k] / 1000 for k in names]
    ys = range(len(names))
    a.barh([y - 0.2 for y in ys], steady, height=0.4, color="#2c7a3f", label="steady state")
    a.barh([y + 0.2 for y in ys], whole, height=0.4, color="#9cc9a0",
           label="processing (first batch included)")
    for y, v in zip(ys, steady, strict=True):
        a.text(v, y - 0.2, f" {v:,.0f}k", va="center", fontsize=7)
    a.set_yticks(list(ys), names, fontsize=8)
    a.invert_yaxis()
    a.set_xlabel("thousand lines/s (higher is better)")
    a.set_title(f"Backlog of {r['lines']:,} lines, {r['cores']} cores", fontsize=10)
    a.legend(fontsize=7, loc="lower right")

    cold = [r["cold_start_s"][k] or 0 for k in names]
    b.barh(names, cold, color="#6a9fd4")
    for y, v in enumerate(cold):
        b.text(v, y, f" {v:.1f} s", va="center", fontsize=7)
    b.axvline(FIRST_COMMIT_GOAL_S, color="#c33", ls="--", lw=1)
    peer_cold = r["cold_start_s"].get(PEER)
    if peer_cold:
        b.axvline(COLD_START_RATIO_GOAL * peer_cold, color="#c33", ls=":", lw=1)
    b.invert_yaxis()
    b.tick_params(axis="y", labelsize=8)
    b.set_xlabel("seconds from process start to the first result (lower is better)")
    b.set_title(f"Cold start (goals for logcount_eos: {FIRST_COMMIT_GOAL_S:g} s, "
                f"{COLD_START_RATIO_GOAL:g} x {PEER})", fontsize=10)

    rows = latency_rows(r)
    xs = range(len(rows))
    c.bar([x - 0.2 for x in xs], [x["p50"] for _, x in rows], width=0.4, label="p50",
          color="#e8a33d")
    c.bar([x + 0.2 for x in xs], [x["p99"] for _, x in rows], width=0.4, label="p99",
          color="#b5651d")
    for x, (_, run) in zip(xs, rows, strict=True):
        if run.get("cpu_s_per_m_lines") is not None:
            c.text(x, run["p99"], f"{run['cpu_s_per_m_lines']:g} CPU-s/M\n"
                   f"{run['peak_rss_mb']:,.0f} MB", ha="center", va="bottom", fontsize=6)
    c.axhline(P99_GOAL_MS, color="#c33", ls="--", lw=1, label=f"p99 goal {P99_GOAL_MS} ms")
    c.set_xticks(list(xs), [tick_label(name, x) for name, x in rows], fontsize=6)
    c.set_ylim(top=max((x["p99"] for _, x in rows), default=P99_GOAL_MS) * 1.25)
    c.set_ylabel("ms, produced -> seen with read_committed")
    c.set_title("End-to-end latency, exactly-once (CPU per million lines, peak RSS)",
                fontsize=10)
    c.legend(fontsize=6, loc="upper right")

    sc = r["scaling_lines_per_s"]
    labels = [f"{k} core" for k in sc["spark_cores"]] + [
        f"{p} part." for p in sc["input_partitions"]]
    svals = [v / 1000 for v in list(sc["spark_cores"].values())
             + list(sc["input_partitions"].values())]
    d.bar(labels, svals, color=["#2c7a3f"] * len(sc["spark_cores"])
          + ["#7fbf7b"] * len(sc["input_partitions"]))
    d.set_ylabel("thousand lines/s (processing)")
    d.set_title("logcount_eos by Spark cores and input partitions", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    """`python -m logcount.bench.report DIR`: judge DIR/results.json's goals again with this code
    and
    rewrite its results.json, results.md and results.png (after a change to the goals)."""
    import json
    import sys

    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print(main.__doc__, file=sys.stderr)
        return 2
    out = Path(args[0])
    r = json.loads((out / "results.json").read_text())
    r["goals"] = goals(r)
    (out / "results.json").write_text(json.dumps(r, indent=1) + "\n")
    (out / "results.md").write_text(markdown(r))
    plot(r, out / "results.png")
    print(markdown(r))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
