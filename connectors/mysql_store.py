"""The sink's store on MySQL/MariaDB: one connection, each call one transaction of the SQL in
connectors/sink_store.py, retried on a new connection after a transient error.

`MySQLStore` is the one class of the `SinkStore` protocol (connectors/sink_ports.py) for MySQL; a
second database is a second class beside it. Its connection, clock and sleep are handed in
(`connect`, `clock`, `sleep`), so the unit tests run it on a fake connection without waiting.
"""
from __future__ import annotations

import contextlib
import functools
import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

import pymysql

from logcount.connectors import sink_store
from logcount.connectors.sink_store import Final, Record, Total
from logcount.core.backoff import Backoff
from logcount.core.errors import DependencyError, TopicChangedError
from logcount.core.retry import Retry, retry
from logcount.core.settings import MySQLUrl

log = logging.getLogger("logcount.sink")

T = TypeVar("T")

# MySQL errors that mean "not now" (server gone, restarting, lock trouble): retry with backoff.
_TRANSIENT = {2003, 2006, 2013, 2055, 1205, 1213, 1040, 1053, 1927}
_ACCESS_DENIED = {1044, 1045, 1698}
_TLS_FAILED = 2026  # CR_SSL_CONNECTION_ERROR: TLS required (--mysql-tls-ca) but not possible
# Why these: MySQL restarts take seconds; 0.5 s first retry, doubling to 2 s, rides out a restart
# or a cut link and writes again within 2 s of the heal, while one connection attempt every 2 s is
# nothing to a struggling server.
BACKOFF_FIRST_S = 0.5
BACKOFF_MAX_S = 2.0


