"""The Spark side of a batch: executors read the planned Kafka ranges, parse, count per minute.

Only per-minute counts and a bounded number of malformed-line references come back to the driver;
the raw lines never leave the executors. Parsing is Spark SQL (no Python UDF): the format's plan
(logcount/formats/spark.py), the same rule as its pure twin (logcount/formats/rule.py), so the JVM
does the per-line work.
"""

from __future__ import annotations

import contextlib
import functools
import json
import operator
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import NamedTuple

from logcount.formats.rule import REASON_LATE, minute_label
from logcount.formats.spark import cut_dims, dim_columns, line_frame
from logcount.formats.spec import LineFormat
from logcount.pipeline import plan_reuse
from logcount.pipeline.hour_records import MINUTE_END, minute_index
from logcount.pipeline.offsets import OffsetRange
from logcount.pipeline.watermark import CLOSING_SLACK_MINUTES

# How many malformed-line references one batch may bring to the driver (--max-malformed-per-batch):
# a flood of garbage is cut short in the partition where it is reached (the rest: next batch),
# so it cannot exhaust the driver's memory nor outgrow the transaction; ordinary batches stay under.
# Figures: docs/tuning.md#malformed-per-batch
MAX_MALFORMED_PER_BATCH = 50_000
# The first bytes of a malformed value kept in its DLQ record.
RAW_PREFIX_BYTES = 256
# A batch of at most this many offsets runs as ONE task (coalesce(1), no exchange: one stage, not
# three): every stage is fixed cost, while one task reading serially loses once data can be
# shared between cores. Caught-up batches and a process's first batch are below it.
# Figures: docs/tuning.md#single-task
SINGLE_TASK_MAX_RECORDS = 50_000
# A larger batch gets at most this many tasks per core, however many partitions it spans: Spark's
# one task per Kafka range costs a scheduling round trip, a pooled consumer and a generated
# projection each; two per core keeps every core busy when ranges differ in size.
# Figures: docs/tuning.md#tasks-per-core
TASKS_PER_CORE = 2
# A small batch over more ranges than SMALL_BATCH_MAX_SINGLE_RANGES is read by one task per core;
# INTERPRETED_MAX_RECORDS_PER_RANGE on average, or INTERPRETED_MAX_RECORDS in all, and the batch
# runs interpreted (NO_CODEGEN): generating costs per range and job, an interpreted row more.
# Figures: docs/tuning.md#interpreted-projections
SMALL_BATCH_MAX_SINGLE_RANGES = 16
INTERPRETED_MAX_RECORDS_PER_RANGE = 128
INTERPRETED_MAX_RECORDS = 2_500
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
    interpreted = bool(ranges) and records <= max(
        INTERPRETED_MAX_RECORDS, INTERPRETED_MAX_RECORDS_PER_RANGE * len(ranges))
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
    # With --group-by: dimension values -> {minute index: lines counted} (counts holds the sums)
    series: dict[tuple[str, ...], dict[int, int]] = field(default_factory=dict)
    malformed: list[MalformedRef] = field(default_factory=list)
    ranges: list[OffsetRange] = field(default_factory=list)  # possibly cut short (see above)
    records: int = 0  # records read in the (final) ranges: counted, other levels, malformed
    continuation: int = 0  # of them, continuation lines (--continuation-lines skip)
    # --emit-final: partition -> the newest event minute of its lines with a valid time (any
    # level) in the ranges; only partitions that had one
    newest: dict[int, int] = field(default_factory=dict)


class _PlanColumns(NamedTuple):
    keys: tuple  # the aggregation's grouping keys
    n: object  # the first aggregate, count(1) AS n
    masks: tuple  # --emit-final: which partitions' lines a group holds (mask_columns)
    window: object  # malformed refs numbered per partition by offset (None: no bound)
    keep: object  # the filter on that number (None: no bound)


# --emit-final's newest minute per partition rides on the same aggregation: each group of
# lines with a valid time ORs one bit per partition it holds (64 partitions a long), and the
# driver takes each partition's newest minute from the few rows. No partition key: grouping
# by (partition, minute) grew the aggregate with the partitions (docs/tuning.md#aggregation-keys).
MASK_BITS = 64


def mask_columns(words: int) -> tuple[str, ...]:
    """The names of the partition mask aggregates (pm0 covers partitions 0-63, ...)."""
    return tuple(f"pm{i}" for i in range(words))


