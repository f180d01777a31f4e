"""`logcount sink`: carries the stage's totals from the output topic into MySQL `error_log`
(or `--table NAME`; with `--group-by` output, one column per dimension: sink_store.counts_ddl).

Exactly-once into MySQL, the seed's transactional pattern: the rows and the consumed offsets are
written in ONE MySQL transaction (connectors/sink_store.py), and on (re)assignment the consumer
seeks to the offsets stored in MySQL. Offsets are also committed to Kafka afterwards, only for lag
monitoring. This module is the service: the consume loop, its metrics, and riding out outages of
Kafka and MySQL with one WARN line each and one line when they are over.

Drift: MySQL's offsets are of one incarnation of the topic, whose id is kept beside them
(`kafka_topics`). Before subscribing, and every DRIFT_CHECK_INTERVAL_S while running (a consumer
reads a recreated topic on from its old positions without a word), the sink compares the topic's
id and end offsets with MySQL's (logcount/core/sink_drift.py, in one locked transaction). If the
topic was recreated (or its log truncated), stale offsets would silently skip its records, so the
sink deletes them, stores the new id and says so in one warning line. It repairs rather than
refuses because the topic carries absolute per-minute totals, not increments: reading it again
from its start converges error_log to them (minutes the new topic never carries keep their old
totals), and a refusal would only leave the same repair to an operator.
"""
from __future__ import annotations

import contextlib
import functools
import logging
import signal
import socket
import threading
import time
from collections.abc import Mapping, Sequence

import pymysql
from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    KafkaException,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, OffsetSpec

from logcount.connectors import kafka_io, sink_store
from logcount.connectors.sink_store import Total
from logcount.core.backoff import Backoff
from logcount.core.errors import DependencyError, TopicChangedError
from logcount.core.metrics import Health, SinkMetrics, serve
from logcount.core.records import decode_total
from logcount.core.settings import MySQLUrl, SinkSettings

log = logging.getLogger("logcount.sink")

# Kafka's "no id" (a broker without topic ids answers with it): no id to compare.
_NO_TOPIC_ID = "AAAAAAAAAAAAAAAAAAAAAA"

# MySQL errors that mean "not now" (server gone, restarting, lock trouble): retry with backoff.
_TRANSIENT = {2003, 2006, 2013, 2055, 1205, 1213, 1040, 1053, 1927}
_ACCESS_DENIED = {1044, 1045, 1698}
_TLS_FAILED = 2026  # CR_SSL_CONNECTION_ERROR: TLS required (--mysql-tls-ca) but not possible
# Why these: MySQL restarts take seconds; 0.5 s first retry, doubling to 2 s, rides out a restart
# or a cut link and writes again within 2 s of the heal, while one connection attempt every 2 s is
# nothing to a struggling server.
BACKOFF_FIRST_S = 0.5
BACKOFF_MAX_S = 2.0
# Why 10 s: a running sink asks the broker for the topic's id this often (one metadata request)
# to notice a recreation that its consumer does not report; until then it may apply the new
# topic's records from the old positions, which the re-read after the repair converges anyway.
DRIFT_CHECK_INTERVAL_S = 10.0
# After a Kafka error the sink asks the broker (one metadata request, 1 s timeout) at each turn
# of its loop (0.5 s) whether it answers again: the resume line then comes within a second.
KAFKA_PROBE_TIMEOUT_S = 1.0
# A consumer that delivers nothing this long after the broker answers again, while the topic
# holds records past MySQL's offsets, is stuck (seen after a broker restart: its group
# coordinator request queued for good) and is replaced. 1.5 s: three turns of the loop.
STALL_S = 1.5


def instance_id(group_id: str, host: str) -> str:
    """The sink consumer's group.instance.id by default (pure): static membership, so a sink
    restarted on the same host, or a consumer replaced after an outage, takes the old member's
    partitions at once instead of after its 45 s session. Figures: docs/tuning.md#sink-session"""
    return f"{group_id}-{host}"


