"""connectors/kafka_io's pure edges and its waits, with a stand-in for the admin client."""

import logging
from concurrent.futures import Future
from types import SimpleNamespace
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import OffsetSpec

from logcount.connectors import kafka_io
from logcount.core.errors import AuthorizationError, DependencyError


class _Admin:
    """list_offsets answering `offsets`, after raising each of `errors` in turn."""

    def __init__(self, offsets: dict[int, int], *errors: BaseException) -> None:
        self.offsets = offsets
        self.errors = list(errors)
        self.calls = 0

    def list_offsets(self, req, **kwargs):
        self.calls += 1
        error = self.errors.pop(0) if self.errors else None
        out = {}
        for tp in req:
            f: Future = Future()
            if error is not None:
                f.set_exception(error)
            else:
                f.set_result(SimpleNamespace(offset=self.offsets[tp.partition]))
            out[tp] = f
        return out


def test_list_offsets_returns_each_partitions_offset():
    adm: Any = _Admin({0: 5, 1: 0})
    got = kafka_io.list_offsets(adm, "t", [0, 1], OffsetSpec.latest())
    assert got == {0: 5, 1: 0}


def test_a_partition_whose_leader_is_away_is_an_error_to_retry_not_an_offset():
    # Seen on the 3-broker cluster with a broker killed: -1001 and no error. As an offset it
    # made the running stage stop with "input fell behind the state".
    with pytest.raises(DependencyError, match=r"no offset for partition\(s\) 0, 3 "):
        adm: Any = _Admin({0: -1001, 1: 7, 2: 0, 3: -1})
        kafka_io.list_offsets(adm, "t", [0, 1, 2, 3], OffsetSpec.latest())


def test_list_offsets_asks_again_while_the_broker_does_not_know_the_topic(sleeps):
    # Seen on the 3-broker cluster: a sink that saw the stage's new output topic in the metadata
    # asked a broker that did not know it yet, and exited instead of waiting a moment.
    adm: Any = _Admin({0: 3}, _kafka(KafkaError.UNKNOWN_TOPIC_OR_PART),
                      _kafka(KafkaError._UNKNOWN_TOPIC))
    assert kafka_io.list_offsets(adm, "t", [0], OffsetSpec.latest()) == {0: 3}
    assert adm.calls == 3 and sleeps == [kafka_io.POLL_S] * 2


def test_list_offsets_gives_up_after_a_request_timeout_and_raises_other_errors_at_once(
        sleeps, monkeypatch):
    monkeypatch.setattr(kafka_io, "REQUEST_TIMEOUT_S", 0.0)  # the budget is spent at once
    adm: Any = _Admin({0: 3}, _kafka(KafkaError.UNKNOWN_TOPIC_OR_PART, "no such topic"))
    with pytest.raises(DependencyError, match="^listing offsets of t: no such topic$"):
        kafka_io.list_offsets(adm, "t", [0], OffsetSpec.latest())
    monkeypatch.undo()
    adm = _Admin({0: 3}, _kafka(KafkaError.TOPIC_AUTHORIZATION_FAILED))
    with pytest.raises(AuthorizationError, match="listing offsets of t: not authorized: topic t"):
        kafka_io.list_offsets(adm, "t", [0], OffsetSpec.latest())
    adm = _Admin({0: 3}, TimeoutError())
    with pytest.raises(DependencyError, match="^listing offsets of t: no answer from Kafka "
                                              "within 15s$"):
        kafka_io.list_offsets(adm, "t", [0], OffsetSpec.latest())
    assert adm.calls == 1 and sleeps == []


def _kafka(code: int, reason: str = "") -> KafkaException:
    return KafkaException(KafkaError(code, reason or None))


class _Configs:
    """describe_configs answering each of `answers` in turn: an exception is raised."""

    def __init__(self, *answers: object) -> None:
        self.answers = list(answers)
        self.calls = 0

    def describe_configs(self, resources: list) -> dict:
        self.calls += 1
        answer = self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]
        f: Future = Future()
        if isinstance(answer, BaseException):
            f.set_exception(answer)
        else:
            f.set_result(answer)
        return {resources[0]: f}


