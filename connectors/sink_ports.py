"""What the sink's loop (connectors/mysql_sink.py) is handed: its consumer, the topic as the
broker sees it, and its store. Each a `Protocol`: the Kafka classes (connectors/sink_kafka.py)
and MySQL's (connectors/mysql_store.py) are one implementation each, the unit tests' fakes
another, and a second database is a second store class.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Protocol

from confluent_kafka import KafkaError, Message, TopicPartition

from logcount.connectors.sink_store import Record

Rebalance = Callable[[list[TopicPartition]], None]
ErrorCallback = Callable[[KafkaError], None]


class SinkConsumer(Protocol):
    """A group member reading the output topic (read_committed, no auto-commit); its
    rebalance callbacks run inside consume()."""

    def subscribe(self, topic: str, on_assign: Rebalance, on_revoke: Rebalance) -> None: ...

    def consume(self, num_messages: int, timeout: float) -> list[Message]: ...

    def assign(self, parts: list[TopicPartition]) -> None: ...

    def seek(self, tp: TopicPartition) -> None: ...

    def commit_async(self, offsets: list[TopicPartition]) -> None:
        """Kafka's copy of the offsets, for lag monitoring only."""

    def lag(self, partitions: Iterable[int]) -> dict[int, int] | None:
        """Records behind the cached high watermark per partition where known; None when
        the consumer cannot say (metrics only)."""

    def close(self) -> None: ...


# A new consumer, its client errors (broker down, fenced) reported to the callback.
ConsumerFactory = Callable[[ErrorCallback], SinkConsumer]


class TopicView(Protocol):
    """The output topic as the broker sees it (metadata and list-offsets requests); the
    methods raise DependencyError when the broker does not answer, but `answers`."""

    def partitions(self) -> list[int] | None:
        """The partition ids, or None while the topic does not exist."""

    def topic_id(self) -> str | None:
        """The topic's id (a recreated topic gets a new one); None: the broker gives none."""

    def ends(self, partitions: Iterable[int], committed_only: bool) -> dict[int, int]:
        """Each partition's end: the last stable offset, or with committed_only=False the
        high watermark."""

    def answers(self) -> bool:
        """Whether the topic's leaders answer for their offsets now (after an outage)."""


class SinkStore(Protocol):
    """The database side: each call one transaction, retried through the database's
    transient failures (ensure_schema up to `timeout_s`; the others until the sink stops)."""

    def ensure_schema(self, timeout_s: float | None = None) -> None: ...

    def load_offsets(self, group: str, topic: str) -> dict[int, int]: ...

    def reconcile_topic(self, group: str, topic: str, current_id: str | None,
                        ends: Mapping[int, int]) -> str | None:
        """The drift check (logcount/core/sink_drift.py): repair offsets of another
        incarnation of the topic, store the current id; the drift's reason or None."""

    def apply(self, group: str, topic: str, records: Sequence[Record],
              ends: Mapping[int, int] | None = None,
              topic_id: str | None = None) -> dict[int, int]:
        """The records and the next offsets in ONE transaction; the offsets written. Running
        totals (Total) are absolute: the last per key is upserted. Final records (Final) are
        inserted, a row each, never overwritten: a key already there is a ConfigError. One
        kind a topic (sink_store.batch_kind: ConfigError). TopicChangedError when the stored
        topic id is not `topic_id`."""

    def close(self) -> None: ...
