"""The Spark side of a batch: executors read the planned Kafka ranges, parse, count per minute.

Only per-minute counts and a bounded number of malformed-line references come back to the driver;
the raw lines never leave the executors. Parsing is Spark SQL (no Python UDF): the format's plan
(logcount/formats/spark.py), the same rule as its pure twin (logcount/formats/rule.py), so the JVM
does the
per-line work.
"""

from __future__ import annotations

import contextlib
import functools
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

from logcount.formats.rule import REASON_LATE, minute_label
from logcount.formats.spark import line_frame
from logcount.formats.spec import LineFormat
from logcount.pipeline.offsets import OffsetRange
from logcount.pipeline.totals import minute_index

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
# A larger batch gets at most this many tasks per core, however many partitions it spans. Spark
# makes one task per Kafka partition range: a 256-partition topic's batch was 256 tasks on 2
# cores, each a scheduling round trip, a consumer from the pool and a code-generated projection
# (issue #30). Two per core keeps every core busy when ranges differ in size; each task reads its
# ranges one after another (coalesce, no shuffle). A 4-partition topic keeps its 4 tasks.
TASKS_PER_CORE = 2
# A small batch over more ranges than this is read by one task per core instead of one task: each
# range costs a reader, a projection and a fetch round trip, which one task pays serially. A batch
# whose ranges hold at most INTERPRETED_MAX_RECORDS_PER_RANGE records on average makes its row
# projections interpreted instead of generated (spark.sql.codegen.factoryMode=NO_CODEGEN, set for
# that batch's job): Spark creates an UnsafeProjection per range in every batch, and a generated
# one costs ~1 ms even when its class is cached (the code is made again to look it up); interpreted
# it is nearly free, but every row then costs more (the setting reaches the whole plan: its parse
# and aggregation run interpreted too, ~2x the per-row time). Measured warm on 2 cores with `python
# -m logcount.bench.cycle --partitions P [--tasks T] [--conf ...]` (20,000 lines/s, a cycle's
# collect,
# median of 90): 256 partitions, ~20 records a range: one task 282 ms, interpreted 183, two tasks
# 153, both 127-134 (cycle 360 -> 216 ms); 64: cycle 254 -> 191 ms; 4 partitions (~750 a range, one
# task, generated as before) 73 ms, interpreted it would be 61. Ranges read again and again (a
# one-off script, the same `compute_batch`, median of 8): interpreted costs ~3 us a row more (4
# ranges x 5,000: 159-186 -> 232-234 ms; 4 x 1,250 even) and saves ~1 ms a range (256 x 10: 538-728
# -> 347-411 ms; 256 x 100: 622 -> 459-495 ms), hence 128.
SMALL_BATCH_MAX_SINGLE_RANGES = 16
INTERPRETED_MAX_RECORDS_PER_RANGE = 128
CODEGEN_FACTORY_MODE = "spark.sql.codegen.factoryMode"


@contextlib.contextmanager
def projections(spark, interpreted: bool):
    """With `interpreted`, jobs started inside make their row projections interpreted (see
    INTERPRETED_MAX_RECORDS_PER_RANGE), unless the session has a factory mode set on purpose;
    unset again afterwards. It is a session setting, read when a job's tasks create their
    projections, so it covers exactly the jobs in between (the stage runs one at a time)."""
    # get(key, None) is only a value set on purpose (spark-submit --conf, a test): that wins.
    if not interpreted or spark.conf.get(CODEGEN_FACTORY_MODE, None) is not None:
        yield
        return
    spark.conf.set(CODEGEN_FACTORY_MODE, "NO_CODEGEN")
    try:
        yield
    finally:
        spark.conf.unset(CODEGEN_FACTORY_MODE)


class BatchShape(NamedTuple):
    tasks: int | None  # coalesce to this many tasks; None: Spark's one task per range
    interpreted: bool  # interpreted row projections (INTERPRETED_MAX_RECORDS_PER_RANGE)


def batch_shape(ranges: Sequence[OffsetRange], parallelism: int,
                single_task_max: int = SINGLE_TASK_MAX_RECORDS) -> BatchShape:
    """How a batch over `ranges` runs (pure): its task count and its projections.

    A small batch is one task, or one per core when it spans many ranges; a larger one at most
    TASKS_PER_CORE per core (None when Spark's one task per range is already no more)."""
    records = sum(r.size for r in ranges)
    interpreted = bool(ranges) and records <= INTERPRETED_MAX_RECORDS_PER_RANGE * len(ranges)
    cores = max(1, parallelism)
    if records <= single_task_max:
        many = len(ranges) > SMALL_BATCH_MAX_SINGLE_RANGES and cores > 1
        return BatchShape(cores if many else 1, interpreted)
    most = TASKS_PER_CORE * cores
    return BatchShape(most if len(ranges) > most else None, interpreted)


