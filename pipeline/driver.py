"""`logcount run`: the stage. One batch is one cycle, `Stage.cycle`:

    plan     the next input ranges: from the state's offsets up to the last stable offsets
    compute  Spark's executors read exactly those ranges, parse and count; counts come back
    publish  ONE Kafka transaction: new totals, DLQ records, state records, the group's offsets
    advance  only after the commit does the in-memory state move

The state (pipeline/state.py) lives in the compacted `<output>-state` topic, written in that same
transaction, and is checked against the cluster at every start (`Stage.start_state`). There is
no checkpoint directory and nothing else to get out of step.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import socket
import sys
import threading
import time
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from http.server import ThreadingHTTPServer

from confluent_kafka import Consumer, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec

from logcount.connectors import kafka_io, state_topic
from logcount.connectors.transactional_sink import (
    AtLeastOnceSink,
    OutRecord,
    Publisher,
    TransactionalSink,
)
from logcount.core.batch_line import BatchLine, ClosingLine
from logcount.core.errors import (
    AbortableKafkaError,
    AuthorizationError,
    ConfigError,
    DependencyError,
    FatalKafkaError,
    FencedError,
    HungClientError,
    RetriableKafkaError,
    StateRefused,
    TakenOverError,
)
from logcount.core.heartbeat import HEARTBEAT, frozen_between
from logcount.core.metrics import Health, StageMetrics, serve
from logcount.core.progress import Progress
from logcount.core.records import DeadLetter, MinuteTotal, encode_dead_letter, encode_total
from logcount.core.settings import RunSettings
from logcount.formats.rule import REASON_LATE
from logcount.formats.spark import check_regex
from logcount.formats.spec import FormatError
from logcount.pipeline import start_facts
from logcount.pipeline.crash import CrashPoints
from logcount.pipeline.job import BatchResult, MalformedRef, compute_batch
from logcount.pipeline.offsets import (
    OffsetRange,
    batch_cap,
    offsets_to_send,
    pacing_wait,
    plan_ranges,
    resolve_starts,
)
from logcount.pipeline.spark import SessionStart, connector_jars, under_spark_submit
from logcount.pipeline.state import (
    CLAIM_KEY,
    Change,
    StageState,
    check_start,
    claim_value,
    claimant,
    decode_records,
    state_topic_name,
)
from logcount.pipeline.totals import minute_index, minute_text

log = logging.getLogger("logcount.stage")

# The DLQ keeps malformed lines for 90 days: long enough for someone to notice and replay them.
DLQ_RETENTION_MS = str(90 * 24 * 3600 * 1000)
# A batch that fails before its transaction opens is re-planned (nothing was published): 0.5 s,
# then every second, so a heal is followed within a second; a plan is 3 small admin requests.
# Figures: docs/tuning.md#where-a-broker-restarts-9-115-s-went-and-what-was-cut
RETRY_FIRST_S = 0.5
RETRY_MAX_S = 1.0
# Failing without a break for 5 minutes means the cause is not passing: exit with the last
# error rather than spin, and let the supervisor decide.
GIVE_UP_AFTER_S = 300.0
# How long a failing start-up waits, with --verbose, for the Spark session it began beside it
# (so that the JVM's start-up chatter comes before our one error line). A session starts in
# 2-10 s; past this the error is printed anyway.
SPARK_START_WAIT_S = 60.0
# How often a running stage asks whether its input or output topic was recreated under it: one
# DescribeTopics per 30 s is nothing, and a batch planned meanwhile is caught by the offset check
# (a recreated log is behind the state) or by this one before the next.
TOPIC_ID_CHECK_S = 30.0
# A transaction sends the group offsets that moved, and all of them hourly (and at a first commit):
# an empty group's offset expires offsets.retention.minutes (7 days) after its last commit, so an
# idle input partition would lose it; the refresh is one larger TxnOffsetCommit an hour.
GROUP_OFFSETS_REFRESH_S = 3600.0
# A hung librdkafka call makes the stage replace its Kafka clients (keeping the Spark session) once
# its own claim is still the last; a fourth hang before any commit means replacing does not help,
# so it exits for its supervisor (three: links healing one by one can catch a new producer).
MAX_HANGS_WITHOUT_COMMIT = 3
# A producer fenced while its own claim is still the last (the broker aborted our transaction
# after transaction.timeout.ms, e.g. the process stood stopped) is replaced in-process like a
# hung one. A fourth fencing before any batch commits is not a passing fault: exit 1.
MAX_FENCES_WITHOUT_COMMIT = 3
# A replacement claims after its init_transactions fenced us and its state read (0.1-0.3 s here,
# longer for years of minutes on a loaded host): fenced with no freeze to explain it, the stage
# watches the claim this long before it fences anyone back; a freeze gave a replacement its time.
CLAIM_GRACE_S = 5.0
CLAIM_POLL_S = 0.5


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


def output_record(topic: str, minute: str, total: int, level: str) -> OutRecord:
    return OutRecord(topic, *encode_total(MinuteTotal(minute, total, level)))


def dlq_record(topic: str, source_topic: str, ref: MalformedRef) -> OutRecord:
    return OutRecord(topic, *encode_dead_letter(DeadLetter(
        source_topic, ref.partition, ref.offset, ref.reason, ref.raw_length, ref.raw_prefix)))


@dataclass
class Plan:
    ranges: list[OffsetRange]
    starts: dict[int, int]  # every partition's start (the state's offsets, moved where needed)
    commit: bool  # a transaction is due even with no ranges (a repair, new starting points)


class _Retry(Exception):
    """A batch step failed before anything was published: back off and plan again."""

    def __init__(self, doing: str, cause: Exception) -> None:
        super().__init__(doing)
        self.doing, self.cause = doing, cause


@dataclass
class _Tally:
    """What the stage has done, for its closing line."""

    records: int = 0
    first_plan: float | None = None
    last_commit: float = 0.0


class Stage:
    def __init__(self, s: RunSettings, spark: SessionStart | None = None) -> None:
        self.s = s
        self.fmt = s.line_format  # what a record counts as: the state's identity
        self.spark_start = spark  # begun by the caller, or by start()
        self.extra = s.kafka_client_config  # librdkafka: the driver's clients
        self.spark_options = executor_kafka_options(s.spark_kafka_options, s.group_id)
        self.state_topic = state_topic_name(s.output_topic)
        self.crash = CrashPoints()
        self.stop = StopFlag()
        if not under_spark_submit():  # spark-submit brings its own jars (or --packages)
            connector_jars()  # missing jars: say so before anything starts
        self.admin: AdminClient  # start() waits for the broker
        self.server: ThreadingHTTPServer | None = None  # started once the broker answers
        self.batches = 0
        self.backlogged = False  # the last plan left more than one batch's records (plan())
        self.failures = 0
        self.failing_since: float | None = None  # the first of the failures in a row
        self.hangs = 0  # hung Kafka calls since the last commit
        self.fences = 0  # fencings of our own producer since the last commit
        self.recovering: str | None = None  # why the clients are being replaced (a metric label)
        self.batch_started = time.monotonic()  # the current batch's plan began
        self.clients_made_at = 0.0  # kafka_clients(): when the current ones were made
        # Who this process is in the state topic's claim: unique per start, so a restart on the
        # same host is another instance.
        self.instance = uuid.uuid4().hex[:16]
        self.metrics = StageMetrics()
        self.health = Health(s.health_stall_seconds)
        self.tally = _Tally()
        self.limit: dict[int, int] | None = None  # --once: the ends readable at start
        self.ids_checked_at = time.monotonic()  # start_state has just read them
        self.progress: Progress | None = None
        self.state: StageState
        self.commit_due = False  # set by start_state: commit before the first batch
        self.all_offsets_sent_at: float | None = None  # see GROUP_OFFSETS_REFRESH_S
        self.pending_records: list[tuple[bytes, bytes | None]] = []  # tombstones from start

    # -- start-up ------------------------------------------------------------------------------
    def ensure_topics(self) -> None:
        """Create what is missing; refuse an output or state topic that deletes by time."""
        s, adm, rf = self.s, self.admin, self.s.replication_factor
        kafka_io.ensure_topic(adm, s.input_topic, s.input_partitions, None, rf)
        # Output and DLQ partitions are for what they hold, not copied from the input (see
        # RunSettings.output_partitions); existing topics are used as they are.
        kafka_io.ensure_topic(adm, s.output_topic, s.output_partitions,
                              {"cleanup.policy": "compact"}, rf)
        _require_compacted(adm, s.output_topic, "output")  # before the state topic is created
        kafka_io.ensure_topic(adm, self.state_topic, 1, state_topic.STATE_TOPIC_CONFIG, rf)
        _require_compacted(adm, self.state_topic, "state")
        kafka_io.ensure_topic(adm, s.dlq_topic, s.dlq_partitions,
                              {"retention.ms": DLQ_RETENTION_MS}, rf)

    def group_consumer(self) -> Consumer:
        """A consumer that never subscribes: it reads the group's committed offsets and lends its
        group metadata to send_offsets_to_transaction. Spark's executors do the reading."""
        return Consumer(kafka_io.client_config(self.s.bootstrap_servers, self.extra, **{
            "group.id": self.s.group_id, "isolation.level": "read_committed",
            "enable.auto.commit": False,
        }))

    def read_state_table(self) -> dict[bytes, bytes]:
        """The state topic's last value per key."""
        return start_facts.read_table(self.admin, self.s)

    def start_state(self, consumer: Consumer) -> None:
        """Read the state back and check it against the cluster. Runs after init_transactions:
        a predecessor's open transaction is aborted, so state and group offsets are settled.
        `logcount state show` reads and decides the same way (pipeline/state_view.py)."""
        t0 = time.monotonic()
        facts = start_facts.gather(self.admin, self.s, consumer, self.read_state_table,
                                  created=True)
        progress, hours = decode_records(facts.table, self.state_topic)
        start = check_start(progress, hours, facts.start, start_facts.wanted(self.s))
        for line in start.warnings:
            log.warning("%s", line)
        self.state = start.state
        self.commit_due = start.must_commit
        self.pending_records = [(k, None) for k in start.tombstones]
        self.metrics.state_minutes.set(len(self.state.totals))
        log.info("state of %s: %d minute totals, offsets %s, restored in %.2fs",
                 self.state_topic, len(self.state.totals), _span(self.state.offsets),
                 time.monotonic() - t0)

    def start(self):
        """Spark, and beside it the broker, topics, fencing and the state. Returns spark, sink,
        consumer."""
        s = self.s
        # The Spark session starts first, beside the whole Kafka start-up it does not depend on:
        # every step moved out of its way brings the first commit, and a restart's, that much
        # sooner. Nothing is read or written before both are done.
        spark_started = self.spark_start or SessionStart(s.master)
        consumer = sink = None
        try:
            if self.fmt.line_regex is not None:
                # A mistake in --line-regex is one line before anything is touched; only Java
                # reads it as the plan will, so this start waits for the session first.
                try:
                    check_regex(spark_started.result(), self.fmt)
                except FormatError as exc:
                    raise ConfigError(str(exc)) from None
            self.admin = kafka_io.wait_for_broker(s.bootstrap_servers, self.extra,
                                                  s.startup_timeout)
            # Only once the broker answers (as before the Spark session began first): a
            # newcomer's wrong address or protocol is one line, with no metrics line before it.
            log.info("starting stage: %r", s)
            self.server = serve(s.metrics_port, self.metrics.registry, self.health)
            self.ensure_topics()
            sink, consumer = self.kafka_clients()
            if s.once:
                parts = kafka_io.partitions_of(self.admin, s.input_topic) or []
                self.limit = kafka_io.list_offsets(self.admin, s.input_topic, parts,
                                                   OffsetSpec.latest())
        except BaseException:
            if _jvm_writes_where_we_do():
                # --verbose: let the JVM finish writing to our stderr, so the error that stops us
                # is the last line an operator sees. Otherwise its output goes to the log file and
                # we exit at once; the JVM exits by itself when our pipe closes.
                with contextlib.suppress(Exception):
                    spark_started.result(timeout=SPARK_START_WAIT_S)
            self.close(sink, consumer)
            raise
        spark = spark_started.result()
        log.info("Spark session on %s ready %.1fs after it began%s", spark.sparkContext.master,
                 spark_started.took or 0.0, " (from spark-submit)" if under_spark_submit() else "")
        self.stop.on_stop.append(spark.sparkContext.cancelAllJobs)
        return spark, sink, consumer

    def kafka_clients(self):
        """The group consumer and the sink, fenced and with the state read back: at start, and
        in place of clients whose call hung. Returns sink, consumer."""
        s = self.s
        consumer = self.group_consumer()
        sink: Publisher
        if s.delivery == "exactly-once":
            sink = TransactionalSink(s.bootstrap_servers, s.txn_id, self.extra, self.crash)
        else:
            sink = AtLeastOnceSink(s.bootstrap_servers, consumer, self.extra, self.crash)
        try:
            sink.init()  # fences a predecessor first: only then is the state settled
            self.start_state(consumer)  # may refuse the start: then nothing is published
            if isinstance(sink, TransactionalSink):
                # Next, before the Spark job: the sooner the claim is in the state topic, the
                # narrower the window in which a predecessor that hung could miss it (the state
                # read before it takes a fraction of a second).
                value = claim_value(self.instance, socket.gethostname(), os.getpid(),
                                    datetime.now(UTC).isoformat(timespec="seconds"))
                sink.commit([OutRecord(self.state_topic, CLAIM_KEY, value)], [], None)
        except BaseException:
            self.close(sink, consumer)
            raise
        self.all_offsets_sent_at = None  # the first commit of these clients sends them all
        self.clients_made_at = time.monotonic()
        return sink, consumer

    def let_go(self, sink, consumer, hung: HungClientError) -> None:
        """A librdkafka call hung: let go of the clients (closed on threads of their own, which
        may never return), and count it; one hang too many is the stage's exit."""
        self.metrics.hung_calls.labels(call=hung.call or "unknown").inc()
        if sink is not None:  # None: the hang was in replacing them (kafka_clients closed them)
            sink.abandon()
        if consumer is not None:
            threading.Thread(target=_best_effort, args=(consumer.close,), daemon=True).start()
        self.hangs += 1
        if self.hangs > MAX_HANGS_WITHOUT_COMMIT:
            raise hung
        self.recovering = "hung_call"
        self.metrics.batches_aborted.inc()
        log.warning("%s; replacing the stage's Kafka clients unless another instance took over",
                    hung)

    def retire(self, sink, consumer) -> None:
        """Let go of clients that saw the cluster fail, between two batches: the loop makes
        new ones (recover_clients) before the next transaction, retrying until it answers."""
        self.recovering = "after_outage"
        sink.abandon()  # nothing open: flushes nothing, on a thread of its own all the same
        threading.Thread(target=_best_effort, args=(consumer.close,), daemon=True).start()
        log.info("replacing the stage's Kafka clients before the next transaction (they saw "
                 "the cluster fail), unless another instance took over")

    def fenced(self, sink, consumer, fenced: FencedError) -> None:
        """Our producer was fenced. Unless another instance took over (the claim check in
        recover_clients), the broker fenced it for our own transaction: aborted after
        transaction.timeout.ms, most often because this process stood stopped longer than that.
        The batch is abandoned (nothing of it reached the in-memory state, which moves only
        after a commit) and the clients are replaced like hung ones."""
        if sink is not None:
            sink.abandon()
        if consumer is not None:
            threading.Thread(target=_best_effort, args=(consumer.close,), daemon=True).start()
        self.fences += 1
        if self.fences > MAX_FENCES_WITHOUT_COMMIT:
            raise FatalKafkaError(
                f"the producer was fenced {self.fences} times without a commit in between "
                f"(last: {fenced}); giving up: the cause is not passing") from fenced
        self.metrics.batches_aborted.inc()
        frozen = frozen_between(self.batch_started)
        timeout_s = getattr(sink, "transaction_timeout_s", None)
        if timeout_s is not None and frozen >= timeout_s:
            self.recovering = "fenced_after_freeze"
            why = (f"this process was stopped for {frozen:.1f}s, longer than "
                   f"transaction.timeout.ms ({timeout_s:.0f}s), and the broker aborted its "
                   f"transaction")
        else:
            self.recovering = "fenced"
            stopped = f" (the process was stopped for {frozen:.1f}s)" if frozen else ""
            why = f"the broker fenced the producer{stopped}: {fenced}"
        log.warning("producer fenced, cause %s: %s; abandoning batch %d and replacing the "
                    "Kafka clients unless another instance took over", self.recovering, why,
                    self.batches)

    def recover_clients(self):
        """After a hang: what a restart does, without its Spark start. First the rule that keeps
        a superseded instance from coming back: if the state topic's last claim is not this
        instance's, another one took the transactional id while this one hung (an orchestrator
        replaced it): exit without publishing (TakenOverError). Else a new producer with the
        same transactional.id fences the hung one and settles its transaction (committed if its
        commit had reached the coordinator, else aborted), and the state is read back, so
        nothing in memory from before the hang is trusted. Returns sink, consumer."""
        s = self.s
        if s.delivery == "exactly-once":
            holder = claimant(self.read_state_table())
            deadline = time.monotonic() + CLAIM_GRACE_S
            while (holder == self.instance and self.recovering == "fenced"
                   and time.monotonic() < deadline and not self.stop.event.wait(CLAIM_POLL_S)):
                holder = claimant(self.read_state_table())
            if holder != self.instance:
                while_ = {"hung_call": "this one's Kafka call hung",
                          "after_outage": "the cluster was away"}.get(
                              self.recovering or "", "its producer was fenced")
                raise TakenOverError(
                    f"another instance ({holder or 'unknown'}) took transactional id {s.txn_id} "
                    f"while {while_}; this instance stops without publishing anything more")
        clients = self.kafka_clients()
        self.metrics.producer_recoveries.labels(cause=self.recovering or "unknown").inc()
        log.info("Kafka clients replaced (%s); batch %d is planned again from the committed "
                 "state", self.recovering, self.batches + 1)
        self.recovering = None
        return clients

    # -- the cycle -----------------------------------------------------------------------------
    def cycle(self, spark, sink: Publisher, consumer: Consumer) -> bool:
        """One batch: plan -> compute -> publish -> advance. False when there was nothing to do."""
        self.batch_started = time.monotonic()
        plan = self.plan()
        if not plan.ranges and not plan.commit:
            return False
        self.batches += 1
        self.crash.batch = self.batches
        t0 = time.monotonic()
        result = self.compute(spark, plan)
        t1 = time.monotonic()
        self.crash("after_collect")
        change = self.state.change(result.ranges, result.counts, _now_minute(), plan.starts,
                                   self.pending_records)
        self.publish(sink, consumer, result, change)
        t2 = time.monotonic()
        self.state.advance(change)  # only now, after the commit
        self.pending_records, self.commit_due = [], False
        self.observe(result, change, t1 - t0, t2 - t1)
        self.crash("after_commit")
        return True

    def plan(self) -> Plan:
        s = self.s
        try:
            parts = kafka_io.partitions_of(self.admin, s.input_topic) or []  # new ones too
            earliest = kafka_io.list_offsets(self.admin, s.input_topic, parts,
                                             OffsetSpec.earliest())
            stable = kafka_io.list_offsets(self.admin, s.input_topic, parts, OffsetSpec.latest())
        except DependencyError as exc:
            raise _Retry("planning", exc) from exc
        self.check_topics_still_ours(stable)
        if self.limit is not None:  # --once: only what was readable when the command started
            stable = {p: min(off, self.limit.get(p, 0)) for p, off in stable.items()}
        starts = resolve_starts(self.state.offsets, earliest, stable)
        moved = {p: o for p, o in starts.items() if self.state.offsets.get(p) != o}
        for p in sorted(moved):
            if p in self.state.offsets:
                log.warning("p%d: retention deleted offsets %d-%d before they were counted; "
                            "continuing at %d", p, self.state.offsets[p], moved[p] - 1, moved[p])
        lag = {p: max(0, stable[p] - starts[p]) for p in stable}
        for p, n in lag.items():
            self.metrics.lag.labels(partition=str(p)).set(n)
        self.health.lag = sum(lag.values())
        if s.once and self.progress is None:  # the first plan's lag is the whole backlog
            self.progress = Progress(self.health.lag, "run")
        cap = batch_cap(self.batches, s.max_records_per_batch)
        self.backlogged = self.health.lag > cap  # more than one batch: no pacing (run())
        ranges = plan_ranges(starts, stable, cap)
        if ranges and self.tally.first_plan is None:
            self.tally.first_plan = time.monotonic()
        return Plan(ranges, starts, bool(moved) or self.commit_due)

    def check_topics_still_ours(self, stable: dict[int, int]) -> None:
        """While running, what the start check would refuse: an input whose log fell behind the
        state (recreated or truncated; the stage would idle, then count the new log from the
        old offsets), and, every TOPIC_ID_CHECK_S, input or output topic ids that changed."""
        state, s = self.state, self.s
        behind = {p: o for p, o in state.offsets.items() if stable.get(p, -1) < o}
        if behind:
            detail = ", ".join(f"p{p} state {o} > end {stable.get(p, 'none')}"
                               for p, o in sorted(behind.items()))
            raise StateRefused(f"input topic {s.input_topic} fell behind the state while the "
                               f"stage ran ({detail}): it was recreated or truncated; nothing "
                               f"more is published")
        if time.monotonic() - self.ids_checked_at < TOPIC_ID_CHECK_S:
            return
        self.ids_checked_at = time.monotonic()
        try:
            ids = kafka_io.existing_topic_ids(self.admin, [s.input_topic, s.output_topic])
        except DependencyError as exc:  # a topic gone (being recreated) or a broker away
            raise _Retry("checking the topic ids", exc) from exc
        known = {s.input_topic: state.identity.input_topic_id,
                 s.output_topic: state.identity.output_topic_id}
        changed = [t for t, i in ids.items() if i != known[t]]
        if changed:
            raise StateRefused(f"topic {changed[0]} was recreated while the stage ran (id "
                               f"{known[changed[0]]} in the state, {ids[changed[0]]} now); "
                               f"nothing more is published: restart, and the start check "
                               f"decides (recount or refuse)")

    def compute(self, spark, plan: Plan) -> BatchResult:
        s = self.s
        late = self.state.late_before()
        try:
            return compute_batch(spark, s.bootstrap_servers, s.input_topic, plan.ranges,
                                 self.fmt, self.spark_options, s.max_malformed_per_batch, late)
        except Exception as exc:  # noqa: BLE001 - Spark/py4j errors have no common base
            denial = _spark_denial(str(exc))
            if denial:  # the executors were refused: no retry makes that pass
                raise AuthorizationError(f"the Spark job's Kafka reads: not authorized: "
                                         f"{denial}; grant the ACLs in docs/deploy.md") from exc
            raise _Retry("the Spark job", exc) from exc

    def publish(self, sink: Publisher, consumer: Consumer, result: BatchResult,
                change: Change) -> None:
        """ONE transaction: totals, DLQ records, state records and the group offsets that moved
        (all of them hourly, GROUP_OFFSETS_REFRESH_S), so the group's offsets mirror the state.
        Only partitions written to join the transaction: the touched minutes' output partitions,
        the DLQ's when there is garbage, the state topic's one."""
        s = self.s
        records = [output_record(s.output_topic, minute_text(m), n, self.fmt.level_label)
                   for m, n in sorted(change.updates.items())]
        records += [dlq_record(s.dlq_topic, s.input_topic, ref) for ref in result.malformed]
        records += [OutRecord(self.state_topic, k, v) for k, v in change.state_records]
        now = time.monotonic()
        everything = (self.all_offsets_sent_at is None
                      or now - self.all_offsets_sent_at >= GROUP_OFFSETS_REFRESH_S)
        send = offsets_to_send(change.offsets, self.state.offsets, everything)
        tps = [TopicPartition(s.input_topic, p, off) for p, off in sorted(send.items())]
        try:
            sink.commit(records, tps, consumer.consumer_group_metadata())
        except AbortableKafkaError as exc:
            raise _Retry("the transaction", exc) from exc
        if everything:
            self.all_offsets_sent_at = now

    # -- metrics -------------------------------------------------------------------------------
    def observe(self, result: BatchResult, change: Change, spark_s: float,
                commit_s: float) -> None:
        if self.failures:
            log.info("committing again after %d failed attempts over %.1fs", self.failures,
                     time.monotonic() - (self.failing_since or time.monotonic()))
        self.failures = self.hangs = self.fences = 0
        self.failing_since = None
        t = self.tally
        t.last_commit = time.monotonic()
        t.records += result.records
        self.health.progressed()
        m = self.metrics
        late = sum(1 for ref in result.malformed if ref.reason == REASON_LATE)
        m.batches_committed.inc()
        m.records_read.inc(result.records)
        m.malformed.inc(len(result.malformed) - late)
        m.late.inc(late)
        m.continuation.inc(result.continuation)
        m.counted_lines.inc(sum(result.counts.values()))
        m.state_minutes.set(len(self.state.totals))
        m.spark_seconds.observe(spark_s)
        m.commit_seconds.observe(commit_s)
        if self.progress is not None:
            self.progress.advance(sum(r.size for r in result.ranges))
        log.info("%s", BatchLine(
            self.batches, tuple((r.partition, r.start, r.end) for r in result.ranges),
            result.records, len(result.malformed) - late, late, len(change.updates), spark_s,
            commit_s, result.continuation if self.fmt.continuation == "skip" else None).text())

    def transient_failure(self, failed: _Retry) -> None:
        """Log, back off and let the loop re-plan; give up after too many in a row."""
        exc = failed.cause
        self.failures += 1
        self.metrics.batches_aborted.inc()
        now = time.monotonic()
        if self.failing_since is None:
            self.failing_since = now
        first_line = str(exc).strip().splitlines()[0] if str(exc).strip() else repr(exc)
        if now - self.failing_since >= GIVE_UP_AFTER_S:
            raise DependencyError(f"{failed.doing} failed {self.failures} times in a row over "
                                  f"{now - self.failing_since:.0f}s; last: "
                                  f"{first_line[:500]}") from exc
        delay = min(RETRY_FIRST_S * 2 ** (self.failures - 1), RETRY_MAX_S)
        # One WARN line an outage (retries go on every second), one INFO line when it is over.
        log.log(logging.WARNING if self.failures == 1 else logging.DEBUG,
                "%s failed (%s); re-planning in %.1fs (%d in a row)", failed.doing,
                first_line[:300], delay, self.failures)
        self.stop.event.wait(delay)

    # -- shutdown ------------------------------------------------------------------------------
    def close(self, sink, consumer) -> None:
        if self.progress is not None:
            self.progress.close()
        if sink is not None:
            sink.close()
        if consumer is not None:
            with contextlib.suppress(Exception):  # never mask the error that got us here
                consumer.close()

    def closing_line(self) -> None:
        t = self.tally
        busy = t.last_commit - t.first_plan if t.first_plan is not None and t.last_commit else 0.0
        log.info("%s", ClosingLine(self.batches, t.records, busy).text())

    def run(self) -> int:
        s = self.s
        self.stop.install()
        HEARTBEAT.start()  # from the start: a freeze before the first watched call counts too
        try:
            spark, sink, consumer = self.start()
            try:
                while not self.stop.set:
                    try:
                        if sink is None:  # the last ones hung
                            sink, consumer = self.recover_clients()
                        started = time.monotonic()
                        busy = self.cycle(spark, sink, consumer)
                    except _Retry as failed:
                        if self.stop.set:  # a Spark job cancelled by the signal: nothing open
                            break
                        if isinstance(sink, TransactionalSink) and failed.doing in (
                                "planning", "the Spark job") and self.clients_made_at <= (
                                self.failing_since or time.monotonic()):
                            # After a broker restart the old producer's send_offsets hung for
                            # its whole watchdog (7 s, librdkafka #5456). Nothing is open now:
                            # new clients (claim check first), once per run of failures.
                            stale = sink, consumer
                            sink = consumer = None
                            self.retire(*stale)
                        self.transient_failure(failed)
                        continue
                    except HungClientError as hung:
                        hung_clients = sink, consumer
                        sink = consumer = None  # let go of: never closed in the finally below
                        self.let_go(*hung_clients, hung)
                        continue
                    except FencedError as exc:
                        if isinstance(exc, TakenOverError) or s.delivery != "exactly-once":
                            raise
                        fenced_clients = sink, consumer
                        sink = consumer = None  # let go of: a fenced producer does nothing more
                        self.fenced(*fenced_clients, exc)
                        continue
                    except (DependencyError, RetriableKafkaError, AbortableKafkaError) as exc:
                        if sink is not None:
                            raise
                        # Replacing hung clients failed (the links are still down): try again
                        # after the usual backoff, as a failed plan would.
                        self.transient_failure(_Retry("replacing the Kafka clients", exc))
                        continue
                    if not busy:
                        if s.once:
                            break
                        self.stop.event.wait(s.trigger_interval)
                    elif s.min_batch_interval and not (s.once or self.backlogged):
                        # Pacing: a caught-up stage waits out the rest of the interval, so what
                        # arrives meanwhile joins the next batch instead of making its own.
                        self.stop.event.wait(pacing_wait(started, time.monotonic(),
                                                         s.min_batch_interval))
            finally:
                self.close(sink, consumer)
        except StateRefused as exc:
            self.hold_refusal(exc)
            raise
        finally:
            if self.server is not None:
                self.server.shutdown()
        self.closing_line()
        return 0

    def hold_refusal(self, exc: StateRefused) -> None:
        """A refused stage says so on /metrics (and /healthz) for --refusal-hold-seconds before
        it exits, so that a scrape sees why it is down; SIGTERM ends the wait."""
        self.metrics.start_refused.set(1)
        self.health.refused = str(exc)
        hold = self.s.refusal_hold_seconds
        if self.server is None or hold <= 0:
            return
        log.error("refused: %s; /metrics says logcount_stage_start_refused 1 for %.0fs "
                  "(--refusal-hold-seconds) before the exit", exc, hold)
        self.stop.event.wait(hold)


