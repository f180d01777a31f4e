"""`logcount sink`: carries the stage's totals from the output topic into MySQL `error_log`
(or `--table NAME`; with `--group-by` output, one column per dimension: sink_store.counts_ddl).
Pointed at the final topic (`--emit-final`), it inserts each final record as a row instead, once:
minutes into `--table`, hour and day rollups into `NAME_1h`, `NAME_1d`, closed windows into
`NAME_closed` (sink_store.write_finals). The loop is the same for both kinds: the records
decide (`"final": true`), and the store writes each kind (one kind a topic: batch_kind).

    output topic (read_committed)                MySQL, ONE transaction a batch
    +--------------------+  1 poll     +------+  3 apply  +---------------------------------+
    | p0 | p1 | ... | pN | ----------> | Sink | --------> | error_log      absolute totals  |
    +--------------------+  2 decode   +------+           | kafka_offsets  next offsets     |
       ^      ^                          |  |             | kafka_topics   the topic's id   |
       |      +-- 4 commit (lag only) ---+  |             +---------------------------------+
       +--- on (re)assign: seek to kafka_offsets <---- load_offsets -----------+

Exactly-once into MySQL, the seed's transactional pattern. Each turn of the loop (`Sink.turn`):
 1. poll: up to 10,000 records or 0.5 s. The group's rebalances happen in here: an assigned
    partition starts at MySQL's offset (not Kafka's), a revoked one is forgotten.
 2. decode: records into Totals (or Finals); an end of partition is the position reached (on a
    transactional topic a commit marker follows the last record); a record of a partition no
    longer assigned is dropped (its new owner reads it from MySQL's offsets); an undecodable
    one is skipped with one warning.
 3. apply: the totals and the next offsets in ONE database transaction (the store:
    connectors/sink_ports.py, on MySQL connectors/mysql_store.py). A crash anywhere leaves both
    or neither, and a replay changes nothing: totals are absolute, records below the stored
    offsets are skipped under their row lock (so a final record's row is inserted once). A
    database outage is ridden out inside the store (one WARN line, backoff, one line when it is
    over), holding this batch.
 4. commit: the offsets to Kafka too, asynchronously, only after the database's commit and only
    for lag monitoring: Kafka's copy is never read back, so losing it loses nothing.

Drift (before subscribing, and every DRIFT_CHECK_INTERVAL_S while running: a consumer reads a
recreated topic on from its old positions without a word): MySQL's offsets are of one
incarnation of the topic, whose id is kept beside them (`kafka_topics`). The sink compares the
topic's id and end offsets with MySQL's (logcount/core/sink_drift.py, in one locked
transaction). If the topic was recreated (or its log truncated), stale offsets would silently
skip its records, so the sink deletes them, stores the new id and says so in one warning line.
It repairs rather than refuses because the topic carries absolute per-minute totals, not
increments: reading it again from its start converges error_log to them (minutes the new topic
never carries keep their old totals), and a refusal would only leave the same repair to an
operator.

Kafka outages: one WARN line, one line when the broker answers again, and a consumer that stays
silent after that while there is more to read is replaced (`_after_outage`).

The sink is handed its collaborators (the consumer factory, the topic, the store, a clock and a
sleep); `build` wires the real ones from SinkSettings in one place.
"""
from __future__ import annotations

import contextlib
import functools
import logging
import signal
import threading
import time
from collections.abc import Callable, Sequence

from confluent_kafka import OFFSET_BEGINNING, KafkaError, KafkaException, Message, TopicPartition

from logcount.connectors import kafka_io
from logcount.connectors.mysql_store import MySQLStore
from logcount.connectors.sink_kafka import KafkaConsumer, KafkaTopic, fatal_line, is_fatal
from logcount.connectors.sink_ports import ConsumerFactory, SinkConsumer, SinkStore, TopicView
from logcount.connectors.sink_store import Final, Record, Total, window_minutes
from logcount.core.errors import ConfigError, DependencyError, TopicChangedError
from logcount.core.metrics import Health, SinkMetrics, serve
from logcount.core.records import MinuteTotal, decode_record
from logcount.core.settings import SinkSettings

log = logging.getLogger("logcount.sink")

# Why 10 s: a running sink asks the broker for the topic's id this often (one metadata request)
# to notice a recreation that its consumer does not report; until then it may apply the new
# topic's records from the old positions, which the re-read after the repair converges anyway.
DRIFT_CHECK_INTERVAL_S = 10.0
# A consumer that delivers nothing this long after the broker answers again, while the topic
# holds records past MySQL's offsets, is stuck (seen after a broker restart: its group
# coordinator request queued for good) and is replaced. 1.5 s: three turns of the loop.
STALL_S = 1.5
# One poll: up to this many records, or this long (a turn of the loop; the outage probes and
# the stop flag are looked at once a turn).
POLL_RECORDS = 10_000
POLL_S = 0.5