@dataclass(frozen=True)
class MalformedRef:
    partition: int
    offset: int
    reason: str
    raw_prefix: bytes
    raw_length: int


@dataclass
class BatchResult:
    counts: dict[int, int] = field(default_factory=dict)  # UTC minute index -> lines counted
    malformed: list[MalformedRef] = field(default_factory=list)
    ranges: list[OffsetRange] = field(default_factory=list)  # possibly cut short (see above)
    records: int = 0  # records read in the (final) ranges: counted, other levels, malformed


class _PlanColumns(NamedTuple):
    keys: tuple  # the aggregation's grouping keys
    n: object  # the one aggregate, count(1) AS n
    window: object  # malformed refs numbered per partition by offset (None: no bound)
    keep: object  # the filter on that number (no bound: a null rn)


def batch_frame(df, fmt: LineFormat, malformed_per_partition: int | None,
                late_before: int | None = None):
    """Kafka rows (partition, offset, value) -> the batch's aggregate, as one Spark plan.

    One scan, one aggregation: a counted line is grouped under its minute, a valid line of
    another level under nothing, a malformed line under its partition and offset with
    its reason and first bytes (a late line too: a counted one whose minute index is before
    `late_before`). With a `malformed_per_partition` bound, the malformed groups are then
    numbered per partition by offset and only the first `malformed_per_partition + 1` come back
    (the +1 tells the caller where to cut); with None, all come back and `rn` is null.
    Columns: p (a malformed line's partition, else null), minute (binary 'YYYY-MM-DD HH:MM'
    from the seed fast path, or null), mi (the minute index from every other path, or null),
    bad_offset, reason, raw, len, n, rn.
    Every per-line step is a built-in expression (logcount/formats/spark.py: JVM code generation, no
    Python per line).
    """
    from pyspark import SparkContext

    c = _plan_columns(SparkContext._active_spark_context, fmt, malformed_per_partition,
                      late_before)
    agg = line_frame(df, fmt).groupBy(*c.keys).agg(c.n)
    if c.window is None:
        return agg.withColumn("rn", c.keep)
    return agg.withColumn("rn", c.window).filter(c.keep)


# Every Column is a py4j round trip to build: the ~120 of the plan took 0.10-0.19 s per batch,
# a third of a small batch's warm cost. They are unresolved expressions, valid for any DataFrame
# of the session's JVM, so each (JVM, format, bound, horizon) builds them once; the horizon moves
# at most once a minute. Keyed by the SparkContext: a new session never gets another's columns.
@functools.lru_cache(maxsize=16)
def _plan_columns(context, fmt: LineFormat, malformed_per_partition: int | None,
                  late_before: int | None) -> _PlanColumns:
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    reason = F.col("reason")
    if late_before is not None:
        # The fast path's minute is fixed-width digits, which compare as text; the others' is
        # an index.
        late_text = minute_label(late_before)[:16].encode()
        late = F.col("counted") & reason.isNull() & (
            (F.col("minute") < F.lit(late_text)) | (F.col("mi") < late_before))
        reason = F.when(late, F.lit(REASON_LATE)).otherwise(reason)
    bad = reason.isNotNull()
    counted = ~bad & F.col("counted")
    # Everything is a grouping key and the only aggregate is count(): Spark keeps the fast
    # hash aggregation (first()/collect of a binary would fall back to a slower one).
    # Only a malformed line keeps its partition: counts are per minute, and grouped by
    # (partition, minute) a batch's aggregate grew with the partition count (a backlog spanning
    # a day over 256 partitions: 368,640 groups per task, shuffled and all collected to Python,
    # against 1,440). A cut (below) then reads the whole batch again, not just its partition.
    keys = (
        F.when(bad, F.col("p")).alias("p"),
        F.when(counted, F.col("minute")).alias("minute"),
        F.when(counted, F.col("mi")).alias("mi"),
        F.when(bad, F.col("offset")).alias("bad_offset"),
        reason.alias("reason"),
        F.when(bad, F.substring("value", 1, RAW_PREFIX_BYTES)).alias("raw"),
        F.when(bad, F.coalesce(F.length("value"), F.lit(0))).alias("len"),
    )
    n = F.count(F.lit(1)).alias("n")
    if malformed_per_partition is None:
        return _PlanColumns(keys, n, None, F.lit(None).cast("int"))
    w = Window.partitionBy("p", F.col("bad_offset").isNull()).orderBy("bad_offset")
    keep = F.col("bad_offset").isNull() | (F.col("rn") <= malformed_per_partition + 1)
    return _PlanColumns(keys, n, F.row_number().over(w), keep)


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
# How many records one poll of the executors' consumers may return (the Java client's default is
# 500). spark-sql-kafka asks the broker for the partition's earliest and latest offsets after
# every poll (two ListOffsets round trips, and a seek back), so a backlog's range of N records
# pays N / this of them; a caught-up batch's ranges (a few hundred records) take one poll either
# way. The cost: a range that ends in the middle of a poll leaves the rest of it with the
# consumer's pooled fetched data until the next batch reads on (spark-sql-kafka keeps it), so
# between backlog batches up to this many records per input partition stay on the heap.
# Measured warm on 2 cores (a one-off script timing compute_batch over 1M-record batches that
# follow one another on a 5M-record topic, median of 4 batches, interleaved processes, 3-6
# processes each), 500 -> 2000: 4 partitions 1.42 -> 1.13 s, 256 partitions 2.13 -> 1.80 s;
# the JVM's RSS at 256 partitions 1.03 -> 1.30 GB, one process each (1,000: 1.67 s, 1.09 GB;
# 5,000 was no faster at 256). A wider input than ~500 partitions, or a tight heap: lower it
# with the --client-config file (max.poll.records=500), which wins over this default. 2,000
# rather than 1,000: the common narrow input gains most from it; at 256 partitions the two
# were alike.
MAX_POLL_RECORDS = "2000"


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
        "kafka.max.poll.records": MAX_POLL_RECORDS,
        **{f"kafka.{k}": v for k, v in kafka_options.items()},
    }