def _require_compacted(adm: AdminClient, topic: str, role: str) -> None:
    """A topic that deletes by time is refused like a state drift, and shown the same."""
    try:
        kafka_io.require_compacted(adm, topic, role)
    except ConfigError as exc:
        raise StateRefused(str(exc)) from None


def _jvm_writes_where_we_do() -> bool:
    """Whether the Spark JVM's output (it inherits fd 2) reaches the stream our error line goes
    to (sys.stderr). Unless --verbose, the CLI points fd 2 at a log file and keeps sys.stderr
    on a copy of the terminal's descriptor."""
    try:
        return sys.stderr.fileno() == 2
    except (AttributeError, OSError, ValueError):  # replaced by something without a descriptor
        return True


def executor_kafka_options(client: dict[str, str], group_id: str) -> dict[str, str]:
    """The Java client properties of Spark's executors (pure): the --client-config file verbatim
    (over pipeline/job.py's read defaults), and one fixed group id under the stage's group (one
    prefixed group ACL covers it). Fixed, not Spark's default of a fresh random id per batch:
    the executors' consumer pool is keyed by group id and partition, so only a stable id lets
    batch N+1 reuse batch N's connected consumers. The executors assign partitions and never
    commit, so the id joins no group and cannot disturb the stage's own group offsets."""
    return {**client, "group.id": f"{group_id}-spark"}


def _spark_denial(text: str) -> str | None:
    """The Java client's authorization exception in a Spark error, as one line, if any."""
    for line in text.splitlines():
        for name in ("TopicAuthorizationException", "GroupAuthorizationException",
                     "SaslAuthenticationException", "ClusterAuthorizationException"):
            if name in line:
                return line.strip()[line.strip().find(name):][:300]
    return None


def _now_minute() -> int:
    return minute_index(datetime.now(UTC).strftime("%Y-%m-%d %H:%M"))


def _span(offsets: dict[int, int]) -> str:
    return " ".join(f"p{p}:{o}" for p, o in sorted(offsets.items())) or "-"


def run_stage(s: RunSettings, spark: SessionStart | None = None) -> int:
    try:
        return Stage(s, spark).run()
    except KafkaException as exc:  # anything not classified on the way up
        raise FatalKafkaError(f"Kafka: {exc}") from exc
