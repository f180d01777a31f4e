"""Thin adapters over confluent-kafka: client config, topics, offsets, a health round trip."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from confluent_kafka import (
    Consumer,
    IsolationLevel,
    KafkaError,
    KafkaException,
    Producer,
    TopicCollection,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic, OffsetSpec

from logcount.core.backoff import Backoff
from logcount.core.client_properties.translation import RDKAFKA_CONSUMER_ONLY
from logcount.core.errors import ConfigError, DependencyError, denied
from logcount.core.retry import Retry, poll, retry

log = logging.getLogger("logcount.kafka")

# Why 15 s: long enough for a broker under load (or restarting) to answer metadata, short enough
# that an unreachable broker is reported within one operator glance.
REQUEST_TIMEOUT_S = 15.0
# A broker that is not up yet is asked again every half second (one metadata request each); a
# topic or id a broker does not know yet (just created) every 0.2 s: it shows within a second.
BROKER_RETRY_S = 0.5
POLL_S = 0.2


# How fast our librdkafka clients give up on a silent link and reconnect: what decides the
# resume time after a network fault heals (measured with tests/network). Each is overridable with
# --kafka-config / --client-config.
NETWORK_DEFAULTS = {
    # A request unanswered for 10 s (librdkafka's default: 60 s) is timed out and its connection
    # closed, so a link that drops our bytes is replaced within 10 s, not a minute; healthy
    # answers take milliseconds, and produce/fetch waits have their own timeouts on top.
    # Details: docs/tuning.md#network-timeouts
    "socket.timeout.ms": 10_000,
    # The TCP and TLS/SASL handshakes of a new connection: 10 s (default 30 s) is ample on any
    # network that carries data at all, and a connection accepted by a proxy that then drops
    # everything is abandoned after 10 s rather than 30.
    "socket.connection.setup.timeout.ms": 10_000,
    # Reconnect attempts back off from 100 ms up to 1 s (default 10 s): after a long outage the
    # next attempt is never more than a second after the heal. One connection attempt per second
    # per broker is nothing to a cluster.
    "reconnect.backoff.max.ms": 1_000,
}


# librdkafka's own log lines, served by each client's poll: the CLI sends them to its log file
# (or, with --verbose, to the terminal); our error lines say what matters.
RDKAFKA_LOG = logging.getLogger("librdkafka")


def client_config(bootstrap: str, extra: Mapping[str, str] | None = None,
                  **kw: Any) -> dict[str, Any]:
    """Base librdkafka config; `extra` (from --kafka-config) wins over our defaults."""
    # log_level 4: librdkafka's warnings and errors only; its info lines (e.g. purging queues
    # at shutdown) are noise even in a log file.
    conf: dict[str, Any] = {"bootstrap.servers": bootstrap, "log_level": 4,
                            "logger": RDKAFKA_LOG, **NETWORK_DEFAULTS, **kw}
    conf.update(extra or {})
    if "group.id" not in conf:  # a producer or admin client: consumer-only keys would warn
        for key in RDKAFKA_CONSUMER_ONLY:
            conf.pop(key, None)
    return conf


def admin(bootstrap: str, extra: Mapping[str, str] | None = None) -> AdminClient:
    return AdminClient(client_config(bootstrap, extra))


# librdkafka reports a failed authentication, or a TLS handshake with a listener that speaks
# something else, as connection errors it keeps retrying; neither heals by waiting.
_HOPELESS = ("SSL handshake failed", "SASL", "Authentication", "certificate verify failed")


def wait_for_broker(bootstrap: str, extra: Mapping[str, str] | None,
                    timeout_s: float) -> AdminClient:
    """An AdminClient once the cluster answers metadata; retries until `timeout_s`, then one
    clear DependencyError naming librdkafka's own reason (refused, TLS or SASL mismatch...).
    A broker that is restarting answers again within seconds; a security mismatch fails at once.
    """
    errors: list[KafkaError] = []
    adm = AdminClient(client_config(bootstrap, extra, error_cb=errors.append))
    # Each attempt gets a slice of the budget (at most 5 s), so there are always several
    # attempts: one attempt as long as the whole budget would never retry at all.
    attempt_s = max(0.5, min(5.0, timeout_s / 4))
    reason = ""

    def verdict(exc: Exception) -> Retry | BaseException:
        nonlocal reason
        if not isinstance(exc, KafkaException):
            return exc
        adm.poll(0)  # serves error_cb (and librdkafka's log lines)
        reasons = [e.str() for e in errors if e.code() != KafkaError._ALL_BROKERS_DOWN]
        reason = reasons[-1] if reasons else exc.args[0].str()
        if any(word in reason for word in _HOPELESS):
            return DependencyError(f"Kafka at {bootstrap} unreachable: {reason}" + _hint(reason))
        return Retry(DependencyError(f"Kafka at {bootstrap} unreachable after {timeout_s:.0f}s "
                                     f"of retries: {reason}" + _hint(reason)))

    def waiting(_: Retry, delay: float) -> None:
        if backoff.failures == 1:
            log.info("waiting for Kafka at %s (%s), up to %.0fs", bootstrap, reason, timeout_s)

    backoff = Backoff(BROKER_RETRY_S, give_up_s=timeout_s).begin()
    retry(lambda: adm.list_topics(timeout=attempt_s), backoff, verdict, on_retry=waiting)
    return adm


def _hint(reason: str) -> str:
    if "SSL handshake failed" in reason or "SASL" in reason:
        return " (does security.protocol match the broker's listener?)"
    return ""


def _refused(exc: KafkaException, doing: str, resource: str = "") -> Exception:
    """A KafkaException from an admin or consumer call -> AuthorizationError or DependencyError."""
    err = exc.args[0] if exc.args and isinstance(exc.args[0], KafkaError) else None
    return denied(err, doing, resource) or DependencyError(
        f"{doing}: {err.str() if err is not None else exc}")


def partitions_of(adm: AdminClient, topic: str) -> list[int] | None:
    """The topic's partition ids, or None if it does not exist."""
    try:
        md = adm.list_topics(topic=topic, timeout=REQUEST_TIMEOUT_S)
    except KafkaException as exc:
        raise DependencyError(f"Kafka unreachable: {exc.args[0].str()}") from exc
    t = md.topics.get(topic)
    if t is None:
        return None
    if t.error is not None:
        if t.error.code() not in (KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._UNKNOWN_TOPIC):
            raise (denied(t.error, f"metadata of {topic}", topic)
                   or DependencyError(f"metadata of {topic}: {t.error.str()}"))
        return None
    return sorted(t.partitions)