def mask_words(ranges: Sequence[OffsetRange]) -> int:
    """How many mask longs the ranges' partitions need."""
    return max((r.partition for r in ranges), default=0) // MASK_BITS + 1


def batch_frame(df, fmt: LineFormat, malformed_per_partition: int | None,
                late_before: int | None = None, newest_words: int = 0):
    """Kafka rows (partition, offset, value) -> the batch's aggregate, as one Spark plan.

    One scan, one aggregation: a counted line is grouped under its minute, a valid line of
    another level under nothing, a malformed line under its partition and offset with
    its reason and first bytes (a late line too: a counted one whose minute index is before
    `late_before`). With a `malformed_per_partition` bound, the malformed groups are then
    numbered per partition by offset and only the first `malformed_per_partition + 1` come back
    (the +1 tells the caller where to cut); with None, all come back and there is no `rn`.
    Columns: p (a malformed line's partition, else null), minute (binary 'YYYY-MM-DD HH:MM'
    from the seed fast path, or null), mi (the minute index from every other path, or null),
    bad_offset, reason, raw, len, the --group-by values d0, d1, ... of counted lines (so the
    executors count per series and only the small counts come back), n, rn (numbered); with
    --continuation-lines skip also cont (true on the group of continuation lines, else null).
    With `newest_words` (--emit-final) a valid line of another level keeps its minute too, under
    `other` (true), and every group ORs the bits of its partitions into pm0, pm1, ...
    Every per-line step is a built-in expression (logcount/formats/spark.py: JVM code generation, no
    Python per line).
    """
    from pyspark import SparkContext

    c = _plan_columns(SparkContext._active_spark_context, fmt, malformed_per_partition,
                      late_before, newest_words)
    # The dimension values are cut to their bytes after the aggregation, on its few rows
    # (formats/spark.py _dims); rows whose cut values meet are summed by batch_result. The cut
    # and rn are one step: each step is analysed whole. Figures: docs/tuning.md#plan-steps
    agg = line_frame(df, fmt, cut=False).groupBy(*c.keys).agg(c.n, *c.masks)
    width = len(fmt.group_by)
    if c.window is None:  # no rn: one step less for an ungrouped batch, the usual caught-up one
        return cut_dims(agg, width)
    return cut_dims(agg, width, rn=c.window).filter(c.keep)


# Every Column is a py4j round trip to build, a third of a small batch's warm cost; they are
# unresolved expressions, so each (JVM, format, bound, horizon) builds them once. Keyed by the
# SparkContext: a new session never gets another's columns. Figures: docs/tuning.md#plan-columns
@functools.lru_cache(maxsize=16)
def _plan_columns(context, fmt: LineFormat, malformed_per_partition: int | None,
                  late_before: int | None, newest_words: int = 0) -> _PlanColumns:
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
    timed = counted  # the lines whose minute is a key
    masks: tuple = ()
    if newest_words:
        # Every line that is not refused keeps its minute (null where it has none: its group's
        # row is then skipped by batch_result, masks and all), so no test of the time per line.
        timed = ~bad
        p = F.col("p")
        masks = tuple(F.bit_or(F.when(timed if newest_words == 1 else
                                      timed & (p >= MASK_BITS * i) & (p < MASK_BITS * (i + 1)),
                                      F.expr(f"shiftleft(1L, p - {MASK_BITS * i})")))
                      .alias(name) for i, name in enumerate(mask_columns(newest_words)))
    # Every key is a grouping key and count() the only aggregate, so Spark keeps the fast hash
    # aggregation. Only a malformed line keeps its partition: grouped by (partition, minute) the
    # aggregate grew with the partition count. Figures: docs/tuning.md#aggregation-keys
    keys: tuple = (
        F.when(bad, F.col("p")).alias("p"),
        F.when(timed, F.col("minute")).alias("minute"),
        F.when(timed, F.col("mi")).alias("mi"),
        F.when(bad, F.col("offset")).alias("bad_offset"),
        reason.alias("reason"),
        F.when(bad, F.substring("value", 1, RAW_PREFIX_BYTES)).alias("raw"),
        F.when(bad, F.coalesce(F.length("value"), F.lit(0))).alias("len"),
        *(F.when(counted, F.col(d)).alias(d) for d in dim_columns(len(fmt.group_by))),
    )
    if fmt.continuation == "skip":
        keys += (F.when(F.col("cont"), F.lit(True)).alias("cont"),)
    if newest_words:
        keys += (F.when(timed & ~counted, F.lit(True)).alias("other"),)
    n = F.count(F.lit(1)).alias("n")
    if malformed_per_partition is None:
        return _PlanColumns(keys, n, masks, None, None)
    w = Window.partitionBy("p", F.col("bad_offset").isNull()).orderBy("bad_offset")
    keep = F.col("bad_offset").isNull() | (F.col("rn") <= malformed_per_partition + 1)
    return _PlanColumns(keys, n, masks, F.row_number().over(w), keep)


