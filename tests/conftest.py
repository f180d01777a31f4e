"""Fixtures: where the real Kafka and MySQL are, and unique names per test.

Endpoints, in order: `LOGCOUNT_BOOTSTRAP_SERVERS` + `LOGCOUNT_MYSQL_URL` from the environment;
else testcontainers (Kafka and MySQL 8 containers) when a Docker engine answers; else the
embedded stack (`logcount stack up`), started here and stopped again if this session started it.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import pymysql
import pytest

from core.settings import MySQLUrl


@dataclass(frozen=True)
class Endpoints:
    bootstrap: str
    mysql: MySQLUrl
    kind: str  # "env" | "testcontainers" | "embedded"


def _docker_answers() -> bool:
    try:
        import docker

        docker.from_env(timeout=3).ping()
        return True
    except Exception:  # noqa: BLE001 - no engine, no socket, no permission: all mean "no"
        return False


def _testcontainers() -> Iterator[Endpoints]:
    from testcontainers.kafka import KafkaContainer
    from testcontainers.mysql import MySqlContainer

    kafka = (KafkaContainer().with_kraft()
             # One broker: transactions need their state topic at RF 1 / min ISR 1.
             .with_env("KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR", "1")
             .with_env("KAFKA_TRANSACTION_STATE_LOG_MIN_ISR", "1"))
    mysql = MySqlContainer("mysql:8.4", username="root", password="test", dbname="logcount")
    with kafka, mysql:
        url = MySQLUrl("root", "test", mysql.get_container_host_ip(),
                       int(mysql.get_exposed_port(3306)), "logcount")
        yield Endpoints(kafka.get_bootstrap_server(), url, "testcontainers")


@pytest.fixture(scope="session")
def endpoints() -> Iterator[Endpoints]:
    env_kafka = os.environ.get("LOGCOUNT_BOOTSTRAP_SERVERS")
    env_mysql = os.environ.get("LOGCOUNT_MYSQL_URL")
    if env_kafka and env_mysql:
        yield Endpoints(env_kafka, MySQLUrl.parse(env_mysql), "env")
        return
    if _docker_answers():
        yield from _testcontainers()
        return
    from connectors import stack

    was_up = all(svc.pid() is not None for svc in stack.services())
    stack.up(log=lambda line: None)
    try:
        yield Endpoints(stack.BOOTSTRAP, MySQLUrl.parse("mysql://root@127.0.0.1:3306/logcount"),
                        "embedded")
    finally:
        if not was_up and not os.environ.get("LOGCOUNT_KEEP_STACK"):
            stack.down(log=lambda line: None)


@dataclass(frozen=True)
class Names:
    """Unique topic, group, transactional id and database names for one test."""

    prefix: str

    def topic(self, role: str) -> str:
        return f"{self.prefix}-{role}"

    @property
    def group(self) -> str:
        return f"{self.prefix}-group"

    @property
    def txn_id(self) -> str:
        return f"{self.prefix}-txn"

    @property
    def database(self) -> str:
        return self.prefix.replace("-", "_")


@pytest.fixture
def names(request) -> Names:
    short = request.node.name.split("[")[0].removeprefix("test_")[:20].replace("_", "-")
    return Names(f"t-{short}-{uuid.uuid4().hex[:8]}")


@pytest.fixture
def mysql_db(endpoints: Endpoints, names: Names) -> Iterator[MySQLUrl]:
    """A fresh, empty database for this test, dropped afterwards."""
    url = endpoints.mysql.with_database(names.database)

    def execute(sql: str) -> None:
        # A fresh connection each time: chaos tests restart the server in between.
        conn = pymysql.connect(host=url.host, port=url.port, user=url.user,
                               password=url.password, autocommit=True)
        try:
            with conn.cursor() as cur:
                cur.execute(sql)
        finally:
            conn.close()

    execute(f"CREATE DATABASE `{url.database}`")
    try:
        yield url
    finally:
        execute(f"DROP DATABASE IF EXISTS `{url.database}`")
