"""The sink checks its own drift: MySQL's offsets of a deleted and recreated output topic must not
make it skip the new topic's records. We write the output topic ourselves (a transactional
producer, as the stage does) and run the real `logcount sink --once` against it."""

from __future__ import annotations

import signal

import pymysql
import pytest

from logcount.connectors import kafka_io
from logcount.connectors.mysql_sink import DRIFT_CHECK_INTERVAL_S
from logcount.connectors.mysql_store import MySQLStore
from logcount.connectors.sink_store import Total
from logcount.core.errors import TopicChangedError
from tests.support.inputs import create_topic, minute, write_totals
from tests.support.readers import end_offsets, read_table, sink_offsets
from tests.support.run import cli, sink_args, start_cli, wait_for

WARNING = "was recreated"


def delete_topic(bootstrap: str, topic: str) -> None:
    adm = kafka_io.admin(bootstrap)
    adm.delete_topics([topic])[topic].result(timeout=15)
    wait_for(lambda: kafka_io.partitions_of(adm, topic) is None
             and kafka_io.topic_ids(adm, [topic])[topic] is None,
             timeout_s=30, what=f"{topic} to be gone")


def recreate(endpoints, names, totals: dict[str, int]) -> tuple[str, str]:
    """Delete the output topic, create it again and write `totals`; return (old id, new id)."""
    topic = names.topic("out")
    old = kafka_io.topic_ids(kafka_io.admin(endpoints.bootstrap), [topic])[topic]
    assert old is not None, "the broker gives topic ids"
    delete_topic(endpoints.bootstrap, topic)
    new = create_topic(endpoints.bootstrap, topic)
    assert new != old, "a recreated topic must get a new id"
    write_totals(endpoints.bootstrap, topic, totals, names.txn_id + "-2")
    return old, new


def sink(endpoints, names, url) -> str:
    proc = cli(*sink_args(endpoints, names, url, "--once"), timeout=120)
    return proc.stderr


def drained_ends(endpoints, names) -> dict[int, int]:
    return {p: o for p, o in end_offsets(endpoints.bootstrap, names.topic("out")).items()
            if o > 0}


def stored_topic_id(url, names) -> str | None:
    conn = pymysql.connect(host=url.host, port=url.port, user=url.user, password=url.password,
                           database=url.database)
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT topic_id FROM kafka_topics WHERE group_id = %s AND topic = %s",
                        (names.group + "-sink", names.topic("out")))
            row = cur.fetchone()
            return row[0] if row else None
    finally:
        conn.close()


def warnings(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if WARNING in line]


def test_a_shorter_recreated_topic_is_read_from_its_start(endpoints, names, mysql_db):
    topic = names.topic("out")
    create_topic(endpoints.bootstrap, topic)
    first = {minute(i): 100 + i for i in range(40)}
    write_totals(endpoints.bootstrap, topic, first, names.txn_id)
    assert not warnings(sink(endpoints, names, mysql_db))
    assert read_table(mysql_db) == first
    before = sink_offsets(mysql_db, names)
    assert before == drained_ends(endpoints, names)

    # The new topic: new totals for four old minutes and one minute never seen before.
    second = {minute(i): 1000 + i for i in (0, 7, 21, 33)} | {minute(500): 7}
    old_id, new_id = recreate(endpoints, names, second)
    new_ends = drained_ends(endpoints, names)
    assert any(before.get(p, 0) > new_ends.get(p, 0) for p in before), \
        "MySQL's offsets must sit beyond the new topic's end for this test to mean anything"

    lines = warnings(sink(endpoints, names, mysql_db))
    assert len(lines) == 1, lines
    assert f"topic {topic} was recreated (id {old_id} in MySQL, {new_id} now)" in lines[0]
    assert "from the beginning" in lines[0] and "converges" in lines[0]
    assert read_table(mysql_db) == first | second, "new totals applied, other minutes kept"
    assert sink_offsets(mysql_db, names) == new_ends
    assert stored_topic_id(mysql_db, names) == new_id


def test_a_longer_recreated_topic_is_not_skipped(endpoints, names, mysql_db):
    topic = names.topic("out")
    create_topic(endpoints.bootstrap, topic)
    first = {minute(i): 1 for i in range(5)}
    write_totals(endpoints.bootstrap, topic, first, names.txn_id)
    sink(endpoints, names, mysql_db)
    assert read_table(mysql_db) == first

    # The silent case: MySQL's offsets are inside the new, longer topic, so seeking to them
    # would skip its first records without any sign.
    second = {minute(i): 50 + i for i in range(60)}
    _, new_id = recreate(endpoints, names, second)
    lines = warnings(sink(endpoints, names, mysql_db))
    assert len(lines) == 1, lines
    assert read_table(mysql_db) == second, "every record of the new topic applied"
    assert sink_offsets(mysql_db, names) == drained_ends(endpoints, names)
    assert stored_topic_id(mysql_db, names) == new_id