def existing_topic_ids(adm: AdminClient, topics: Iterable[str]) -> dict[str, str]:
    """The ids of topics that exist (just created, say): a broker that does not know one yet is
    asked again, for as long as a metadata request may take. An id is part of the stage's state,
    so a missing one must never be taken for "no topic"."""
    names = list(topics)
    missing: list[str] = []

    def attempt() -> dict[str, str] | None:
        ids = topic_ids(adm, names)
        missing[:] = [t for t, i in ids.items() if i is None]
        return None if missing else {t: i for t, i in ids.items() if i is not None}

    found = poll(attempt, Backoff(POLL_S, give_up_s=REQUEST_TIMEOUT_S).begin())
    if found is None:
        raise DependencyError(f"topic {missing[0]} exists but no broker gave its id within "
                              f"{REQUEST_TIMEOUT_S:.0f}s")
    return found


def topic_ids(adm: AdminClient, topics: Iterable[str]) -> dict[str, str | None]:
    """Each topic's id (a recreated topic gets a new one), or None where it does not exist."""
    names = list(topics)
    futures = adm.describe_topics(TopicCollection(names), request_timeout=REQUEST_TIMEOUT_S)
    out: dict[str, str | None] = {}
    for name, fut in futures.items():
        try:
            out[name] = str(fut.result(timeout=REQUEST_TIMEOUT_S).topic_id)
        except KafkaException as exc:
            if exc.args[0].code() not in (KafkaError.UNKNOWN_TOPIC_OR_PART,
                                          KafkaError._UNKNOWN_TOPIC):
                raise _refused(exc, f"describing topic {name}", name) from exc
            out[name] = None
        except TimeoutError as exc:
            raise DependencyError(f"describing topic {name}: no answer from Kafka within "
                                  f"{REQUEST_TIMEOUT_S:.0f}s") from exc
    return out


