"""Where a warm batch's time goes: `python -m logcount.bench.cycle [--cycles N] [--conf KEY=VALUE
...]`.

A producer writes 20,000 lines/s (logcount/bench/latency.py RateProducer) into a fresh 4-partition
topic;
one Spark session, set up as the stage's, runs the stage's batch back to back on what has
arrived, and times each phase of the cycle: planning the ranges (the driver's ListOffsets), the
read (`spark.read...load()`), the plan's columns and frames, optimising, physical planning, and
the collect (code generation, the offset reader, the job, the rows to Python); a 15 ms sleep
stands for the transaction. The first 30 cycles (JIT warm-up) are left out of the report.
Medians and p90 in ms, and the CPU per warm cycle (the JVM's, Python's), as one JSON line.
`--conf` sets session SQL settings to try one; `--jfr` writes a Java Flight Recording
(`cycle.jfr` in the working directory) for a profile.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
import uuid

from confluent_kafka.admin import OffsetSpec

from logcount.bench import data
from logcount.bench.latency import RateProducer
from logcount.connectors import kafka_io, stack
from logcount.formats.spec import LineFormat
from logcount.pipeline import job
from logcount.pipeline.cds import spark_java_options
from logcount.pipeline.offsets import plan_ranges
from logcount.pipeline.spark import spark_session

WARM_CYCLES = 30
TRANSACTION_S = 0.015  # the stage's commit, measured at 13-16 ms on this machine


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--cycles", type=int, default=150)
    ap.add_argument("--conf", action="append", default=[], help="a SQL setting, KEY=VALUE")
    ap.add_argument("--jfr", action="store_true", help="record cycle.jfr (profile settings)")
    ap.add_argument("--partitions", type=int, default=4, help="the topic's partitions")
    ap.add_argument("--tasks", type=int, default=None,
                    help="tasks per batch (default: the stage's rule, job.batch_shape)")
    args = ap.parse_args()
    stack.up(log=lambda line: None)
    topic = f"cycle-{uuid.uuid4().hex[:6]}"
    adm = kafka_io.admin(stack.BOOTSTRAP)
    kafka_io.ensure_topic(adm, topic, args.partitions, None, 1)
    java = spark_java_options() or ""
    if args.jfr:
        java += " -XX:StartFlightRecording=filename=cycle.jfr,settings=profile"
    spark = spark_session("local[2]", "logcount-cycle", java)
    for item in args.conf:
        key, _, value = item.partition("=")
        spark.conf.set(key, value)
    producer = RateProducer(stack.BOOTSTRAP, topic, data.generate(200_000, 1), 20_000, 3600,
                           args.partitions)
    producer.start()
    options = {"group.id": f"{topic}-spark"}
    starts = dict.fromkeys(range(args.partitions), 0)
    time.sleep(1)
    rows = []
    jvm = spark._jvm.java.lang.ProcessHandle.current().pid()
    cpu_at_warm = (0.0, 0.0)
    for i in range(args.cycles):
        if i == WARM_CYCLES:
            cpu_at_warm = (time.process_time(), _cpu_s(jvm))
        t = [time.monotonic()]
        parts = kafka_io.partitions_of(adm, topic) or []
        kafka_io.list_offsets(adm, topic, parts, OffsetSpec.earliest())
        stable = kafka_io.list_offsets(adm, topic, parts, OffsetSpec.latest())
        ranges = plan_ranges(starts, stable, 2_000_000 if i else 2_000)
        t.append(time.monotonic())
        df = job.read_ranges(spark, stack.BOOTSTRAP, topic, ranges, options)
        shape = job.batch_shape(ranges, spark.sparkContext.defaultParallelism)
        tasks = shape.tasks if args.tasks is None else args.tasks
        if tasks is not None:
            df = df.coalesce(tasks)
        t.append(time.monotonic())
        frame = job.batch_frame(df, LineFormat(), None, None)
        t.append(time.monotonic())
        qe = frame._jdf.queryExecution()
        qe.optimizedPlan()
        t.append(time.monotonic())
        qe.executedPlan()
        t.append(time.monotonic())
        # The stage's choice of projections (a --conf of the factory mode wins, as in the stage).
        with job.projections(spark, interpreted=shape.interpreted):
            frame.collect()
        t.append(time.monotonic())
        time.sleep(TRANSACTION_S)
        starts.update({r.partition: r.end for r in ranges})
        names = ("ranges", "read", "frame", "optimise", "physical", "collect")
        phases = {n: b - a for n, a, b in zip(names, t[:-1], t[1:], strict=True)}
        phases["cycle"] = t[-1] - t[0] + TRANSACTION_S
        phases["records"] = sum(r.size for r in ranges)
        rows.append(phases)
    cpu = ((time.process_time() - cpu_at_warm[0]), _cpu_s(jvm) - cpu_at_warm[1])
    producer.stop.set()
    warm = rows[WARM_CYCLES:]
    report = {}
    for key in rows[0]:
        values = sorted(r[key] for r in warm)
        scale = 1 if key == "records" else 1000
        report[key] = [round(statistics.median(values) * scale, 1),
                       round(values[int(len(values) * 0.9)] * scale, 1)]
    # CPU per warm cycle: the JVM's, and Python's (the rate producer's thread included).
    cpu_ms = {"jvm": round(cpu[1] * 1000 / len(warm), 1),
              "python": round(cpu[0] * 1000 / len(warm), 1)}
    print(json.dumps({"cycles": len(warm), "conf": args.conf, "median_p90": report,
                      "cpu_ms_per_cycle": cpu_ms}))
    return 0


def _cpu_s(pid: int) -> float:
    """utime + stime of a process, in seconds (/proc/PID/stat)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


if __name__ == "__main__":
    raise SystemExit(main())
