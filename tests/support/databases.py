"""A fresh, empty MySQL database for a test (or a module's cases), dropped afterwards."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pymysql

from logcount.core.settings import MySQLUrl


@contextmanager
def fresh_database(server: MySQLUrl, database: str) -> Iterator[MySQLUrl]:
    url = server.with_database(database)

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
