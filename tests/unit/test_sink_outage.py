"""Riding out outages: Kafka's (one WARN line, one when the broker answers, a silent consumer
replaced, fatal errors kept for the loop) on the sink's fakes (tests/support/sink_fakes.py), and
MySQL's retries in MySQLStore on a handed-in connection, clock and sleep."""

import logging
import threading
from collections.abc import Callable

import pymysql
import pytest
from confluent_kafka import KafkaError

from logcount.connectors import mysql_sink
from logcount.connectors.mysql_sink import Sink
from logcount.connectors.mysql_store import MySQLStore
from logcount.connectors.sink_kafka import fatal_line, instance_id
from logcount.core.errors import DependencyError
from logcount.core.settings import MySQLUrl, SinkSettings
from tests.support.fakes import Clock
from tests.support.sink_fakes import Consumers, FakeStore, FakeTopic, Journal

pytestmark = pytest.mark.unit

TRANSPORT = KafkaError(KafkaError._TRANSPORT, "connection refused")


class Fixture:
    def __init__(self, log=None, offsets=None) -> None:
        self.journal: Journal = []
        self.clock = Clock()
        self.topic = FakeTopic(log or {0: [("2026-11-29 10:00:00", 1)]})
        self.store = FakeStore(self.journal, offsets)
        self.scripts: dict[int, Callable[[], object]] = {}
        self.consumers = Consumers(self.topic, self.journal, on_poll=self.on_poll)
        self.sink = Sink(SinkSettings(metrics_port=0), store=self.store,
                         new_consumer=self.consumers, open_topic=lambda: self.topic,
                         clock=self.clock, sleep=self.clock.sleep)
        self.sink.start()

    def on_poll(self, n: int) -> None:
        if n in self.scripts:
            self.scripts[n]()

    def fail(self, times: int = 1, err: KafkaError = TRANSPORT) -> None:
        """librdkafka reports client errors to error_cb, from inside the poll."""
        for _ in range(times):
            self.consumers.made[-1].on_error(err)


@pytest.fixture
def f() -> Fixture:
    return Fixture()


def test_one_warn_line_an_outage_and_one_when_the_broker_answers(f, caplog):
    caplog.set_level(logging.DEBUG, logger="logcount.sink")
    f.sink.turn()  # assigned; the record is applied
    f.topic.up = False
    f.scripts[2] = lambda: f.fail(5)
    f.sink.turn()
    warns = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warns) == 1 and "waiting for the broker" in warns[0].getMessage()
    f.sink.turn()  # the broker does not answer yet
    assert not any("answers again" in r.getMessage() for r in caplog.records)
    f.topic.up = True
    f.sink.turn()  # it answers; the consumer is not stuck yet
    f.topic.log[0].append(("2026-11-29 10:01:00", 2))
    f.sink.turn()  # and delivers again
    assert f.sink.kafka_down_since is None, "delivering again ends the outage"
    assert f.store.totals["2026-11-29 10:01:00"] == 2
    infos = [r.getMessage() for r in caplog.records if r.levelno == logging.INFO]
    assert sum("answers again" in m for m in infos) == 1
    assert len(f.consumers.made) == 1


def test_a_consumer_still_silent_after_the_broker_is_back_is_replaced(f):
    f.scripts[1] = lambda: f.fail()
    f.topic.up = True
    f.sink.turn()  # the poll of the outage's error (its record was fetched before): the
    # broker answers, the consumer has STALL_S to deliver
    old = f.consumers.made[0]
    old.positions.clear()  # stuck: delivers nothing although the record is not in MySQL
    f.store.offsets.clear()
    f.sink.turn()
    assert len(f.consumers.made) == 1, "not before STALL_S"
    f.clock.now += mysql_sink.STALL_S
    f.sink.turn()
    assert len(f.consumers.made) == 2 and f.sink.consumer is f.consumers.made[1]
    assert old.closed.wait(5), "the stuck one is closed (on a thread of its own)"
    f.sink.turn()  # the new one is assigned at MySQL's offsets and delivers
    assert f.consumers.made[1].assigned_at == [{0: 0}]
    assert f.sink.kafka_down_since is None


def test_a_fatal_client_error_is_kept_for_the_loop(f):
    err = KafkaError(KafkaError._FATAL, "boom", fatal=True)
    f.fail(err=err)
    assert f.sink.fatal is err and f.sink.kafka_down_since is None
    with pytest.raises(DependencyError, match="sink consumer: boom"):
        f.sink.turn()


def test_a_fatal_error_as_error_cb_reports_it_is_kept_too(f):
    # librdkafka's error_cb gives code _FATAL without the fatal() flag (seen: a fenced static
    # member was taken for a broker outage and kept running without a consumer).
    err = KafkaError(KafkaError._FATAL, "Fatal error: Broker: Static consumer fenced by other "
                     "consumer with same group.instance.id")
    f.fail(err=err)
    assert f.sink.fatal is err and f.sink.kafka_down_since is None
    assert "--kafka-config group.instance.id=" in fatal_line(err)


