"""Reading a topic back to its end, read_committed: a compacted one as a table (the stage's
state topic at start), or every record in order (the demo's final topic)."""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping

from confluent_kafka import Consumer, KafkaError, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec

from logcount.connectors import kafka_io
from logcount.core.errors import DependencyError

# Why 300 s for the whole read: a compacted state topic is small (5 years of minutes read in well
# under a second), plus at most about an hour of superseded versions; 300 s is far beyond any
# honest read and bounds one making no headway. Figures: docs/tuning.md#state-restore-timeout
RESTORE_TIMEOUT_S = 300.0
# The state topic's own settings: compacted (last value per key is the state), and segments
# rolled hourly so that superseded versions become cleanable within the hour: the active segment
# is never compacted, and with the default of 7 days a restart would read a week of versions.
STATE_TOPIC_CONFIG = {"cleanup.policy": "compact", "segment.ms": str(3600 * 1000)}


def read_table(adm: AdminClient, bootstrap: str, topic: str, extra: Mapping[str, str],
               group_id: str) -> dict[bytes, bytes]:
    """The topic's last value per key (tombstones remove keys), read_committed to its end.

    Runs after init_transactions, which aborted any transaction a predecessor left open, so the
    last stable offset is the log end and this read never waits on one. `group_id` only names
    the reader (it assigns, never commits): it sits under the stage's group prefix, so the
    group ACL that covers the stage covers it too.
    """
    table: dict[bytes, bytes] = {}
    for key, value in read_records(adm, bootstrap, topic, extra, group_id):
        if key is None:  # the stage keys every record: another writer's, skipped
            continue
        if value is None:
            table.pop(key, None)
        else:
            table[key] = value
    return table


def read_records(adm: AdminClient, bootstrap: str, topic: str, extra: Mapping[str, str],
                 group_id: str) -> Iterator[tuple[bytes | None, bytes | None]]:
    """Every committed (key, value) of the topic to its end, in offset order per partition."""
    parts = kafka_io.partitions_of(adm, topic) or []
    ends = kafka_io.list_offsets(adm, topic, parts, OffsetSpec.latest())
    starts = kafka_io.list_offsets(adm, topic, parts, OffsetSpec.earliest())
    todo = {p for p in parts if ends[p] > starts[p]}
    if not todo:
        return
    consumer = Consumer(kafka_io.client_config(bootstrap, extra, **{
        "group.id": group_id, "isolation.level": "read_committed",
        "enable.auto.commit": False, "enable.partition.eof": True,
        # A transactional topic ends with a commit marker, so only the end-of-partition event
        # says we are done, and it comes with the next empty fetch, which the broker holds for
        # fetch.wait.max.ms (500 ms by default): 0.62 s -> 0.16 s for a small state.
        "fetch.wait.max.ms": 10,
    }))
    try:
        consumer.assign([TopicPartition(topic, p, starts[p]) for p in todo])
        deadline = time.monotonic() + RESTORE_TIMEOUT_S
        while todo:
            if time.monotonic() > deadline:
                raise DependencyError(f"reading {topic}: its end was not reached in "
                                      f"{RESTORE_TIMEOUT_S:.0f}s")
            # A short wait per call: consume() returns early only with a full batch, and a
            # state topic's tail (or a small state) would otherwise cost a whole second a start.
            for msg in consumer.consume(10_000, 0.1):
                err = msg.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        todo.discard(msg.partition())
                        continue
                    raise DependencyError(f"reading {topic}: {err.str()}")
                partition, offset, key = msg.partition(), msg.offset(), msg.key()
                assert partition is not None and offset is not None  # a record has both
                if offset + 1 >= ends[partition]:
                    todo.discard(partition)
                yield key, msg.value()
    finally:
        consumer.close()
