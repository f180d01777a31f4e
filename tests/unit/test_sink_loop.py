"""The sink's loop (connectors/mysql_sink.py) on fakes of its consumer, topic and store
(tests/support/sink_fakes.py): the commit order, a database outage mid-batch, a rebalance."""

from __future__ import annotations

import logging

import pytest

from logcount.connectors import sink_store
from logcount.connectors.mysql_sink import Sink
from logcount.connectors.mysql_store import MySQLStore
from logcount.connectors.sink_ports import SinkStore
from logcount.core.settings import MySQLUrl, SinkSettings
from tests.support.fakes import Clock
from tests.support.sink_fakes import (
    Consumers,
    FakeMySQL,
    FakeStore,
    FakeTopic,
    Journal,
    record,
)

pytestmark = pytest.mark.unit

LOG = {0: [("2026-11-29 10:00:00", 3), ("2026-11-29 10:01:00", 5), ("2026-11-29 10:00:00", 4)],
       1: [("2026-11-29 10:02:00", 1), ("2026-11-29 10:03:00", 2)]}


def sink_on(store: SinkStore, consumers: Consumers, topic: FakeTopic, clock: Clock
            ) -> Sink:
    return Sink(SinkSettings(once=True, metrics_port=0), store=store, new_consumer=consumers,
                open_topic=lambda: topic, clock=clock, sleep=clock.sleep)


def kafka_commits_follow_the_database(journal: Journal) -> None:
    """Each Kafka commit repeats offsets the database committed before it, never others."""
    in_db: dict[int, int] = {}
    for what, held in journal:
        if what == "db commit":
            in_db.update(held["offsets"])
        else:
            assert held and all(in_db.get(p) == o for p, o in held.items()), journal


def test_each_batch_is_one_database_commit_and_only_then_kafkas():
    journal: Journal = []
    topic, store, clock = FakeTopic(LOG), FakeStore(journal), Clock()
    consumers = Consumers(topic, journal)
    assert sink_on(store, consumers, topic, clock).run() == 0
    assert store.totals == {"2026-11-29 10:00:00": 4, "2026-11-29 10:01:00": 5,
                            "2026-11-29 10:02:00": 1, "2026-11-29 10:03:00": 2}
    assert store.offsets == {0: 3, 1: 2}
    assert [w for w, _ in journal][:2] == ["db commit", "kafka commit"]
    kafka_commits_follow_the_database(journal)
    assert consumers.made[0].closed.is_set() and store.closed


def test_a_database_outage_mid_batch_is_waited_out_and_nothing_is_lost_or_written_twice(caplog):
    caplog.set_level(logging.INFO, logger="logcount.sink")
    journal: Journal = []
    db, topic, clock = FakeMySQL(journal), FakeTopic(LOG), Clock()
    store = MySQLStore(MySQLUrl.parse("mysql://root@127.0.0.1:3306/db"), connect=db.connect,
                       clock=clock, sleep=clock.sleep)
    # The server goes away as the first batch writes its offsets, and stays away 3 connects.
    db.outage_at(sink_store.UPSERT_OFFSETS, times=4)
    sink = sink_on(store, Consumers(topic, journal), topic, clock)
    assert sink.run() == 0
    assert clock.sleeps == [0.5, 1.0, 2.0, 2.0]
    assert db.counts == {("2026-11-29 10:00:00",): 4, ("2026-11-29 10:01:00",): 5,
                         ("2026-11-29 10:02:00",): 1, ("2026-11-29 10:03:00",): 2}
    assert db.stored_offsets() == {0: 3, 1: 2}
    # The rows and the offsets of a batch commit together, each batch once.
    batches = [c for c in db.commits if any(sql == sink_store.UPSERT_COUNTS for sql, _ in c)]
    assert batches and all(any(sql == sink_store.UPSERT_OFFSETS for sql, _ in c)
                           for c in batches)
    assert set(db.writes.values()) == {1}, db.writes
    assert sink.applied == 5
    kafka_commits_follow_the_database(journal)
    warns = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warns) == 1 and "waiting for MySQL" in warns[0]
    assert sum("answers again" in r.getMessage() for r in caplog.records) == 1


def test_a_batch_writes_its_rows_and_offsets_in_one_transaction():
    db, clock = FakeMySQL(), Clock()
    store = MySQLStore(MySQLUrl.parse("mysql://root@127.0.0.1:3306/db"), connect=db.connect,
                       clock=clock, sleep=clock.sleep)
    store.ensure_schema()
    before = len(db.commits)
    totals = [sink_store.Total(0, 0, "2026-11-29 10:00:00", 3)]
    assert store.apply("g", "t", totals, {0: 2}) == {0: 2}
    [batch] = db.commits[before + 1:]  # after the counts table's check, one commit
    assert [sql for sql, _ in batch] == [sink_store.UPSERT_COUNTS, sink_store.UPSERT_OFFSETS]


def test_a_rebalance_drops_the_revoked_partitions_records_and_resumes_from_the_database():
    journal: Journal = []
    topic, clock = FakeTopic(LOG), Clock()
    store = FakeStore(journal, offsets={0: 1})  # partition 0's first record was applied
    revoked_at = 0

    def script(poll: int) -> None:
        nonlocal revoked_at
        consumer = consumers.made[0]
        if poll == 2:  # partition 1 goes to another sink; its next record was fetched already
            consumer.rebalance(revoke=[1])
            consumer.buffered.append(record(1, 1, *LOG[1][1]))
            revoked_at = len(journal)
        elif poll == 3:  # and comes back
            consumer.rebalance(assign=[0, 1])

    consumers = Consumers(topic, journal, on_poll=script)
    assert sink_on(store, consumers, topic, clock).run() == 0
    consumer = consumers.made[0]
    # Every assignment starts at the offsets the database held then.
    assert consumer.assigned_at == [{0: 1, 1: 0}, {0: 3, 1: 1}]
    # While revoked, nothing of partition 1 is written (the buffered record was dropped).
    offsets = [held["offsets"] if what == "db commit" else held for what, held in journal]
    back = next(i for i, o in enumerate(offsets) if i >= revoked_at and 1 in o)
    assert all(1 not in o for o in offsets[revoked_at:back]), journal
    assert journal[back] == ("db commit", {"totals": {"2026-11-29 10:03:00": 2},
                                           "offsets": {1: 2}}), journal
    assert store.totals == {"2026-11-29 10:01:00": 5, "2026-11-29 10:00:00": 4,
                            "2026-11-29 10:02:00": 1, "2026-11-29 10:03:00": 2}
    assert store.offsets == {0: 3, 1: 2}
    kafka_commits_follow_the_database(journal)