def is_fatal(err: KafkaError) -> bool:
    """librdkafka reports a consumer's fatal error (a static member fenced) to error_cb and in
    consume()'s messages as code _FATAL, without the fatal() flag."""
    return err.fatal() or err.code() == KafkaError._FATAL


def fatal_line(err: KafkaError) -> str:
    """A fatal consumer error as the one line the sink exits with."""
    # error_cb's fatal errors are _FATAL with the cause in the text (librdkafka's own words).
    if err.code() == KafkaError.FENCED_INSTANCE_ID or "same group.instance.id" in err.str():
        return (f"{err.str()}: another sink of this group runs with the same group.instance.id "
                f"(the group id and host name by default); give each sink its own with "
                f"--kafka-config group.instance.id=ID")
    return err.str()


class MySQLSession:
    """The sink's MySQL side: one connection; each call one transaction of the store
    (connectors/sink_store.py), retried on a new connection after a transient error."""

    def __init__(self, url: MySQLUrl, stop: threading.Event | None = None,
                 create_database: bool = False, tls_ca: str | None = None,
                 table: str = sink_store.DEFAULT_TABLE) -> None:
        self.url = url
        self.table = table
        self.tables_ready: set[tuple[str, ...]] = set()  # dimensions whose table was checked
        self.conn: pymysql.connections.Connection | None = None
        self.stop = stop or threading.Event()
        self.create_database = create_database
        self.tls_ca = tls_ca

    def _connect(self) -> pymysql.connections.Connection:
        return sink_store.connect(self.url, self.create_database, self.tls_ca)

    def with_retry(self, doing: str, fn, deadline: float | None = None):
        """Run fn(conn) in a transaction; on a transient error roll back, reconnect, retry
        (until `deadline`, a time.monotonic() value, when given: the start-up's bound)."""
        backoff = Backoff(BACKOFF_FIRST_S, BACKOFF_MAX_S)  # its run of failures: this outage
        while True:
            try:
                if self.conn is None:
                    self.conn = self._connect()
                result = fn(self.conn)
                self.conn.commit()
                if backoff.failures and deadline is None:
                    log.info("MySQL at %s:%d answers again after %.1fs: %s resumed",
                             self.url.host, self.url.port, backoff.elapsed(), doing)
                return result
            except pymysql.err.MySQLError as exc:
                code = exc.args[0] if exc.args and isinstance(exc.args[0], int) else None
                self._drop()
                text = str(exc.args[-1]) if exc.args else str(exc)
                if code == _TLS_FAILED or "CERTIFICATE_VERIFY_FAILED" in text:
                    # An untrusted certificate or a server without TLS stays so: no retry.
                    raise DependencyError(f"MySQL at {self.url.host}:{self.url.port}: TLS "
                                          f"failed: {text}") from exc
                if code in _ACCESS_DENIED:
                    raise DependencyError(f"MySQL {self.url!r} refused us: {exc.args[-1]}") from exc
                if code not in _TRANSIENT and not isinstance(exc, pymysql.err.InterfaceError):
                    raise DependencyError(f"MySQL {doing}: {exc}") from exc
                if self.stop.is_set():
                    raise DependencyError(f"MySQL {doing}: stopping while MySQL is down") from exc
                first = backoff.failures == 0
                delay = backoff.failed()
                assert delay is not None  # no budget of its own: the deadline bounds it
                if deadline is not None and time.monotonic() + delay > deadline:
                    raise DependencyError(f"MySQL at {self.url.host}:{self.url.port} "
                                          f"unreachable ({doing}): {exc.args[-1]}") from exc
                if deadline is None and first:  # running: one line an outage
                    log.warning("MySQL %s failed (%s); waiting for MySQL at %s:%d, retrying "
                                "every %.0fs at most: the sink resumes by itself", doing, text,
                                self.url.host, self.url.port, BACKOFF_MAX_S)
                elif deadline is None:
                    log.debug("MySQL %s failed again (%s)", doing, text)
                elif first:  # at start: one line, then the verdict
                    log.info("waiting for MySQL at %s:%d (%s), up to %.0fs", self.url.host,
                             self.url.port, text, deadline - time.monotonic())
                self.stop.wait(delay)

    def _drop(self) -> None:
        if self.conn is not None:
            with contextlib.suppress(Exception):  # already broken
                self.conn.close()
            self.conn = None

    def ensure_schema(self, timeout_s: float | None = None) -> None:
        """Create the tables if missing; at start, give up after `timeout_s` of retries."""
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        self.with_retry("creating tables", sink_store.create_tables, deadline)
        self.with_retry("creating tables",
                        lambda conn: sink_store.create_counts_table(conn, self.table), deadline)

    def load_offsets(self, group: str, topic: str) -> dict[int, int]:
        return self.with_retry("reading offsets",
                               lambda conn: sink_store.read_offsets(conn, group, topic))

    def reconcile_topic(self, group: str, topic: str, current_id: str | None,
                        ends: Mapping[int, int]) -> str | None:
        """The drift check, in one transaction (sink_store.reconcile_topic): the drift's reason,
        or None."""
        return self.with_retry(
            "checking the stored offsets against the topic",
            lambda conn: sink_store.reconcile_topic(conn, group, topic, current_id, ends))

    def apply(self, group: str, topic: str, totals: Sequence[Total],
              ends: Mapping[int, int] | None = None,
              topic_id: str | None = None) -> dict[int, int]:
        """Upsert the last total per minute and the next offsets, atomically; return the offsets
        (sink_store.write_batch). `topic_id` is the id this sink's drift check saw: if MySQL now
        holds another, the records are of another incarnation of the topic and nothing is
        written. The counts table is created (or checked) first, in a transaction of its own:
        DDL commits implicitly, so it cannot share the batch's."""
        dims = sink_store.batch_dims(topic, totals)
        if totals and dims not in self.tables_ready:
            self.with_retry("creating the counts table", lambda conn: sink_store.
                            ensure_counts_table(conn, self.table, topic, dims))
            self.tables_ready.add(dims)
        nxt, changed = self.with_retry(
            "writing a batch",
            lambda conn: sink_store.write_batch(conn, group, topic, totals, ends, topic_id,
                                                self.table, dims))
        if changed is not None:
            raise TopicChangedError(
                f"topic {topic} changed under this sink: MySQL's offsets are of topic id "
                f"{changed}, this sink read id {topic_id}; nothing written")
        return nxt

    def close(self) -> None:
        self._drop()


