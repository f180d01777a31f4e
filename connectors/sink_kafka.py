"""The sink's Kafka side: its group consumer and the broker's view of the output topic, the
real implementations of connectors/sink_ports.py, and the one-line words of its fatal errors.
"""
from __future__ import annotations

import socket
from collections.abc import Iterable

from confluent_kafka import Consumer, KafkaError, Message, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec

from logcount.connectors import kafka_io
from logcount.connectors.sink_ports import ErrorCallback, Rebalance
from logcount.core.settings import SinkSettings

# Kafka's "no id" (a broker without topic ids answers with it): no id to compare.
_NO_TOPIC_ID = "AAAAAAAAAAAAAAAAAAAAAA"
# After a Kafka error the sink asks the broker (one metadata request, 1 s timeout) at each turn
# of its loop (0.5 s) whether it answers again: the resume line then comes within a second.
KAFKA_PROBE_TIMEOUT_S = 1.0


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


class KafkaConsumer:
    """The sink's consumer (sink_ports.SinkConsumer) on confluent-kafka."""

    def __init__(self, s: SinkSettings, on_error: ErrorCallback) -> None:
        self.topic = s.topic
        self.consumer = Consumer(kafka_io.client_config(
            s.bootstrap_servers, s.kafka_client_config, **{
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
                "error_cb": on_error,
            }))

    def subscribe(self, topic: str, on_assign: Rebalance, on_revoke: Rebalance) -> None:
        self.consumer.subscribe([topic], on_assign=lambda _c, parts: on_assign(parts),
                                on_revoke=lambda _c, parts: on_revoke(parts))

    def consume(self, num_messages: int, timeout: float) -> list[Message]:
        return self.consumer.consume(num_messages, timeout)

    def assign(self, parts: list[TopicPartition]) -> None:
        self.consumer.assign(parts)

    def seek(self, tp: TopicPartition) -> None:
        self.consumer.seek(tp)

    def commit_async(self, offsets: list[TopicPartition]) -> None:
        self.consumer.commit(offsets=offsets, asynchronous=True)

    def lag(self, partitions: Iterable[int]) -> dict[int, int] | None:
        """Cached high watermark minus our position, per partition."""
        out: dict[int, int] = {}
        try:
            positions = self.consumer.position([TopicPartition(self.topic, p)
                                                for p in partitions])
        except Exception:  # noqa: BLE001 - metrics only
            return None
        for tp in positions:
            try:
                _, high = self.consumer.get_watermark_offsets(tp, cached=True)
            except Exception:  # noqa: BLE001
                continue
            if high >= 0 and tp.offset >= 0:
                out[tp.partition] = max(0, high - tp.offset)
        return out

    def close(self) -> None:
        self.consumer.close()


class KafkaTopic:
    """The output topic through an admin client (sink_ports.TopicView)."""

    def __init__(self, adm: AdminClient, topic: str) -> None:
        self.adm, self.topic = adm, topic

    def partitions(self) -> list[int] | None:
        return kafka_io.partitions_of(self.adm, self.topic)

    def topic_id(self) -> str | None:
        found = kafka_io.topic_ids(self.adm, [self.topic])[self.topic]
        return None if found == _NO_TOPIC_ID else found

    def ends(self, partitions: Iterable[int], committed_only: bool) -> dict[int, int]:
        return kafka_io.list_offsets(self.adm, self.topic, partitions, OffsetSpec.latest(),
                                     committed_only=committed_only)

    def answers(self) -> bool:
        """The topic's leaders answer for their offsets (what the consumer needs): metadata
        alone comes from a broker that is still shutting down, or not yet serving partitions."""
        t = KAFKA_PROBE_TIMEOUT_S
        try:
            md = self.adm.list_topics(topic=self.topic, timeout=t)
            parts = md.topics[self.topic].partitions
            futures = self.adm.list_offsets(
                {TopicPartition(self.topic, p): OffsetSpec.latest() for p in parts},
                request_timeout=t)
            for fut in futures.values():
                fut.result(timeout=t + 1)
            return bool(parts)
        except Exception:  # noqa: BLE001 - refused, timed out, no leader: all mean "not yet"
            return False

