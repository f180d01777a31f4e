"""The secured cluster itself: SCRAM logins, ACLs, both client libraries, coordinators, and a
topic that stays writable with acks=all while one broker of three is down (min ISR 2)."""

from __future__ import annotations

import logging
import secrets
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from confluent_kafka import (
    Consumer,
    KafkaError,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AclOperation, ConfigResource, NewTopic, ResourceType

from tests.support.cluster import (
    BROKER_IDS,
    INTERNAL_TOPICS,
    SecuredCluster,
    acls_of,
    allow,
)
from tests.support.names import unique
from tests.support.readers import read_all

QUIET = logging.getLogger("tests.secured.rdkafka")
ALICE = "alice"
PREFIX = "alice-"  # alice's topics, groups and transactional ids


@dataclass(frozen=True)
class User:
    name: str
    password: str
    conf: dict[str, str]


@pytest.fixture(scope="module")
def alice(secured_cluster: SecuredCluster) -> Iterator[User]:
    """User alice with what a transactional producer and a read_committed consumer need on
    alice-* (no IdempotentWrite on the cluster: Kafka 4.3 does not need it)."""
    c = secured_cluster
    password = secrets.token_hex(12)
    c.add_user(ALICE, password)
    c.add_acls([
        *(allow(ALICE, ResourceType.TOPIC, PREFIX, op, prefixed=True)
          for op in (AclOperation.WRITE, AclOperation.READ, AclOperation.DESCRIBE)),
        allow(ALICE, ResourceType.GROUP, PREFIX, AclOperation.READ, prefixed=True),
        *(allow(ALICE, ResourceType.TRANSACTIONAL_ID, PREFIX, op, prefixed=True)
          for op in (AclOperation.WRITE, AclOperation.DESCRIBE)),
    ])
    yield User(ALICE, password, c.librdkafka_conf(ALICE, password))
    c.delete_acls([acls_of(ALICE)])
    c.disable_user(ALICE)


def _name(kind: str) -> str:
    return unique(PREFIX + kind)


def _create_topic(c: SecuredCluster, topic: str, partitions: int = 1) -> None:
    # No replication factor given: the controller's default (3) applies.
    for f in c.admin().create_topics([NewTopic(topic, partitions)],
                                     request_timeout=30).values():
        f.result()
    c.wait_healthy(topics=[topic], timeout_s=30)


@pytest.fixture(scope="module")
def alice_data(secured_cluster: SecuredCluster, alice: User) -> tuple[str, list[bytes]]:
    """alice's topic with one committed transaction (with consumer offsets in it, as the stage
    sends them) and one aborted transaction; returns (topic, committed values)."""
    c = secured_cluster
    topic, source = _name("out"), _name("in")
    _create_topic(c, topic)
    _create_topic(c, source)
    committed = [f"v{i}".encode() for i in range(10)]
    producer = Producer({**alice.conf, "transactional.id": _name("txn"), "logger": QUIET})
    producer.init_transactions(30)
    producer.begin_transaction()
    for v in committed:
        producer.produce(topic, v)
    group = Consumer({**alice.conf, "group.id": _name("group"), "logger": QUIET})
    producer.send_offsets_to_transaction([TopicPartition(source, 0, 42)],
                                         group.consumer_group_metadata(), 30)
    group.close()
    producer.commit_transaction(30)
    producer.begin_transaction()
    for i in range(5):
        producer.produce(topic, f"aborted{i}".encode())
    producer.flush(30)
    producer.abort_transaction(30)
    return topic, committed


def test_internal_topics_run_rf3_min_isr2(secured_cluster: SecuredCluster) -> None:
    c = secured_cluster
    md = c.admin().list_topics(timeout=10)
    assert set(md.brokers) == set(BROKER_IDS)
    for name, partitions in INTERNAL_TOPICS.items():
        tm = md.topics[name]
        assert len(tm.partitions) == partitions
        assert all(len(p.replicas) == 3 == len(p.isrs) for p in tm.partitions.values())
        res = ConfigResource("TOPIC", name)
        cfg = c.admin().describe_configs([res], request_timeout=30)[res].result()
        assert cfg["min.insync.replicas"].value == "2", name
    # Coordinators are spread: every broker leads some of the internal partitions.
    leaders = {p.leader for t in INTERNAL_TOPICS for p in md.topics[t].partitions.values()}
    assert leaders == set(BROKER_IDS)


def test_alice_transactions_read_committed(secured_cluster: SecuredCluster, alice: User,
                                           alice_data: tuple[str, list[bytes]]) -> None:
    topic, committed = alice_data
    assert len(secured_cluster.describe_acls(acls_of(ALICE))) == 6
    assert [m.value() for m in read_all(alice.conf, topic, timeout_s=30)] == committed


def test_java_console_consumer_reads_what_alice_committed(
        secured_cluster: SecuredCluster, alice: User, alice_data: tuple[str, list[bytes]],
        tmp_path: Path) -> None:
    c = secured_cluster
    topic, committed = alice_data
    props = c.write_java_properties(tmp_path / "alice.properties", alice.name, alice.password)
    proc = c.run_java_tool(
        "org.apache.kafka.tools.consumer.ConsoleConsumer", "--bootstrap-server", c.bootstrap,
        # --command-config is 4.3's name for the deprecated --consumer.config.
        "--command-config", str(props), "--topic", topic, "--group", _name("console"),
        "--from-beginning", "--isolation-level", "read_committed",
        "--max-messages", str(len(committed)), "--timeout-ms", "30000")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == [v.decode() for v in committed]


def _first_error(conf: dict[str, str], wanted: int, timeout_s: float = 20.0) -> list[int]:
    """Error codes a producer with `conf` reports (error_cb) until `wanted` shows up."""
    codes: list[int] = []
    producer = Producer({**conf, "logger": QUIET, "error_cb": lambda e: codes.append(e.code())})
    deadline = time.monotonic() + timeout_s
    while wanted not in codes and time.monotonic() < deadline:
        producer.poll(0.2)
    producer.purge()
    return codes


def test_wrong_password_fails_authentication(secured_cluster: SecuredCluster,
                                             alice: User) -> None:
    conf = secured_cluster.librdkafka_conf(alice.name, "not-" + alice.password)
    assert KafkaError._AUTHENTICATION in _first_error(conf, KafkaError._AUTHENTICATION)


def test_untrusted_ca_fails_tls(secured_cluster: SecuredCluster, alice: User) -> None:
    c = secured_cluster
    conf = c.librdkafka_conf(alice.name, alice.password, ca=c.untrusted_ca)
    assert KafkaError._SSL in _first_error(conf, KafkaError._SSL)


def test_user_without_acls_is_denied(secured_cluster: SecuredCluster,
                                     alice_data: tuple[str, list[bytes]]) -> None:
    c = secured_cluster
    topic, _ = alice_data
    password = secrets.token_hex(12)
    c.add_user("mallory", password)
    try:
        conf = c.librdkafka_conf("mallory", password)
        reports: list[KafkaError | None] = []
        producer = Producer({**conf, "logger": QUIET, "message.timeout.ms": 20000})
        producer.produce(topic, b"x", on_delivery=lambda err, msg: reports.append(err))
        producer.flush(30)
        assert len(reports) == 1 and reports[0] is not None
        assert reports[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
        # Nor does the metadata show mallory any topic.
        md = Producer({**conf, "logger": QUIET}).list_topics(timeout=10)
        assert topic not in md.topics and not [t for t in md.topics if t.startswith("__")]
    finally:
        c.disable_user("mallory")


def test_coordinator_lookup_matches_kafka(secured_cluster: SecuredCluster, alice: User,
                                          tmp_path: Path) -> None:
    c = secured_cluster
    tid, group = _name("txn"), _name("group")
    producer = Producer({**alice.conf, "transactional.id": tid, "logger": QUIET})
    producer.init_transactions(30)
    props = c.write_java_properties(tmp_path / "admin.properties", "admin", c.admin_password)
    proc = c.run_java_tool("org.apache.kafka.tools.TransactionsCommand",
                           "--bootstrap-server", c.bootstrap, "--command-config", str(props),
                           "describe", "--transactional-id", tid)
    assert proc.returncode == 0, proc.stderr
    header, row = (line.split("\t") for line in proc.stdout.splitlines()[:2])
    described = {k.strip(): v.strip() for k, v in zip(header, row, strict=True)}
    assert described["TransactionalId"] == tid
    assert int(described["CoordinatorId"]) == c.transaction_coordinator(tid)
    desc = c.admin().describe_consumer_groups([group], request_timeout=30)[group].result()
    assert desc.coordinator.id == c.group_coordinator(group)


def _deliver(conf: dict[str, str], topic: str, values: list[bytes], timeout_s: float) -> None:
    reports: list[KafkaError | None] = []
    producer = Producer({**conf, "acks": "all", "enable.idempotence": True, "logger": QUIET})
    for v in values:
        producer.produce(topic, v, on_delivery=lambda err, msg: reports.append(err))
    assert producer.flush(timeout_s) == 0, "not delivered in time"
    assert reports == [None] * len(values), [e for e in reports if e]


def _wait_isr(c: SecuredCluster, topic: str, size: int, timeout_s: float = 60.0) -> list[int]:
    deadline = time.monotonic() + timeout_s
    while (isr := c.partition_isr(topic, 0)) and len(isr) != size:
        assert time.monotonic() < deadline, f"ISR {isr}, expected {size} replicas"
        time.sleep(0.3)
    return isr


def test_leader_kill_keeps_topic_writable_with_min_isr_2(secured_cluster: SecuredCluster,
                                                         alice: User) -> None:
    """Last in the file: it kills brokers (and restarts them, leaving the cluster healthy)."""
    c = secured_cluster
    topic = _name("kill")
    _create_topic(c, topic)
    leader = c.partition_leader(topic, 0)
    c.kill_broker(leader)
    killed = [leader]
    try:
        # 2 of 3 in sync is enough for acks=all: the writes go through once the controller has
        # fenced the dead broker (broker.session.timeout.ms, 9 s) and moved the leadership.
        _deliver(alice.conf, topic, [f"a{i}".encode() for i in range(20)], timeout_s=90)
        new_leader = c.partition_leader(topic, 0)
        assert new_leader != leader
        follower = next(b for b in _wait_isr(c, topic, 2) if b != new_leader)
        # 1 of 3 is not: the leader refuses the write (NOT_ENOUGH_REPLICAS; no retries here,
        # so the producer reports it rather than retrying until the broker is back).
        c.kill_broker(follower)
        killed.append(follower)
        assert _wait_isr(c, topic, 1) == [new_leader]
        reports: list[KafkaError | None] = []
        producer = Producer({**alice.conf, "acks": "all", "enable.idempotence": False,
                             "retries": 0, "logger": QUIET})
        producer.produce(topic, b"refused", on_delivery=lambda err, msg: reports.append(err))
        producer.flush(30)
        assert [e.code() for e in reports if e] == [KafkaError.NOT_ENOUGH_REPLICAS]
    finally:
        for b in killed:
            c.start_broker(b, wait=False)
        c.wait_healthy(topics=[topic])
        c.elect_preferred_leaders()
    _deliver(alice.conf, topic, [f"b{i}".encode() for i in range(20)], timeout_s=60)
    values = [m.value() for m in read_all(alice.conf, topic, timeout_s=30)]
    assert values == [f"a{i}".encode() for i in range(20)] + [f"b{i}".encode() for i in range(20)]
