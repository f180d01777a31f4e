"""The partitions axis alone: `python -m tools.partitions [--lines N] [--repeats R] [--out DIR]`.

The same part of `logcount bench` (input shaped like production log topics), without the other
contenders: N synthetic lines on topics of 4, 64 and 256 partitions, `logcount run --once` on each
(steady state, slowest commit), then the stage's latency run at 20,000 lines/s (trigger 0.5 s) on
each, one after the other, and the three goals of the partitions axis judged on them. A quick
before/after tool for a change to the batch (~8 minutes at the default N on 2 cores, a round);
`logcount bench` is the full run.
With R rounds, each width's figures are the median of its rounds (report.combine_throughput and
combine_runs). Writes DIR/partitions.json and prints the table.
"""

from __future__ import annotations

import argparse
import json
import logging

from logcount.bench import data, report
from logcount.bench.runner import PARTITION_AXIS, Bench
from logcount.connectors import stack
from logcount.core.settings import BenchSettings


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--lines", type=int, default=2_000_000)
    ap.add_argument("--out", default="bench-partitions")
    ap.add_argument("--repeats", type=int, default=1,
                    help="rounds of the whole axis; each figure is the median of its rounds")
    args = ap.parse_args()
    if args.repeats < 1:
        ap.error("--repeats must be at least 1")
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    stack.up(log=logging.info)
    b = Bench(BenchSettings(lines=args.lines, out=args.out).validate())
    lines, _ = data.generate_with_totals(args.lines, 1)
    runs: dict[str, list[dict]] = {}
    latency: dict[str, list[dict]] = {}
    try:
        for p in PARTITION_AXIS:
            data.write_topic(b.bootstrap, b.name(f"in-p{p}"), lines, p)
        # Rounds, not one width's repeats in a row: a slow minute of the machine (or of the
        # broker) then falls on every width of a round, not on one width's figure (the
        # 4-partition steady state moved 536k-701k lines/s between single runs of one day).
        for i in range(args.repeats):
            for p in PARTITION_AXIS:
                label = report.axis_label(p)
                run = b.logcount(label + (f"_x{i}" if i else ""), b.name(f"in-p{p}"))
                runs.setdefault(label, []).append(run)
            for p in PARTITION_AXIS:
                latency.setdefault(str(p), []).append(b.latency(0.5, lines, p, repeat=i))
    finally:
        b.drop_topics()
    table = report.partitions_table(
        {k: report.combine_throughput(v) for k, v in runs.items()},
        {k: report.combine_runs(v) for k, v in latency.items()})
    goals = report.wide_goals(table)  # the same judgement as the full report
    (b.out / "partitions.json").write_text(json.dumps(
        {"lines": args.lines, "repeats": args.repeats, "partitions": table, "goals": goals,
         "steady_runs": {k: [x.get("steady_lines_per_s") for x in v] for k, v in runs.items()},
         "p99_runs": {k: [x.get("p99") for x in v] for k, v in latency.items()}},
        indent=1) + "\n")
    print("\n".join(report.partitions_markdown(table)))
    for g in goals:
        print(f"{g['goal']}: {g['value']} ({'met' if g['met'] else 'not met'})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