# How long the broker may hold an executor consumer's fetch that finds no new record (Java
# default 500 ms): spark-sql-kafka's offset requests queue behind that fetch, so every batch that
# reaches a partition's end waited this long per partition; an empty fetch costs only a round trip.
# Figures: docs/tuning.md#fetch-wait
FETCH_MAX_WAIT_MS = "1"
# How many records one poll of the executors' consumers may return (Java default 500): every poll
# costs spark-sql-kafka two ListOffsets round trips, so a backlog pays N / this; the cost is up to
# this many records per partition held between batches (wide input or tight heap: set it lower).
# Figures: docs/tuning.md#max-poll-records
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
    return _read(spark, reader_options(bootstrap, topic, ranges, kafka_options))


def _read(spark, options: Mapping[str, str]):
    return spark.read.format("kafka").options(**options).load()


def batch_plan(spark, bootstrap: str, topic: str, ranges: Sequence[OffsetRange],
               fmt: LineFormat, kafka_options: Mapping[str, str],
               malformed_per_partition: int | None, late_before: int | None,
               tasks: int | None, newest_words: int = 0):
    """The batch's frame over `ranges` (batch_frame's), read by `tasks` tasks (None: one per
    range). Its analysed plan is built once per shape and reused with only the offsets replaced
    (pipeline/plan_reuse.py)."""
    options = reader_options(bootstrap, topic, ranges, kafka_options)

    def build():
        df = _read(spark, options)
        if tasks is not None:
            df = df.coalesce(tasks)
        return batch_frame(df, fmt, malformed_per_partition, late_before, newest_words)

    shape = (fmt, malformed_per_partition, late_before, tasks, newest_words)
    return plan_reuse.frame(spark, shape, options, build)


