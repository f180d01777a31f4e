"""`logcount bench --target`: the stage paced to a latency target, beside Kafka Streams.

For each rate (--target-rates): Kafka Streams (its 100 ms commit interval), then the stage with
`--target-latency` at Kafka Streams' p99 of that run, then the stage unpaced
(`--min-batch-interval 0`, today's low-latency mode), each on a fresh 4-partition topic with the
latency runs' producer, probes and read_committed reader (runner.py `Bench.measure`): the same
warm-up (--latency-warmup-seconds) and window (--latency-seconds).

Goals, per rate: the target run's p99 at most Kafka Streams', its CPU per line at most
CPU_GOAL x Kafka Streams', and fewer batches than the unpaced run. Writes target.json and
target.md in --out.
"""

from __future__ import annotations

import logging
import math
import os
from datetime import UTC, datetime

from logcount.bench import data
from logcount.bench.runner import DEFAULT_TRIGGER_S, Bench, run_steps
from logcount.connectors import stack
from logcount.core.paths import home
from logcount.core.settings import BenchSettings

log = logging.getLogger("logcount.bench")

CPU_GOAL = 2.5  # CPU per line of the target run / Kafka Streams', at most
FILLER_LINES = 100_000
UNPACED_TRIGGER_S = 0.5  # the latency runs' unpaced stage (runner.py run_bench)


# -- pure parts ---------------------------------------------------------------------------------
def target_ms(streams_p99_ms: float) -> int:
    """The target for the stage: Kafka Streams' p99, in whole milliseconds, not above it."""
    return max(1, math.floor(streams_p99_ms))


def goals(rate: int, streams: dict, target: dict, unpaced: dict) -> list[dict]:
    """The goals of one rate from its three runs (each a `Bench.measure` row)."""
    ratio = (round(target["cpu_s_per_m_lines"] / streams["cpu_s_per_m_lines"], 2)
             if target.get("cpu_s_per_m_lines") and streams.get("cpu_s_per_m_lines") else None)
    return [
        {"goal": f"{rate} lines/s: p99 <= Kafka Streams'", "value": target["p99"],
         "peer": streams["p99"], "met": target["p99"] <= streams["p99"]},
        {"goal": f"{rate} lines/s: CPU per line <= {CPU_GOAL:g} x Kafka Streams'",
         "value": ratio, "peer": None, "met": ratio is not None and ratio <= CPU_GOAL},
        {"goal": f"{rate} lines/s: fewer batches than unpaced", "value": target["batches"],
         "peer": unpaced["batches"], "met": target["batches"] < unpaced["batches"]},
    ]


def markdown(r: dict) -> str:
    out = [f"# The latency target (`logcount bench --target`), {r['started']}", "",
           f"Each run: {r['warmup_seconds']:g} s of warm-up, then {r['window_seconds']:g} s "
           "measured; CPU is the contender's process tree over the window, per million lines.",
           "", "| rate | contender | p50 ms | p99 ms | CPU-s per M lines | cores | batches |",
           "|---:|---|---:|---:|---:|---:|---:|"]
    for row in r["rates"]:
        for name, run in (("kafka_streams_eos", row["streams"]),
                          (f"logcount, --target-latency {row['target_ms']}ms", row["target"]),
                          ("logcount, --min-batch-interval 0", row["unpaced"])):
            cores = run["window_cpu_seconds"] / r["window_seconds"]
            out.append(f"| {row['rate']:,} | {name} | {run['p50']:,} | {run['p99']:,} | "
                       f"{run['cpu_s_per_m_lines']:,} | {cores:.2f} | "
                       f"{run.get('batches', '')} |")
    out += ["", "| goal | figure | peer | met |", "|---|---:|---:|---|"]
    for row in r["rates"]:
        for g in row["goals"]:
            peer = "" if g["peer"] is None else g["peer"]
            out.append(f"| {g['goal']} | {g['value']} | {peer} | {'yes' if g['met'] else 'no'} |")
    return "\n".join(out) + "\n"


# -- the run ------------------------------------------------------------------------------------
def run_rate(b: Bench, lines: list[bytes], rate: int) -> dict:
    streams = b.latency_streams(lines, rate)
    ms = target_ms(streams["p99"])
    target = b.latency(DEFAULT_TRIGGER_S, lines, rate=rate, target_ms=ms)
    unpaced = b.latency(UNPACED_TRIGGER_S, lines, rate=rate)
    return {"rate": rate, "target_ms": ms, "streams": streams, "target": target,
            "unpaced": unpaced, "goals": goals(rate, streams, target, unpaced)}


def run_target(s: BenchSettings) -> int:
    if s.bootstrap_servers is None:
        stack.up(log=log.info)
    os.environ.setdefault("PYTHONPATH", str(home()))
    b = Bench(s)
    lines, _ = data.generate_with_totals(FILLER_LINES, s.seed)
    result: dict = {"started": datetime.now(UTC).isoformat(timespec="seconds"),
                    "warmup_seconds": s.latency_warmup_seconds,
                    "window_seconds": s.latency_seconds, "cpu_goal": CPU_GOAL, "rates": []}
    steps = [lambda r, rate=rate: r["rates"].append(run_rate(b, lines, rate))
             for rate in s.target_rate_list]
    return run_steps(b, "target", result, steps, markdown)
