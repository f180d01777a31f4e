"""The real parts answer: transactions on the broker, rows in MariaDB/MySQL."""

from __future__ import annotations

import uuid

import pymysql
import pytest
from confluent_kafka import Producer

from logcount.connectors import kafka_io
from tests.support.readers import read_all
from tests.support.run import cli


def test_read_committed_sees_the_committed_batch_and_never_the_aborted_one(endpoints, names):
    topic = names.topic("txn")
    kafka_io.ensure_topic(kafka_io.admin(endpoints.bootstrap), topic, 2)
    p = Producer({"bootstrap.servers": endpoints.bootstrap, "transactional.id": names.txn_id})
    p.init_transactions(30)
    p.begin_transaction()
    for i in range(10):
        p.produce(topic, f"committed-{i}".encode(), partition=i % 2)
    p.commit_transaction(30)
    p.begin_transaction()
    for i in range(10):
        p.produce(topic, f"aborted-{i}".encode(), partition=i % 2)
    p.flush(30)  # the aborted records really reach the log before the abort
    p.abort_transaction(30)

    committed = sorted(m.value().decode() for m in read_all(endpoints.bootstrap, topic))
    assert committed == sorted(f"committed-{i}" for i in range(10))
    everything = [m.value().decode() for m in read_all(endpoints.bootstrap, topic,
                                                       committed_only=False)]
    assert sum(v.startswith("aborted-") for v in everything) == 10, \
        "the aborted records must be in the log, or this test proves nothing"


def test_a_row_written_through_pymysql_reads_back(mysql_db):
    conn = pymysql.connect(host=mysql_db.host, port=mysql_db.port, user=mysql_db.user,
                           password=mysql_db.password, database=mysql_db.database)
    token = uuid.uuid4().hex
    with conn.cursor() as cur:
        cur.execute("CREATE TABLE t (k VARCHAR(64) PRIMARY KEY, v INT NOT NULL)")
        cur.execute("INSERT INTO t VALUES (%s, %s)", (token, 42))
    conn.commit()
    conn.close()
    conn = pymysql.connect(host=mysql_db.host, port=mysql_db.port, user=mysql_db.user,
                           password=mysql_db.password, database=mysql_db.database)
    with conn.cursor() as cur:
        cur.execute("SELECT v FROM t WHERE k = %s", (token,))
        assert cur.fetchall() == ((42,),)
    conn.close()


def test_stack_up_is_idempotent_and_status_reports_ready(endpoints):
    if endpoints.kind != "embedded":
        pytest.skip("the embedded stack is not in use")
    before = cli("stack", "status").stdout
    again = cli("stack", "up")
    assert "already running" in again.stdout + again.stderr
    after = cli("stack", "status").stdout
    assert "kafka: ready" in after and "mariadb: ready" in after
    assert before.splitlines()[:2] == after.splitlines()[:2], "pids must not change"


def test_a_port_taken_by_another_process_is_one_line_and_exit_2(endpoints, tmp_path):
    if endpoints.kind != "embedded":
        pytest.skip("the embedded stack is not in use")
    # A second stack (another state dir) finds 9092 taken by the first one's broker.
    proc = cli("stack", "up", env={"LOGCOUNT_STATE_DIR": str(tmp_path)}, check=False)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines()[-1].startswith(
        "logcount: error: kafka: port 9092 on 127.0.0.1 is taken")
