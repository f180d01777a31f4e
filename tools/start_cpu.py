"""The CPU of a stage start, by driver JVM options: `python -m tools.start_cpu [--lines N]
[--runs R] [--options "-XX:..."]...`.

Loads N synthetic lines into a fresh topic on the embedded stack, then runs `logcount run --once`
on it R times per options set (alternating, each with a fresh group), and sums the user + system
CPU of the stage's process tree (the Python driver and its JVM), sampled from /proc every 0.1 s
until it exits: the JVM is not reaped through Python, so wait4 would miss it. Machine-wide
figures would also count whatever else runs. Prints one JSON line per run, then the means.
The default compares the JVM as shipped ("") with a C1-only JIT, what tests/conftest.py gives
the stages the tests start (docs/testing.md).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
import uuid

from logcount.bench.data import generate, write_topic
from logcount.connectors import stack

TICK = os.sysconf("SC_CLK_TCK")


def tree_cpu(root: int) -> dict[int, float]:
    """user + system CPU seconds of `root` and every descendant alive now, by pid."""
    children: dict[int, list[int]] = {}
    stats: dict[int, list[str]] = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue  # gone meanwhile
            stats[int(name)] = fields
            children.setdefault(int(fields[1]), []).append(int(name))
    found, todo = {}, [root]
    while todo:
        pid = todo.pop()
        if pid in stats:
            found[pid] = (int(stats[pid][11]) + int(stats[pid][12])) / TICK
        todo += children.get(pid, [])
    return found


def one_start(topic: str, options: str, extra: list[str]) -> dict:
    tag = f"startcpu-{uuid.uuid4().hex[:8]}"
    env = {**os.environ, "LOGCOUNT_SPARK_JAVA_OPTIONS": options}
    argv = [sys.executable, "-m", "logcount.cli", "run", "--once", "--input-topic", topic,
            "--output-topic", f"{tag}-out", "--dlq-topic", f"{tag}-dlq", "--group-id", tag,
            "--transactional-id", tag, "--metrics-port", "0", *extra]
    t0 = time.monotonic()
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    last: dict[int, float] = {}
    names: dict[int, str] = {}
    while proc.poll() is None:
        for pid, cpu in tree_cpu(proc.pid).items():
            last[pid] = cpu  # a pid's figure only grows: its latest sample is kept
            names.setdefault(pid, _name(pid))
        time.sleep(0.1)
    by_name: dict[str, float] = {}
    for pid, cpu in last.items():
        by_name[names[pid]] = round(by_name.get(names[pid], 0.0) + cpu, 2)
    return {"options": options, "exit": proc.returncode, "cpu_s": round(sum(last.values()), 2),
            "wall_s": round(time.monotonic() - t0, 2), "by_process": by_name}


def _name(pid: int) -> str:
    """The process's program and, for a JVM, its main class (the launcher or Spark's submit)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            argv = f.read().split(b"\0")
    except OSError:
        return "?"
    prog = os.path.basename(argv[0].decode(errors="replace"))
    mains = [a.decode() for a in argv if a.startswith(b"org.apache.spark.")]
    return f"{prog} {mains[0]}" if mains else prog


def main() -> int:
    ap = argparse.ArgumentParser(prog="python -m tools.start_cpu")
    ap.add_argument("--lines", type=int, default=60_000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--options", action="append",
                    help="driver JVM options of one set (repeatable; default: '' and C1 only)")
    ap.add_argument("--stage-arg", action="append", default=[],
                    help="one more argument of `logcount run` (repeatable), such as "
                         "--stage-arg=--min-batch-interval --stage-arg=0")
    a = ap.parse_args()
    sets = a.options or ["", "-XX:TieredStopAtLevel=1"]
    if not stack.port_open(stack.KAFKA_PORT):  # a stack of another checkout will do
        stack.up(log=lambda line: None)
    topic = f"startcpu-{uuid.uuid4().hex[:8]}"
    write_topic(stack.BOOTSTRAP, topic, generate(a.lines, seed=1), partitions=4)
    runs = []
    for _ in range(a.runs):
        for options in sets:
            runs.append(one_start(topic, options, a.stage_arg))
            print(json.dumps(runs[-1]), flush=True)
    for options in sets:
        cpu = [r["cpu_s"] for r in runs if r["options"] == options]
        print(json.dumps({"options": options, "mean_cpu_s": round(statistics.mean(cpu), 2),
                          "runs": len(cpu)}))
    return 0 if all(r["exit"] == 0 for r in runs) else 1


if __name__ == "__main__":
    sys.exit(main())