def ensure_topic(adm: AdminClient, topic: str, partitions: int,
                 config: Mapping[str, str] | None = None,
                 replication_factor: int | None = None) -> list[int]:
    """Create `topic` if missing (replication factor: the cluster's default unless given);
    return its partitions."""
    existing = partitions_of(adm, topic)
    if existing is not None:
        return existing
    futures = adm.create_topics(
        [NewTopic(topic, num_partitions=partitions, replication_factor=replication_factor or -1,
                  config=dict(config or {}))],
        request_timeout=REQUEST_TIMEOUT_S,
    )
    try:
        futures[topic].result(timeout=REQUEST_TIMEOUT_S)
    except KafkaException as exc:
        if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:  # lost a race: fine
            raise _refused(exc, f"creating topic {topic}", topic) from exc
    # Metadata can lag creation: a loaded broker (the docker demo's, a cluster electing leaders)
    # took over 5 s to show a new topic's partitions. Wait as long as a metadata request may
    # take, twice over, then say so.
    found = poll(lambda: partitions_of(adm, topic) or None,
                 Backoff(POLL_S, give_up_s=2 * REQUEST_TIMEOUT_S).begin())
    if found:
        return found
    raise DependencyError(f"topic {topic} was created but its partitions did not appear within "
                          f"{2 * REQUEST_TIMEOUT_S:.0f}s; is the cluster healthy?")


def _known_soon(doing: str, topic: str) -> Callable[[Exception], Retry | BaseException]:
    """`retry`'s verdict for a request about `topic`, which exists: on a cluster, a topic created
    a moment ago may not be known yet to the broker that answers (seen with 3 brokers), so that
    answer is asked again; a denial, a timeout or any other error is raised at once."""
    def verdict(exc: Exception) -> Retry | BaseException:
        if isinstance(exc, TimeoutError):
            return DependencyError(f"{doing}: no answer from Kafka within "
                                   f"{REQUEST_TIMEOUT_S:.0f}s")
        if not isinstance(exc, KafkaException):
            return exc
        refused = _refused(exc, doing, topic)
        unknown = exc.args[0].code() in (KafkaError.UNKNOWN_TOPIC_OR_PART,
                                         KafkaError._UNKNOWN_TOPIC)
        return Retry(refused) if unknown else refused
    return verdict


def topic_config(adm: AdminClient, topic: str) -> dict[str, str]:
    """The topic's configuration, asked again for as long as a metadata request may take while
    the broker that answers does not know the topic yet (`_known_soon`)."""
    res = ConfigResource(ConfigResource.Type.TOPIC, topic)
    got = retry(lambda: adm.describe_configs([res])[res].result(timeout=REQUEST_TIMEOUT_S),
                Backoff(POLL_S, give_up_s=REQUEST_TIMEOUT_S).begin(),
                _known_soon(f"describing topic {topic}", topic))
    return {k: v.value for k, v in got.items()}


def require_compacted(adm: AdminClient, topic: str, role: str = "output") -> None:
    """The output and state topics are tables (last value per key wins): refuse one whose
    cleanup.policy deletes by time or size (`delete`, `compact,delete`): retention would remove
    old totals and a restart would lose them."""
    policy = topic_config(adm, topic).get("cleanup.policy", "")
    if {p.strip() for p in policy.split(",")} != {"compact"}:
        raise ConfigError(
            f"{role} topic {topic} has cleanup.policy={policy!r}; it must be exactly 'compact' "
            f"(its records are a table: retention would delete totals) - use another topic or "
            f"alter it with kafka-configs --alter --add-config cleanup.policy=compact"
        )


