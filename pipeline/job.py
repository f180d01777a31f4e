"""The Spark side of a batch: executors read the planned Kafka ranges, parse, count per minute.

Only per-minute counts and a bounded number of malformed-line references come back to the driver;
the raw lines never leave the executors. Parsing is Spark SQL (no Python UDF), the same rule as
pipeline/lines.py, so the JVM does the per-line work.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from connectors.offsets import OffsetRange
from logcount.errors import ConfigError, DependencyError
from logcount.paths import jars_dir
from pipeline.lines import REASON_EMPTY, REASON_FORMAT, REASON_TIMESTAMP

# How many malformed-line references one batch may bring to the driver (--max-malformed-per-batch).
# A batch that holds more is cut short in the partition where the limit is reached (the rest
# comes in the next batch), so a flood of garbage cannot exhaust the driver's memory nor make the
# transaction huge. 50,000 refs of <= 256 bytes are ~25 MB at worst and produce in about a second,
# far inside the transaction timeout; 1% garbage in a 2M-record batch (20,000) stays under it,
# so ordinary batches never pay for the cut (two extra Spark actions).
MAX_MALFORMED_PER_BATCH = 50_000
# The first bytes of a malformed value kept in its DLQ record.
RAW_PREFIX_BYTES = 256

# Java regex: \d is ASCII-only without UNICODE_CHARACTER_CLASS; \z is the very end (Java's $
# would also match before a final line terminator).
_PREFIX_RE = r"^(\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}) ([A-Za-z]+)(?: |\z)"


@dataclass(frozen=True)
class MalformedRef:
    partition: int
    offset: int
    reason: str
    raw_prefix: bytes
    raw_length: int


@dataclass
class BatchResult:
    counts: dict[str, int] = field(default_factory=dict)
    malformed: list[MalformedRef] = field(default_factory=list)
    ranges: list[OffsetRange] = field(default_factory=list)  # possibly cut short (see above)
    records: int = 0  # records read in the (final) ranges: counted, other levels, malformed


def connector_jars() -> list[str]:
    d = jars_dir() / "spark-kafka"
    jars = sorted(str(p) for p in Path(d).glob("*.jar"))
    if not jars:
        raise ConfigError(f"Spark Kafka connector jars missing in {d}: run scripts/setup.sh")
    return jars


def spark_session(master: str, app_name: str = "logcount"):
    """One session per stage process (it takes seconds to start; batches reuse it)."""
    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", os.sys.executable)
    builder = (
        SparkSession.builder.master(master).appName(app_name)
        .config("spark.jars", ",".join(connector_jars()))
        # Minutes are text cut from the line, never converted between zones; UTC keeps
        # try_to_timestamp's validity check free of daylight-saving gaps.
        .config("spark.sql.session.timeZone", "UTC")
        # The aggregations are tiny (minutes x partitions): a few shuffle partitions suffice.
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.ui.enabled", "false")
        .config("spark.driver.memory", os.environ.get("LOGCOUNT_SPARK_DRIVER_MEMORY", "2g"))
        .config("spark.ui.showConsoleProgress", "false")
    )
    if master.startswith("spark://"):
        host = os.environ.get("LOGCOUNT_SPARK_DRIVER_HOST", "127.0.0.1")
        builder = builder.config("spark.driver.host", host)
        if host != "127.0.0.1":  # in a container: listen on all interfaces, advertise `host`
            builder = builder.config("spark.driver.bindAddress", "0.0.0.0")
    try:
        spark = builder.getOrCreate()
    except Exception as exc:  # py4j / JVM start failures
        raise DependencyError(f"Spark session on {master} could not start: {exc}") from exc
    spark.sparkContext.setLogLevel("WARN")
    # The executors' Kafka clients log every refused reconnect while a broker restarts; the
    # driver logs the failed batch once, which is what an operator needs.
    jvm = spark.sparkContext._jvm
    jvm.org.apache.logging.log4j.core.config.Configurator.setLevel(
        "org.apache.kafka", jvm.org.apache.logging.log4j.Level.ERROR)
    return spark


def parsed_frame(df, level: str):
    """Kafka rows -> (partition, offset, key, reason, raw_prefix, raw_length).

    key is the minute for a counted line, '#' for a malformed one, '' for a valid line of
    another level. Malformed lines carry their reason and first bytes; others carry nulls.
    """
    from pyspark.sql import functions as F

    v = F.col("value")
    n = F.coalesce(F.length(v), F.lit(0))
    # One trailing \r is ignored (contract).
    line = F.when(F.substring(v, -1, 1) == F.lit(b"\r"),
                  F.expr("substring(value, 1, length(value) - 1)")).otherwise(v)
    text = F.coalesce(line.cast("string"), F.lit(""))
    ts = F.regexp_extract(text, _PREFIX_RE, 1)
    lvl = F.regexp_extract(text, _PREFIX_RE, 2)
    # try_to_timestamp (not to_timestamp): Spark 4 runs ANSI mode, where one 2017-02-30 would
    # fail the whole job. Year 0000 parses in Spark's proleptic calendar but not in the contract.
    valid_ts = F.try_to_timestamp(ts, F.lit("yyyy-MM-dd HH:mm:ss")).isNotNull() & (
        F.substring(ts, 1, 4) != F.lit("0000"))
    reason = (
        F.when(F.length(text) == 0, F.lit(REASON_EMPTY))
        .when(ts == F.lit(""), F.lit(REASON_FORMAT))
        .when(~valid_ts, F.lit(REASON_TIMESTAMP))
    )
    minute = F.concat(F.substring(ts, 1, 17), F.lit("00"))
    key = F.when(reason.isNotNull(), F.lit("#")).when(lvl == F.lit(level), minute).otherwise("")
    return df.select(
        F.col("partition").cast("int").alias("partition"),
        F.col("offset"),
        key.alias("key"),
        reason.alias("reason"),
        F.when(reason.isNotNull(), F.substring(v, 1, RAW_PREFIX_BYTES)).alias("raw_prefix"),
        F.when(reason.isNotNull(), n).alias("raw_length"),
    )


def read_ranges(spark, bootstrap: str, topic: str, ranges: Sequence[OffsetRange],
                kafka_options: Mapping[str, str]):
    starting = {topic: {str(r.partition): r.start for r in ranges}}
    ending = {topic: {str(r.partition): r.end for r in ranges}}
    reader = (
        spark.read.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("assign", json.dumps({topic: [r.partition for r in ranges]}))
        .option("startingOffsets", json.dumps(starting))
        .option("endingOffsets", json.dumps(ending))
        # Only committed input counts; aborted records and markers leave gaps that the source
        # tolerates under read_committed (SPARK-25005).
        .option("kafka.isolation.level", "read_committed")
        # Offsets we planned must exist: data loss (a range deleted under us) fails the batch,
        # which is then re-planned from the log start, rather than being skipped silently.
        .option("failOnDataLoss", "true")
        # A poll that brings nothing for 30 s (broker down) fails the task soon, and the driver
        # re-plans the batch, instead of waiting Spark's default 120 s network timeout.
        .option("kafkaConsumer.pollTimeoutMs", "30000")
    )
    for k, val in kafka_options.items():
        reader = reader.option(f"kafka.{k}", val)
    return reader.load()


def compute_batch(spark, bootstrap: str, topic: str, ranges: Sequence[OffsetRange], level: str,
                  kafka_options: Mapping[str, str] | None = None,
                  max_malformed: int = MAX_MALFORMED_PER_BATCH) -> BatchResult:
    """Run the batch's Spark job(s); return counts, malformed references and the final ranges."""
    from pyspark import StorageLevel
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    if not ranges:
        return BatchResult()
    parsed = parsed_frame(read_ranges(spark, bootstrap, topic, ranges, kafka_options or {}), level)
    # Cached: the counts and (when there are any) the malformed rows come from one Kafka read.
    parsed = parsed.persist(StorageLevel.MEMORY_AND_DISK)
    try:
        rows = parsed.groupBy("partition", "key").count().collect()
        counts_by_part: dict[int, dict[str, int]] = {}
        bad_by_part: dict[int, int] = {}
        for r in rows:
            if r["key"] == "#":
                bad_by_part[r["partition"]] = r["count"]
            else:
                counts_by_part.setdefault(r["partition"], {})[r["key"]] = r["count"]
        result = BatchResult(ranges=list(ranges))
        if bad_by_part:
            per_part = max(1, max_malformed // len(ranges))
            w = Window.partitionBy("partition").orderBy("offset")
            bad = (parsed.filter(F.col("key") == "#")
                   .withColumn("rn", F.row_number().over(w))
                   .filter(F.col("rn") <= per_part + 1)
                   .select("partition", "offset", "reason", "raw_prefix", "raw_length", "rn")
                   .collect())
            cut: dict[int, int] = {}
            for r in bad:
                if r["rn"] == per_part + 1:
                    cut[r["partition"]] = r["offset"]
            if cut:
                # Cut the overflowing partitions just before their first malformed line beyond the
                # limit and recount them up to there; the rest is the next batch's.
                cond = F.lit(False)
                for p, off in cut.items():
                    cond = cond | ((F.col("partition") == p) & (F.col("offset") < off))
                recount = (parsed.filter(cond & (F.col("key") != "#"))
                           .groupBy("partition", "key").count().collect())
                for p in cut:
                    counts_by_part[p] = {}
                for r in recount:
                    counts_by_part[r["partition"]][r["key"]] = r["count"]
                result.ranges = [OffsetRange(r.partition, r.start, cut.get(r.partition, r.end))
                                 for r in ranges]
            result.malformed = sorted(
                (MalformedRef(r["partition"], r["offset"], r["reason"], bytes(r["raw_prefix"]),
                              r["raw_length"]) for r in bad if r["rn"] <= per_part),
                key=lambda m: (m.partition, m.offset))
        for part_counts in counts_by_part.values():
            for key, c in part_counts.items():
                result.records += c
                if key:  # '' is a valid line of another level: read, not counted
                    result.counts[key] = result.counts.get(key, 0) + c
        result.records += len(result.malformed)
        return result
    finally:
        parsed.unpersist()
