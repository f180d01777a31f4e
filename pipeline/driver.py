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
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import ThreadingHTTPServer
from typing import Protocol

from confluent_kafka import TopicPartition
from py4j.protocol import Py4JError
from pyspark.errors import PySparkException

from logcount.connectors.transactional_sink import OutRecord, Publisher
from logcount.core.backoff import Backoff
from logcount.core.batch_line import BatchLine, ClosingLine
from logcount.core.errors import (
    AbortableKafkaError,
    AuthorizationError,
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
from logcount.core.records import (
    DeadLetter,
    SeriesEncoder,
    TotalEncoder,
    encode_dead_letter,
)
from logcount.core.recovery import Recovery
from logcount.core.settings import RunSettings
from logcount.formats.rule import REASON_LATE
from logcount.pipeline import start_facts
from logcount.pipeline.crash import CrashPoints
from logcount.pipeline.job import BatchResult, MalformedRef
from logcount.pipeline.offsets import (
    OffsetRange,
    batch_cap,
    offsets_to_send,
    pacing_wait,
    plan_ranges,
    resolve_starts,
)
from logcount.pipeline.state import (
    CLAIM_KEY,
    Change,
    StageState,
    check_start,
    claim_value,
    claimant,
    decode_records,
    decode_series,
    state_topic_name,
)
from logcount.pipeline.totals import minute_index, minute_text

log = logging.getLogger("logcount.stage")

# A batch that fails before its transaction opens is re-planned (nothing was published): 0.5 s,
# then every second, so a heal is followed within a second; a plan is 3 small admin requests.
# Figures: docs/tuning.md#where-a-broker-restarts-9-115-s-went-and-what-was-cut
RETRY_FIRST_S = 0.5
RETRY_MAX_S = 1.0
# Failing without a break for 5 minutes means the cause is not passing: exit with the last
# error rather than spin, and let the supervisor decide.
GIVE_UP_AFTER_S = 300.0
# How often a running stage asks whether its input or output topic was recreated under it: one
# DescribeTopics per 30 s is nothing, and a batch planned meanwhile is caught by the offset check
# (a recreated log is behind the state) or by this one before the next.
TOPIC_ID_CHECK_S = 30.0
# A transaction sends the group offsets that moved, and all of them hourly (and at a first commit):
# an empty group's offset expires offsets.retention.minutes (7 days) after its last commit, so an
# idle input partition would lose it; the refresh is one larger TxnOffsetCommit an hour.
GROUP_OFFSETS_REFRESH_S = 3600.0
# A replacement claims after its init_transactions fenced us and its state read (0.1-0.3 s here,
# longer for years of minutes on a loaded host): fenced with no freeze to explain it, the stage
# watches the claim this long before it fences anyone back; a freeze gave a replacement its time.
CLAIM_GRACE_S = 5.0
CLAIM_POLL_S = 0.5
# What a failed Spark job raises: its own errors (a failed or cancelled job, a socket to the JVM
# that cannot be opened) and py4j's (a Java exception, a JVM that is gone). Nothing else.
SPARK_ERRORS = (PySparkException, Py4JError)


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


class Cluster(Protocol):
    """The stage's view of the Kafka cluster through its admin client (pipeline/wiring.py)."""

    def connect(self) -> None:
        """Wait for the broker (--startup-timeout)."""

    def ensure_topics(self) -> None:
        """Create what is missing; refuse an output or state topic that deletes by time."""

    def input_partitions(self) -> list[int]: ...

    def input_offsets(self, parts: list[int], latest: bool) -> dict[int, int]:
        """Each partition's earliest offset, or its last stable one (`latest`)."""

    def topic_ids(self, topics: list[str]) -> dict[str, str]: ...

    def state_table(self) -> dict[bytes, bytes]:
        """The state topic's last value per key."""

    def facts(self, group: Group) -> start_facts.Facts:
        """What a start decides on (pipeline/start_facts.py), with the group's offsets."""


class Group(Protocol):
    """The group consumer: it never subscribes; it lends its group metadata to the
    transaction (and reads the group's committed offsets at start)."""

    def consumer_group_metadata(self) -> object: ...

    def close(self) -> None: ...


class Compute(Protocol):
    """The Spark side: a session begun before the stage, and the batch job on it."""

    def check_format(self) -> None:
        """Refuse a --line-regex Java cannot read (ConfigError), before anything is touched."""

    def settle(self) -> None:
        """A start failed: let the JVM finish its output where ours goes (--verbose)."""

    def ready(self) -> None:
        """Wait for the session."""

    def cancel(self) -> None:
        """Cancel the running job (from a signal's helper thread)."""

    def batch(self, ranges: list[OffsetRange], late_before: int | None) -> BatchResult:
        """Read, parse and count `ranges`; raises Spark's and py4j's errors (SPARK_ERRORS)."""


# A publisher and the group consumer it sends offsets through, made anew after a hang.
Clients = Callable[[], "tuple[Publisher, Group]"]


@dataclass
class Seams:
    """What a Stage works through; the real ones are wired in pipeline/wiring.py."""

    cluster: Cluster
    clients: Clients
    compute: Compute
    clock: Callable[[], float] = time.monotonic
    sleep: Callable[[float], bool] | None = None  # default: the stop flag's wait
    frozen: Callable[[float], float] = frozen_between  # process stopped since then (heartbeat)
    crash: CrashPoints = field(default_factory=CrashPoints)
    serve_metrics: bool = True


class Stage:
    def __init__(self, s: RunSettings, seams: Seams) -> None:
        self.s = s
        self.fmt = s.line_format  # what a record counts as: the state's identity
        self.cluster, self.make_clients, self.compute = seams.cluster, seams.clients, seams.compute
        self.clock, self.frozen, self.crash = seams.clock, seams.frozen, seams.crash
        self.stop = StopFlag()
        self.sleep = seams.sleep or self.stop.event.wait
        self.serve_metrics = seams.serve_metrics
        self.state_topic = state_topic_name(s.output_topic)
        self.server: ThreadingHTTPServer | None = None  # started once the broker answers
        self.sink: Publisher | None = None  # None: let go of (hung, fenced, retired)
        self.consumer: Group | None = None
        self.batches = 0
        self.overflow_warned_at: float | None = None  # the overflow WARN: once an hour
        self.encoder: SeriesEncoder | None = None  # grouped output records (batch_records)
        self.totals_encoder = TotalEncoder(self.fmt.level_label)  # ungrouped ones
        self.backlogged = False  # the last plan left more than one batch's records (plan())
        self.backoff = Backoff(RETRY_FIRST_S, RETRY_MAX_S, give_up_s=GIVE_UP_AFTER_S,
                               clock=self.clock)
        self.recovery = Recovery()
        self.batch_started = self.clock()  # the current batch's plan began
        self.clients_made_at = 0.0  # kafka_clients(): when the current ones were made
        # Who this process is in the state topic's claim: unique per start, so a restart on the
        # same host is another instance.
        self.instance = uuid.uuid4().hex[:16]
        self.metrics = StageMetrics(tuple(d.name for d in self.fmt.group_by))
        self.health = Health(s.health_stall_seconds)
        self.tally = _Tally()
        self.limit: dict[int, int] | None = None  # --once: the ends readable at start
        self.ids_checked_at = self.clock()  # start_state has just read them
        self.progress: Progress | None = None
        self.state: StageState
        self.commit_due = False  # set by start_state: commit before the first batch
        self.all_offsets_sent_at: float | None = None  # see GROUP_OFFSETS_REFRESH_S
        self.pending_records: list[tuple[bytes, bytes | None]] = []  # tombstones from start

    # -- start-up ------------------------------------------------------------------------------
    def start_state(self, consumer: Group) -> None:
        """Read the state back and check it against the cluster. Runs after init_transactions:
        a predecessor's open transaction is aborted, so state and group offsets are settled.
        `logcount state show` reads and decides the same way (pipeline/state_view.py)."""
        t0 = self.clock()
        facts = self.cluster.facts(consumer)
        progress, hours = decode_records(facts.table, self.state_topic)
        start = check_start(progress, hours, facts.start, start_facts.wanted(self.s),
                            decode_series(facts.table))
        for line in start.warnings:
            log.warning("%s", line)
        self.state = start.state
        self.commit_due = start.must_commit
        self.pending_records = [(k, None) for k in start.tombstones] + start.records
        self.metrics.state_minutes.set(self.state.cells())
        series = self.state.series
        if series is not None and self.s.horizon_minutes is None:
            log.warning("--group-by without --lateness-horizon: the state keeps every (minute, "
                        "series) total for good, up to %d series more each minute; set a "
                        "horizon to bound it (docs/contract.md)", series.max_series + 1)
        log.info("state of %s: %d minute totals%s, offsets %s, restored in %.2fs",
                 self.state_topic, self.state.cells(),
                 "" if series is None else f" in {series.named} named series",
                 _span(self.state.offsets), self.clock() - t0)

    def start(self) -> None:
        """Beside the Spark session (begun before the stage): the broker, topics, fencing and
        the state. Nothing is read or written before both are done."""
        s = self.s
        try:
            # A mistake in --line-regex is one line before anything is touched; only Java
            # reads it as the plan will, so this start waits for the session first.
            self.compute.check_format()
            self.cluster.connect()
            # Only once the broker answers (as before the Spark session began first): a
            # newcomer's wrong address or protocol is one line, with no metrics line before it.
            log.info("starting stage: %r", s)
            if self.serve_metrics:
                self.server = serve(s.metrics_port, self.metrics.registry, self.health)
            self.cluster.ensure_topics()
            self.sink, self.consumer = self.kafka_clients()
            if s.once:
                self.limit = self.cluster.input_offsets(self.cluster.input_partitions(),
                                                        latest=True)
        except BaseException:
            self.compute.settle()
            self.close()
            raise
        self.compute.ready()
        self.stop.on_stop.append(self.compute.cancel)

    def kafka_clients(self) -> tuple[Publisher, Group]:
        """The group consumer and the sink, fenced and with the state read back: at start, and
        in place of clients whose call hung. Returns sink, consumer."""
        sink, consumer = self.make_clients()
        try:
            sink.init()  # fences a predecessor first: only then is the state settled
            self.start_state(consumer)  # may refuse the start: then nothing is published
            if self.s.delivery == "exactly-once":
                # Next, before the Spark job: the sooner the claim is in the state topic, the
                # narrower the window in which a predecessor that hung could miss it (the state
                # read before it takes a fraction of a second).
                value = claim_value(self.instance, socket.gethostname(), os.getpid(),
                                    datetime.now(UTC).isoformat(timespec="seconds"))
                sink.commit([OutRecord(self.state_topic, CLAIM_KEY, value)], [], None)
        except BaseException:
            _close(sink, consumer)
            raise
        self.all_offsets_sent_at = None  # the first commit of these clients sends them all
        self.clients_made_at = self.clock()
        return sink, consumer

    # -- recovery: the clients are let go of, and replaced before the next batch ----------------
    def let_go(self) -> None:
        """Let go of the clients (closed on threads of their own, which may never return)."""
        sink, consumer, self.sink, self.consumer = self.sink, self.consumer, None, None
        if sink is not None:  # None: the hang was in replacing them (kafka_clients closed them)
            sink.abandon()
        if consumer is not None:
            threading.Thread(target=_best_effort, args=(consumer.close,), daemon=True).start()

    def hung(self, hung: HungClientError) -> None:
        """A librdkafka call hung: let go of the clients, and count it; one hang too many is the
        stage's exit."""
        self.metrics.hung_calls.labels(call=hung.call or "unknown").inc()
        self.let_go()
        if not self.recovery.hung():
            raise hung
        self.metrics.batches_aborted.inc()
        log.warning("%s; replacing the stage's Kafka clients unless another instance took over",
                    hung)

    def retire(self) -> None:
        """Let go of clients that saw the cluster fail, between two batches: the loop makes
        new ones (recover_clients) before the next transaction, retrying until it answers."""
        self.recovery.outage()
        self.let_go()  # nothing open: flushes nothing, on a thread of its own all the same
        log.info("replacing the stage's Kafka clients before the next transaction (they saw "
                 "the cluster fail), unless another instance took over")

    def fenced(self, fenced: FencedError) -> None:
        """Our producer was fenced. Unless another instance took over (the claim check in
        recover_clients), the broker fenced it for our own transaction: aborted after
        transaction.timeout.ms, most often because this process stood stopped longer than that.
        The batch is abandoned (nothing of it reached the in-memory state, which moves only
        after a commit) and the clients are replaced like hung ones."""
        timeout_s = getattr(self.sink, "transaction_timeout_s", None)
        self.let_go()
        frozen = self.frozen(self.batch_started)
        cause = ("fenced_after_freeze" if timeout_s is not None and frozen >= timeout_s
                 else "fenced")
        if not self.recovery.fenced(cause):
            raise FatalKafkaError(
                f"the producer was fenced {self.recovery.fences} times without a commit in "
                f"between (last: {fenced}); giving up: the cause is not passing") from fenced
        self.metrics.batches_aborted.inc()
        if cause == "fenced_after_freeze":
            why = (f"this process was stopped for {frozen:.1f}s, longer than "
                   f"transaction.timeout.ms ({timeout_s:.0f}s), and the broker aborted its "
                   f"transaction")
        else:
            stopped = f" (the process was stopped for {frozen:.1f}s)" if frozen else ""
            why = f"the broker fenced the producer{stopped}: {fenced}"
        log.warning("producer fenced, cause %s: %s; abandoning batch %d and replacing the "
                    "Kafka clients unless another instance took over", cause, why,
                    self.batches)

    def recover_clients(self) -> None:
        """After a hang: what a restart does, without its Spark start. First the rule that keeps
        a superseded instance from coming back: if the state topic's last claim is not this
        instance's, another one took the transactional id while this one hung (an orchestrator
        replaced it): exit without publishing (TakenOverError). Else a new producer with the
        same transactional.id fences the hung one and settles its transaction (committed if its
        commit had reached the coordinator, else aborted), and the state is read back, so
        nothing in memory from before the hang is trusted."""
        s = self.s
        if s.delivery == "exactly-once":
            holder = claimant(self.cluster.state_table())
            watch = Backoff(CLAIM_POLL_S, give_up_s=CLAIM_GRACE_S, clock=self.clock).begin()
            while holder == self.instance and self.recovery.cause == "fenced":
                pause = watch.failed()
                if pause is None or self.sleep(pause):  # the grace is over, or a stop
                    break
                holder = claimant(self.cluster.state_table())
            if holder != self.instance:
                while_ = {"hung_call": "this one's Kafka call hung",
                          "after_outage": "the cluster was away"}.get(
                              self.recovery.cause or "", "its producer was fenced")
                raise TakenOverError(
                    f"another instance ({holder or 'unknown'}) took transactional id {s.txn_id} "
                    f"while {while_}; this instance stops without publishing anything more")
        self.sink, self.consumer = self.kafka_clients()
        cause = self.recovery.recovered()
        self.metrics.producer_recoveries.labels(cause=cause).inc()
        log.info("Kafka clients replaced (%s); batch %d is planned again from the committed "
                 "state", cause, self.batches + 1)

    # -- the cycle -----------------------------------------------------------------------------
    def cycle(self, sink: Publisher, consumer: Group) -> bool:
        """One batch: plan -> compute -> publish -> advance. False when there was nothing to do."""
        self.batch_started = self.clock()
        plan = self.plan()
        if not plan.ranges and not plan.commit:
            return False
        self.batches += 1
        self.crash.batch = self.batches
        t0 = self.clock()
        result = self.run_job(plan)
        t1 = self.clock()
        self.crash("after_collect")
        change = self.state.change(result.ranges, result.counts, _now_minute(), plan.starts,
                                   self.pending_records, result.series)
        self.publish(sink, consumer, result, change)
        t2 = self.clock()
        self.state.advance(change)  # only now, after the commit
        self.pending_records, self.commit_due = [], False
        self.observe(result, change, t1 - t0, t2 - t1)
        self.crash("after_commit")
        return True

    def plan(self) -> Plan:
        s = self.s
        try:
            parts = self.cluster.input_partitions()  # new ones too
            earliest = self.cluster.input_offsets(parts, latest=False)
            stable = self.cluster.input_offsets(parts, latest=True)
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
            self.tally.first_plan = self.clock()
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
        if self.clock() - self.ids_checked_at < TOPIC_ID_CHECK_S:
            return
        self.ids_checked_at = self.clock()
        try:
            ids = self.cluster.topic_ids([s.input_topic, s.output_topic])
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

    def run_job(self, plan: Plan) -> BatchResult:
        """The Spark job. Only Spark's and py4j's errors are a failed job (re-planned); anything
        else, from our own pure code too, is a bug and propagates with its traceback."""
        try:
            return self.compute.batch(plan.ranges, self.state.late_before())
        except SPARK_ERRORS as exc:
            denial = _spark_denial(str(exc))
            if denial:  # the executors were refused: no retry makes that pass
                raise AuthorizationError(f"the Spark job's Kafka reads: not authorized: "
                                         f"{denial}; grant the ACLs in docs/deploy.md") from exc
            raise _Retry("the Spark job", exc) from exc

    def publish(self, sink: Publisher, consumer: Group, result: BatchResult,
                change: Change) -> None:
        """ONE transaction: totals, DLQ records, state records and the group offsets that moved
        (all of them hourly, GROUP_OFFSETS_REFRESH_S), so the group's offsets mirror the state.
        Only partitions written to join the transaction: the touched minutes' output partitions,
        the DLQ's when there is garbage, the state topic's one."""
        now = self.clock()
        everything = (self.all_offsets_sent_at is None
                      or now - self.all_offsets_sent_at >= GROUP_OFFSETS_REFRESH_S)
        send = offsets_to_send(change.offsets, self.state.offsets, everything)
        tps = [TopicPartition(self.s.input_topic, p, off) for p, off in sorted(send.items())]
        try:
            sink.commit(self.batch_records(result, change), tps,
                        consumer.consumer_group_metadata())
        except AbortableKafkaError as exc:
            raise _Retry("the transaction", exc) from exc
        if everything:
            self.all_offsets_sent_at = now

    def batch_records(self, result: BatchResult, change: Change) -> list[OutRecord]:
        """What one batch publishes: the touched minutes' new totals, its DLQ records, and the
        state records."""
        s = self.s
        names = tuple(d.name for d in self.fmt.group_by)
        tuples = self.state.series.tuples if self.state.series is not None else {}
        enc = self.encoder
        if names and (enc is None or enc.names != names):
            enc = self.encoder = SeriesEncoder(self.fmt.level_label, names)
        if enc is not None:  # a grouped batch: up to one record per (series, minute)
            encoded = enc.encode_all(change.outputs(tuples), minute_text)
        else:
            encoded = self.totals_encoder.encode_all(
                ((m, n) for m, _, n in change.outputs(tuples)), minute_text)
        records = [OutRecord(s.output_topic, k, v) for k, v in encoded]
        records += [dlq_record(s.dlq_topic, s.input_topic, ref) for ref in result.malformed]
        records += [OutRecord(self.state_topic, k, v) for k, v in change.state_records]
        return records

    # -- metrics -------------------------------------------------------------------------------
    def observe(self, result: BatchResult, change: Change, spark_s: float,
                commit_s: float) -> None:
        if self.backoff.failures:
            log.info("committing again after %d failed attempts over %.1fs",
                     self.backoff.failures, self.backoff.elapsed())
        self.backoff.reset()
        self.recovery.committed()
        t = self.tally
        t.last_commit = self.clock()
        t.records += result.records
        self.health.progressed()
        m = self.metrics
        late = sum(1 for ref in result.malformed if ref.reason == REASON_LATE)
        m.batches_committed.inc()
        m.records_read.inc(result.records)
        m.malformed.inc(len(result.malformed) - late)
        m.late.inc(late)
        m.continuation.inc(result.continuation)
        if self.state.series is None:
            m.counted_lines.inc(sum(result.counts.values()))
        else:  # after advance(): this batch's new names are held
            tuples = self.state.series.tuples
            for sid, lines in change.series_lines.items():
                m.count_series(tuples[sid], lines)
        m.state_minutes.set(self.state.cells())
        if change.overflow_lines:
            m.overflow_lines.inc(change.overflow_lines)
            now = self.clock()
            if self.overflow_warned_at is None or now - self.overflow_warned_at >= 3600:
                self.overflow_warned_at = now
                log.warning("--max-series %d reached: %d lines of new series counted under the "
                            "overflow series (every dimension __other__); the dimension with "
                            "the most distinct values is %s (this warning: once an hour)",
                            self.fmt.max_series, change.overflow_lines, change.widest)
        m.spark_seconds.observe(spark_s)
        m.commit_seconds.observe(commit_s)
        if self.progress is not None:
            self.progress.advance(sum(r.size for r in result.ranges))
        log.info("%s", BatchLine(
            self.batches, tuple((r.partition, r.start, r.end) for r in result.ranges),
            result.records, len(result.malformed) - late, late,
            len(change.updates) + len(change.series_updates), spark_s, commit_s,
            result.continuation if self.fmt.continuation == "skip" else None).text())

    def transient_failure(self, failed: _Retry) -> None:
        """Log, back off and let the loop re-plan; give up after too many in a row."""
        exc = failed.cause
        self.metrics.batches_aborted.inc()
        delay = self.backoff.failed()
        first_line = str(exc).strip().splitlines()[0] if str(exc).strip() else repr(exc)
        n = self.backoff.failures
        if delay is None:
            raise DependencyError(f"{failed.doing} failed {n} times in a row over "
                                  f"{self.backoff.elapsed():.0f}s; last: "
                                  f"{first_line[:500]}") from exc
        # One WARN line an outage (retries go on every second), one INFO line when it is over.
        log.log(logging.WARNING if n == 1 else logging.DEBUG,
                "%s failed (%s); re-planning in %.1fs (%d in a row)", failed.doing,
                first_line[:300], delay, n)
        self.sleep(delay)

    # -- shutdown ------------------------------------------------------------------------------
    def close(self) -> None:
        if self.progress is not None:
            self.progress.close()
        _close(self.sink, self.consumer)

    def closing_line(self) -> None:
        t = self.tally
        busy = t.last_commit - t.first_plan if t.first_plan is not None and t.last_commit else 0.0
        log.info("%s", ClosingLine(self.batches, t.records, busy).text())

    # -- the loop ------------------------------------------------------------------------------
    def run(self) -> int:
        s = self.s
        self.stop.install()
        HEARTBEAT.start()  # from the start: a freeze before the first watched call counts too
        try:
            self.start()
            try:
                while not self.stop.set:
                    busy = self.turn()
                    if busy is None:  # a failure was handled: plan again at once
                        continue
                    if not busy:
                        if s.once:
                            break
                        self.sleep(s.trigger_interval)
                    elif s.min_batch_interval and not (s.once or self.backlogged):
                        # Pacing: a caught-up stage waits out the rest of the interval, so what
                        # arrives meanwhile joins the next batch instead of making its own.
                        self.sleep(pacing_wait(self.batch_started, self.clock(),
                                               s.min_batch_interval))
            finally:
                self.close()
        except StateRefused as exc:
            self.hold_refusal(exc)
            raise
        finally:
            if self.server is not None:
                self.server.shutdown()
        self.closing_line()
        return 0

    def turn(self) -> bool | None:
        """One pass of the loop: new clients if the last ones were let go of, then one batch.
        True/False: a batch was done / nothing to do; None: a failure, handled here."""
        try:
            if self.sink is None or self.consumer is None:  # the last ones were let go of
                try:
                    self.recover_clients()
                except (DependencyError, RetriableKafkaError, AbortableKafkaError) as exc:
                    # The links are still down: try again after the usual backoff, as a failed
                    # plan would.
                    raise _Retry("replacing the Kafka clients", exc) from exc
            assert self.sink is not None and self.consumer is not None
            return self.cycle(self.sink, self.consumer)
        except _Retry as failed:
            if self.stop.set:  # a Spark job cancelled by the signal: nothing open
                return None
            if (self.sink is not None and self.s.delivery == "exactly-once"
                    and failed.doing in ("planning", "the Spark job")
                    and self.clients_made_at <= (self.backoff.since or self.clock())):
                # After a broker restart the old producer's send_offsets hung for its whole
                # watchdog (7 s, librdkafka #5456). Nothing is open now: new clients (claim
                # check first), once per run of failures.
                self.retire()
            self.transient_failure(failed)
        except HungClientError as hung:
            self.hung(hung)
        except FencedError as exc:
            if isinstance(exc, TakenOverError) or self.s.delivery != "exactly-once":
                raise
            self.fenced(exc)
        return None

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
        self.sleep(hold)


def _close(sink: Publisher | None, consumer: Group | None) -> None:
    if sink is not None:
        sink.close()
    if consumer is not None:
        with contextlib.suppress(Exception):  # never mask the error that got us here
            consumer.close()


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
