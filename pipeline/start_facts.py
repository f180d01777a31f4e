"""The facts a start decides on, read from the cluster: the state table, the input's offsets,
the group's committed offsets and the topic ids. The stage's start reads them, and so does
`logcount state show` (pipeline/state_view.py), which asks the same rule what a start would do.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from confluent_kafka import Consumer
from confluent_kafka.admin import AdminClient, OffsetSpec

from logcount.connectors import kafka_io, state_topic
from logcount.core.errors import ConfigError
from logcount.core.settings import RunSettings
from logcount.pipeline.state import StartFacts, Wanted, counting_settings, state_topic_name

# A topic that does not exist yet has no id; a start would create it with a new one, which is
# what this stands for when the rule compares it with the state's.
NO_TOPIC = "(none: a start creates it)"
@dataclass(frozen=True)
class Facts:
    """What a start reads from the cluster (after its init_transactions, or, here, without)."""

    table: dict[bytes, bytes]  # the state topic's last value per key
    partitions: list[int]  # the input's
    start: StartFacts
    state_log: tuple[int, int]  # the state topic's log start and end offsets
    compaction: str | None = None  # the line a start's topic check refuses with, if any


def wanted(s: RunSettings) -> Wanted:
    """What a start with these settings is configured to do."""
    fmt = s.line_format
    return Wanted(s.input_topic, s.output_topic, fmt.level_label, s.delivery == "exactly-once",
                  s.starting_offsets, s.horizon_minutes, counting_settings(fmt),
                  s.final_topic_name, s.grace_seconds, s.emit_final, s.rollup_minutes)


def read_table(adm: AdminClient, s: RunSettings) -> dict[bytes, bytes]:
    """The state topic's table (the reader's group sits under the stage's, for one ACL)."""
    return state_topic.read_table(adm, s.bootstrap_servers, state_topic_name(s.output_topic),
                                  s.kafka_client_config, f"{s.group_id}-state-reader")


def gather(adm: AdminClient, s: RunSettings, consumer: Consumer,
           table: Callable[[], dict[bytes, bytes]], *, created: bool) -> Facts:
    """The facts a start decides on. `created`: the stage has just created its topics, so a
    missing id is a broker that does not know it yet (asked again), never "no topic"."""
    got = table()  # the state first: the input's ends read after it are never behind it
    parts = kafka_io.partitions_of(adm, s.input_topic) or []
    names = [s.input_topic, s.output_topic]
    final = s.final_topic_name
    if final is not None and (created or kafka_io.partitions_of(adm, final)):
        names.append(final)
    if created:
        ids: Mapping[str, str | None] = kafka_io.existing_topic_ids(adm, names)
    else:
        ids = kafka_io.topic_ids(adm, names)
    facts = StartFacts(
        input_topic_id=ids[s.input_topic] or NO_TOPIC,
        output_topic_id=ids[s.output_topic] or NO_TOPIC,
        earliest=kafka_io.list_offsets(adm, s.input_topic, parts, OffsetSpec.earliest()),
        latest=kafka_io.list_offsets(adm, s.input_topic, parts, OffsetSpec.latest()),
        group=kafka_io.committed_offsets(consumer, s.input_topic, parts),
        final_records=_final_records(adm, final),
        final_topic_id=None if final is None else ids.get(final))
    log = (0, 0)
    compaction = None
    if not created:
        state = state_topic_name(s.output_topic)
        if kafka_io.partitions_of(adm, state):
            log = (kafka_io.list_offsets(adm, state, [0], OffsetSpec.earliest())[0],
                   kafka_io.list_offsets(adm, state, [0], OffsetSpec.latest())[0])
        # The start's own topic check (KafkaCluster.ensure_topics in pipeline/wiring.py), for
        # topics that exist already.
        for topic, role in ((s.output_topic, "output"), (state, "state")):
            if compaction is None and kafka_io.partitions_of(adm, topic):
                try:
                    kafka_io.require_compacted(adm, topic, role)
                except ConfigError as exc:
                    compaction = str(exc)
    return Facts(got, parts, facts, log, compaction)


def _final_records(adm: AdminClient, topic: str | None) -> int:
    """The offsets in the final topic (0 when it is missing or empty, or without --emit-final):
    a start refuses a state that closed nothing into a final topic that holds records."""
    parts = kafka_io.partitions_of(adm, topic) if topic is not None else None
    if not parts or topic is None:
        return 0
    return sum(kafka_io.list_offsets(adm, topic, parts, OffsetSpec.latest()).values())