def compute_batch(spark, bootstrap: str, topic: str, ranges: Sequence[OffsetRange],
                  fmt: LineFormat,
                  kafka_options: Mapping[str, str] | None = None,
                  max_malformed: int = MAX_MALFORMED_PER_BATCH,
                  late_before: int | None = None,
                  single_task_max: int = SINGLE_TASK_MAX_RECORDS,
                  newest: bool = False, late_first: bool = False) -> BatchResult:
    """Run the batch's Spark job; return counts, malformed references and the final ranges.

    `late_before` (a minute index or None): counted lines of earlier minutes are late. Without
    `late_first` the job first runs without the bound and again with it only when a counted
    minute is before it (the same result: docs/tuning.md#late-lines).
    `newest` (--emit-final): the result holds each partition's newest event minute too.
    Ranges of at most `single_task_max` offsets in all are one task (see SINGLE_TASK_MAX_RECORDS),
    and many ranges a few tasks (TASKS_PER_CORE); the result is the same either way."""
    if not ranges:
        return BatchResult()
    per_part = max(1, max_malformed // len(ranges))
    parallelism = spark.sparkContext.defaultParallelism
    words = mask_words(ranges) if newest else 0

    def numbered(rs: Sequence[OffsetRange]) -> bool:
        # A range no longer than its share cannot hold more malformed lines than the share, so it
        # needs no numbering: without the window (a sort and a stage) the plan is smaller, for
        # every caught-up batch and a first one. Figures: docs/tuning.md#malformed-window
        return any(r.size > per_part for r in rs)

    def aggregate(rs: Sequence[OffsetRange], late: int | None) -> list:
        shape = batch_shape(rs, parallelism, single_task_max)
        frame = batch_plan(spark, bootstrap, topic, rs, fmt, kafka_options or {},
                           per_part if numbered(rs) else None, late, shape.tasks, words)
        with projections(spark, interpreted=shape.interpreted):
            return frame.collect()

    def run(late: int | None) -> BatchResult:
        rows = aggregate(ranges, late)
        # A partition with more malformed lines than its share is cut before the first beyond it
        # and the batch read again over the final ranges (counts are not kept per partition):
        # only floods of garbage take this job; it cannot cut again (a cut keeps per_part).
        cut = ({r["p"]: r["bad_offset"] for r in rows if r["rn"] == per_part + 1
                and r["bad_offset"] is not None} if numbered(ranges) else {})  # else no rn
        final = [OffsetRange(r.partition, r.start, cut.get(r.partition, r.end)) for r in ranges]
        if cut:
            again = [r for r in final if r.size > 0]
            rows = aggregate(again, late) if again else []
        # Each partition's newest minute only from lines at most CLOSING_SLACK_MINUTES ahead.
        now = minute_index(datetime.now(UTC).strftime("%Y-%m-%d %H:%M"))
        return batch_result(rows, final, len(fmt.group_by), words,
                            now + CLOSING_SLACK_MINUTES + 1)

    # The bound is a literal in the plan: a new one each minute (--emit-final, a horizon) was a
    # new plan, JIT warm-up and a test per line. It only makes lines late: a batch that counted
    # no earlier minute is the same without it. Figures: docs/tuning.md#late-lines
    if late_before is None or late_first:
        return run(late_before)
    result = run(None)
    if min(result.counts, default=late_before) < late_before:
        return run(late_before)
    return result


# A fast-path minute's text -> its index, kept between batches (a caught-up batch's rows touch
# the minutes of the last ones again) up to this many, then cleared.
_MINUTES_HELD = 4096
_MINUTE_OF: dict[bytes, int] = {}


def batch_result(rows: Sequence[Mapping], ranges: Sequence[OffsetRange],
                 width: int = 0, newest_words: int = 0,
                 newest_before: int = MINUTE_END) -> BatchResult:
    """The collected aggregate rows of batch_frame -> BatchResult (pure); `width`: how many
    --group-by dimensions the rows carry; `newest_words`: partition mask columns (--emit-final),
    whose rows of minutes before `newest_before` give each partition's newest minute."""
    result = BatchResult(ranges=list(ranges))
    names = ("n", "cont", "bad_offset", "p", "reason", "raw", "len", "minute", "mi", "other",
             *mask_columns(newest_words), *dim_columns(width))
    malformed = []
    texts = _MINUTE_OF
    newest = result.newest
    for n, cont, bad, p, reason, raw, length, fast, mi, other, *rest in _columns(rows, names):
        masks, dims = rest[:newest_words], rest[newest_words:]
        result.records += n
        if cont:
            result.continuation += n
        elif bad is not None:
            malformed.append(MalformedRef(p, bad, reason, bytes(raw), length))
        elif fast is not None or mi is not None:
            if fast is None:
                minute = mi
            else:
                fast = bytes(fast)
                minute = texts.get(fast)
                if minute is None:
                    if len(texts) >= _MINUTES_HELD:
                        texts.clear()
                    minute = texts[fast] = minute_index(fast.decode("ascii"))
            for word, mask in enumerate(masks if minute < newest_before else ()):
                for part in _bits(mask, word):
                    if minute > newest.get(part, minute - 1):
                        newest[part] = minute
            if other:  # a line of another level: its time only
                continue
            result.counts[minute] = result.counts.get(minute, 0) + n
            if width:
                cells = result.series.setdefault(tuple(dims), {})
                cells[minute] = cells.get(minute, 0) + n
    result.malformed = sorted(malformed, key=lambda m: (m.partition, m.offset))
    return result


def _bits(mask: int | None, word: int) -> list[int]:
    """The partitions a mask long names (bit i of word w: partition w * MASK_BITS + i; Spark's
    long is signed, so bit 63 reads negative)."""
    if not mask:
        return []
    mask &= (1 << MASK_BITS) - 1
    return [word * MASK_BITS + i for i in range(MASK_BITS) if mask >> i & 1]


def _columns(rows: Sequence[Mapping], names: tuple[str, ...]):
    """Each row's `names` as a tuple (a missing one: None). Collected Rows are read by position
    (by name each costs a list search): ~1,000 rows a batch at 10,000 live series.
    Figures: docs/tuning.md#collected-rows"""
    fields = None
    pick: Callable[[tuple], tuple] = tuple
    for r in rows:
        f = getattr(r, "__fields__", None)  # a Row's, read without Row.__getattr__'s error path
        if f is None:
            yield tuple(r.get(c) for c in names)
            continue
        if f is not fields and f != fields:  # a missing name reads the None appended below
            fields = f
            pick = operator.itemgetter(*(f.index(c) if c in f else len(f) for c in names))
        # Row.__getitem__ is Python code; a plain tuple's items are read in C
        yield pick((*r, None))
