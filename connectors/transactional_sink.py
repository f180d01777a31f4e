"""Publishing one batch: results, DLQ records and input offsets in one Kafka transaction.

The steps are the publisher's (`Publisher`, declared beside the batch that calls them in order:
pipeline/batch.py, whose docstring says why the order is the guarantee):
  begin                   begin_transaction
  produce                 totals + DLQ records (invisible to read_committed readers until commit)
  send_offsets            send_offsets_to_transaction: the input offsets join the SAME transaction
  commit                  commit_transaction: one atomic step, all visible, offsets committed
  abort                   abort_transaction, after an abortable error at any of the four
`AtLeastOnceSink` is the deliberately weaker variant (benchmarks, proving the tests can fail):
produce, flush, then commit offsets; a crash in between replays the batch.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import NamedTuple

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

from logcount.connectors.kafka_io import client_config
from logcount.core.backoff import Backoff
from logcount.core.errors import (
    AbortableKafkaError,
    FatalKafkaError,
    HungClientError,
    RetriableKafkaError,
    classify,
    kafka_error,
)
from logcount.core.heartbeat import frozen_between
from logcount.core.retry import Retry, retry

log = logging.getLogger("logcount.txn")

# Why 60 s: the transaction is open only from begin to commit (well under a second; the Spark work
# comes before), so 60 s rides out a broker bounce mid-commit while bounding how long a dead stage
# stalls read_committed readers. Must stay <= transaction.max.timeout.ms; --kafka-config overrides.
TRANSACTION_TIMEOUT_MS = 60_000
# Each call waits for its own timeout, so a network fault costs seconds, not a minute:
# init_transactions finds the coordinator and waits out a predecessor's abort (30 s).
# Figures: docs/tuning.md#transaction-timeouts
INIT_TIMEOUT_S = 30.0
# - send_offsets_to_transaction: FindCoordinator for the group, AddOffsetsToTxn, TxnOffsetCommit:
#   three round trips of milliseconds. A coordinator that is moving answers at once ("not
#   coordinator", retried inside the call), so 5 s is ample; expiry is retried or aborts.
SEND_OFFSETS_TIMEOUT_S = 5.0
# commit_transaction flushes the batch's records (acks=all) and writes EndTxn, abort likewise:
# well under a second for the touched minutes and the DLQ records; 10 s, and expiry is retriable.
END_TIMEOUT_S = 10.0
# Retriable errors are retried until this deadline, then treated as abortable (re-plan, redo).
RETRY_DEADLINE_S = 120.0
RETRY_PAUSE_S = 0.5
# A call still running this long after its own timeout is hung (librdkafka returns within ms of a
# timeout unless stuck): the stage replaces it once no other instance took over, and the new
# producer fences the hung one. Figures: docs/tuning.md#hung-calls
HANG_GRACE_S = 2.0


# A grouped batch makes ~70,000 of these: a frozen dataclass's init took twice a NamedTuple's.
class OutRecord(NamedTuple):
    topic: str
    key: bytes
    value: bytes | None  # None: a tombstone (a state record the stage drops)


def _watched(doing: str, call: Callable[[], object], timeout_s: float):
    """Run `call` (which passes `timeout_s` to librdkafka) in a helper thread; one that outlives
    it by HANG_GRACE_S of time this process actually ran is hung. Time during which the whole
    process was stopped (logcount/core/heartbeat.py) is not counted: after a SIGSTOP the call
    resumes with the rest of its own timeout, and a freeze is not a reason to replace the
    clients."""
    outcome: dict = {}

    def target() -> None:
        try:
            outcome["value"] = call()
        except BaseException as exc:  # noqa: BLE001 - re-raised in the caller's thread
            outcome["error"] = exc

    limit = timeout_s + HANG_GRACE_S
    started = time.monotonic()
    frozen_between(started)  # starts the heartbeat, if nobody has yet
    worker = threading.Thread(target=target, name=f"kafka-{doing}", daemon=True)
    worker.start()
    while True:
        worker.join(max(0.0, limit - (time.monotonic() - started - frozen_between(started))))
        if not worker.is_alive():
            break
        frozen = frozen_between(started)
        ran = time.monotonic() - started - frozen
        if ran >= limit:
            stopped = (f"; the process was also stopped for {frozen:.1f}s, not counted"
                       if frozen else "")
            raise HungClientError(
                f"{doing} did not return within {limit:.0f}s of running time, "
                f"{HANG_GRACE_S:.0f}s past its own timeout (a librdkafka hang, #5456{stopped})",
                call=doing)
    if "error" in outcome:
        raise outcome["error"]
    return outcome.get("value")


def _retrying(doing: str, call: Callable[[], object], timeout_s: float,
              deadline_s: float = RETRY_DEADLINE_S):
    """Run `call` (watched for hangs); repeat it while librdkafka says the error is retriable,
    for `deadline_s`, after which it counts as abortable."""

    def verdict(exc: Exception) -> Retry | BaseException:
        kexc = kafka_error(exc) if isinstance(exc, KafkaException | SystemError) else None
        if kexc is None:
            return exc  # a hang, or not librdkafka's: through unchanged
        err = classify(kexc, doing)
        if not isinstance(err, RetriableKafkaError):
            return err
        return Retry(err, give_up=AbortableKafkaError(
            f"{err} (still failing after {deadline_s:.0f}s)", err.error))

    return retry(lambda: _watched(doing, call, timeout_s),
                 Backoff(RETRY_PAUSE_S, give_up_s=deadline_s).begin(), verdict,
                 on_retry=lambda failed, delay: log.warning("%s; retrying", failed.error))


def _produce_all(producer: Producer, records: Sequence[OutRecord]) -> None:
    try:
        for rec in records:
            while True:
                try:
                    producer.produce(rec.topic, rec.value, rec.key)
                    break
                except BufferError:  # local queue full: let deliveries drain, then go on
                    producer.poll(0.1)
            producer.poll(0)
    except (KafkaException, SystemError) as exc:
        if (kexc := kafka_error(exc)) is None:
            raise
        raise classify(kexc, "produce") from exc



class TransactionalSink:
    """A transactional producer with a fixed transactional.id."""

    def __init__(self, bootstrap: str, transactional_id: str, extra: Mapping[str, str],
                 crash: Callable[[str], None] = lambda point: None,
                 make_producer: Callable[[dict], Producer] = Producer) -> None:
        """`make_producer`: confluent-kafka's Producer, or a test's fake of it."""
        conf = client_config(bootstrap, None, **{
            "transactional.id": transactional_id,
            "enable.idempotence": True,
            "transaction.timeout.ms": TRANSACTION_TIMEOUT_MS,
            # Batch the results a little; commit_transaction flushes anyway.
            "linger.ms": 5,
        })
        conf.update(extra)
        # librdkafka refuses socket.timeout.ms > transaction.timeout.ms + 100: a short
        # transaction timeout (a test's 5-8 s) brings our network default down with it.
        txn_ms = int(conf["transaction.timeout.ms"])
        if "socket.timeout.ms" not in extra and int(conf["socket.timeout.ms"]) > txn_ms + 100:
            conf["socket.timeout.ms"] = txn_ms
        self.producer = make_producer(conf)
        self.transaction_timeout_s = txn_ms / 1000
        self._crash = crash

    def init(self) -> None:
        """Register our transactional.id: fences any predecessor and aborts its open transaction,
        so read_committed readers are not stalled until its timeout."""
        _retrying("init_transactions", lambda: self.producer.init_transactions(INIT_TIMEOUT_S),
                  INIT_TIMEOUT_S)

    def begin(self) -> None:
        # begin_transaction is local (no request): it returns at once or raises.
        _retrying("begin_transaction", self.producer.begin_transaction, 0.0)

    def produce(self, records: Sequence[OutRecord]) -> None:
        _produce_all(self.producer, records)
        self._crash("after_produce")

    def send_offsets(self, topic: str, offsets: Mapping[int, int],
                     group_metadata: object) -> None:
        tps = [TopicPartition(topic, p, off) for p, off in sorted(offsets.items())]

        # Always with a timeout: it can hang while the group coordinator is down
        # (librdkafka #3013); expiry surfaces as retriable, then abortable.
        def send_offsets():
            self._crash("in_send_offsets")  # a fault test's hang: inside the watched call
            self.producer.send_offsets_to_transaction(tps, group_metadata,
                                                      SEND_OFFSETS_TIMEOUT_S)

        if tps:  # a claim has none
            _retrying("send_offsets_to_transaction", send_offsets, SEND_OFFSETS_TIMEOUT_S)
        self._crash("after_send_offsets")

    def commit(self) -> None:
        # commit_transaction may be called again after a retriable error: it resumes.
        _retrying("commit_transaction", lambda: self.producer.commit_transaction(END_TIMEOUT_S),
                  END_TIMEOUT_S)

    def abort(self) -> None:
        try:
            _retrying("abort_transaction", lambda: self.producer.abort_transaction(END_TIMEOUT_S),
                      END_TIMEOUT_S)
        except AbortableKafkaError as exc:
            # Abort itself failing for two minutes means the producer is unusable.
            raise FatalKafkaError(f"abort_transaction failed: {exc}") from exc

    def close(self) -> None:
        _close(self.producer)

    def abandon(self) -> None:
        """Let go of a hung producer: closed on a thread of its own, which may never return."""
        _abandon(self.producer)


def _abandon(producer: Producer) -> None:
    threading.Thread(target=_close, args=(producer,), name="abandoned-producer",
                     daemon=True).start()


def _close(producer: Producer) -> None:
    """Best effort: a fenced or fatal producer raises from flush, and that must not replace the
    error that brought us here (the one clear line). Not only KafkaException: confluent-kafka's
    flush on a fenced producer can return with that exception still set, which Python reports
    as `SystemError: ... returned a result with an exception set` (seen in the zombie chaos
    test). Nothing is lost by ignoring it: every commit has already flushed its records."""
    with contextlib.suppress(KafkaException, SystemError):
        producer.flush(5)


class AtLeastOnceSink:
    """No transaction: produce and flush, then commit the offsets. A crash between the two
    replays the batch and over-counts - kept to measure the cost of exactly-once and to prove
    that the fault tests can catch it."""

    def __init__(self, bootstrap: str, consumer: Consumer, extra: Mapping[str, str],
                 crash: Callable[[str], None] = lambda point: None) -> None:
        conf = client_config(bootstrap, None, **{"enable.idempotence": True, "linger.ms": 5})
        conf.update(extra)
        self.producer = Producer(conf)
        self.consumer = consumer
        self._crash = crash
        self.offsets: list[TopicPartition] = []  # send_offsets: committed after the flush

    def init(self) -> None:
        pass

    def begin(self) -> None:
        self.offsets = []

    def produce(self, records: Sequence[OutRecord]) -> None:
        _produce_all(self.producer, records)
        remaining = self.producer.flush(END_TIMEOUT_S)
        if remaining:
            raise AbortableKafkaError(f"{remaining} records not delivered in {END_TIMEOUT_S}s")
        self._crash("after_produce")

    def send_offsets(self, topic: str, offsets: Mapping[int, int],
                     group_metadata: object) -> None:
        self.offsets = [TopicPartition(topic, p, off) for p, off in sorted(offsets.items())]

    def commit(self) -> None:
        """The records are flushed: only now are the offsets committed, outside any transaction
        (a crash in between replays the batch)."""
        self._crash("after_send_offsets")

        def commit_offsets():
            self._crash("in_send_offsets")  # a fault test's hang: inside the watched call
            self.consumer.commit(offsets=self.offsets, asynchronous=False)

        _retrying("commit offsets", commit_offsets, END_TIMEOUT_S)

    def abort(self) -> None:
        pass

    def close(self) -> None:
        _close(self.producer)

    def abandon(self) -> None:
        _abandon(self.producer)