def list_offsets(adm: AdminClient, topic: str, partitions: Iterable[int], spec: OffsetSpec,
                 committed_only: bool = True) -> dict[int, int]:
    """Offsets per partition for `spec`; `committed_only` asks for the last stable offset.

    With READ_COMMITTED, OffsetSpec.latest() is the LSO: the first offset of a still-open
    transaction, or the end of the log. Planning up to the LSO (not the high watermark) is what
    lets a read_committed reader reach the planned end without waiting on an open transaction.
    A broker that does not know the topic yet (just created) is asked again (`_known_soon`).
    """
    parts = list(partitions)
    if not parts:
        return {}
    level = IsolationLevel.READ_COMMITTED if committed_only else IsolationLevel.READ_UNCOMMITTED
    req = {TopicPartition(topic, p): spec for p in parts}

    def attempt() -> dict:
        futures = adm.list_offsets(req, isolation_level=level, request_timeout=REQUEST_TIMEOUT_S)
        return {tp: f.result(timeout=REQUEST_TIMEOUT_S) for tp, f in futures.items()}

    got = retry(attempt, Backoff(POLL_S, give_up_s=REQUEST_TIMEOUT_S).begin(),
                _known_soon(f"listing offsets of {topic}", topic))
    out = {tp.partition: info.offset for tp, info in got.items()}
    # Earliest and latest are never negative. A partition whose leader is away comes back as
    # -1001 (librdkafka's "invalid") with no error (seen on the 3-broker cluster): taken as an
    # offset it looks like truncated input; as an error, the caller retries until it is back.
    unknown = sorted(p for p, o in out.items() if o < 0)
    if unknown:
        raise DependencyError(
            f"listing offsets of {topic}: no offset for partition(s) "
            f"{', '.join(map(str, unknown))} (their leader is away: a broker down or a leader "
            f"election)")
    return out


def committed_offsets(consumer: Consumer, topic: str, partitions: Iterable[int]) -> dict[int, int]:
    """The group's committed offsets; partitions without one are left out."""
    tps = [TopicPartition(topic, p) for p in partitions]
    if not tps:
        return {}
    try:
        got = consumer.committed(tps, timeout=REQUEST_TIMEOUT_S)
    except KafkaException as exc:
        if exc.args[0].code() == KafkaError._TIMED_OUT:
            # Seen on Kafka 4.3: without DESCRIBE on the group, OffsetFetch is not refused but
            # never answered, so say what it may be.
            raise DependencyError(
                f"reading the group's committed offsets: no answer in {REQUEST_TIMEOUT_S:.0f}s "
                f"(the group coordinator is unreachable, or the principal lacks DESCRIBE on "
                f"the group)") from exc
        raise _refused(exc, "reading the group's committed offsets") from exc
    return {tp.partition: tp.offset for tp in got if tp.offset >= 0}


HEALTH_TOPIC = "logcount-health"


def transactional_round_trip(bootstrap: str, timeout_s: float = 10.0) -> None:
    """Prove the broker serves transactions: commit one record, read it back read_committed.

    This is the readiness probe of the embedded stack: a broker that answers metadata but whose
    transaction coordinator cannot load __transaction_state would pass a plain port check.
    """
    adm = admin(bootstrap)
    ensure_topic(adm, HEALTH_TOPIC, 1)
    # log_level 0: a probe's failures are reported by its exception, not by librdkafka's log.
    producer = Producer(client_config(bootstrap, None, **{
        "transactional.id": "logcount-health", "transaction.timeout.ms": 10000, "log_level": 0,
    }))
    try:
        producer.init_transactions(timeout_s)
        producer.begin_transaction()
        marker = uuid.uuid4().hex.encode()
        delivered: list[int] = []
        producer.produce(HEALTH_TOPIC, marker,
                         on_delivery=lambda err, msg: delivered.append(msg.offset() or 0)
                         if not err else None)
        producer.commit_transaction(timeout_s)
    except KafkaException as exc:
        raise DependencyError(f"transaction round trip: {exc.args[0].str()}") from exc
    if not delivered:
        raise DependencyError("transaction round trip: record not delivered")
    consumer = Consumer(client_config(bootstrap, None, **{
        "group.id": "logcount-health", "isolation.level": "read_committed",
        "enable.auto.commit": False, "log_level": 0,
    }))
    try:
        consumer.assign([TopicPartition(HEALTH_TOPIC, 0, delivered[0])])
        msg = consumer.poll(timeout_s)
        if msg is None or msg.error() or msg.value() != marker:
            raise DependencyError("transaction round trip: committed record not read back")
    finally:
        consumer.close()