def test_topic_config_asks_again_while_the_broker_does_not_know_the_topic(sleeps):
    adm: Any = _Configs(_kafka(KafkaError.UNKNOWN_TOPIC_OR_PART),
                        _kafka(KafkaError._UNKNOWN_TOPIC),
                        {"cleanup.policy": SimpleNamespace(value="compact")})
    assert kafka_io.topic_config(adm, "t") == {"cleanup.policy": "compact"}
    assert sleeps == [kafka_io.POLL_S] * 2


def test_topic_config_gives_up_on_an_unknown_topic_after_a_request_timeout(sleeps, monkeypatch):
    monkeypatch.setattr(kafka_io, "REQUEST_TIMEOUT_S", 0.0)  # the budget is spent at once
    adm: Any = _Configs(_kafka(KafkaError.UNKNOWN_TOPIC_OR_PART, "no such topic"))
    with pytest.raises(DependencyError, match="^describing topic t: no such topic$") as got:
        kafka_io.topic_config(adm, "t")
    assert isinstance(got.value.__cause__, KafkaException) and sleeps == []


def test_topic_config_raises_a_denial_or_a_timeout_at_once(sleeps):
    adm: Any = _Configs(_kafka(KafkaError.TOPIC_AUTHORIZATION_FAILED))
    with pytest.raises(AuthorizationError, match="describing topic t: not authorized: topic t"):
        kafka_io.topic_config(adm, "t")
    adm = _Configs(TimeoutError())
    with pytest.raises(DependencyError, match="^describing topic t: no answer from Kafka within "
                                              "15s$"):
        kafka_io.topic_config(adm, "t")
    assert adm.calls == 1 and sleeps == []


class _Unreachable:
    """An AdminClient whose metadata requests fail `failures` times, reporting `reason` to its
    error_cb as librdkafka does."""

    def __init__(self, failures: int, reason: str) -> None:
        self.failures, self.reason, self.error_cb = failures, reason, None

    def __call__(self, conf: dict) -> "_Unreachable":
        self.error_cb = conf["error_cb"]
        return self

    def list_topics(self, timeout: float) -> object:
        if self.failures:
            self.failures -= 1
            raise _kafka(KafkaError._TRANSPORT, "all brokers down")
        return object()

    def poll(self, timeout: float) -> int:
        assert self.error_cb is not None
        self.error_cb(KafkaError(KafkaError._TRANSPORT, self.reason))
        return 0


def test_wait_for_broker_waits_for_a_broker_that_comes_back(sleeps, monkeypatch, caplog):
    fake = _Unreachable(3, "Connect to ipv4#127.0.0.1:9092 failed: Connection refused")
    monkeypatch.setattr(kafka_io, "AdminClient", fake)
    with caplog.at_level(logging.INFO, "logcount.kafka"):
        assert kafka_io.wait_for_broker("127.0.0.1:9092", None, 30.0) is fake
    assert sleeps == [kafka_io.BROKER_RETRY_S] * 3
    assert [r.getMessage() for r in caplog.records] == [  # one line a wait
        "waiting for Kafka at 127.0.0.1:9092 (Connect to ipv4#127.0.0.1:9092 failed: "
        "Connection refused), up to 30s"]


def test_wait_for_broker_gives_up_after_its_budget(sleeps, monkeypatch):
    monkeypatch.setattr(kafka_io, "AdminClient", _Unreachable(99, "Connection refused"))
    with pytest.raises(DependencyError, match="^Kafka at b:1 unreachable after 0s of retries: "
                                              "Connection refused$"):
        kafka_io.wait_for_broker("b:1", None, 0.0)
    assert sleeps == []


def test_wait_for_broker_fails_at_once_on_a_security_mismatch(sleeps, monkeypatch):
    monkeypatch.setattr(kafka_io, "AdminClient", _Unreachable(99, "SSL handshake failed"))
    with pytest.raises(DependencyError, match=r"^Kafka at b:1 unreachable: SSL handshake failed "
                                              r"\(does security.protocol match"):
        kafka_io.wait_for_broker("b:1", None, 30.0)
    assert sleeps == []
