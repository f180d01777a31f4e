"""`logcount run`: the driver loop. Plan -> compute in Spark -> merge -> commit atomically.

Progress lives only in Kafka: the group's committed offsets (written inside the same transaction
as the results) and the output topic's totals (read back at start). There is no checkpoint
directory, so there is nothing else to get out of step.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import json
import logging
import signal
import threading
import time
import uuid
from dataclasses import dataclass

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import OffsetSpec

from connectors import kafka_io
from connectors.transactional_sink import AtLeastOnceSink, OutRecord, TransactionalSink
from core.errors import AbortableKafkaError, DependencyError, FatalKafkaError
from core.metrics import Health, StageMetrics, serve
from core.progress import Progress
from core.settings import RunSettings
from pipeline.crash import CrashPoints
from pipeline.job import BatchResult, MalformedRef, compute_batch
from pipeline.offsets import OffsetRange, plan_ranges, resolve_starts
from pipeline.spark import spark_session
from pipeline.state import merge_counts

log = logging.getLogger("logcount.stage")

# The DLQ keeps malformed lines for 90 days: long enough for someone to notice and replay them.
DLQ_RETENTION_MS = str(90 * 24 * 3600 * 1000)
RESTORE_TIMEOUT_S = 300.0
# A batch that fails before its transaction opens (broker bouncing under the plan, a Spark task
# losing its Kafka connection) is simply re-planned: nothing was published. Backoff doubles from
# 1 s to 15 s; 20 failures in a row (about 4 minutes) means the cause is not passing, and the
# stage exits with the last error rather than spinning silently.
RETRY_FIRST_S = 1.0
RETRY_MAX_S = 15.0
MAX_CONSECUTIVE_FAILURES = 20
# How long a failing start-up waits for the Spark session it began beside it (so that the JVM's
# start-up chatter comes before our one error line). A session starts in 3-10 s; past this the
# error is printed anyway.
SPARK_START_WAIT_S = 60.0


class StopFlag:
    """Set by SIGTERM/SIGINT. The loop checks it between batches; a running Spark job is
    cancelled so the stop is prompt; an open transaction is always finished or aborted first."""

    def __init__(self) -> None:
        self.event = threading.Event()
        self.on_stop: list = []

    def install(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return  # signals reach only the main thread; embedded callers use .event

        def handler(signum, frame):
            if not self.event.is_set():
                log.info("signal %s: stopping after the current step", signal.Signals(signum).name)
                self.event.set()
                # From a helper thread: the handler runs on the main thread, which may be inside a
                # py4j call; calling py4j again from here would re-enter that same socket.
                for cb in self.on_stop:
                    threading.Thread(target=_best_effort, args=(cb,), daemon=True).start()

        signal.signal(signal.SIGTERM, handler)
        signal.signal(signal.SIGINT, handler)

    @property
    def set(self) -> bool:
        return self.event.is_set()


def _best_effort(fn) -> None:
    with contextlib.suppress(Exception):
        fn()


@dataclass
class Plan:
    ranges: list[OffsetRange]
    commit_offsets: dict[int, int]  # partition -> offset to commit (ranges' ends + new starts)


def output_record(topic: str, minute: str, total: int, level: str) -> OutRecord:
    value = {"log_time": minute, "log_count": total, "level": level}
    return OutRecord(topic, minute.encode(), json.dumps(value).encode())


def dlq_record(topic: str, source_topic: str, ref: MalformedRef) -> OutRecord:
    import base64

    value = {
        "topic": source_topic, "partition": ref.partition, "offset": ref.offset,
        "reason": ref.reason, "raw_length": ref.raw_length,
        "raw_prefix_base64": base64.b64encode(ref.raw_prefix).decode(),
        "raw_prefix_text": ref.raw_prefix.decode("utf-8", errors="replace"),
    }
    return OutRecord(topic, f"{source_topic}/{ref.partition}/{ref.offset}".encode(),
                     json.dumps(value).encode())


def restore_totals(bootstrap: str, topic: str, extra: dict[str, str]) -> dict[str, int]:
    """Read the output topic to its end with read_committed: the last total per minute.

    Runs after init_transactions, which has aborted any transaction a predecessor left open, so
    the last stable offset is the end of the log and this read does not wait on it.
    """
    adm = kafka_io.admin(bootstrap, extra)
    parts = kafka_io.partitions_of(adm, topic) or []
    ends = kafka_io.list_offsets(adm, topic, parts, OffsetSpec.latest())
    starts = kafka_io.list_offsets(adm, topic, parts, OffsetSpec.earliest())
    todo = {p for p in parts if ends[p] > starts[p]}
    totals: dict[str, int] = {}
    if not todo:
        return totals
    consumer = Consumer(kafka_io.client_config(bootstrap, extra, **{
        "group.id": f"logcount-restore-{uuid.uuid4().hex}", "isolation.level": "read_committed",
        "enable.auto.commit": False, "enable.partition.eof": True,
    }))
    try:
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in todo])
        deadline = time.monotonic() + RESTORE_TIMEOUT_S
        while todo:
            if time.monotonic() > deadline:
                raise DependencyError(f"restoring totals from {topic}: end not reached in "
                                      f"{RESTORE_TIMEOUT_S:.0f}s")
            for msg in consumer.consume(10_000, 1.0):
                if msg.error():
                    if msg.error().code() == KafkaError._PARTITION_EOF:
                        todo.discard(msg.partition())
                        continue
                    raise DependencyError(f"restoring totals: {msg.error().str()}")
                if msg.offset() + 1 >= ends[msg.partition()]:
                    todo.discard(msg.partition())
                if msg.value() is None:  # a tombstone: the minute was deleted
                    totals.pop(msg.key().decode(), None)
                    continue
                value = json.loads(msg.value())
                totals[value["log_time"]] = int(value["log_count"])
    finally:
        consumer.close()
    return totals


class Stage:
    def __init__(self, s: RunSettings) -> None:
        self.s = s
        self.extra = s.kafka_client_config
        self.crash = CrashPoints()
        self.stop = StopFlag()
        self.admin = kafka_io.wait_for_broker(s.bootstrap_servers, self.extra, s.startup_timeout)
        self.batches = 0
        self.failures = 0
        self.metrics = StageMetrics()
        self.health = Health(s.health_stall_seconds)

    # -- start --------------------------------------------------------------------------------
    def ensure_topics(self) -> None:
        s = self.s
        kafka_io.ensure_topic(self.admin, s.input_topic, s.input_partitions)
        parts = len(kafka_io.partitions_of(self.admin, s.input_topic) or [1])
        kafka_io.ensure_topic(self.admin, s.output_topic, parts, {"cleanup.policy": "compact"})
        kafka_io.require_compacted(self.admin, s.output_topic)
        kafka_io.ensure_topic(self.admin, s.dlq_topic, parts, {"retention.ms": DLQ_RETENTION_MS})

    def group_consumer(self) -> Consumer:
        """A consumer that never subscribes: it reads the group's committed offsets and lends its
        group metadata to send_offsets_to_transaction. Spark's executors do the reading."""
        return Consumer(kafka_io.client_config(self.s.bootstrap_servers, self.extra, **{
            "group.id": self.s.group_id, "isolation.level": "read_committed",
            "enable.auto.commit": False,
        }))

    # -- one batch ----------------------------------------------------------------------------
    def plan(self, consumer: Consumer, limit: dict[int, int] | None) -> Plan:
        s = self.s
        parts = kafka_io.partitions_of(self.admin, s.input_topic) or []  # new partitions too
        committed = kafka_io.committed_offsets(consumer, s.input_topic, parts)
        earliest = kafka_io.list_offsets(self.admin, s.input_topic, parts, OffsetSpec.earliest())
        stable = kafka_io.list_offsets(self.admin, s.input_topic, parts, OffsetSpec.latest())
        if limit is not None:  # --once: only what was readable when the command started
            stable = {p: min(off, limit.get(p, 0)) for p, off in stable.items()}
        starts = resolve_starts(committed, earliest, stable, s.starting_offsets)
        ranges = plan_ranges(starts, stable, s.max_records_per_batch)
        lag = {p: max(0, stable[p] - starts[p]) for p in stable}
        for p, n in lag.items():
            self.metrics.lag.labels(partition=str(p)).set(n)
        self.health.lag = sum(lag.values())
        # Commit new starting points too (a fresh partition, a log start moved by retention),
        # so the group's offsets always say where the stage stands.
        commit = {p: off for p, off in starts.items() if committed.get(p) != off}
        return Plan(ranges, commit)

    def publish(self, sink, consumer: Consumer, plan: Plan, result: BatchResult,
                totals: dict[str, int]) -> dict[str, int]:
        s = self.s
        updates = merge_counts(totals, result.counts)
        records = [output_record(s.output_topic, m, n, s.level) for m, n in sorted(updates.items())]
        records += [dlq_record(s.dlq_topic, s.input_topic, ref) for ref in result.malformed]
        offsets = dict(plan.commit_offsets)
        offsets.update({r.partition: r.end for r in result.ranges})
        tps = [TopicPartition(s.input_topic, p, off) for p, off in sorted(offsets.items())]
        sink.commit(records, tps, consumer.consumer_group_metadata())
        return updates

    def transient_failure(self, doing: str, exc: Exception) -> None:
        """Log, back off and let the loop re-plan; give up after too many in a row."""
        self.failures += 1
        self.metrics.batches_aborted.inc()
        first_line = str(exc).strip().splitlines()[0] if str(exc).strip() else repr(exc)
        if self.failures >= MAX_CONSECUTIVE_FAILURES:
            raise DependencyError(f"{doing} failed {self.failures} times in a row; last: "
                                  f"{first_line[:500]}") from exc
        delay = min(RETRY_FIRST_S * 2 ** (self.failures - 1), RETRY_MAX_S)
        log.warning("%s failed (%s); re-planning in %.0fs (%d in a row)", doing,
                    first_line[:300], delay, self.failures)
        self.stop.event.wait(delay)

    def start_spark(self):
        t0 = time.monotonic()
        spark = spark_session(self.s.master)
        log.info("Spark session on %s ready in %.1fs", self.s.master, time.monotonic() - t0)
        return spark

    def run(self) -> int:
        s = self.s
        log.info("starting stage: %r", s)
        self.stop.install()
        server = serve(s.metrics_port, self.metrics.registry, self.health)
        self.ensure_topics()  # configuration errors exit here, before Spark starts at all
        # The Spark session starts beside the rest of the Kafka start-up, which it does not
        # depend on: a restart's first commit comes seconds sooner. Nothing is read or written
        # before both are done, so the order of fencing and reading is unchanged.
        starter = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="spark-start")
        spark_started = starter.submit(self.start_spark)
        starter.shutdown(wait=False)
        try:
            consumer = self.group_consumer()
            if s.delivery == "exactly-once":
                sink = TransactionalSink(s.bootstrap_servers, s.transactional_id, self.extra,
                                         self.crash)
            else:
                sink = AtLeastOnceSink(s.bootstrap_servers, consumer, self.extra, self.crash)
            sink.init()
            totals = restore_totals(s.bootstrap_servers, s.output_topic, self.extra)
        except BaseException:
            # Let the Spark start finish first: its JVM writes to our stderr while it starts,
            # and the error that stops us must be the last line an operator sees.
            with contextlib.suppress(Exception):
                spark_started.result(timeout=SPARK_START_WAIT_S)
            raise
        log.info("restored %d minute totals from %s", len(totals), s.output_topic)
        spark = spark_started.result()
        self.stop.on_stop.append(spark.sparkContext.cancelAllJobs)
        limit = None
        progress = None
        first_plan: float | None = None  # for the closing throughput line
        last_commit = 0.0
        committed_records = 0
        if s.once:
            parts = kafka_io.partitions_of(self.admin, s.input_topic) or []
            limit = kafka_io.list_offsets(self.admin, s.input_topic, parts, OffsetSpec.latest())
        try:
            while not self.stop.set:
                try:
                    plan = self.plan(consumer, limit)
                except DependencyError as exc:
                    self.transient_failure("planning", exc)
                    continue
                if s.once and progress is None:  # the first plan's lag is the whole backlog
                    progress = Progress(self.health.lag, "run")
                if first_plan is None and plan.ranges:
                    first_plan = time.monotonic()
                if not plan.ranges and not plan.commit_offsets:
                    if s.once:
                        break
                    self.stop.event.wait(s.trigger_interval)
                    continue
                self.batches += 1
                self.crash.batch = self.batches
                t0 = time.monotonic()
                try:
                    result = compute_batch(spark, s.bootstrap_servers, s.input_topic, plan.ranges,
                                           s.level, self.extra, s.max_malformed_per_batch)
                except Exception as exc:  # noqa: BLE001 - Spark/py4j errors have no common base
                    if self.stop.set:  # cancelled by the signal handler: nothing is open
                        break
                    self.transient_failure("the Spark job", exc)
                    continue
                t1 = time.monotonic()
                self.crash("after_collect")
                try:
                    updates = self.publish(sink, consumer, plan, result, totals)
                except AbortableKafkaError as exc:
                    log.warning("batch %d aborted (%s); re-planning from committed offsets",
                                self.batches, exc)
                    self.transient_failure("the transaction", exc)
                    continue
                self.failures = 0
                t2 = last_commit = time.monotonic()
                committed_records += result.records
                # Only now, after the commit, do the in-memory totals move.
                totals.update(updates)
                self.health.progressed()
                m = self.metrics
                m.batches_committed.inc()
                m.records_read.inc(result.records)
                m.malformed.inc(len(result.malformed))
                m.spark_seconds.observe(t1 - t0)
                m.commit_seconds.observe(t2 - t1)
                self.crash("after_commit")
                if progress is not None:
                    progress.advance(sum(r.size for r in result.ranges))
                span = " ".join(f"p{r.partition}:{r.start}-{r.end}" for r in result.ranges)
                log.info("batch %d committed: offsets %s; records %d, malformed %d, minutes "
                         "touched %d, spark %.2fs, commit %.3fs", self.batches, span or "-",
                         result.records, len(result.malformed), len(updates), t1 - t0, t2 - t1)
        finally:
            if progress is not None:
                progress.close()
            sink.close()
            with contextlib.suppress(Exception):  # never mask the error that got us here
                consumer.close()
            if server is not None:
                server.shutdown()
        busy = last_commit - first_plan if first_plan is not None and last_commit else 0.0
        log.info("stage stopped after %d batches: %d records committed in %.2fs from the first "
                 "plan to the last commit (%.0f records/s)", self.batches, committed_records,
                 busy, committed_records / busy if busy else 0.0)
        return 0


def run_stage(s: RunSettings) -> int:
    try:
        return Stage(s).run()
    except KafkaException as exc:  # anything not classified on the way up
        raise FatalKafkaError(f"Kafka: {exc}") from exc