class MySQLStore:
    """The sink's MySQL side: one connection; each call one transaction of the store
    (connectors/sink_store.py), retried on a new connection after a transient error."""

    def __init__(self, url: MySQLUrl, stop: threading.Event | None = None,
                 create_database: bool = False, tls_ca: str | None = None,
                 table: str = sink_store.DEFAULT_TABLE, *,
                 connect: Callable[[], Any] | None = None,
                 clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], object] | None = None) -> None:
        self.url = url
        self.table = table
        # (table, dimensions) checked: the counts table by its dimensions (table ""), the final
        # tables by name (dimensions None: the closed table)
        self.tables_ready: set[tuple[str, tuple[str, ...] | None]] = set()
        self.kind: str | None = None  # what this sink's batches hold (sink_store.batch_kind)
        self.conn: Any = None  # a pymysql connection (or the tests' fake), None between them
        self.stop = stop or threading.Event()
        self.connect = connect or (lambda: sink_store.connect(url, create_database, tls_ca))
        self.clock = clock
        self.sleep = sleep or self.stop.wait  # a stop cuts a wait short

    def with_retry(self, doing: str, fn: Callable[[Any], T], deadline: float | None = None) -> T:
        """Run fn(conn) in a transaction; on a transient error roll back, reconnect, retry
        (until `deadline`, a clock() value, when given: the start-up's bound)."""
        backoff = Backoff(BACKOFF_FIRST_S, BACKOFF_MAX_S, clock=self.clock)  # this outage's

        def attempt() -> T:
            try:
                if self.conn is None:
                    self.conn = self.connect()
                result = fn(self.conn)
                self.conn.commit()
                return result
            except pymysql.err.MySQLError:
                self._drop()  # the transaction rolls back with its connection
                raise

        def waiting(verdict: Retry, delay: float) -> None:
            self._say_waiting(doing, verdict.error, backoff.failures == 1, deadline)

        result = retry(attempt, backoff, functools.partial(self._classify, doing),
                       sleep=self.sleep, stop=self.stop.is_set, deadline=deadline,
                       on_retry=waiting)
        if backoff.failures and deadline is None:
            log.info("MySQL at %s:%d answers again after %.1fs: %s resumed",
                     self.url.host, self.url.port, backoff.elapsed(), doing)
        return result

    def _classify(self, doing: str, exc: Exception) -> Retry | BaseException:
        """A MySQL error worth another try (the server gone, restarting, lock trouble), or
        the one-line DependencyError that ends the sink; any other exception goes through."""
        if not isinstance(exc, pymysql.err.MySQLError):
            return exc
        code = exc.args[0] if exc.args and isinstance(exc.args[0], int) else None
        text = str(exc.args[-1]) if exc.args else str(exc)
        if code == _TLS_FAILED or "CERTIFICATE_VERIFY_FAILED" in text:
            # An untrusted certificate or a server without TLS stays so: no retry.
            return DependencyError(f"MySQL at {self.url.host}:{self.url.port}: TLS "
                                   f"failed: {text}")
        if code in _ACCESS_DENIED:
            return DependencyError(f"MySQL {self.url!r} refused us: {exc.args[-1]}")
        if code not in _TRANSIENT and not isinstance(exc, pymysql.err.InterfaceError):
            return DependencyError(f"MySQL {doing}: {exc}")
        return Retry(exc, give_up=DependencyError(
            f"MySQL at {self.url.host}:{self.url.port} unreachable ({doing}): {exc.args[-1]}"),
            stopped=DependencyError(f"MySQL {doing}: stopping while MySQL is down"))

    def _say_waiting(self, doing: str, exc: BaseException, first: bool,
                     deadline: float | None) -> None:
        """Running: one WARN line an outage (DEBUG after); at start: one line, then the
        verdict."""
        text = str(exc.args[-1]) if exc.args else str(exc)
        if deadline is None and first:
            log.warning("MySQL %s failed (%s); waiting for MySQL at %s:%d, retrying "
                        "every %.0fs at most: the sink resumes by itself", doing, text,
                        self.url.host, self.url.port, BACKOFF_MAX_S)
        elif deadline is None:
            log.debug("MySQL %s failed again (%s)", doing, text)
        elif first:
            log.info("waiting for MySQL at %s:%d (%s), up to %.0fs", self.url.host,
                     self.url.port, text, deadline - self.clock())

    def _drop(self) -> None:
        if self.conn is not None:
            with contextlib.suppress(Exception):  # already broken
                self.conn.close()
            self.conn = None

    def ensure_schema(self, timeout_s: float | None = None) -> None:
        """Create the tables if missing; at start, give up after `timeout_s` of retries."""
        deadline = None if timeout_s is None else self.clock() + timeout_s
        self.with_retry("creating tables", sink_store.create_tables, deadline)
        self.with_retry("creating tables",
                        lambda conn: sink_store.create_counts_table(conn, self.table), deadline)

    def load_offsets(self, group: str, topic: str) -> dict[int, int]:
        return self.with_retry("reading offsets",
                               lambda conn: sink_store.read_offsets(conn, group, topic))

    def reconcile_topic(self, group: str, topic: str, current_id: str | None,
                        ends: Mapping[int, int]) -> str | None:
        """The drift check, in one transaction (sink_store.reconcile_topic): the drift's reason,
        or None."""
        return self.with_retry(
            "checking the stored offsets against the topic",
            lambda conn: sink_store.reconcile_topic(conn, group, topic, current_id, ends))

    def apply(self, group: str, topic: str, records: Sequence[Record],
              ends: Mapping[int, int] | None = None,
              topic_id: str | None = None) -> dict[int, int]:
        """Running totals: upsert the last total per minute (sink_store.write_batch); final
        records: insert a row each (sink_store.write_finals); and the next offsets, atomically;
        return the offsets. `topic_id` is the id this sink's drift check saw: if MySQL now
        holds another, the records are of another incarnation of the topic and nothing is
        written. The tables are created (or checked) first, in transactions of their own: DDL
        commits implicitly, so it cannot share the batch's."""
        self.kind = sink_store.batch_kind(topic, records, self.kind)
        if self.kind == sink_store.FINALS:
            finals = [r for r in records if isinstance(r, Final)]
            dims = sink_store.batch_dims(topic, [f for f in finals if not f.closed])
            self._final_tables(topic, finals, dims)
            nxt, changed = self.with_retry("writing a batch", lambda conn: sink_store.
                                           write_finals(conn, group, topic, finals, ends,
                                                        topic_id, self.table, dims))
        else:
            totals = [r for r in records if isinstance(r, Total)]
            dims = sink_store.batch_dims(topic, totals)
            if totals and ("", dims) not in self.tables_ready:
                self.with_retry("creating the counts table", lambda conn: sink_store.
                                ensure_counts_table(conn, self.table, topic, dims))
                self.tables_ready.add(("", dims))
            nxt, changed = self.with_retry("writing a batch", lambda conn: sink_store.
                                           write_batch(conn, group, topic, totals, ends,
                                                       topic_id, self.table, dims))
        if changed is not None:
            raise TopicChangedError(
                f"topic {topic} changed under this sink: MySQL's offsets are of topic id "
                f"{changed}, this sink read id {topic_id}; nothing written")
        return nxt

    def _final_tables(self, topic: str, finals: Sequence[Final],
                      dims: tuple[str, ...]) -> None:
        """The closed table with the first final records, and each window length's table of
        final totals with its first series record (a grouped stage's first windows may have
        none: the table's dimensions come with its first row)."""
        closed = sink_store.closed_table(self.table)
        if (closed, None) not in self.tables_ready:
            self.with_retry("creating the closed table", lambda conn: sink_store.
                            ensure_closed_table(conn, self.table, topic))
            self.tables_ready.add((closed, None))
        for name in sink_store.final_tables(self.table, finals):
            if (name, dims) not in self.tables_ready:
                self.with_retry(f"creating table {name}", functools.partial(
                    sink_store.ensure_final_table, name=name, topic=topic, dims=dims))
                self.tables_ready.add((name, dims))

    def close(self) -> None:
        self._drop()
