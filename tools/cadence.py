"""What each caught-up cadence costs and gives: `python -m tools.cadence [--rate R]
[--intervals 0,0.25,0.5,1] [--seconds S] [--trigger T]`.

`logcount bench`'s latency run (logcount/bench/runner.py Bench.latency: a producer at `--rate`
lines/s, probe lines read back with read_committed, the stage's process tree's CPU over the
measured window) once per `--min-batch-interval`, at the stage's default trigger: the figures
behind the default cadence (docs/tuning.md#pacing). One JSON line per interval, then a table.
"""

from __future__ import annotations

import argparse
import json
import tempfile

from logcount.bench import data
from logcount.bench.runner import Bench
from logcount.connectors import stack
from logcount.core.settings import BenchSettings


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--rate", type=int, default=2000, help="lines/s produced")
    ap.add_argument("--intervals", default="0,0.25,0.5,1", help="--min-batch-interval values")
    ap.add_argument("--seconds", type=float, default=40.0, help="measured seconds per interval")
    ap.add_argument("--warmup", type=float, default=10.0, help="seconds produced before that")
    ap.add_argument("--trigger", type=float, default=1.0, help="the stage's --trigger-interval")
    ap.add_argument("--out", default=None, help="directory for the stages' logs")
    args = ap.parse_args()
    stack.up(log=lambda line: None)
    out = args.out or tempfile.mkdtemp(prefix="logcount-cadence-")
    b = Bench(BenchSettings(out=out, latency_seconds=args.seconds,
                            latency_warmup_seconds=args.warmup, latency_rate=args.rate))
    filler = data.generate(200_000, 1)
    rows = []
    for interval in (float(x) for x in args.intervals.split(",")):
        run = b.latency(args.trigger, filler, pacing=interval)
        seconds = args.warmup + args.seconds
        row = {"min_batch_interval_s": interval, "p50_ms": run["p50"], "p99_ms": run["p99"],
               "cpu_s_per_m_lines": run["cpu_s_per_m_lines"],
               "cores": round(run["window_cpu_seconds"] / args.seconds, 3),
               "batches_per_s": round(run["batches"] / seconds, 1),
               "peak_rss_mb": run["peak_rss_mb"], "probes": f"{run['probes_seen']}/"
                                                              f"{run['probes']}"}
        rows.append(row)
        print(json.dumps(row), flush=True)
    b.drop_topics()
    print(f"rate {args.rate} lines/s, trigger {args.trigger:g} s, {args.seconds:g} s measured "
          f"after {args.warmup:g} s; logs in {out}")
    print("| --min-batch-interval | batches/s | CPU (cores) | CPU-s per M lines | p50 ms | "
          "p99 ms |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['min_batch_interval_s']:g} | {r['batches_per_s']} | {r['cores']} | "
              f"{r['cpu_s_per_m_lines']} | {r['p50_ms']} | {r['p99_ms']} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
