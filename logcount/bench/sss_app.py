"""spark_structured_streaming: the same count as Spark users write it today.

readStream kafka -> parse -> groupBy(1-minute window).count() -> writeStream kafka (update
mode, a checkpoint directory; Spark's Kafka sink is at-least-once). The backlog is processed
with Trigger.AvailableNow in micro-batches of at most --max-records, logcount's batch size.
Same Spark session settings as the stage (pipeline.spark.spark_session). Prints `progress R`
after each micro-batch, then one JSON line: records, seconds (query started -> query finished),
session_seconds. With --trigger-seconds S it runs as a service instead (the bench's latency
runs): a processing-time trigger of S seconds, until it is stopped, `progress R` lines only.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time

from pyspark.sql import functions as F

from logcount.connectors import kafka_io
from logcount.pipeline.job import FETCH_MAX_WAIT_MS
from logcount.pipeline.spark import spark_session


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--bootstrap-servers", required=True)
    ap.add_argument("--topic", required=True)
    ap.add_argument("--output-topic", required=True)
    ap.add_argument("--master", default="local[*]")
    ap.add_argument("--max-records", type=int, default=2_000_000)
    ap.add_argument("--trigger-seconds", type=float, default=None,
                    help="a processing-time trigger, run until stopped (default: AvailableNow)")
    a = ap.parse_args()
    t0 = time.monotonic()
    kafka_io.ensure_topic(kafka_io.admin(a.bootstrap_servers), a.output_topic, 4,
                          {"cleanup.policy": "compact"})
    # Under a trigger it runs at the stage's default cadence: the paced stage's driver JVM too.
    spark = spark_session(a.master, "sss-bench", paced=a.trigger_seconds is not None)
    t1 = time.monotonic()
    lines = (spark.readStream.format("kafka")
             .option("kafka.bootstrap.servers", a.bootstrap_servers)
             .option("subscribe", a.topic).option("startingOffsets", "earliest")
             .option("kafka.isolation.level", "read_committed")
             # The same executor fetch wait as the stage's (pipeline/job.py): the contender
             # would otherwise pay 500 ms per partition on the batch that reaches the log's end.
             .option("kafka.fetch.max.wait.ms", FETCH_MAX_WAIT_MS)
             .option("maxOffsetsPerTrigger", a.max_records).load()
             .select(F.col("value").cast("string").alias("line")))
    m = F.regexp_extract("line", r"^(\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}) ([A-Za-z]+)(?: |$)", 0)
    parsed = lines.select(
        F.try_to_timestamp(F.substring("line", 1, 19), F.lit("yyyy-MM-dd HH:mm:ss")).alias("ts"),
        F.regexp_extract("line", r"^\S+ \S+ ([A-Za-z]+)(?: |\r?$)", 1).alias("level"),
        (m != "").alias("ok"))
    counts = (parsed.filter(F.col("ok") & F.col("ts").isNotNull() & (F.col("level") == "ERROR"))
              .groupBy(F.window("ts", "1 minute")).count()
              .select(F.date_format("window.start", "yyyy-MM-dd HH:mm:ss").alias("key"),
                      F.to_json(F.struct(F.date_format("window.start", "yyyy-MM-dd HH:mm:ss")
                                         .alias("log_time"),
                                         F.col("count").alias("log_count"))).alias("value")))
    trigger = ({"availableNow": True} if a.trigger_seconds is None
               else {"processingTime": f"{a.trigger_seconds:g} seconds"})
    with tempfile.TemporaryDirectory() as ckpt:
        q = (counts.writeStream.format("kafka").outputMode("update")
             .option("kafka.bootstrap.servers", a.bootstrap_servers)
             .option("topic", a.output_topic).option("checkpointLocation", ckpt)
             .trigger(**trigger).start())
        # A `progress R` line per finished micro-batch (its output written): the checkpoints of
        # logcount/bench/phases.py. Polled every 50 ms, so a checkpoint is late by at most that
        # much.
        seen: set[int] = set()
        records = 0

        def report() -> None:
            nonlocal records
            last = q.lastProgress  # one object: cheap to poll; the whole history when it moved
            if last is None or last.batchId in seen:
                return
            for p in q.recentProgress:
                if p.batchId not in seen:
                    seen.add(p.batchId)
                    records += p.numInputRows
                    if p.numInputRows:
                        print(f"progress {records}", flush=True)

        while not q.awaitTermination(0.05):
            report()
        t2 = time.monotonic()
        report()
    print(json.dumps({"records": records, "seconds": t2 - t1, "session_seconds": t1 - t0}),
          flush=True)
    spark.stop()


if __name__ == "__main__":
    main()
