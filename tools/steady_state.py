"""Steady state and cold start of the stage, apart: `python -m tools.steady_state --lines N`.

Loads N synthetic lines into a fresh 4-partition topic on the embedded stack (once per run), then
runs `logcount run --once` on it `--runs` times, each with a fresh group, and reads the stage's
own lines as they arrive: the first commit's delay from process start (cold start), each batch's
Spark seconds, and the steady-state rate = the records of batches 2.. / the time from the first
commit to the last (the cold first batch drops out; logcount/bench/phases.py, as `logcount bench`).
Kafka's
ConsumerPerformance reads the same topic in the same run as the raw-JVM anchor. `--shape` loads
another log shape (logcount/formats/shapes.py) and runs the stage with its flags. A quick
before/after
tool for one change; `logcount bench` is the full side-by-side run.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import time
import uuid

from logcount.bench import phases
from logcount.bench.data import generate, write_topic
from logcount.bench.runner import consumer_performance_argv
from logcount.connectors import stack
from logcount.core.batch_line import parse_batch_line
from logcount.formats.catalogue import RUN_FLAGS, SHAPES
from logcount.formats.shapes import synthetic_records


def run_stage(topic: str, tag: str, extra: list[str]) -> dict:
    argv = [sys.executable, "-m", "logcount.cli", "run", "--once", "--verbose",
            "--input-topic", topic, "--output-topic", f"{tag}-out", "--dlq-topic", f"{tag}-dlq",
            "--group-id", tag, "--metrics-port", "0", *extra]
    t0 = time.monotonic()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert proc.stdout is not None  # stdout=PIPE
    lines = [(time.monotonic() - t0, line) for line in proc.stdout]
    rc = proc.wait()
    checkpoints = phases.stage_checkpoints(lines)
    if rc != 0 or not checkpoints:
        raise SystemExit(f"stage exited {rc} with {len(checkpoints)} batches")
    split = phases.split(checkpoints)
    return {"first_commit_s": split["cold_start_s"], "batches": len(checkpoints),
            "first_batch_records": checkpoints[0][1],
            "steady_lines_per_s": split["steady_lines_per_s"] or 0,
            "total_s": round(checkpoints[-1][0], 2),
            "spark_s": [b.spark_s for _, s in lines if (b := parse_batch_line(s))]}


def raw_jvm(topic: str, n: int) -> float:
    out = subprocess.run(
        consumer_performance_argv(stack.BOOTSTRAP, topic, n, f"raw-{uuid.uuid4().hex[:6]}"),
        capture_output=True, text=True, check=True).stdout
    row = [r for r in out.splitlines() if re.match(r"\d{4}-\d\d-\d\d ", r)][-1]
    return float(row.split(",")[5])  # nMsg.sec, its own clock


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--lines", type=int, default=5_000_000)
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--topic", help="reuse a loaded topic instead of writing a new one")
    ap.add_argument("--shape", default="seed", choices=SHAPES,
                    help="the log shape to load (logcount/formats/shapes.py); the stage runs "
                         "with its ready-made flags (RUN_FLAGS)")
    ap.add_argument("stage_args", nargs="*", help="extra `logcount run` flags (after --)")
    args = ap.parse_args()
    stack.up(log=lambda line: None)
    topic = args.topic or f"steady-{uuid.uuid4().hex[:6]}"
    if not args.topic:
        lines = (generate(args.lines, 1) if args.shape == "seed" else
                 [r.value for r in synthetic_records(args.shape, args.lines, 1)])
        write_topic(stack.BOOTSTRAP, topic, lines, partitions=4)
    flags = [*RUN_FLAGS[args.shape], *args.stage_args]
    runs = [run_stage(topic, f"steady-{uuid.uuid4().hex[:6]}", flags) for _ in range(args.runs)]
    jvm = raw_jvm(topic, args.lines)
    for r in runs:
        r["ratio_to_raw_jvm"] = round(r["steady_lines_per_s"] / jvm, 3)
    print(json.dumps({"topic": topic, "shape": args.shape, "lines": args.lines,
                      "raw_jvm_lines_per_s": round(jvm),
                      "runs": runs}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