def test_a_replaced_consumers_errors_are_not_the_sinks(f):
    # Its successor, of the same group.instance.id, fences it while it closes.
    f.scripts[1] = lambda: f.fail()
    f.sink.turn()
    f.store.offsets.clear()
    f.consumers.made[0].positions.clear()
    f.clock.now += mysql_sink.STALL_S
    f.sink.turn()
    old, new = f.consumers.made
    f.sink.turn()
    assert f.sink.kafka_down_since is None
    old.on_error(KafkaError(KafkaError.FENCED_INSTANCE_ID, "fenced", fatal=True))
    old.on_error(TRANSPORT)
    assert f.sink.fatal is None and f.sink.kafka_down_since is None
    new.on_error(TRANSPORT)
    assert f.sink.kafka_down_since is not None


def test_a_fenced_instance_id_says_what_to_do():
    line = fatal_line(KafkaError(KafkaError.FENCED_INSTANCE_ID, "fenced", fatal=True))
    assert "same group.instance.id" in line and "--kafka-config group.instance.id=" in line
    assert fatal_line(KafkaError(KafkaError._FATAL, "boom", fatal=True)) == "boom"


def test_the_default_instance_id_is_the_groups_on_this_host():
    assert instance_id("logcount-sink", "web-1") == "logcount-sink-web-1"


class _Conn:
    def __init__(self) -> None:
        self.commits = 0

    def commit(self) -> None:
        self.commits += 1

    def close(self) -> None:
        pass


def connects(*tries):
    """A connect that raises or returns each of `tries` in turn."""
    it = iter(tries)

    def connect():
        got = next(it)
        if isinstance(got, Exception):
            raise got
        return got
    return connect


def test_mysql_down_is_retried_on_the_backoff_with_one_warn_and_one_resume_line(caplog):
    caplog.set_level(logging.INFO, logger="logcount.sink")
    conn, clock = _Conn(), Clock()
    store = MySQLStore(MySQLUrl.parse("mysql://root@127.0.0.1:1/db"), clock=clock,
                       sleep=clock.sleep, connect=connects(
                           *[pymysql.err.OperationalError(2003, "refused")] * 4, conn))
    assert store.with_retry("writing", lambda c: 7) == 7
    assert clock.sleeps == [0.5, 1.0, 2.0, 2.0] and conn.commits == 1
    warns = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warns) == 1 and "waiting for MySQL" in warns[0].getMessage()
    assert any("answers again" in r.getMessage() for r in caplog.records)


def test_mysql_down_at_start_gives_up_at_the_deadline():
    clock = Clock()
    store = MySQLStore(MySQLUrl.parse("mysql://root@127.0.0.1:1/db"), clock=clock,
                       sleep=clock.sleep, connect=connects(
                           *[pymysql.err.OperationalError(2003, "refused")] * 10))
    with pytest.raises(DependencyError, match="unreachable"):
        store.ensure_schema(timeout_s=3.0)
    assert clock.sleeps == [0.5, 1.0]  # the next 2 s would pass the deadline


def test_mysql_errors_that_waiting_does_not_cure_end_the_sink_at_once():
    for exc, line in [(pymysql.err.OperationalError(1045, "Access denied"), "refused us"),
                      (pymysql.err.ProgrammingError(1064, "syntax"), "MySQL writing: ")]:
        clock = Clock()
        store = MySQLStore(MySQLUrl.parse("mysql://root@127.0.0.1:1/db"), clock=clock,
                           sleep=clock.sleep, connect=connects(exc))
        with pytest.raises(DependencyError, match=line):
            store.with_retry("writing", lambda c: 7)
        assert clock.sleeps == []


def test_a_stop_during_a_mysql_outage_ends_the_retries_with_one_line():
    clock, stop = Clock(), threading.Event()

    def sleep(seconds: float) -> None:
        clock.sleep(seconds)
        stop.set()  # SIGTERM while waiting: one more try, then the verdict

    store = MySQLStore(MySQLUrl.parse("mysql://root@127.0.0.1:1/db"), stop, clock=clock,
                       sleep=sleep, connect=connects(
                           *[pymysql.err.OperationalError(2003, "refused")] * 3))
    with pytest.raises(DependencyError, match="MySQL writing: stopping while MySQL is down"):
        store.with_retry("writing", lambda c: 7)
    assert clock.sleeps == [0.5]


def test_an_error_of_ours_inside_the_transaction_goes_through_unchanged():
    conn = _Conn()
    store = MySQLStore(MySQLUrl.parse("mysql://root@127.0.0.1:1/db"), connect=connects(conn))

    def refuse(c):
        raise ValueError("not a MySQL error")

    with pytest.raises(ValueError, match="not a MySQL error"):
        store.with_retry("writing", refuse)
    assert store.conn is conn and conn.commits == 0
