import logging

import pymysql
import pytest
from confluent_kafka import KafkaError

from logcount.connectors import mysql_sink
from logcount.connectors.mysql_sink import Sink
from logcount.core.errors import DependencyError
from logcount.core.settings import MySQLUrl, SinkSettings

pytestmark = pytest.mark.unit


@pytest.fixture
def sink() -> Sink:
    return Sink(SinkSettings(metrics_port=0))


def test_one_warn_line_an_outage_and_one_when_the_broker_answers(sink, caplog, monkeypatch):
    caplog.set_level(logging.DEBUG, logger="logcount.sink")
    for _ in range(5):
        sink._on_error(sink.token, KafkaError(KafkaError._TRANSPORT, "connection refused"))
    warns = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warns) == 1 and "waiting for the broker" in warns[0].getMessage()
    consumer = object()
    monkeypatch.setattr(sink, "_broker_answers", lambda: False)
    assert sink._after_outage(consumer, delivered=False) is consumer
    monkeypatch.setattr(sink, "_broker_answers", lambda: True)
    assert sink._after_outage(consumer, delivered=False) is consumer  # answers; not stuck yet
    assert sink._after_outage(consumer, delivered=True) is consumer
    assert sink.kafka_down_since is None, "delivering again ends the outage"
    infos = [r.getMessage() for r in caplog.records if r.levelno == logging.INFO]
    assert sum("answers again" in m for m in infos) == 1


def test_a_consumer_still_silent_after_the_broker_is_back_is_replaced(sink, monkeypatch):
    sink._kafka_failed("1/1 brokers are down")
    monkeypatch.setattr(sink, "_broker_answers", lambda: True)
    monkeypatch.setattr(sink, "_behind", lambda: True)
    monkeypatch.setattr(sink, "_new_consumer", lambda: "new consumer")
    monkeypatch.setattr(mysql_sink, "_close_quietly", lambda consumer: None)
    old = object()
    assert sink._after_outage(old, delivered=False) is old
    sink.kafka_back_at -= mysql_sink.STALL_S  # silent STALL_S since the broker came back
    assert sink._after_outage(old, delivered=False) == "new consumer"


def test_a_fatal_client_error_is_kept_for_the_loop(sink):
    err = KafkaError(KafkaError._FATAL, "boom", fatal=True)
    sink._on_error(sink.token, err)
    assert sink.fatal is err and sink.kafka_down_since is None


def test_a_fatal_error_as_error_cb_reports_it_is_kept_too(sink):
    # librdkafka's error_cb gives code _FATAL without the fatal() flag (seen: a fenced static
    # member was taken for a broker outage and kept running without a consumer).
    err = KafkaError(KafkaError._FATAL, "Fatal error: Broker: Static consumer fenced by other "
                     "consumer with same group.instance.id")
    sink._on_error(sink.token, err)
    assert sink.fatal is err and sink.kafka_down_since is None
    assert "--kafka-config group.instance.id=" in mysql_sink.fatal_line(err)


def test_a_replaced_consumers_errors_are_not_the_sinks(sink):
    # Its successor, of the same group.instance.id, fences it while it closes.
    sink.token = object()
    fenced = KafkaError(KafkaError.FENCED_INSTANCE_ID, "fenced", fatal=True)
    sink._on_error(object(), fenced)
    sink._on_error(object(), KafkaError(KafkaError._TRANSPORT, "connection refused"))
    assert sink.fatal is None and sink.kafka_down_since is None


def test_a_fenced_instance_id_says_what_to_do():
    line = mysql_sink.fatal_line(KafkaError(KafkaError.FENCED_INSTANCE_ID, "fenced", fatal=True))
    assert "same group.instance.id" in line and "--kafka-config group.instance.id=" in line
    assert mysql_sink.fatal_line(KafkaError(KafkaError._FATAL, "boom", fatal=True)) == "boom"


def test_the_default_instance_id_is_the_groups_on_this_host():
    assert mysql_sink.instance_id("logcount-sink", "web-1") == "logcount-sink-web-1"


class _Conn:
    def __init__(self) -> None:
        self.commits = 0

    def commit(self) -> None:
        self.commits += 1

    def close(self) -> None:
        pass


def test_mysql_down_is_retried_on_the_backoff_with_one_warn_and_one_resume_line(caplog,
                                                                              monkeypatch):
    caplog.set_level(logging.INFO, logger="logcount.sink")
    session = mysql_sink.MySQLSession(MySQLUrl.parse("mysql://root@127.0.0.1:1/db"))
    waits: list[float] = []
    monkeypatch.setattr(session.stop, "wait", lambda s: waits.append(s))
    conn = _Conn()
    tries = iter([pymysql.err.OperationalError(2003, "refused")] * 4 + [conn])

    def connect():
        got = next(tries)
        if isinstance(got, Exception):
            raise got
        return got

    monkeypatch.setattr(session, "_connect", connect)
    assert session.with_retry("writing", lambda c: 7) == 7
    assert waits == [0.5, 1.0, 2.0, 2.0] and conn.commits == 1
    warns = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warns) == 1 and "waiting for MySQL" in warns[0].getMessage()
    assert any("answers again" in r.getMessage() for r in caplog.records)


def test_mysql_down_at_start_gives_up_at_the_deadline(monkeypatch):
    session = mysql_sink.MySQLSession(MySQLUrl.parse("mysql://root@127.0.0.1:1/db"))
    monkeypatch.setattr(session.stop, "wait", lambda s: None)

    def connect():
        raise pymysql.err.OperationalError(2003, "refused")

    monkeypatch.setattr(session, "_connect", connect)
    with pytest.raises(DependencyError, match="unreachable"):
        session.with_retry("creating tables", lambda c: None, deadline=0.0)
