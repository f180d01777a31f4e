"""The stage's real collaborators, wired in one place: the Kafka cluster through its admin
client, the transactional publisher with its group consumer, and the Spark job
(pipeline/compute.py). `run_stage` is what `logcount run` (and the demo) call; tests give
`Stage` fakes instead (tests/unit)."""

from __future__ import annotations

from confluent_kafka import Consumer, KafkaException
from confluent_kafka.admin import AdminClient, OffsetSpec

from logcount.connectors import kafka_io, state_topic
from logcount.connectors.transactional_sink import AtLeastOnceSink, TransactionalSink
from logcount.core.errors import ConfigError, FatalKafkaError, StateRefused
from logcount.core.settings import RunSettings
from logcount.pipeline import start_facts
from logcount.pipeline.batch import Publisher
from logcount.pipeline.compute import SparkCompute
from logcount.pipeline.crash import CrashPoints
from logcount.pipeline.driver import Seams, Stage
from logcount.pipeline.spark import SessionStart, connector_jars, under_spark_submit
from logcount.pipeline.state import state_topic_name

# The DLQ keeps malformed lines for 90 days: long enough for someone to notice and replay them.
DLQ_RETENTION_MS = str(90 * 24 * 3600 * 1000)


class KafkaCluster:
    """The stage's Cluster: kafka_io and start_facts over one AdminClient."""

    def __init__(self, s: RunSettings) -> None:
        self.s = s
        self.admin: AdminClient  # connect() waits for the broker

    def connect(self) -> None:
        s = self.s
        self.admin = kafka_io.wait_for_broker(s.bootstrap_servers, s.kafka_client_config,
                                              s.startup_timeout)

    def ensure_topics(self) -> None:
        s, adm, rf = self.s, self.admin, self.s.replication_factor
        state = state_topic_name(s.output_topic)
        kafka_io.ensure_topic(adm, s.input_topic, s.input_partitions, None, rf)
        # Output and DLQ partitions are for what they hold, not copied from the input (see
        # RunSettings.output_partitions); existing topics are used as they are.
        kafka_io.ensure_topic(adm, s.output_topic, s.output_partitions,
                              {"cleanup.policy": "compact"}, rf)
        _require_compacted(adm, s.output_topic, "output")  # before the state topic is created
        kafka_io.ensure_topic(adm, state, 1, state_topic.STATE_TOPIC_CONFIG, rf)
        _require_compacted(adm, state, "state")
        kafka_io.ensure_topic(adm, s.dlq_topic, s.dlq_partitions,
                              {"retention.ms": DLQ_RETENTION_MS}, rf)
        final = s.final_topic_name
        if final is not None:
            # Append-only: a minute's records share its key, which compaction would cut to one.
            # One partition: a minute's records and every minute in order (output_partitions'
            # reasoning: a transaction pays per partition written).
            kafka_io.ensure_topic(adm, final, 1, {"cleanup.policy": "delete"}, rf)
            policy = kafka_io.topic_config(adm, final).get("cleanup.policy", "")
            if "compact" in policy:
                raise StateRefused(f"final topic {final} has cleanup.policy={policy!r}: "
                                   f"compaction would keep one record per minute of its "
                                   f"series; it must be 'delete' (append-only)")

    def input_partitions(self) -> list[int]:
        return kafka_io.partitions_of(self.admin, self.s.input_topic) or []

    def input_offsets(self, parts: list[int], latest: bool) -> dict[int, int]:
        spec = OffsetSpec.latest() if latest else OffsetSpec.earliest()
        return kafka_io.list_offsets(self.admin, self.s.input_topic, parts, spec)

    def topic_ids(self, topics: list[str]) -> dict[str, str]:
        return kafka_io.existing_topic_ids(self.admin, topics)

    def state_table(self) -> dict[bytes, bytes]:
        return start_facts.read_table(self.admin, self.s)

    def facts(self, group) -> start_facts.Facts:
        return start_facts.gather(self.admin, self.s, group, self.state_table, created=True)


class KafkaClients:
    """The publisher factory: a group consumer that never subscribes (it reads the group's
    committed offsets and lends its group metadata to send_offsets_to_transaction; Spark's
    executors do the reading) and the sink of --delivery."""

    def __init__(self, s: RunSettings, crash: CrashPoints) -> None:
        self.s, self.crash = s, crash

    def __call__(self) -> tuple[Publisher, Consumer]:
        s, extra = self.s, self.s.kafka_client_config
        consumer = Consumer(kafka_io.client_config(s.bootstrap_servers, extra, **{
            "group.id": s.group_id, "isolation.level": "read_committed",
            "enable.auto.commit": False,
        }))
        sink: Publisher
        if s.delivery == "exactly-once":
            sink = TransactionalSink(s.bootstrap_servers, s.txn_id, extra, self.crash)
        else:
            sink = AtLeastOnceSink(s.bootstrap_servers, consumer, extra, self.crash)
        return sink, consumer


def wire(s: RunSettings, spark: SessionStart | None = None) -> Stage:
    """The stage with its real collaborators."""
    if not under_spark_submit():  # spark-submit brings its own jars (or --packages)
        connector_jars()  # missing jars: say so before anything starts
    crash = CrashPoints()
    return Stage(s, Seams(KafkaCluster(s), KafkaClients(s, crash), SparkCompute(s, spark),
                          crash=crash))


def run_stage(s: RunSettings, spark: SessionStart | None = None) -> int:
    try:
        return wire(s, spark).run()
    except KafkaException as exc:  # anything not classified on the way up
        raise FatalKafkaError(f"Kafka: {exc}") from exc


def _require_compacted(adm: AdminClient, topic: str, role: str) -> None:
    """A topic that deletes by time is refused like a state drift, and shown the same."""
    try:
        kafka_io.require_compacted(adm, topic, role)
    except ConfigError as exc:
        raise StateRefused(str(exc)) from None
