"""Where a warm batch's time goes: `python -m tools.cycle [--cycles N] [--conf KEY=VALUE ...]`.

A producer writes 20,000 lines/s (logcount/bench/latency.py RateProducer) into a fresh 4-partition
topic; one Spark session, set up as the stage's, runs the stage's batch back to back on what has
arrived, and times each phase of the cycle: planning the ranges (the driver's ListOffsets), the
batch's frame (`job.batch_plan`: built, or its kept plan reused; `--fresh-plans` builds each
anew), optimising, physical planning, and the collect (code generation, the offset reader, the
job, the rows to Python); a 15 ms sleep stands for the transaction. The first 30 cycles (JIT
warm-up) are left out of the report.
Medians and p90 in ms, as one JSON line. `--conf` sets session SQL settings to try one;
`--jfr FILE` writes a Java Flight Recording of the warm cycles (JFR's "profile" settings),
`--cprofile FILE` the Python side's profile of the warm cycles (pstats); `--group-by key` runs the
grouped batch over the live-series bench's 10,000 record keys (its rows to counts: "result";
"cells", the (series, minute) cells a batch). `cpu_ms` is the CPU of
one warm cycle, averaged: the driver's Python thread (its py4j calls; the producer's thread is not
in it) and the whole Spark JVM (driver and, in local mode, the executors' tasks).
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import statistics
import time
import uuid

from confluent_kafka.admin import OffsetSpec

from logcount.bench import data
from logcount.bench.grouping import LIVE_SERIES
from logcount.bench.latency import RateProducer
from logcount.bench.procs import cpu_seconds
from logcount.connectors import kafka_io, stack
from logcount.formats.spec import LineFormat
from logcount.pipeline import job, plan_reuse
from logcount.pipeline.cds import spark_java_options
from logcount.pipeline.offsets import plan_ranges
from logcount.pipeline.spark import spark_session

WARM_CYCLES = 30
TRANSACTION_S = 0.015  # the stage's commit, measured at 13-16 ms on this machine


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--cycles", type=int, default=150)
    ap.add_argument("--conf", action="append", default=[], help="a SQL setting, KEY=VALUE")
    ap.add_argument("--jfr", default=None, help="record the warm cycles' JFR here")
    ap.add_argument("--cprofile", default=None, help="write the warm cycles' cProfile here")
    ap.add_argument("--partitions", type=int, default=4, help="the topic's partitions")
    ap.add_argument("--tasks", type=int, default=None,
                    help="tasks per batch (default: the stage's rule, job.batch_shape)")
    ap.add_argument("--group-by", default=None,
                    help="the stage's --group-by; with `key` the lines carry the live-series "
                         "bench's 10,000 keys in turn (logcount/bench/grouping.py)")
    ap.add_argument("--fresh-plans", action="store_true",
                    help="build every batch's plan anew (the stage reuses one per shape: "
                         "pipeline/plan_reuse.py)")
    args = ap.parse_args()
    plan_reuse.enabled = not args.fresh_plans
    fmt = LineFormat.from_flags(group_by=args.group_by)
    keys = ([b"svc-%05d" % i for i in range(LIVE_SERIES)]
            if any(d.kind == "key" for d in fmt.group_by) else None)
    stack.up(log=lambda line: None)
    topic = f"cycle-{uuid.uuid4().hex[:6]}"
    adm = kafka_io.admin(stack.BOOTSTRAP)
    kafka_io.ensure_topic(adm, topic, args.partitions, None, 1)
    java = spark_java_options() or ""
    spark = spark_session("local[2]", "logcount-cycle", java)
    for item in args.conf:
        key, _, value = item.partition("=")
        spark.conf.set(key, value)
    producer = RateProducer(stack.BOOTSTRAP, topic, data.generate(200_000, 1), 20_000, 3600,
                           args.partitions, keys=keys)
    producer.start()
    options = {"group.id": f"{topic}-spark"}
    starts = dict.fromkeys(range(args.partitions), 0)
    time.sleep(1)
    rows = []
    # Asked of the JVM itself: the first java child may be the broker stack.up just started.
    jvm = spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid()
    profile = cProfile.Profile() if args.cprofile else None
    for i in range(args.cycles):
        if i == WARM_CYCLES and profile is not None:
            profile.enable()
        if i == WARM_CYCLES and args.jfr:
            jfr = spark.sparkContext._jvm.jdk.jfr
            recording = jfr.Recording(jfr.Configuration.getConfiguration("profile"))
            recording.start()
        py0, jvm0 = time.thread_time(), cpu_seconds(jvm)
        t = [time.monotonic()]
        parts = kafka_io.partitions_of(adm, topic) or []
        kafka_io.list_offsets(adm, topic, parts, OffsetSpec.earliest())
        stable = kafka_io.list_offsets(adm, topic, parts, OffsetSpec.latest())
        ranges = plan_ranges(starts, stable, 2_000_000 if i else 2_000)
        t.append(time.monotonic())
        shape = job.batch_shape(ranges, spark.sparkContext.defaultParallelism)
        tasks = shape.tasks if args.tasks is None else args.tasks
        frame = job.batch_plan(spark, stack.BOOTSTRAP, topic, ranges, fmt, options, None, None,
                               tasks)
        t.append(time.monotonic())
        qe = frame._jdf.queryExecution()
        qe.optimizedPlan()
        t.append(time.monotonic())
        qe.executedPlan()
        t.append(time.monotonic())
        # The stage's choice of projections (a --conf of the factory mode wins, as in the stage).
        with job.projections(spark, interpreted=shape.interpreted):
            collected = frame.collect()
        t.append(time.monotonic())
        result = job.batch_result(collected, ranges, len(fmt.group_by))
        t.append(time.monotonic())
        py1 = time.thread_time()
        time.sleep(TRANSACTION_S)
        starts.update({r.partition: r.end for r in ranges})
        names = ("ranges", "frame", "optimise", "physical", "collect", "result")
        phases = {n: b - a for n, a, b in zip(names, t[:-1], t[1:], strict=True)}
        phases["cycle"] = t[-1] - t[0] + TRANSACTION_S
        phases["records"] = sum(r.size for r in ranges)
        phases["cells"] = sum(len(c) for c in result.series.values()) or len(result.counts)
        phases["cpu_py"], phases["cpu_jvm"] = py1 - py0, cpu_seconds(jvm) - jvm0
        rows.append(phases)
    if profile is not None:
        profile.disable()
        profile.dump_stats(args.cprofile)
    if args.jfr:
        recording.stop()
        recording.dump(spark.sparkContext._jvm.java.io.File(args.jfr).toPath())
    producer.stop.set()
    warm = rows[WARM_CYCLES:]
    cpu = {k: round(sum(r[k] for r in warm) / len(warm) * 1000, 1) for k in ("cpu_py", "cpu_jvm")}
    cpu["total"] = round(cpu["cpu_py"] + cpu["cpu_jvm"], 1)
    report = {}
    for key in (k for k in rows[0] if not k.startswith("cpu_")):
        values = sorted(r[key] for r in warm)
        scale = 1 if key in ("records", "cells") else 1000
        report[key] = [round(statistics.median(values) * scale, 1),
                       round(values[int(len(values) * 0.9)] * scale, 1)]
    print(json.dumps({"cycles": len(warm), "conf": args.conf, "cpu_ms": cpu,
                      "median_p90": report, "jvm_threads_cpu_s": _busiest_threads(jvm)}))
    return 0


def _busiest_threads(pid: int | None, top: int = 8) -> dict[str, float]:
    """The JVM's threads that used the most CPU over the whole run, by name (a profile's first
    look: tasks, the planner, a client's network thread)."""
    cpu: dict[str, float] = {}
    for tid in os.listdir(f"/proc/{pid}/task") if pid else []:
        try:
            with open(f"/proc/{pid}/task/{tid}/comm") as f:
                name = f.read().strip()
        except OSError:
            continue
        cpu[name] = cpu.get(name, 0.0) + cpu_seconds(f"{pid}/task/{tid}")
    return dict(sorted(((k, round(v, 2)) for k, v in cpu.items()), key=lambda kv: -kv[1])[:top])


if __name__ == "__main__":
    raise SystemExit(main())
