"""Where a caught-up contender's CPU goes, by thread: `python -m tools.thread_cpu
[--rate N] [--warm S] [--window S] [--contender stage|kafka-streams] [-- STAGE FLAGS...]`.

The stage (at its defaults unless flags follow `--`) or the Kafka Streams peer on a fresh
4-partition topic of the embedded stack, `logcount bench`'s latency producer at `--rate` lines/s;
after `--warm` seconds, the CPU of each of its threads (the process tree's, from
/proc/PID/task) over `--window` seconds, summed by thread name with its numbers dropped (JVM pools
such as "C2 CompilerThread0"), in ms per second. One JSON line: the total in cores and CPU-s per
million lines, and the threads, busiest first. A long `--warm` shows the cost once the JIT has
done its work (docs/tuning.md#where-a-paced-stages-cpu-goes).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import time
from collections.abc import Mapping

from logcount.bench.data import synthetic_lines
from logcount.bench.latency import RateProducer
from logcount.bench.procs import cpu_seconds, descendants, parse_stat, processes, read_proc
from logcount.bench.runner import Bench
from logcount.connectors import kafka_io, stack
from logcount.core.settings import BenchSettings

# The first seconds of a child are its start (the JVM, the session, the first batch): the
# producer begins only after it, so the warm-up is the caught-up stage's own.
START_S = 20.0


def family(thread_name: str) -> str:
    """A thread's name without its pool number: 'C2 CompilerThre0' -> 'C2 CompilerThre'."""
    return re.sub(r"[\d#\-_ ]+$", "", thread_name) or thread_name


def per_family(before: Mapping[tuple[str, str, int], float],
               after: Mapping[tuple[str, str, int], float]) -> dict[tuple[str, str], float]:
    """PURE: CPU seconds between two samples {(process comm, thread name, tid): seconds}, summed
    by (process comm, thread family); a thread born between them counts from zero."""
    out: dict[tuple[str, str], float] = {}
    for (comm, name, tid), seconds in after.items():
        key = (comm, family(name))
        out[key] = out.get(key, 0.0) + seconds - before.get((comm, name, tid), 0.0)
    return out


def thread_seconds(root: int) -> dict[tuple[str, str, int], float]:
    """Every thread of `root`'s process tree: (process comm, thread name, tid) -> CPU seconds."""
    parents = {pid: ppid for pid, (_, ppid) in processes().items()}
    out = {}
    for pid in [root, *descendants(root, parents)]:
        comm = read_proc(f"/proc/{pid}/comm")
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for tid in tids:
            stat = read_proc(f"/proc/{pid}/task/{tid}/stat")
            if comm is None or stat is None:  # gone meanwhile
                continue
            name, _ = parse_stat(stat)
            out[(comm.strip(), name, int(tid))] = cpu_seconds(f"{pid}/task/{tid}")
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--rate", type=int, default=2_000, help="lines/s")
    ap.add_argument("--warm", type=float, default=420.0, help="seconds before the window")
    ap.add_argument("--window", type=float, default=60.0, help="seconds measured")
    ap.add_argument("--contender", choices=("stage", "kafka-streams"), default="stage")
    ap.add_argument("--out", default="bench-thread-cpu")
    ap.add_argument("stage_args", nargs="*", help="extra `logcount run` flags (after --)")
    args = ap.parse_args()
    stack.up()
    b = Bench(BenchSettings(out=args.out))
    tag = f"thr-{args.contender}"
    topic = b.name(f"{tag}-in")
    kafka_io.ensure_topic(kafka_io.admin(b.bootstrap), topic, 4)
    argv = (b.streams_argv(topic, tag) if args.contender == "kafka-streams"
            else b.stage_argv(topic, tag, *args.stage_args))
    child = b.child(tag, argv)
    producer = RateProducer(b.bootstrap, topic, list(synthetic_lines(200_000, 1)), args.rate,
                            START_S + args.warm + args.window + 5, 4)
    try:
        time.sleep(START_S)
        producer.start()
        time.sleep(args.warm)
        before = thread_seconds(child.proc.pid)
        time.sleep(args.window)
        spent = per_family(before, thread_seconds(child.proc.pid))
    finally:
        producer.stop.set()
        child.signal(signal.SIGTERM)
        child.wait(120)
        b.drop_topics()
    total = sum(spent.values())
    print(json.dumps({
        "contender": args.contender, "rate": args.rate, "warm_s": args.warm,
        "window_s": args.window, "flags": args.stage_args,
        "cores": round(total / args.window, 3),
        "cpu_s_per_m_lines": round(total / (args.rate * args.window) * 1e6, 1),
        "ms_per_s": {f"{comm}:{name}": round(s / args.window * 1000, 1)
                     for (comm, name), s in sorted(spent.items(), key=lambda kv: -kv[1])
                     if s > 0}}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