def read_ranges(spark, bootstrap: str, topic: str, ranges: Sequence[OffsetRange],
                kafka_options: Mapping[str, str]):
    return (spark.read.format("kafka")
            .options(**reader_options(bootstrap, topic, ranges, kafka_options)).load())


def compute_batch(spark, bootstrap: str, topic: str, ranges: Sequence[OffsetRange],
                  fmt: LineFormat,
                  kafka_options: Mapping[str, str] | None = None,
                  max_malformed: int = MAX_MALFORMED_PER_BATCH,
                  late_before: int | None = None,
                  single_task_max: int = SINGLE_TASK_MAX_RECORDS) -> BatchResult:
    """Run the batch's Spark job; return counts, malformed references and the final ranges.

    `late_before` (a minute index or None): counted lines of earlier minutes are late.
    Ranges of at most `single_task_max` offsets in all are one task (see SINGLE_TASK_MAX_RECORDS),
    and many ranges a few tasks (TASKS_PER_CORE); the result is the same either way."""
    if not ranges:
        return BatchResult()
    per_part = max(1, max_malformed // len(ranges))
    parallelism = spark.sparkContext.defaultParallelism

    def aggregate(rs: Sequence[OffsetRange]) -> list:
        df = read_ranges(spark, bootstrap, topic, rs, kafka_options or {})
        shape = batch_shape(rs, parallelism, single_task_max)
        if shape.tasks is not None:
            df = df.coalesce(shape.tasks)
        # A range no longer than its share cannot hold more malformed lines than the share, so
        # it needs no numbering: without the window (a sort and a stage of its own) the plan is
        # smaller. That is every batch of a stage that keeps up, and a process's first (2k):
        # measured on 2 cores, a cold first job 2.62-2.84 -> 2.54-2.57 s, a warm 3.2k-record
        # batch 180-189 -> 160-176 ms (median of 30).
        numbered = any(r.size > per_part for r in rs)
        frame = batch_frame(df, fmt, per_part if numbered else None, late_before)
        with projections(spark, interpreted=shape.interpreted):
            return frame.collect()

    rows = aggregate(ranges)
    # A partition with more malformed lines than its share is cut just before the first one
    # beyond it (the rest is the next batch's), and the batch is read again over the final
    # ranges: its counts are not kept per partition (batch_frame). Only floods of garbage take
    # this second job; it cannot cut again (a cut partition keeps exactly per_part, the others
    # had no more).
    cut = {r["p"]: r["bad_offset"] for r in rows if r["rn"] == per_part + 1
           and r["bad_offset"] is not None}
    final = [OffsetRange(r.partition, r.start, cut.get(r.partition, r.end)) for r in ranges]
    if cut:
        again = [r for r in final if r.size > 0]
        rows = aggregate(again) if again else []
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
        elif r["minute"] is not None or r["mi"] is not None:
            minute = (r["mi"] if r["minute"] is None
                      else minute_index(bytes(r["minute"]).decode("ascii")))
            result.counts[minute] = result.counts.get(minute, 0) + r["n"]
    result.malformed = sorted(malformed, key=lambda m: (m.partition, m.offset))
    return result
