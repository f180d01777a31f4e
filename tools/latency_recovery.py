"""Latency and recovery alone: `python -m tools.latency_recovery [--seconds S] [--trigger T]`.

The same two measurements as `logcount bench` (logcount/bench/runner.py Bench.latency and
.recovery: a producer at 20,000 lines/s, probe lines read back with read_committed; a SIGKILL
after the third batch and a restart at once), without the rest of the run: a quick before/after
tool for a change to the batch's fixed cost or to the start-up path. Check out each version in
turn, run this, and compare the JSON lines; `logcount bench` stays the full side-by-side run.
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
    ap.add_argument("--seconds", type=float, default=40.0, help="measured seconds of latency")
    ap.add_argument("--trigger", type=float, default=0.5, help="the stage's --trigger-interval")
    ap.add_argument("--out", default=None, help="directory for the stages' logs")
    args = ap.parse_args()
    stack.up(log=lambda line: None)
    out = args.out or tempfile.mkdtemp(prefix="logcount-latency-")
    b = Bench(BenchSettings(out=out, latency_seconds=args.seconds))
    filler = data.generate(200_000, 1)
    print(json.dumps({"latency": b.latency(args.trigger, filler),
                      "recovery": b.recovery(filler), "logs": out}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
