"""Generated against interpreted execution by batch size: `python -m tools.projections
[--sizes 1000,4000,...] [--rounds R]`.

A 4-partition topic is written once (400,000 generated lines); one Spark session, set up as the
stage's, runs `job.compute_batch` over 4 slices of N records again and again, 12 batches per
(size, mode), the modes taking turns and the first round left out: `generated` is Spark's default
(`spark.sql.codegen.factoryMode=FALLBACK`, whatever the stage's rule would choose),
`interpreted` sets it to NO_CODEGEN, `interpreted_no_wholestage` also turns whole-stage code
generation off. Medians of the CPU (driver Python thread + the Spark JVM) and wall time of a
batch, as JSON lines. Figures: docs/tuning.md#interpreted-projections
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
import uuid

from confluent_kafka.admin import OffsetSpec

from logcount.bench import data
from logcount.bench.procs import cpu_seconds
from logcount.connectors import kafka_io, stack
from logcount.formats.spec import LineFormat
from logcount.pipeline import job
from logcount.pipeline.cds import spark_java_options
from logcount.pipeline.offsets import OffsetRange
from logcount.pipeline.spark import spark_session

PARTITIONS = 4
LINES = 400_000
BATCHES = 12  # per (size, mode) and round; the first 2 of each are left out (the mode's switch)
MODES = {
    # Set on purpose, so the stage's own rule (job.projections) leaves each mode as it is.
    "generated": {job.CODEGEN_FACTORY_MODE: "FALLBACK"},
    "interpreted": {job.CODEGEN_FACTORY_MODE: "NO_CODEGEN"},
    "interpreted_no_wholestage": {job.CODEGEN_FACTORY_MODE: "NO_CODEGEN",
                                  "spark.sql.codegen.wholeStage": "false"},
}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--sizes", default="1000,2000,3000,4000,8000,20000,60000",
                    help="records a batch, comma-separated")
    ap.add_argument("--rounds", type=int, default=3, help="rounds measured (after one left out)")
    args = ap.parse_args()
    sizes = [int(x) for x in args.sizes.split(",")]
    stack.up(log=lambda line: None)
    topic = f"projections-{uuid.uuid4().hex[:6]}"
    adm = kafka_io.admin(stack.BOOTSTRAP)
    kafka_io.ensure_topic(adm, topic, PARTITIONS, None, 1)
    data.write_topic(stack.BOOTSTRAP, topic, data.generate(LINES, 1), PARTITIONS)
    ends = kafka_io.list_offsets(adm, topic, range(PARTITIONS), OffsetSpec.latest())
    spark = spark_session("local[2]", "logcount-projections", spark_java_options() or "")
    jvm = spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid()
    options = {"group.id": f"{topic}-spark"}
    at = dict.fromkeys(range(PARTITIONS), 0)

    def batch(size: int) -> tuple[float, float]:
        per = size // PARTITIONS
        ranges = []
        for p in range(PARTITIONS):
            if at[p] + per > ends[p]:
                at[p] = 0
            ranges.append(OffsetRange(p, at[p], at[p] + per))
            at[p] += per
        cpu0, py0, t0 = cpu_seconds(jvm), time.thread_time(), time.monotonic()
        job.compute_batch(spark, stack.BOOTSTRAP, topic, ranges, LineFormat(), options)
        return cpu_seconds(jvm) - cpu0 + time.thread_time() - py0, time.monotonic() - t0

    seen: dict[tuple[int, str], list[tuple[float, float]]] = {}
    for round_ in range(args.rounds + 1):
        for size in sizes:
            for mode, conf in MODES.items():
                for key, value in conf.items():
                    spark.conf.set(key, value)
                runs = [batch(size) for _ in range(BATCHES)]
                for key in conf:
                    spark.conf.unset(key)
                if round_:
                    seen.setdefault((size, mode), []).extend(runs[2:])
    for (size, mode), runs in sorted(seen.items()):
        print(json.dumps({"records": size, "mode": mode,
                          "cpu_ms": round(statistics.median(r[0] for r in runs) * 1000, 1),
                          "wall_ms": round(statistics.median(r[1] for r in runs) * 1000, 1)}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
