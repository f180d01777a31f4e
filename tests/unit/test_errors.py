from typing import cast

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer

from logcount.connectors.transactional_sink import (
    OutRecord,
    _close,
    _produce_all,
    _retrying,
)
from logcount.core.errors import (
    AbortableKafkaError,
    FatalKafkaError,
    FencedError,
    RetriableKafkaError,
    classify,
    kafka_error,
)


def _exc(code: int, *, fatal: bool = False, retriable: bool = False,
         txn_requires_abort: bool = False) -> KafkaException:
    return KafkaException(KafkaError(code, "x", fatal=fatal, retriable=retriable,
                                     txn_requires_abort=txn_requires_abort))


def test_classify_maps_librdkafka_flags():
    assert isinstance(classify(_exc(KafkaError._TIMED_OUT, retriable=True), "c"),
                      RetriableKafkaError)
    assert isinstance(classify(_exc(KafkaError._STATE, txn_requires_abort=True), "c"),
                      AbortableKafkaError)
    assert isinstance(classify(_exc(KafkaError._STATE, fatal=True), "c"), FatalKafkaError)


def test_abort_wins_over_retriable():
    e = _exc(KafkaError._TIMED_OUT, retriable=True, txn_requires_abort=True)
    assert isinstance(classify(e, "c"), AbortableKafkaError)


def test_fenced_is_fatal_and_says_so():
    e = classify(_exc(KafkaError._FENCED, fatal=True), "commit")
    assert isinstance(e, FencedError) and isinstance(e, FatalKafkaError)
    assert "fenced" in str(e)


def _left_set(exc: KafkaException) -> SystemError:
    """What Python raises when confluent-kafka returns with `exc` still set (a fenced flush)."""
    err = SystemError("<built-in function isinstance> returned a result with an exception set")
    err.__cause__ = exc
    return err


class _FailingProducer:
    def __init__(self, raises: BaseException) -> None:
        self.raises = raises

    def produce(self, *args) -> None:
        pass

    def poll(self, timeout) -> int:
        raise self.raises

    def flush(self, timeout) -> int:
        raise self.raises


def _producer(raises: BaseException) -> Producer:
    # The sink types its producer as confluent-kafka's class: the fake has the calls it makes.
    return cast(Producer, _FailingProducer(raises))


def test_a_kafka_error_left_set_by_the_client_is_still_a_kafka_error():
    fenced = _exc(KafkaError._FENCED, fatal=True)
    assert kafka_error(_left_set(fenced)) is fenced and kafka_error(fenced) is fenced
    assert kafka_error(SystemError("a real bug")) is None
    # produce/poll and the transactional calls: the one clear fenced line, not a traceback
    with pytest.raises(FencedError):
        _produce_all(_producer(_left_set(fenced)), [OutRecord("t", b"k", b"v")])

    def call():
        raise _left_set(fenced)

    with pytest.raises(FencedError):
        _retrying("commit_transaction", call, 1.0)
    # closing never replaces the error that brought us there; a real bug still shows
    _close(_producer(_left_set(fenced)))
    _close(_producer(fenced))
    with pytest.raises(SystemError):
        _retrying("commit_transaction", lambda: (_ for _ in ()).throw(SystemError("bug")), 1.0)