def decode(msg) -> Total | None:
    try:
        value = decode_total(msg.value())
        return Total(msg.partition(), msg.offset(), value.minute, value.count, value.dims)
    except ValueError as exc:
        log.warning("skipping undecodable record %s/%d@%d: %s", msg.topic(), msg.partition(),
                    msg.offset(), exc)
        return None


class Sink:
    def __init__(self, s: SinkSettings) -> None:
        self.s = s
        self.stop = threading.Event()
        self.store = MySQLSession(s.mysql, self.stop, s.create_database, s.mysql_tls_ca,
                                  s.table)
        self.assigned: set[int] = set()
        self.at_eof: set[int] = set()
        self.applied = 0
        self.metrics = SinkMetrics()
        self.health = Health(s.health_stall_seconds)
        self.adm: AdminClient | None = None
        # The topic id the last drift check saw (None: the broker gives none).
        self.topic_id: str | None = None
        self.id_checked_at = 0.0
        self.kafka_down_since: float | None = None  # a Kafka outage began (one WARN line)
        self.kafka_back_at: float | None = None  # the broker answered again
        self.consumer: Consumer | None = None  # the current one (_new_consumer)
        self.token: object | None = None  # the current one's error_cb token
        self.fatal: KafkaError | None = None  # reported by error_cb

    def _topic_id_now(self) -> str | None:
        assert self.adm is not None
        found = kafka_io.topic_ids(self.adm, [self.s.topic])[self.s.topic]
        return None if found == _NO_TOPIC_ID else found

    def _check_drift(self) -> None:
        """Compare MySQL's offsets with the topic as it is now; repair them if it was recreated
        (see the module docstring)."""
        s = self.s
        assert self.adm is not None
        parts = self._wait_for_topic()
        current_id = self._topic_id_now()
        ends = kafka_io.list_offsets(self.adm, s.topic, parts, OffsetSpec.latest(),
                                     committed_only=False)
        reason = self.store.reconcile_topic(s.group_id, s.topic, current_id, ends)
        self.topic_id = current_id
        self.id_checked_at = time.monotonic()
        if reason is not None:
            log.warning("topic %s %s: reading it from the beginning; its totals are absolute, "
                        "so error_log converges to them (rows of minutes it no longer carries "
                        "keep their old totals)", s.topic, reason)

    def _wait_for_topic(self) -> list[int]:
        """The topic's partitions, waiting up to --startup-timeout for the stage to create it:
        a sink started beside a fresh stage (the docker demo) must not race it."""
        s = self.s
        assert self.adm is not None
        deadline = time.monotonic() + s.startup_timeout
        said = False
        while (parts := kafka_io.partitions_of(self.adm, s.topic)) is None:
            if time.monotonic() >= deadline or self.stop.is_set():
                raise DependencyError(f"topic {s.topic} does not exist after "
                                      f"{s.startup_timeout:.0f}s (has the stage run?)")
            if not said:
                log.info("waiting for topic %s (the stage creates it), up to %.0fs", s.topic,
                         s.startup_timeout)
                said = True
            self.stop.wait(1.0)
        return parts

    def _id_changed(self) -> bool:
        """Every DRIFT_CHECK_INTERVAL_S while running: has the topic been recreated under us?
        (The consumer itself does not notice: it goes on reading the new topic from the old
        positions.) A broker that does not answer is asked again at the next interval."""
        if self.topic_id is None or time.monotonic() - self.id_checked_at < DRIFT_CHECK_INTERVAL_S:
            return False
        self.id_checked_at = time.monotonic()
        try:
            now = self._topic_id_now()
        except DependencyError as exc:
            self._kafka_failed(f"checking the topic's id: {exc}")  # asked again later
            return False
        return now is not None and now != self.topic_id

    def _resync(self, consumer: Consumer) -> None:
        """The topic changed while we ran: check (and repair) MySQL's offsets, then move every
        assigned partition to them."""
        self._check_drift()
        stored = self.store.load_offsets(self.s.group_id, self.s.topic)
        for p in sorted(self.assigned):
            try:
                consumer.seek(TopicPartition(self.s.topic, p, stored.get(p, OFFSET_BEGINNING)))
            except KafkaException as exc:
                raise DependencyError(f"sink consumer: seeking partition {p} to MySQL's offset "
                                      f"after the topic changed: {exc.args[0].str()}") from exc
        self.at_eof -= self.assigned
        log.info("moved partitions %s to MySQL's offsets %s", sorted(self.assigned),
                 {p: stored.get(p, OFFSET_BEGINNING) for p in sorted(self.assigned)})

    def _on_assign(self, consumer: Consumer, parts: list[TopicPartition]) -> None:
        if consumer is not self.consumer:
            return
        stored = self.store.load_offsets(self.s.group_id, self.s.topic)
        for tp in parts:
            tp.offset = stored.get(tp.partition, OFFSET_BEGINNING)
        consumer.assign(parts)
        self.assigned = {tp.partition for tp in parts}
        self.at_eof -= {tp.partition for tp in parts}
        log.info("assigned %s, starting at MySQL's offsets %s", sorted(self.assigned),
                 {tp.partition: tp.offset for tp in parts})

    def _on_revoke(self, consumer: Consumer, parts: list[TopicPartition]) -> None:
        if consumer is not self.consumer:
            return
        self.assigned -= {tp.partition for tp in parts}
        self.at_eof -= {tp.partition for tp in parts}

    def _update_lag(self, consumer: Consumer) -> None:
        """Lag per assigned partition: cached high watermark minus our position."""
        total = 0
        try:
            positions = consumer.position([TopicPartition(self.s.topic, p)
                                           for p in self.assigned])
        except Exception:  # noqa: BLE001 - metrics only
            return
        for tp in positions:
            try:
                _, high = consumer.get_watermark_offsets(tp, cached=True)
            except Exception:  # noqa: BLE001
                continue
            if high >= 0 and tp.offset >= 0:
                lag = max(0, high - tp.offset)
                self.metrics.lag.labels(partition=str(tp.partition)).set(lag)
                total += lag
        self.health.lag = total

    def _new_consumer(self) -> Consumer:
        s = self.s
        token = object()  # this consumer's: a replaced one's errors are not the sink's
        consumer = Consumer(kafka_io.client_config(s.bootstrap_servers, s.kafka_client_config, **{
            "group.id": s.group_id,
            # --kafka-config group.instance.id=... (a distinct one per sink of a group) wins.
            "group.instance.id": instance_id(s.group_id, socket.gethostname()),
            # Only committed transactions: never an aborted total.
            "isolation.level": "read_committed",
            # Offsets live in MySQL; Kafka's copy is for lag monitoring only.
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "auto.offset.reset": "earliest",
            # Client-level errors (broker down, transport) come here, not through consume().
            "error_cb": functools.partial(self._on_error, token),
        }))
        self.consumer, self.token = consumer, token  # a replaced one's callbacks change nothing
        consumer.subscribe([s.topic], on_assign=self._on_assign, on_revoke=self._on_revoke)
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
            self.kafka_down_since, self.kafka_back_at = time.monotonic(), None
            log.warning("Kafka at %s: %s; waiting for the broker: the sink resumes by itself",
                        self.s.bootstrap_servers, reason)
        else:
            log.debug("Kafka: %s", reason)

    def _broker_answers(self) -> bool:
        """The topic's leaders answer for their offsets (what the consumer needs): metadata
        alone comes from a broker that is still shutting down, or not yet serving partitions."""
        assert self.adm is not None
        t = KAFKA_PROBE_TIMEOUT_S
        try:
            md = self.adm.list_topics(topic=self.s.topic, timeout=t)
            parts = md.topics[self.s.topic].partitions
            futures = self.adm.list_offsets(
                {TopicPartition(self.s.topic, p): OffsetSpec.latest() for p in parts},
                request_timeout=t)
            for fut in futures.values():
                fut.result(timeout=t + 1)
            return bool(parts)
        except Exception:  # noqa: BLE001 - refused, timed out, no leader: all mean "not yet"
            return False

    def _behind(self) -> bool:
        """Whether the topic holds committed records past MySQL's offsets."""
        assert self.adm is not None
        try:
            parts = kafka_io.partitions_of(self.adm, self.s.topic) or []
            ends = kafka_io.list_offsets(self.adm, self.s.topic, parts, OffsetSpec.latest())
        except DependencyError:
            return False  # not answering after all: ask again next turn
        stored = self.store.load_offsets(self.s.group_id, self.s.topic)
        return any(end > stored.get(p, 0) for p, end in ends.items())

    def _after_outage(self, consumer: Consumer, delivered: bool) -> Consumer:
        """While a Kafka outage lasts: say once when the broker answers again, and replace a
        consumer that still delivers nothing STALL_S later although there is more to read."""
        assert self.kafka_down_since is not None
        now = time.monotonic()
        if self.kafka_back_at is None:
            if not (delivered or self._broker_answers()):
                return consumer
            self.kafka_back_at = now
            log.info("Kafka at %s answers again after %.1fs: the sink resumes",
                     self.s.bootstrap_servers, now - self.kafka_down_since)
        if delivered or now - self.kafka_back_at < STALL_S:
            if delivered:
                self.kafka_down_since = self.kafka_back_at = None
            return consumer
        if not self._behind():  # nothing to read: nothing to show either way
            self.kafka_down_since = self.kafka_back_at = None
            return consumer
        log.warning("the sink's Kafka consumer delivered nothing %.1fs after the broker came "
                    "back, with records to read: replacing it (it resumes from MySQL's offsets)",
                    now - self.kafka_back_at)
        threading.Thread(target=_close_quietly, args=(consumer,), daemon=True).start()
        self.assigned, self.at_eof = set(), set()
        self.kafka_back_at = now  # the new one gets its STALL_S too
        return self._new_consumer()

    def run(self) -> int:
        s = self.s
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGTERM, signal.SIGINT):
                signal.signal(sig, lambda *_: self.stop.set())
        log.info("starting sink: %r", s)
        server = serve(s.metrics_port, self.metrics.registry, self.health)
        # Kafka first: a sink that cannot reach its broker leaves no tables behind in MySQL.
        self.adm = kafka_io.wait_for_broker(s.bootstrap_servers, s.kafka_client_config,
                                            s.startup_timeout)
        self.store.ensure_schema(s.startup_timeout)
        self._check_drift()  # before subscribing: the first assignment seeks to its offsets
        consumer = self._new_consumer()
        try:
            while not self.stop.is_set():
                down_before = self.kafka_down_since
                msgs = consumer.consume(10_000, 0.5)
                if self.fatal is not None:
                    raise DependencyError(f"sink consumer: {fatal_line(self.fatal)}")
                batch: list[Total] = []
                ends: dict[int, int] = {}
                for msg in msgs:
                    err = msg.error()
                    if err is not None:
                        partition, offset = msg.partition(), msg.offset()
                        if err.code() == KafkaError._PARTITION_EOF and partition is not None:
                            self.at_eof.add(partition)
                            ends[partition] = offset if offset is not None else 0
                        elif is_fatal(err):
                            raise DependencyError(f"sink consumer: {fatal_line(err)}")
                        else:
                            self._kafka_failed(err.str())
                        continue
                    self.at_eof.discard(msg.partition())
                    total = decode(msg)
                    if total is not None:
                        batch.append(total)
                if self.kafka_down_since is not None:
                    # What this very poll returned beside the outage's first error (records
                    # fetched before, an end of partition) is no sign that it is over.
                    delivered = bool(batch or ends) and down_before is not None
                    consumer = self._after_outage(consumer, delivered)
                if self._id_changed():
                    self._resync(consumer)  # this batch may be of the old topic: dropped
                    continue
                if batch or ends:
                    t0 = time.monotonic()
                    try:
                        nxt = self.store.apply(s.group_id, s.topic, batch, ends, self.topic_id)
                    except TopicChangedError as exc:
                        log.warning("%s: checking it again", exc)
                        self._resync(consumer)
                        continue
                    self.metrics.mysql_write_seconds.observe(time.monotonic() - t0)
                    self.metrics.batches_written.inc()
                    self.metrics.records_applied.inc(len(batch))
                    self.health.progressed()
                    self.applied += len(batch)
                    if nxt:
                        consumer.commit(offsets=[TopicPartition(s.topic, p, o)
                                                 for p, o in nxt.items()], asynchronous=True)
                elif s.once and self.assigned and self.assigned <= self.at_eof:
                    break
                self._update_lag(consumer)
        finally:
            consumer.close()
            self.store.close()
            if server is not None:
                server.shutdown()
        log.info("sink stopped; %d records applied", self.applied)
        return 0


def _close_quietly(consumer: Consumer) -> None:
    """A stuck consumer's close may block (its LeaveGroup is queued behind the stuck request):
    on a thread of its own, errors ignored."""
    with contextlib.suppress(Exception):
        consumer.close()


def run_sink(s: SinkSettings) -> int:
    return Sink(s).run()