def decode(msg) -> Record | None:
    """A running total (the output topic's), or a final record (`"final": true`: the final
    topic's) at its position; None, with one warning, for a record that is neither."""
    try:
        value = decode_record(msg.value())
        if isinstance(value, MinuteTotal):
            return Total(msg.partition(), msg.offset(), value.minute, value.count, value.dims)
        return Final(msg.partition(), msg.offset(), value.window_start, value.count,
                     value.dims, value.window_end, value.grace,
                     window_minutes(value.window_start, value.window_end), value.closed,
                     value.series)
    except ValueError as exc:
        log.warning("skipping undecodable record %s/%d@%d: %s", msg.topic(), msg.partition(),
                    msg.offset(), exc)
        return None


class Sink:
    def __init__(self, s: SinkSettings, *, store: SinkStore, new_consumer: ConsumerFactory,
                 open_topic: Callable[[], TopicView], stop: threading.Event | None = None,
                 clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], object] | None = None) -> None:
        self.s = s
        self.stop = stop or threading.Event()
        self.store = store
        self.new_consumer = new_consumer
        self.open_topic = open_topic  # waits for the broker (--startup-timeout)
        self.clock = clock
        self.sleep = sleep or self.stop.wait  # a stop cuts a wait short
        self.topic: TopicView | None = None  # open_topic's, at start
        self.assigned: set[int] = set()
        self.at_eof: set[int] = set()
        self.applied = 0
        self.metrics = SinkMetrics()
        self.health = Health(s.health_stall_seconds)
        # The topic id the last drift check saw (None: the broker gives none).
        self.topic_id: str | None = None
        self.id_checked_at = 0.0
        self.kafka_down_since: float | None = None  # a Kafka outage began (one WARN line)
        self.kafka_back_at: float | None = None  # the broker answered again
        self.consumer: SinkConsumer | None = None  # the current one (_new_consumer)
        self.token: object | None = None  # the current one's error_cb token
        self.fatal: KafkaError | None = None  # reported by error_cb
        self.refused: ConfigError | None = None  # by a rebalance callback, raised by the loop

    def run(self) -> int:
        s = self.s
        log.info("starting sink: %r", s)
        server = serve(s.metrics_port, self.metrics.registry, self.health)
        try:
            self.start()
            while not self.stop.is_set() and self.turn():
                pass
        finally:
            if self.consumer is not None:
                self.consumer.close()
            self.store.close()
            if server is not None:
                server.shutdown()
        log.info("sink stopped; %d records applied", self.applied)
        return 0

    def start(self) -> None:
        """The broker, the schema, the drift check, then the consumer's subscription."""
        # Kafka first: a sink that cannot reach its broker leaves no tables behind in MySQL.
        self.topic = self.open_topic()
        self.store.ensure_schema(self.s.startup_timeout)
        self._check_drift()  # before subscribing: the first assignment seeks to its offsets
        self._new_consumer()

    def turn(self) -> bool:
        """One turn of the loop: the steps of the module doc. False once --once has read every
        assigned partition to its end."""
        s = self.s
        down_before = self.kafka_down_since
        # 1. poll (rebalance callbacks run in here: _on_assign, _on_revoke)
        msgs = self._consumer().consume(POLL_RECORDS, POLL_S)
        if self.fatal is not None:
            raise DependencyError(f"sink consumer: {fatal_line(self.fatal)}")
        if self.refused is not None:
            raise self.refused
        # 2. decode
        batch, ends = self._decode(msgs)
        if self.kafka_down_since is not None:
            # What this very poll returned beside the outage's first error (records fetched
            # before, an end of partition) is no sign that it is over.
            self._after_outage(bool(batch or ends) and down_before is not None)
        if self._id_changed():
            self._resync()  # this batch may be of the old topic: dropped
            return True
        if batch or ends:
            # 3. apply: totals and offsets in one database transaction
            t0 = self.clock()
            try:
                nxt = self.store.apply(s.group_id, s.topic, batch, ends, self.topic_id)
            except TopicChangedError as exc:
                log.warning("%s: checking it again", exc)
                self._resync()
                return True
            self.metrics.mysql_write_seconds.observe(self.clock() - t0)
            self.metrics.batches_written.inc()
            self.metrics.records_applied.inc(len(batch))
            self.health.progressed()
            self.applied += len(batch)
            # 4. commit to Kafka: after the database's commit, for lag monitoring only
            if nxt:
                self._consumer().commit_async([TopicPartition(s.topic, p, o)
                                               for p, o in nxt.items()])
        elif s.once and self.assigned and self.assigned <= self.at_eof:
            return False
        self._update_lag()
        return True

    def _consumer(self) -> SinkConsumer:
        assert self.consumer is not None, "run() makes one before the loop"
        return self.consumer

    def _decode(self, msgs: Sequence[Message]) -> tuple[list[Record], dict[int, int]]:
        """The poll's records, and the positions reached at the end of partitions."""
        batch: list[Record] = []
        ends: dict[int, int] = {}
        for msg in msgs:
            err, partition = msg.error(), msg.partition()
            if err is not None:
                offset = msg.offset()
                if err.code() == KafkaError._PARTITION_EOF and partition is not None:
                    if partition in self.assigned:
                        self.at_eof.add(partition)
                        ends[partition] = offset if offset is not None else 0
                elif is_fatal(err):
                    raise DependencyError(f"sink consumer: {fatal_line(err)}")
                else:
                    self._kafka_failed(err.str())
                continue
            if partition not in self.assigned:
                continue  # revoked during this poll: its new owner starts at MySQL's offset
            self.at_eof.discard(partition)
            record = decode(msg)
            if record is not None:
                batch.append(record)
        return batch, ends

    def _view(self) -> TopicView:
        assert self.topic is not None, "run() opens it first"
        return self.topic

    def _check_drift(self) -> None:
        """Compare MySQL's offsets with the topic as it is now; repair them if it was recreated
        (see the module docstring)."""
        s = self.s
        parts = self._wait_for_topic()
        current_id = self._view().topic_id()
        ends = self._view().ends(parts, committed_only=False)
        reason = self.store.reconcile_topic(s.group_id, s.topic, current_id, ends)
        self.topic_id = current_id
        self.id_checked_at = self.clock()
        if reason is not None:
            log.warning("topic %s %s: reading it from the beginning; its totals are absolute, "
                        "so error_log converges to them (rows of minutes it no longer carries "
                        "keep their old totals)", s.topic, reason)

    def _wait_for_topic(self) -> list[int]:
        """The topic's partitions, waiting up to --startup-timeout for the stage to create it:
        a sink started beside a fresh stage (the docker demo) must not race it."""
        s = self.s
        deadline = self.clock() + s.startup_timeout
        said = False
        while (parts := self._view().partitions()) is None:
            if self.clock() >= deadline or self.stop.is_set():
                raise DependencyError(f"topic {s.topic} does not exist after "
                                      f"{s.startup_timeout:.0f}s (has the stage run?)")
            if not said:
                log.info("waiting for topic %s (the stage creates it), up to %.0fs", s.topic,
                         s.startup_timeout)
                said = True
            self.sleep(1.0)
        return parts

    def _id_changed(self) -> bool:
        """Every DRIFT_CHECK_INTERVAL_S while running: has the topic been recreated under us?
        (The consumer itself does not notice: it goes on reading the new topic from the old
        positions.) A broker that does not answer is asked again at the next interval."""
        if self.topic_id is None or self.clock() - self.id_checked_at < DRIFT_CHECK_INTERVAL_S:
            return False
        self.id_checked_at = self.clock()
        try:
            now = self._view().topic_id()
        except DependencyError as exc:
            self._kafka_failed(f"checking the topic's id: {exc}")  # asked again later
            return False
        return now is not None and now != self.topic_id

    def _resync(self) -> None:
        """The topic changed while we ran: check (and repair) MySQL's offsets, then move every
        assigned partition to them."""
        self._check_drift()
        stored = self.store.load_offsets(self.s.group_id, self.s.topic)
        for p in sorted(self.assigned):
            try:
                self._consumer().seek(TopicPartition(self.s.topic, p,
                                                     stored.get(p, OFFSET_BEGINNING)))
            except KafkaException as exc:
                raise DependencyError(f"sink consumer: seeking partition {p} to MySQL's offset "
                                      f"after the topic changed: {exc.args[0].str()}") from exc
        self.at_eof -= self.assigned
        log.info("moved partitions %s to MySQL's offsets %s", sorted(self.assigned),
                 {p: stored.get(p, OFFSET_BEGINNING) for p in sorted(self.assigned)})

    def _on_assign(self, consumer: SinkConsumer, parts: list[TopicPartition]) -> None:
        if consumer is not self.consumer:
            return
        foreign = sorted({tp.topic for tp in parts} - {self.s.topic})
        if foreign:
            # Seen with a static member (group.instance.id) that read another topic in the same
            # group before, within its session: the broker hands back that assignment. Read, it
            # would land in this topic's table and offsets.
            self.refused = ConfigError(
                f"consumer group {self.s.group_id} handed this sink partitions of topic "
                f"{', '.join(foreign)}, not of {self.s.topic} (the group read that topic before, "
                f"with this group.instance.id); give each topic its own --group-id")
            return
        stored = self.store.load_offsets(self.s.group_id, self.s.topic)
        for tp in parts:
            tp.offset = stored.get(tp.partition, OFFSET_BEGINNING)
        consumer.assign(parts)
        self.assigned = {tp.partition for tp in parts}
        self.at_eof -= {tp.partition for tp in parts}
        log.info("assigned %s, starting at MySQL's offsets %s", sorted(self.assigned),
                 {tp.partition: tp.offset for tp in parts})

    def _on_revoke(self, consumer: SinkConsumer, parts: list[TopicPartition]) -> None:
        if consumer is not self.consumer:
            return
        self.assigned -= {tp.partition for tp in parts}
        self.at_eof -= {tp.partition for tp in parts}

    def _update_lag(self) -> None:
        """Lag per assigned partition: cached high watermark minus our position."""
        lags = self._consumer().lag(self.assigned)
        if lags is None:
            return
        for p, lag in lags.items():
            self.metrics.lag.labels(partition=str(p)).set(lag)
        self.health.lag = sum(lags.values())

    def _new_consumer(self) -> SinkConsumer:
        token = object()  # this consumer's: a replaced one's errors are not the sink's
        consumer = self.new_consumer(functools.partial(self._on_error, token))
        self.consumer, self.token = consumer, token  # a replaced one's callbacks change nothing
        consumer.subscribe(self.s.topic, on_assign=functools.partial(self._on_assign, consumer),
                           on_revoke=functools.partial(self._on_revoke, consumer))
        return consumer

    def _on_error(self, token: object, err: KafkaError) -> None:
        if token is not self.token:
            return  # a replaced consumer, fenced by its successor of the same instance id
        if is_fatal(err):
            self.fatal = err  # raised by the loop: a callback's exception would be lost
        else:
            self._kafka_failed(err.str())

    def _kafka_failed(self, reason: str) -> None:
        """One WARN line per outage, not one per error librdkafka reports."""
        if self.kafka_down_since is None:
            self.kafka_down_since, self.kafka_back_at = self.clock(), None
            log.warning("Kafka at %s: %s; waiting for the broker: the sink resumes by itself",
                        self.s.bootstrap_servers, reason)
        else:
            log.debug("Kafka: %s", reason)

    def _behind(self) -> bool:
        """Whether the topic holds committed records past MySQL's offsets."""
        try:
            ends = self._view().ends(self._view().partitions() or [], committed_only=True)
        except DependencyError:
            return False  # not answering after all: ask again next turn
        stored = self.store.load_offsets(self.s.group_id, self.s.topic)
        return any(end > stored.get(p, 0) for p, end in ends.items())

    def _after_outage(self, delivered: bool) -> None:
        """While a Kafka outage lasts: say once when the broker answers again, and replace a
        consumer that still delivers nothing STALL_S later although there is more to read."""
        assert self.kafka_down_since is not None
        now = self.clock()
        if self.kafka_back_at is None:
            if not (delivered or self._view().answers()):
                return
            self.kafka_back_at = now
            log.info("Kafka at %s answers again after %.1fs: the sink resumes",
                     self.s.bootstrap_servers, now - self.kafka_down_since)
        if delivered or now - self.kafka_back_at < STALL_S:
            if delivered:
                self.kafka_down_since = self.kafka_back_at = None
            return
        if not self._behind():  # nothing to read: nothing to show either way
            self.kafka_down_since = self.kafka_back_at = None
            return
        log.warning("the sink's Kafka consumer delivered nothing %.1fs after the broker came "
                    "back, with records to read: replacing it (it resumes from MySQL's offsets)",
                    now - self.kafka_back_at)
        threading.Thread(target=_close_quietly, args=(self._consumer(),), daemon=True).start()
        self.assigned, self.at_eof = set(), set()
        self.kafka_back_at = now  # the new one gets its STALL_S too
        self._new_consumer()


def _close_quietly(consumer: SinkConsumer) -> None:
    """A stuck consumer's close may block (its LeaveGroup is queued behind the stuck request):
    on a thread of its own, errors ignored."""
    with contextlib.suppress(Exception):
        consumer.close()


def build(s: SinkSettings) -> Sink:
    """The sink with its real collaborators: the one place they are made."""
    stop = threading.Event()
    return Sink(
        s, stop=stop,
        store=MySQLStore(s.mysql, stop, s.create_database, s.mysql_tls_ca, s.table),
        new_consumer=functools.partial(KafkaConsumer, s),
        open_topic=lambda: KafkaTopic(kafka_io.wait_for_broker(
            s.bootstrap_servers, s.kafka_client_config, s.startup_timeout), s.topic))


def run_sink(s: SinkSettings) -> int:
    sink = build(s)
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda *_: sink.stop.set())
    return sink.run()
