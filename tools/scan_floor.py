"""Spark's Kafka scan alone against the whole batch: `python -m tools.scan_floor [--lines N]`.

The floor under the steady-state goal: on one loaded 4-partition topic, in one warm `local[2]`
session, the same ranges are read with nothing done to the rows (`count()`) and as the stage's
whole batch (`compute_batch`), through DataSource V2 (the stage's setting) and V1 (Spark's
default), in ROUNDS interleaved rounds after one left out. Kafka's ConsumerPerformance reads the
same topic afterwards (its nMsg.sec, start-up included: a lower anchor than `logcount bench`'s
steady figure). Prints one JSON line.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

from confluent_kafka.admin import OffsetSpec

from logcount.bench import data
from logcount.connectors import kafka_io, stack
from logcount.formats.spec import LineFormat
from logcount.pipeline import job
from logcount.pipeline.offsets import OffsetRange
from logcount.pipeline.spark import V1_SOURCES_DEFAULT, V1_SOURCES_KEY, spark_session
from tools.steady_state import raw_jvm

ROUNDS = 4


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--lines", type=int, default=2_000_000)
    args = ap.parse_args()
    stack.up(log=lambda line: None)
    topic = f"floor-{args.lines}"
    adm = kafka_io.admin(stack.BOOTSTRAP)
    if kafka_io.partitions_of(adm, topic) is None:
        kafka_io.ensure_topic(adm, topic, 4, None, 1)
        data.write_topic(stack.BOOTSTRAP, topic, data.generate(args.lines, 1), 4)
    ends = kafka_io.list_offsets(adm, topic, range(4), OffsetSpec.latest())
    ranges = [OffsetRange(p, 0, end) for p, end in sorted(ends.items())]
    n = sum(r.size for r in ranges)
    spark = spark_session("local[2]", "logcount-scan-floor")
    options = {"group.id": f"{topic}-spark"}

    def scan() -> None:
        assert job.read_ranges(spark, stack.BOOTSTRAP, topic, ranges, options).count() == n

    def batch() -> None:
        job.compute_batch(spark, stack.BOOTSTRAP, topic, ranges, LineFormat(), options)

    v2 = spark.conf.get(V1_SOURCES_KEY)
    seconds: dict[str, list[float]] = {}
    # Interleaved, so that the JIT's warming favours neither; the first round is left out.
    for round_ in range(ROUNDS + 1):
        for source, v1_list in (("v2", v2), ("v1", V1_SOURCES_DEFAULT)):
            spark.conf.set(V1_SOURCES_KEY, v1_list)
            for name, step in (("scan", scan), ("batch", batch)):
                t0 = time.monotonic()
                step()
                if round_:
                    seconds.setdefault(f"{source}_{name}", []).append(
                        round(time.monotonic() - t0, 2))
    report = {k: {"seconds": v, "median_lines_per_s": round(n / statistics.median(v)),
                  "best_lines_per_s": round(n / min(v))} for k, v in seconds.items()}
    print(json.dumps({"records": n, "consumer_performance_lines_per_s": round(raw_jvm(topic, n)),
                      **report}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
