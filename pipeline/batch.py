"""One batch, step by step. `Batch.run` is handed its collaborators (the cluster's admin view,
the Spark job, the publisher and the group consumer) and numbers its steps as the code does:

  1. plan      each input partition's range, from the state's offsets up to the last stable
               offset (pipeline/offsets.py): executors read with read_committed, and a range that
               ended at the high watermark would wait on, or skip, an open transaction's records
  2. compute   Spark's executors read exactly those ranges, parse and count; only the counts
               and a bounded number of malformed-line references come back (pipeline/compute.py)
  3. publish   the change (new state = state + counts) is computed, not applied, and published
               in ONE Kafka transaction through the Publisher:
       3a begin         the producer was fenced in at init_transactions (pipeline/clients.py): a
                        zombie (an older instance with our transactional.id) fails from here on
       3b produce       the touched minutes' totals, the DLQ records, the state records: invisible
                        to read_committed readers until 3d
       3c send_offsets  the group's input offsets join the SAME transaction, so results and
                        progress commit or abort together; before 3d, for after it there is no
                        transaction
       3d commit        one atomic step: everything visible, the offsets committed
     An abortable error at any of 3a-3d aborts the transaction (nothing becomes visible) and the
     batch is planned again from the unchanged state (PublishAborted).
  4. advance   only now, after the commit, does the in-memory state become the change: a batch
               that failed anywhere before leaves it as it was, so planning again is exact.

With --emit-final (pipeline/finals.py) the plan also notes which partitions held input and the
clock second, the job each partition's newest event minute; between 2 and 3 the closing decision
is made, and 3b produces the final records of the minutes it closed, in the same transaction.

A step that fails before anything was published raises a `StepFailed` (typed by the step): the
loop (pipeline/loop.py) backs off and plans again.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Protocol

from logcount.connectors.transactional_sink import OutRecord
from logcount.core.errors import AbortableKafkaError, ComputeError, DependencyError, StateRefused
from logcount.core.records import DeadLetter, SeriesEncoder, TotalEncoder, encode_dead_letter
from logcount.core.settings import RunSettings
from logcount.pipeline import start_facts
from logcount.pipeline.batch_report import Report
from logcount.pipeline.crash import CrashPoints
from logcount.pipeline.finals import Finals, Seen
from logcount.pipeline.hour_records import minute_index, minute_text
from logcount.pipeline.job import BatchResult, MalformedRef
from logcount.pipeline.offsets import (
    OffsetRange,
    batch_cap,
    offsets_to_send,
    plan_ranges,
    resolve_starts,
)
from logcount.pipeline.state import Change, StageState, state_topic_name

log = logging.getLogger("logcount.stage")

# How often a running stage asks whether its input or output topic was recreated under it: one
# DescribeTopics per 30 s is nothing, and a batch planned meanwhile is caught by the offset check
# (a recreated log is behind the state) or by this one before the next.
TOPIC_ID_CHECK_S = 30.0
# A transaction sends the group offsets that moved, and all of them hourly (and at a first commit):
# an empty group's offset expires offsets.retention.minutes (7 days) after its last commit, so an
# idle input partition would lose it; the refresh is one larger TxnOffsetCommit an hour.
GROUP_OFFSETS_REFRESH_S = 3600.0


class Publisher(Protocol):
    """What a batch is published through, step 3's calls in order: TransactionalSink
    (exactly-once) or AtLeastOnceSink (no transaction, offsets committed after the flush), in
    connectors/transactional_sink.py."""

    def init(self) -> None:
        """init_transactions: fences a predecessor and settles its open transaction."""

    def begin(self) -> None: ...

    def produce(self, records: Sequence[OutRecord]) -> None: ...

    def send_offsets(self, topic: str, offsets: Mapping[int, int],
                     group_metadata: object) -> None: ...

    def commit(self) -> None: ...

    def abort(self) -> None: ...

    def close(self) -> None: ...

    def abandon(self) -> None:
        """Let go of a hung producer (closed on a thread of its own)."""


class Group(Protocol):
    """The group consumer: it never subscribes; it lends its group metadata to the
    transaction (and reads the group's committed offsets at start)."""

    def consumer_group_metadata(self) -> object: ...

    def close(self) -> None: ...


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


class Compute(Protocol):
    """The Spark side (pipeline/compute.py): a session begun before the stage, the batch job."""

    def check_format(self) -> None:
        """Refuse a --line-regex Java cannot read (ConfigError), before anything is touched."""

    def settle(self) -> None:
        """A start failed: let the JVM finish its output where ours goes (--verbose)."""

    def ready(self) -> None:
        """Wait for the session."""

    def cancel(self) -> None:
        """Cancel the running job (from a signal's helper thread)."""

    def batch(self, ranges: list[OffsetRange], late_before: int | None) -> BatchResult:
        """Read, parse and count `ranges`. A failed job raises ComputeError, executors refused
        by the cluster AuthorizationError; nothing of Spark's or py4j's comes through."""


class StepFailed(Exception):
    """A step failed before anything was published: back off and plan again. `doing` names the
    step in the log lines."""

    doing = "a batch step"

    def __init__(self, cause: Exception) -> None:
        super().__init__(self.doing)
        self.cause = cause


class PlanFailed(StepFailed):
    doing = "planning"


class TopicCheckFailed(StepFailed):
    doing = "checking the topic ids"


class JobFailed(StepFailed):
    doing = "the Spark job"


class PublishAborted(StepFailed):
    doing = "the transaction"


@dataclass
class Plan:
    ranges: list[OffsetRange]
    starts: dict[int, int]  # every partition's start (the state's offsets, moved where needed)
    # a transaction is due even with no ranges (a repair, new starting points, a close)
    commit: bool
    seen: Seen | None = None  # --emit-final: what the plan saw (pipeline/finals.py)


def transaction(sink: Publisher, records: Sequence[OutRecord], topic: str,
                offsets: Mapping[int, int], group_metadata: object) -> None:
    """Step 3a-3d: publish `records` and `offsets` atomically, or abort and raise
    AbortableKafkaError (nothing visible). FatalKafkaError/FencedError: done for."""
    try:
        sink.begin()  # 3a
        sink.produce(records)  # 3b
        sink.send_offsets(topic, offsets, group_metadata)  # 3c: before the commit, in it
        sink.commit()  # 3d
    except AbortableKafkaError:
        sink.abort()
        raise


def dlq_record(topic: str, source_topic: str, ref: MalformedRef) -> OutRecord:
    return OutRecord(topic, *encode_dead_letter(DeadLetter(
        source_topic, ref.partition, ref.offset, ref.reason, ref.raw_length, ref.raw_prefix)))


class BatchRecords:
    """What one batch publishes: the touched minutes' new totals, its DLQ records, and the
    state records (the encoders kept from batch to batch)."""

    def __init__(self, s: RunSettings, finals: Finals | None = None) -> None:
        self.s, self.fmt, self.finals = s, s.line_format, finals
        self.state_topic = state_topic_name(s.output_topic)
        self.encoder: SeriesEncoder | None = None  # grouped output records
        self.totals_encoder = TotalEncoder(self.fmt.level_label)  # ungrouped ones

    def __call__(self, state: StageState, result: BatchResult,
                 change: Change) -> list[OutRecord]:
        s = self.s
        names = tuple(d.name for d in self.fmt.group_by)
        tuples = state.series.tuples if state.series is not None else {}
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
        if self.finals is not None:
            records += self.finals.records(state, change)
        records += [OutRecord(self.state_topic, k, v) for k, v in change.state_records]
        return records


class Batch:
    """The batch, and what carries from one to the next: the state (replaced whenever new
    clients read it back: `restart`), the batch count, the --once limit."""

    def __init__(self, s: RunSettings, cluster: Cluster, compute: Compute, report: Report,
                 clock: Callable[[], float], crash: CrashPoints) -> None:
        self.s, self.cluster, self.compute, self.report = s, cluster, compute, report
        self.clock, self.crash = clock, crash
        self.finals = Finals(s) if s.grace_seconds is not None else None
        self.records = BatchRecords(s, self.finals)
        self.state: StageState
        self.commit_due = False  # restart(): commit before the first batch
        self.pending_records: list[tuple[bytes, bytes | None]] = []  # tombstones from start
        self.number = 0  # batches begun since the process started
        self.started = clock()  # the current batch's plan began
        self.backlogged = False  # the last plan left more than one batch's records
        self.limit: dict[int, int] | None = None  # --once: the ends readable at start
        self.ids_checked_at = clock()  # the start's state read has just read them
        self.all_offsets_sent_at: float | None = None  # see GROUP_OFFSETS_REFRESH_S
        self.on_commit: Callable[[], None] = lambda: None  # the loop's: a success ends a run

    def restart(self, state: StageState, must_commit: bool,
                records: list[tuple[bytes, bytes | None]]) -> None:
        """New clients read the state back: nothing from before is trusted, and their first
        commit sends every group offset."""
        self.state, self.commit_due, self.pending_records = state, must_commit, records
        self.all_offsets_sent_at = None
        if self.finals is not None:
            self.finals.since.clear()  # seen by the clients let go of: seen again, later

    def run(self, sink: Publisher, group: Group) -> bool:
        """plan -> compute -> publish -> advance. False when there was nothing to do."""
        self.started = self.clock()
        plan = self.plan()  # 1
        if not plan.ranges and not plan.commit:
            return False
        self.number += 1
        self.crash.batch = self.number
        t0 = self.clock()
        result = self.count(plan)  # 2
        t1 = self.clock()
        self.crash("after_collect")
        closing = None
        if self.finals is not None and plan.seen is not None:
            # A start's first commit carries the closing state it found or began, and no close:
            # the final topic then only ever holds records a committed closing state published.
            closing = self.finals.decide(self.state, plan.seen, result.newest,
                                         allowed=not self.commit_due, touched=result.counts)
            self.backlogged = self.backlogged or self.finals.more
        # 3: the change is computed, not applied, then published in one transaction.
        change = self.state.change(result.ranges, result.counts, _now_minute(), plan.starts,
                                   self.pending_records, result.series, closing)
        self.publish(sink, group, result, change)
        t2 = self.clock()
        self.state.advance(change)  # 4: only now, after the commit
        self.pending_records, self.commit_due = [], False
        self.on_commit()
        self.report.committed(self.number, self.state, result, change, t1 - t0, t2 - t1)
        self.crash("after_commit")
        return True

    # 1 -----------------------------------------------------------------------------------------
    def plan(self) -> Plan:
        s, state = self.s, self.state
        try:
            parts = self.cluster.input_partitions()  # new ones too
            earliest = self.cluster.input_offsets(parts, latest=False)
            stable = self.cluster.input_offsets(parts, latest=True)
        except DependencyError as exc:
            raise PlanFailed(exc) from exc
        self.check_topics_still_ours(stable)
        if self.limit is not None:  # --once: only what was readable when the command started
            stable = {p: min(off, self.limit.get(p, 0)) for p, off in stable.items()}
        starts = resolve_starts(state.offsets, earliest, stable)
        moved = {p: o for p, o in starts.items() if state.offsets.get(p) != o}
        for p in sorted(moved):
            if p in state.offsets:
                log.warning("p%d: retention deleted offsets %d-%d before they were counted; "
                            "continuing at %d", p, state.offsets[p], moved[p] - 1, moved[p])
        lag = self.report.planned({p: max(0, stable[p] - starts[p]) for p in stable}, s.once)
        cap = batch_cap(self.number, s.max_records_per_batch)
        self.backlogged = lag > cap  # more than one batch: no pacing (pipeline/loop.py)
        ranges = plan_ranges(starts, stable, cap)
        if ranges:
            self.report.first_plan(self.clock())
        commit = bool(moved) or self.commit_due
        seen = None
        if self.finals is not None:
            seen = self.finals.seen(starts, stable)
            # A quiet input: a batch with nothing to read commits when a partition has turned
            # caught up or the clock closes a minute (one small transaction each).
            commit = commit or (not ranges and self.finals.due(state, seen))
        return Plan(ranges, starts, commit, seen)

    def check_topics_still_ours(self, stable: dict[int, int]) -> None:
        """While running, what the start check would refuse: an input whose log fell behind the
        state (recreated or truncated; the stage would idle, then count the new log from the
        old offsets), and, every TOPIC_ID_CHECK_S, input, output or final topic ids that changed."""
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
        known = {s.input_topic: state.identity.input_topic_id,
                 s.output_topic: state.identity.output_topic_id}
        if state.closing is not None and state.closing.final_topic_id is not None:
            known[state.closing.final_topic] = state.closing.final_topic_id
        try:
            ids = self.cluster.topic_ids(list(known))
        except DependencyError as exc:  # a topic gone (being recreated) or a broker away
            raise TopicCheckFailed(exc) from exc
        changed = [t for t, i in ids.items() if i != known[t]]
        if changed:
            raise StateRefused(f"topic {changed[0]} was recreated while the stage ran (id "
                               f"{known[changed[0]]} in the state, {ids[changed[0]]} now); "
                               f"nothing more is published: restart, and the start check "
                               f"decides (recount or refuse)")

    # 2 -----------------------------------------------------------------------------------------
    def count(self, plan: Plan) -> BatchResult:
        """The Spark job. A failed job is planned again; executors refused by the cluster
        (AuthorizationError) and a bug in our own code propagate."""
        try:
            return self.compute.batch(plan.ranges, self.state.late_before())
        except ComputeError as exc:
            raise JobFailed(exc) from exc

    # 3 -----------------------------------------------------------------------------------------
    def publish(self, sink: Publisher, group: Group, result: BatchResult,
                change: Change) -> None:
        """ONE transaction: totals, DLQ records, state records and the group offsets that moved
        (all of them hourly, GROUP_OFFSETS_REFRESH_S), so the group's offsets mirror the state.
        Only partitions written to join the transaction: the touched minutes' output partitions,
        the DLQ's when there is garbage, the state topic's one."""
        now = self.clock()
        everything = (self.all_offsets_sent_at is None
                      or now - self.all_offsets_sent_at >= GROUP_OFFSETS_REFRESH_S)
        send = offsets_to_send(change.offsets, self.state.offsets, everything)
        try:
            transaction(sink, self.records(self.state, result, change), self.s.input_topic,
                        send, group.consumer_group_metadata())
        except AbortableKafkaError as exc:
            raise PublishAborted(exc) from exc
        if everything:
            self.all_offsets_sent_at = now


def _now_minute() -> int:
    return minute_index(datetime.now(UTC).strftime("%Y-%m-%d %H:%M"))
