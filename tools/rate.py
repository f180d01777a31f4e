"""The stage at a rate, alone: `python -m tools.rate [--partitions P] [--repeats R] [--out
DIR] [--rate N] [--trigger S] [--min-batch-interval S]`.

`logcount bench`'s latency run of the stage (20,000 lines/s, the stage's default trigger and
cadence unless given, 15 s of warm-up and 60 s measured), R times one after the other on topics
of their own, without the other contenders: p50 / p99, CPU-seconds per million lines and peak
RSS (Python driver + JVM) per run, one JSON line each. A quick before/after tool for the driver
JVM's options (run it with LOGCOUNT_SPARK_JAVA_OPTIONS set, docs/deploy.md Sizing) or a change to
the batch (~1.5 minutes a run on 2 cores). The stage's log of each run is in DIR/logs.
"""

from __future__ import annotations

import argparse
import json
import logging

from logcount.bench import data
from logcount.bench.runner import DEFAULT_TRIGGER_S, PACED_INTERVAL_S, Bench
from logcount.connectors import stack
from logcount.core.settings import BenchSettings

# Lines the producer cycles through (the rate sets what is sent; they only need to be varied).
FILLER_LINES = 200_000
# The figures a run prints (Bench.latency's result has more: warm-up, probes, rates).
SHOWN = ("p50", "p99", "max", "probes_seen", "cpu_s_per_m_lines", "peak_rss_mb", "jvm_rss_mb",
         "batches", "commit_p99_ms")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--partitions", type=int, default=4, help="the input topic's partitions")
    ap.add_argument("--repeats", type=int, default=1, help="runs, one after the other")
    ap.add_argument("--out", default="bench-rate")
    ap.add_argument("--rate", type=int, default=BenchSettings.latency_rate, help="lines/s")
    ap.add_argument("--trigger", type=float, default=DEFAULT_TRIGGER_S,
                    help="the stage's --trigger-interval (default: the stage's)")
    ap.add_argument("--min-batch-interval", type=float, default=PACED_INTERVAL_S,
                    help="the stage's --min-batch-interval (default: the stage's)")
    args = ap.parse_args()
    if args.repeats < 1 or args.partitions < 1:
        ap.error("--repeats and --partitions must be at least 1")
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    stack.up(log=logging.info)
    b = Bench(BenchSettings(lines=FILLER_LINES, out=args.out, latency_rate=args.rate).validate())
    filler = data.generate(FILLER_LINES, 1)
    try:
        for i in range(args.repeats):
            run = b.latency(args.trigger, filler, args.partitions, pacing=args.min_batch_interval,
                            repeat=i)
            print(json.dumps({"run": i + 1, **{k: run.get(k) for k in SHOWN}}), flush=True)
    finally:
        b.drop_topics()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