def test_an_unchanged_topic_is_no_drift(endpoints, names, mysql_db):
    topic = names.topic("out")
    topic_id = create_topic(endpoints.bootstrap, topic)
    totals = {minute(i): 3 * i + 1 for i in range(10)}
    write_totals(endpoints.bootstrap, topic, totals, names.txn_id)
    for _ in range(2):
        assert not warnings(sink(endpoints, names, mysql_db))
        assert read_table(mysql_db) == totals
        assert sink_offsets(mysql_db, names) == drained_ends(endpoints, names)
        # The offsets are tied to the topic they were read from.
        assert stored_topic_id(mysql_db, names) == topic_id


def test_offsets_stored_before_topic_ids_are_checked_against_the_end(endpoints, names,
                                                                    mysql_db):
    """A database written by a sink that stored no topic id (an upgrade): offsets beyond the
    recreated topic's end are the sign."""
    topic = names.topic("out")
    create_topic(endpoints.bootstrap, topic)
    first = {minute(i): 2 for i in range(30)}
    write_totals(endpoints.bootstrap, topic, first, names.txn_id)
    sink(endpoints, names, mysql_db)
    conn = pymysql.connect(host=mysql_db.host, port=mysql_db.port, user=mysql_db.user,
                           password=mysql_db.password, database=mysql_db.database,
                           autocommit=True)
    try:
        with conn.cursor() as cur:
            cur.execute("DELETE FROM kafka_topics")
    finally:
        conn.close()
    second = {minute(3): 9, minute(4): 9}
    _, new_id = recreate(endpoints, names, second)
    lines = warnings(sink(endpoints, names, mysql_db))
    assert len(lines) == 1, lines
    assert "beyond" in lines[0], lines[0]
    assert read_table(mysql_db) == first | second
    assert sink_offsets(mysql_db, names) == drained_ends(endpoints, names)
    assert stored_topic_id(mysql_db, names) == new_id


def test_a_running_sink_notices_the_recreation(endpoints, names, mysql_db, tmp_path):
    """No restart: the consumer goes on reading the new topic from the old positions without a
    word; the sink's own periodic id check must catch it."""
    topic = names.topic("out")
    create_topic(endpoints.bootstrap, topic)
    first = {minute(i): 1 for i in range(20)}
    write_totals(endpoints.bootstrap, topic, first, names.txn_id)
    log = tmp_path / "sink.log"
    proc = start_cli(*sink_args(endpoints, names, mysql_db, "--metrics-port", "0"),
                     log_path=log)
    try:
        wait_for(lambda: sink_offsets(mysql_db, names) == drained_ends(endpoints, names),
                 timeout_s=30, what="the first topic to be stored")
        assert read_table(mysql_db) == first
        second = {minute(i): 70 + i for i in range(40)}
        _, new_id = recreate(endpoints, names, second)
        wait_for(lambda: read_table(mysql_db) == second
                 and sink_offsets(mysql_db, names) == drained_ends(endpoints, names),
                 timeout_s=DRIFT_CHECK_INTERVAL_S + 20, what="the new topic, all of it")
        assert stored_topic_id(mysql_db, names) == new_id
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(60) == 0
    assert len(warnings(log.read_text())) == 1, log.read_text()


def test_a_batch_read_from_another_topic_id_is_not_written(names, mysql_db):
    """The fence: once MySQL's offsets are of another topic id (another sink repaired them), a
    sink still holding records of the old topic writes nothing."""
    store = MySQLStore(mysql_db)
    group, topic = names.group + "-sink", names.topic("out")
    try:
        store.ensure_schema()
        assert store.reconcile_topic(group, topic, "new-id", {0: 0}) is None
        batch = [Total(0, 5, minute(1), 9)]
        with pytest.raises(TopicChangedError, match="old-id"):
            store.apply(group, topic, batch, {0: 6}, topic_id="old-id")
        assert read_table(mysql_db) == {} and sink_offsets(mysql_db, names) == {}
        assert store.apply(group, topic, batch, {0: 6}, topic_id="new-id") == {0: 6}
        assert read_table(mysql_db) == {minute(1): 9}
    finally:
        store.close()
