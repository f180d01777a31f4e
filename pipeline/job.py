"""The Spark side of a batch: executors read the planned Kafka ranges, parse, count per minute.

Only per-minute counts and a bounded number of malformed-line references come back to the driver;
the raw lines never leave the executors. Parsing is Spark SQL (no Python UDF), the same rule as
pipeline/lines.py, so the JVM does the per-line work.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

from pipeline.lines import REASON_EMPTY, REASON_FORMAT, REASON_LATE, REASON_TIMESTAMP
from pipeline.offsets import OffsetRange

# How many malformed-line references one batch may bring to the driver (--max-malformed-per-batch).
# A batch that holds more is cut short in the partition where the limit is reached (the rest
# comes in the next batch), so a flood of garbage cannot exhaust the driver's memory nor make the
# transaction huge. 50,000 refs of <= 256 bytes are ~25 MB at worst and produce in about a second,
# far inside the transaction timeout; 1% garbage in a 2M-record batch (20,000) stays under it,
# so ordinary batches never pay for the cut (two extra Spark actions).
MAX_MALFORMED_PER_BATCH = 50_000
# The first bytes of a malformed value kept in its DLQ record.
RAW_PREFIX_BYTES = 256
# A batch of at most this many offsets runs as ONE task: its Kafka partitions are read one after
# another (coalesce(1)) and the aggregation and the window need no exchange, so the job is one
# stage instead of three. Every stage is fixed cost (scheduling, shuffle files, a code-generated
# class of its own); one task reading serially is slower once there is real data to share
# between cores. Measured warm on 2 cores, 4 partitions, median of 5 (base -> one task):
# 10k offsets 0.251 -> 0.192 s, 50k 0.292 -> 0.274, 100k 0.343 -> 0.341, 200k 0.452 -> 0.543.
# Batches when caught up (latency) and a process's first batch (2k) are below it.
SINGLE_TASK_MAX_RECORDS = 50_000

# Java regex: \d is ASCII-only without UNICODE_CHARACTER_CLASS; \z is the very end (Java's $
# would also match before a final line terminator). _HEAD_RE is the fast path, run on the first
# HEAD_BYTES only: an ordinary line has its level and the space after it there. A line it does not
# match (no message, a very long level word, or garbage) gets _LINE_RE on the whole value.
_HEAD_RE = r"^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2} [A-Za-z]+ "
_LINE_RE = r"^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2} [A-Za-z]+(?: |\z)"
HEAD_BYTES = 64


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


class _PlanColumns(NamedTuple):
    rows: tuple  # the per-line select
    keys: tuple  # the aggregation's grouping keys
    n: object  # the one aggregate, count(1) AS n
    window: object  # malformed refs numbered per partition by offset (None: no bound)
    keep: object  # the filter on that number (no bound: a null rn)


def batch_frame(df, level: str, malformed_per_partition: int | None,
                late_before: str | None = None):
    """Kafka rows (partition, offset, value) -> the batch's aggregate, as one Spark plan.

    One scan, one aggregation: a counted line is grouped under (partition, its minute), a valid
    line of another level under (partition, nothing), a malformed line under its own offset with
    its reason and first bytes (a late line too: one of `level` whose minute is before
    `late_before`). With a `malformed_per_partition` bound, the malformed groups are then
    numbered per partition by offset and only the first `malformed_per_partition + 1` come back
    (the +1 tells the caller where to cut); with None, all come back and `rn` is null.
    Columns: p, minute (binary 'YYYY-MM-DD HH:MM' or null), bad_offset, reason, raw, len, n, rn.
    Every per-line step is a built-in expression (JVM code generation, no Python, no per-line
    timestamp parsing: the calendar check is arithmetic on the digits).
    """
    from pyspark import SparkContext

    c = _plan_columns(SparkContext._active_spark_context, level, malformed_per_partition,
                      late_before)
    agg = df.select(*c.rows).groupBy(*c.keys).agg(c.n)
    if c.window is None:
        return agg.withColumn("rn", c.keep)
    return agg.withColumn("rn", c.window).filter(c.keep)


# Every Column is a py4j round trip to build: the ~120 of the plan took 0.10-0.19 s per batch,
# a third of a small batch's warm cost. They are unresolved expressions, valid for any DataFrame
# of the session's JVM, so each (JVM, level, bound, horizon) builds them once; the horizon moves
# at most once a minute. Keyed by the SparkContext: a new session never gets another's columns.
@functools.lru_cache(maxsize=16)
def _plan_columns(context, level: str, malformed_per_partition: int | None,
                  late_before: str | None) -> _PlanColumns:
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    v = F.col("value")

    def part(pos: int, length: int):
        return F.substring(v, pos, length)

    def lit(text: str):
        return F.lit(text.encode())

    def number(pos: int, length: int):  # only evaluated once the shape is known to be digits
        return F.expr(f"try_cast(cast(substring(value, {pos}, {length}) as string) as int)")

    # One trailing \r is ignored (contract).
    line = F.when(part(-1, 1) == lit("\r"), F.expr("substring(value, 1, length(value) - 1)")) \
        .otherwise(v)
    shape_ok = (part(1, HEAD_BYTES).cast("string").rlike(_HEAD_RE)
                | F.coalesce(line.cast("string"), F.lit("")).rlike(_LINE_RE))
    # Calendar and clock, on the digits the shape guarantees: two-digit fields compare as text.
    year, month, day = number(1, 4), number(6, 2), number(9, 2)
    leap = (year % 4 == 0) & ((year % 100 != 0) | (year % 400 == 0))
    month_days = (F.when(month == 2, F.when(leap, 29).otherwise(28))
                  .when(month.isin(4, 6, 9, 11), 30).otherwise(31))
    time_ok = ((part(1, 4) != lit("0000"))
               & part(6, 2).between(lit("01"), lit("12")) & (part(9, 2) >= lit("01"))
               & (part(12, 2) <= lit("23")) & (part(15, 2) <= lit("59"))
               & (part(18, 2) <= lit("59"))
               & ((part(9, 2) <= lit("28")) | (day <= month_days)))
    counted = (part(21, len(level) + 1) == lit(level + " ")) | (
        line == F.concat(part(1, 20), lit(level)))
    reason = (F.when(F.coalesce(F.length(line), F.lit(0)) == 0, F.lit(REASON_EMPTY))
              .when(~shape_ok, F.lit(REASON_FORMAT))
              .when(~time_ok, F.lit(REASON_TIMESTAMP)))
    if late_before is not None:  # 'YYYY-MM-DD HH:MM': fixed-width digits compare as text
        reason = reason.when(counted & (part(1, 16) < lit(late_before)), F.lit(REASON_LATE))
    rows = (F.col("partition").cast("int").alias("p"), F.col("offset"), v,
            reason.alias("reason"), counted.alias("counted"))
    bad = F.col("reason").isNotNull()
    # Everything is a grouping key and the only aggregate is count(): Spark keeps the fast
    # hash aggregation (first()/collect of a binary would fall back to a slower one).
    keys = (
        "p",
        F.when(~bad & F.col("counted"), F.substring("value", 1, 16)).alias("minute"),
        F.when(bad, F.col("offset")).alias("bad_offset"),
        "reason",
        F.when(bad, F.substring("value", 1, RAW_PREFIX_BYTES)).alias("raw"),
        F.when(bad, F.coalesce(F.length("value"), F.lit(0))).alias("len"),
    )
    n = F.count(F.lit(1)).alias("n")
    if malformed_per_partition is None:
        return _PlanColumns(rows, keys, n, None, F.lit(None).cast("int"))
    w = Window.partitionBy("p", F.col("bad_offset").isNull()).orderBy("bad_offset")
    keep = F.col("bad_offset").isNull() | (F.col("rn") <= malformed_per_partition + 1)
    return _PlanColumns(rows, keys, n, F.row_number().over(w), keep)


# How long the broker may hold a fetch of the executors' consumers that finds no new record
# (the Java client's default is 500 ms). After each poll, spark-sql-kafka asks the consumer for
# the partition's earliest and latest offsets; the consumer has just pipelined its next fetch,
# from the end of what it got, and at the log's end the broker holds that fetch and answers the
# offset requests on the same connection only after it, in order. So every batch that reached
# the end of a partition (every batch of a stage that has caught up) waits this long per
# partition. Measured on one warm session: at 500 ms a 1-record batch's collect took 0.57 s and
# at 1 line per 3 s each batch 0.72-0.89 s of Spark; at 10 ms, 0.07 s and 0.21-0.28 s; a
# 3.2k-record batch that ends at the log's end (4 partitions, median / p90 of 20):
# 10 ms 187 / 202 ms, 1 ms 149 / 158 ms, 0 ms 146 / 172 ms (empty fetches in a tight loop).
# An empty fetch costs one more round trip 1 ms later, and only while a task polls: pooled
# consumers idle between batches send nothing.
FETCH_MAX_WAIT_MS = "1"


def reader_options(bootstrap: str, topic: str, ranges: Sequence[OffsetRange],
                   kafka_options: Mapping[str, str]) -> dict[str, str]:
    """spark-sql-kafka's options to read exactly `ranges` (pure). The Kafka client properties
    (`kafka_options`: the --client-config file and the executors' group id) go in last, with
    the `kafka.` prefix, so a property given there wins over a default here."""
    starting = {topic: {str(r.partition): r.start for r in ranges}}
    ending = {topic: {str(r.partition): r.end for r in ranges}}
    return {
        "kafka.bootstrap.servers": bootstrap,
        "assign": json.dumps({topic: [r.partition for r in ranges]}),
        "startingOffsets": json.dumps(starting),
        "endingOffsets": json.dumps(ending),
        # Only committed input counts; aborted records and markers leave gaps that the source
        # tolerates under read_committed (SPARK-25005).
        "kafka.isolation.level": "read_committed",
        # Offsets we planned must exist: data loss (a range deleted under us) fails the batch,
        # which is then re-planned from the log start, rather than being skipped silently.
        "failOnDataLoss": "true",
        # A poll that brings nothing for 30 s (broker down) fails the task soon, and the driver
        # re-plans the batch, instead of waiting Spark's default 120 s network timeout.
        "kafkaConsumer.pollTimeoutMs": "30000",
        "kafka.fetch.max.wait.ms": FETCH_MAX_WAIT_MS,
        **{f"kafka.{k}": v for k, v in kafka_options.items()},
    }


def read_ranges(spark, bootstrap: str, topic: str, ranges: Sequence[OffsetRange],
                kafka_options: Mapping[str, str]):
    return (spark.read.format("kafka")
            .options(**reader_options(bootstrap, topic, ranges, kafka_options)).load())


def compute_batch(spark, bootstrap: str, topic: str, ranges: Sequence[OffsetRange], level: str,
                  kafka_options: Mapping[str, str] | None = None,
                  max_malformed: int = MAX_MALFORMED_PER_BATCH,
                  late_before: str | None = None,
                  single_task_max: int = SINGLE_TASK_MAX_RECORDS) -> BatchResult:
    """Run the batch's Spark job; return counts, malformed references and the final ranges.

    `late_before` ('YYYY-MM-DD HH:MM' or None): counted lines of earlier minutes are late.
    Ranges of at most `single_task_max` offsets in all are one task (see SINGLE_TASK_MAX_RECORDS);
    the result is the same either way."""
    if not ranges:
        return BatchResult()
    per_part = max(1, max_malformed // len(ranges))

    def aggregate(rs: Sequence[OffsetRange]) -> list:
        df = read_ranges(spark, bootstrap, topic, rs, kafka_options or {})
        if sum(r.size for r in rs) <= single_task_max:
            df = df.coalesce(1)
        # A range no longer than its share cannot hold more malformed lines than the share, so
        # it needs no numbering: without the window (a sort and a stage of its own) the plan is
        # smaller. That is every batch of a stage that keeps up, and a process's first (2k):
        # measured on 2 cores, a cold first job 2.62-2.84 -> 2.54-2.57 s, a warm 3.2k-record
        # batch 180-189 -> 160-176 ms (median of 30).
        numbered = any(r.size > per_part for r in rs)
        return batch_frame(df, level, per_part if numbered else None, late_before).collect()

    rows = aggregate(ranges)
    # A partition with more malformed lines than its share is cut just before the first one
    # beyond it, and read again up to there (the rest is the next batch's). Only floods of
    # garbage take this second job; it cannot cut again (exactly per_part are left).
    cut = {r["p"]: r["bad_offset"] for r in rows if r["rn"] == per_part + 1
           and r["bad_offset"] is not None}
    final = [OffsetRange(r.partition, r.start, cut.get(r.partition, r.end)) for r in ranges]
    if cut:
        again = [r for r in final if r.partition in cut and r.size > 0]
        rows = [r for r in rows if r["p"] not in cut] + (aggregate(again) if again else [])
    return batch_result(rows, final)


def batch_result(rows: Sequence[Mapping], ranges: Sequence[OffsetRange]) -> BatchResult:
    """The collected aggregate rows of batch_frame -> BatchResult (pure)."""
    result = BatchResult(ranges=list(ranges))
    malformed = []
    for r in rows:
        result.records += r["n"]
        if r["bad_offset"] is not None:
            malformed.append(MalformedRef(r["p"], r["bad_offset"], r["reason"], bytes(r["raw"]),
                                          r["len"]))
        elif r["minute"] is not None:
            minute = bytes(r["minute"]).decode("ascii") + ":00"
            result.counts[minute] = result.counts.get(minute, 0) + r["n"]
    result.malformed = sorted(malformed, key=lambda m: (m.partition, m.offset))
    return result
