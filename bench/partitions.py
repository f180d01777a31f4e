"""The partitions axis alone: `python -m bench.partitions [--lines N] [--out DIR]`.

The same part of `logcount bench` (issue #30), without the other contenders: N synthetic lines on
topics of 4, 64 and 256 partitions, `logcount run --once` on each (steady state, slowest
commit), then the stage's latency run at 20,000 lines/s (trigger 0.5 s) on each, one after the
other, and issue 30's three goals judged on them. A quick before/after tool for a change to the
batch (~8 minutes at the default N on 2 cores); `logcount bench` is the full run. Writes
DIR/partitions.json and prints the table.
"""

from __future__ import annotations

import argparse
import json
import logging

from bench import data, report
from bench.runner import PARTITION_AXIS, Bench
from connectors import stack
from core.settings import BenchSettings


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--lines", type=int, default=2_000_000)
    ap.add_argument("--out", default="bench-partitions")
    args = ap.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    stack.up(log=logging.info)
    b = Bench(BenchSettings(lines=args.lines, out=args.out).validate())
    lines, _ = data.generate_with_totals(args.lines, 1)
    runs, latency = {}, {}
    try:
        for p in PARTITION_AXIS:
            topic = b.name(f"in-p{p}")
            data.write_topic(b.bootstrap, topic, lines, p)
            label = "logcount_eos" if p == 4 else f"logcount_eos_p{p}"
            runs[label] = b.logcount(label, topic)
        for p in PARTITION_AXIS:
            latency[str(p)] = b.latency(0.5, lines, p)
    finally:
        b.drop_topics()
    table = report.partitions_table(runs, latency)
    goals = report.wide_goals(table)  # the same judgement as the full report
    (b.out / "partitions.json").write_text(json.dumps(
        {"lines": args.lines, "partitions": table, "goals": goals}, indent=1) + "\n")
    print("\n".join(report.partitions_markdown(table)))
    for g in goals:
        print(f"{g['goal']}: {g['value']} ({'met' if g['met'] else 'not met'})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
