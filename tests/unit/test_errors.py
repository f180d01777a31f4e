import pytest
from confluent_kafka import KafkaError, KafkaException

from core.errors import (
    AbortableKafkaError,
    FatalKafkaError,
    FencedError,
    RetriableKafkaError,
    classify,
)

pytestmark = pytest.mark.unit


def _exc(code, *, fatal=False, retriable=False, txn_requires_abort=False):
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
