"""The MySQL sink's store: its tables and the SQL of each of its transactions.

The rows and the consumed offsets are written in ONE MySQL transaction. Inside it the stored
offsets are locked (SELECT ... FOR UPDATE) and any record below them is skipped, so neither a
replay nor a zombie sink after a rebalance can write an older total over a newer one. SQL works
on MariaDB and MySQL 8. Each function here is the body of one transaction: the caller
(connectors/mysql_store.py) commits it, and retries it on a new connection.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

import pymysql

from logcount.core.errors import ConfigError, DependencyError
from logcount.core.settings import MySQLUrl
from logcount.core.sink_drift import topic_drift

DEFAULT_TABLE = "error_log"
TABLE_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_]*")
COUNTS_DDL = """CREATE TABLE IF NOT EXISTS error_log (
        log_time DATETIME PRIMARY KEY,
        log_count INT NOT NULL
    )"""
# The sink's bookkeeping. The counts table is created at start in today's shape (when missing),
# and reshaped on the first grouped batch while it is still empty (ensure_counts_table).
SCHEMA = (
    # 190 characters: the composite key stays under InnoDB's 3072-byte limit in utf8mb4.
    """CREATE TABLE IF NOT EXISTS kafka_offsets (
        group_id VARCHAR(190) NOT NULL,
        topic VARCHAR(190) NOT NULL,
        kafka_partition INT NOT NULL,
        next_offset BIGINT NOT NULL,
        PRIMARY KEY (group_id, topic, kafka_partition)
    )""",
    # Which incarnation of the topic the group's offsets belong to (Kafka's topic id).
    """CREATE TABLE IF NOT EXISTS kafka_topics (
        group_id VARCHAR(190) NOT NULL,
        topic VARCHAR(190) NOT NULL,
        topic_id VARCHAR(64) NOT NULL,
        PRIMARY KEY (group_id, topic)
    )""",
)
# VALUES(col) works on MariaDB and MySQL 8 (deprecated there, still accepted); MySQL 8's
# `AS new` alias does not parse on MariaDB. The plain INSERT ... VALUES (%s, %s) shape is what
# lets PyMySQL's executemany send one multi-row statement instead of a row at a time.
UPSERT_COUNTS = (
    "INSERT INTO error_log (log_time, log_count) VALUES (%s, %s) "
    "ON DUPLICATE KEY UPDATE log_count = VALUES(log_count)"
)
UPSERT_OFFSETS = (
    "INSERT INTO kafka_offsets (group_id, topic, kafka_partition, next_offset) "
    "VALUES (%s, %s, %s, %s) ON DUPLICATE KEY UPDATE next_offset = VALUES(next_offset)"
)
READ_OFFSETS = ("SELECT kafka_partition, next_offset FROM kafka_offsets "
                "WHERE group_id = %s AND topic = %s")
LOCK_OFFSETS = READ_OFFSETS + " FOR UPDATE"
# Every transaction that locks both takes the topic row first, then the offsets: one order,
# no deadlock between a drift check and a batch.
LOCK_TOPIC = "SELECT topic_id FROM kafka_topics WHERE group_id = %s AND topic = %s FOR UPDATE"
UPSERT_TOPIC = (
    "INSERT INTO kafka_topics (group_id, topic, topic_id) VALUES (%s, %s, %s) "
    "ON DUPLICATE KEY UPDATE topic_id = VALUES(topic_id)"
)
DELETE_OFFSETS = "DELETE FROM kafka_offsets WHERE group_id = %s AND topic = %s"
READ_TABLE = "SELECT log_time, log_count FROM error_log ORDER BY log_time"
READ_COLUMNS = ("SELECT COLUMN_NAME FROM information_schema.COLUMNS "
                "WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = %s ORDER BY ORDINAL_POSITION")
# A grouped table's key: DATETIME (5 bytes) and up to 3 VARCHAR(255) of utf8mb4 (4 bytes a
# character) = 3,065 bytes, under InnoDB's 3,072-byte limit on an index key.
INNODB_KEY_BYTES = 3072
KEY_BYTES_TIME, KEY_BYTES_DIM = 5, 255 * 4
_NO_SUCH_TABLE = 1146
_DUPLICATE_KEY = 1062
# A table name MySQL takes (64 characters), the longest suffix the final tables add included.
MYSQL_NAME_CHARS = 64
CLOSED_SUFFIX = "_closed"

_UNKNOWN_DB = 1049
# How long one MySQL round trip may stay silent: a batch's write takes milliseconds (a second on a
# busy server), so 10 s of silence is a link dropping our packets: retry on a new connection.
# The connect: 5 s; a server that accepts at all answers its greeting at once.
# Figures: docs/tuning.md#mysql-timeouts
MYSQL_CONNECT_TIMEOUT_S = 5
MYSQL_IO_TIMEOUT_S = 10


@dataclass(frozen=True)
class Total:
    partition: int
    offset: int
    log_time: str
    log_count: int
    dims: tuple[tuple[str, str], ...] = ()  # (NAME, value) of a --group-by record


@dataclass(frozen=True)
class Final:
    """A final topic record (`"final": true`, docs/contract.md) at its position: a series' final
    total of a window, or (`closed`) the record that says the window is closed."""

    partition: int
    offset: int
    log_time: str  # the window's start 'YYYY-MM-DD HH:MM:00'
    log_count: int  # the series' total, or, closed, the window's lines
    dims: tuple[tuple[str, str], ...]  # () on a closed record and without --group-by
    window_end: str
    grace: str  # the --emit-final the window closed with, as written ('1h')
    minutes: int  # the window's length: 1, 60 (a UTC hour), 1440 (a UTC day)
    closed: bool = False
    series: int = 0  # closed: the window's series records


# What the sink hands its store: one kind per topic (batch_kind).
Record = Total | Final
TOTALS, FINALS = "running totals", "final records"


def _table(name: str) -> str:
    """The table as the SQL names it: the default exactly as before, any other backquoted."""
    return name if name == DEFAULT_TABLE else f"`{name}`"


def check_name(what: str, name: str) -> str:
    """A table or column name we put into SQL: letters, digits and _, starting with a letter
    (ConfigError otherwise: names come from flags and from the topic's records)."""
    if not TABLE_NAME.fullmatch(name):
        raise ConfigError(f"{what} {name!r}: not a MySQL name (letters, digits and _, "
                          f"starting with a letter)")
    return name


def binary_collation(version: str) -> str:
    """A binary, NO PAD utf8mb4 collation of the server (`SELECT VERSION()`): `Web-1` and
    `web-1`, `pad` and `pad ` stay distinct keys."""
    return "utf8mb4_nopad_bin" if "mariadb" in version.lower() else "utf8mb4_0900_bin"


def counts_ddl(table: str, dims: Sequence[str], collation: str | None) -> str:
    """The counts table: today's error_log shape without dimensions; else one VARCHAR(255)
    column per dimension, in the records' order, all of them in the key."""
    if not dims:
        return COUNTS_DDL.replace("error_log", _table(check_name("--table", table)), 1)
    key_bytes = KEY_BYTES_TIME + KEY_BYTES_DIM * len(dims)
    if key_bytes > INNODB_KEY_BYTES:
        raise ConfigError(f"MySQL table {table}: {len(dims)} dimensions make a {key_bytes}-byte "
                          f"key, over InnoDB's {INNODB_KEY_BYTES} bytes (at most 3 dimensions)")
    cols = "".join(f"\n        `{check_name('dimension', d)}` VARCHAR(255) CHARACTER SET utf8mb4 "
                   f"COLLATE {collation} NOT NULL," for d in dims)
    key = ", ".join(["log_time", *(f"`{d}`" for d in dims)])
    return (f"CREATE TABLE IF NOT EXISTS `{check_name('--table', table)}` (\n"
            f"        log_time DATETIME NOT NULL,{cols}\n"
            f"        log_count INT NOT NULL,\n        PRIMARY KEY ({key})\n    )")


def upsert_counts(table: str, dims: Sequence[str]) -> str:
    """The counts upsert; without dimensions on error_log exactly UPSERT_COUNTS."""
    if not dims:
        return UPSERT_COUNTS.replace("error_log", _table(check_name("--table", table)), 1)
    cols = ", ".join(["log_time", *(f"`{check_name('dimension', d)}`" for d in dims),
                      "log_count"])
    marks = ", ".join(["%s"] * (len(dims) + 2))
    return (f"INSERT INTO `{check_name('--table', table)}` ({cols}) VALUES ({marks}) "
            f"ON DUPLICATE KEY UPDATE log_count = VALUES(log_count)")


def _shape(dims: Sequence[str]) -> str:
    return f"dimensions ({', '.join(dims)})" if dims else "no dimensions"


def check_columns(table: str, topic: str, dims: Sequence[str], columns: Sequence[str]) -> None:
    """Refuse (ConfigError, one line naming both) a table whose columns are not the records'."""
    want = ["log_time", *dims, "log_count"]
    if [c.lower() for c in columns] == [c.lower() for c in want]:
        return
    if _is_final_table(columns):
        raise ConfigError(f"topic {topic}: its records are running totals, but MySQL table "
                          f"{table} holds final records (columns {', '.join(columns)}); give the "
                          f"sink another --table")
    have = [c for c in columns if c.lower() not in ("log_time", "log_count")]
    raise ConfigError(f"topic {topic}: its records have {_shape(dims)}, but MySQL table {table} "
                      f"has {_shape(have)} (columns {', '.join(columns)}); give the sink "
                      f"another --table")


def batch_dims(topic: str, totals: Sequence[Record]) -> tuple[str, ...]:
    """The dimension names the records share (() without --group-by); records of two shapes
    in one topic are refused."""
    shapes = {tuple(k for k, _ in t.dims) for t in totals}
    if len(shapes) > 1:
        a, b = sorted(shapes)[:2]
        raise ConfigError(f"topic {topic}: records with {_shape(a)} and with {_shape(b)}; one "
                          f"MySQL table holds one shape")
    return next(iter(shapes), ())


def batch_kind(topic: str, records: Sequence[Record], before: str | None = None) -> str | None:
    """TOTALS or FINALS: what the batch holds (`before`: what this sink's earlier batches held;
    None while it has applied none). Running totals and final records in one topic are refused:
    one is upserted, the other inserted once, into tables of other shapes."""
    kinds = {FINALS if isinstance(r, Final) else TOTALS for r in records}
    if before is not None:
        kinds.add(before)
    if len(kinds) > 1:
        raise ConfigError(f"topic {topic}: running totals and final records (\"final\": true) "
                          f"in one topic; the sink loads one kind a topic: point it at the "
                          f"stage's output topic or at its final topic")
    return next(iter(kinds), None)


# The final tables (`--topic OUTPUT-final`), insert-only, a row per record: --table holds the
# minutes' final totals per series, NAME_1h and NAME_1d the rollups' (a table per window length),
# NAME_closed each closed window (minutes and rollups) with its series and lines.


def window_minutes(start: str, end: str) -> int:
    """A window's length in whole minutes (ValueError when it is none, or not 'YYYY-MM-DD
    HH:MM:00' text)."""
    a, b = (datetime.strptime(t, "%Y-%m-%d %H:%M:%S") for t in (start, end))
    seconds = (b - a).total_seconds()
    if a.second or b.second or seconds <= 0:
        raise ValueError(f"not a window of whole minutes: {start} to {end}")
    return int(seconds // 60)


def final_table(table: str, minutes: int) -> str:
    """The table of a window length's final totals: `table` for minutes, else `table_1h`,
    `table_1d` (the length in its largest whole unit: `table_2h`, `table_90m`)."""
    if minutes == 1:
        return table
    for unit, n in (("d", 1440), ("h", 60)):
        if minutes % n == 0:
            return f"{table}_{minutes // n}{unit}"
    return f"{table}_{minutes}m"


def closed_table(table: str) -> str:
    return table + CLOSED_SUFFIX


def _final_name(name: str) -> str:
    check_name("--table", name)
    if len(name) > MYSQL_NAME_CHARS:
        raise ConfigError(f"MySQL table {name}: over {MYSQL_NAME_CHARS} characters; give the "
                          f"sink a shorter --table (the final tables add up to "
                          f"{len(CLOSED_SUFFIX)})")
    return name


def final_columns(dims: Sequence[str]) -> list[str]:
    return ["log_time", *dims, "log_count", "window_end", "grace"]


CLOSED_COLUMNS = ["window_start", "window_end", "series", "log_count", "grace"]


def _is_final_table(columns: Sequence[str]) -> bool:
    return any(c.lower() in ("window_end", "grace") for c in columns)


def final_ddl(name: str, dims: Sequence[str], collation: str | None) -> str:
    """A table of final totals: the counts table's key (log_time, one binary VARCHAR(255) column
    per dimension) and log_count, then the window's end and the grace it closed with. BIGINT: a
    busy series' day passes 2^31 lines (25,000 a second)."""
    _final_name(name)
    if not dims:
        return (f"CREATE TABLE IF NOT EXISTS `{name}` (\n"
                f"        log_time DATETIME NOT NULL,\n        log_count BIGINT NOT NULL,\n"
                f"        window_end DATETIME NOT NULL,\n        grace VARCHAR(32) NOT NULL,\n"
                f"        PRIMARY KEY (log_time)\n    )")
    return counts_ddl(name, dims, collation).replace("        log_count INT NOT NULL,\n",
                       "        log_count BIGINT NOT NULL,\n        window_end DATETIME NOT NULL,"
                       "\n        grace VARCHAR(32) NOT NULL,\n", 1)


def closed_ddl(table: str) -> str:
    """The closed windows: each window once, keyed by its start and end (an hour and its first
    minute start together)."""
    return (f"CREATE TABLE IF NOT EXISTS `{_final_name(closed_table(table))}` (\n"
            f"        window_start DATETIME NOT NULL,\n        window_end DATETIME NOT NULL,\n"
            f"        series INT NOT NULL,\n        log_count BIGINT NOT NULL,\n"
            f"        grace VARCHAR(32) NOT NULL,\n        PRIMARY KEY (window_start, window_end)"
            f"\n    )")


def insert_finals(name: str, dims: Sequence[str]) -> str:
    """A plain INSERT (no upsert: a final row is written once; a duplicate key fails)."""
    cols = final_columns([f"`{check_name('dimension', d)}`" for d in dims])
    return (f"INSERT INTO `{check_name('--table', name)}` ({', '.join(cols)}) "
            f"VALUES ({', '.join(['%s'] * len(cols))})")


def insert_closed(table: str) -> str:
    return (f"INSERT INTO `{check_name('--table', closed_table(table))}` "
            f"({', '.join(CLOSED_COLUMNS)}) VALUES ({', '.join(['%s'] * len(CLOSED_COLUMNS))})")


def check_final_columns(name: str, topic: str, dims: Sequence[str] | None,
                        columns: Sequence[str]) -> None:
    """Refuse (ConfigError, one line naming both) a table whose columns are not those of the
    final records (`dims` None: the closed table)."""
    want = CLOSED_COLUMNS if dims is None else final_columns(dims)
    if [c.lower() for c in columns] == [c.lower() for c in want]:
        return
    if dims is not None and not _is_final_table(columns):
        theirs = "holds running totals"
    else:
        theirs = "has other columns"
    ours = "closed records" if dims is None else f"final records have {_shape(dims)}"
    raise ConfigError(f"topic {topic}: its {ours}, but MySQL table {name} {theirs} (columns "
                      f"{', '.join(columns)}; wanted {', '.join(want)}); give the sink another "
                      f"--table")


def _columns(cur, name: str) -> list[str]:
    cur.execute(READ_COLUMNS, (name,))
    return [str(r[0]) for r in cur.fetchall()]


def ensure_final_table(conn, name: str, topic: str, dims: Sequence[str]) -> None:
    """Create a table of final totals if missing (reshaping the empty counts table a start
    leaves under --table); refuse one of other columns."""
    with conn.cursor() as cur:
        columns = _made(cur, name, dims, final_ddl, reshape=True)
    check_final_columns(name, topic, dims, columns)


def _made(cur, table: str, dims: Sequence[str], ddl, reshape: bool) -> list[str]:
    """The table's columns, creating it with `ddl(table, dims, collation)` when missing; with
    `reshape`, the empty ungrouped counts table a start leaves is dropped and made anew."""
    columns = _columns(cur, table)
    if reshape and [c.lower() for c in columns] == ["log_time", "log_count"]:
        cur.execute(f"SELECT 1 FROM `{check_name('--table', table)}` LIMIT 1")
        if not cur.fetchall():
            cur.execute(f"DROP TABLE `{check_name('--table', table)}`")
            columns = []
    if not columns:
        collation = None
        if dims:
            cur.execute("SELECT VERSION()")
            collation = binary_collation(str(cur.fetchone()[0]))
        cur.execute(ddl(table, dims, collation))
        columns = _columns(cur, table)
    return columns


def ensure_closed_table(conn, table: str, topic: str) -> None:
    with conn.cursor() as cur:
        name = closed_table(table)
        columns = _columns(cur, name)
        if not columns:
            cur.execute(closed_ddl(table))
            columns = _columns(cur, name)
    check_final_columns(name, topic, None, columns)


def final_tables(table: str, finals: Sequence[Final]) -> list[str]:
    """The tables of final totals a batch writes, minutes first (ensure_final_table)."""
    return sorted({final_table(table, f.minutes) for f in finals if not f.closed},
                  key=lambda n: (n != table, n))


def _duplicate(name: str, exc: pymysql.err.IntegrityError, topic: str) -> ConfigError:
    said = str(exc.args[-1]).encode("unicode_escape").decode("ascii")  # one line, any value
    return ConfigError(
        f"MySQL table {name} already holds a row of a final record of topic {topic} ({said}): "
        f"final rows are inserted once and this sink's offsets say it has not written it, so "
        f"something else did (another sink group, or a recreated final topic read again); "
        f"nothing written")


def write_finals(conn, group: str, topic: str, finals: Sequence[Final],
                 ends: Mapping[int, int] | None, topic_id: str | None, table: str,
                 dims: Sequence[str]) -> tuple[dict[int, int], str | None]:
    """Insert a row per final record and store the next offsets; return them, and the topic id
    MySQL holds when it is not `topic_id` (then nothing is written), as write_batch does.
    Records below the stored offsets were applied already and are skipped under their row
    lock, so each record becomes its row once; a key already there was written by someone else
    (ConfigError: refused, not overwritten). Series rows first, closed rows last."""
    with conn.cursor() as cur:
        stored, changed = _lock(cur, group, topic, topic_id)
        if changed is not None:
            return {}, changed
        rows: dict[str, list[tuple]] = {}
        nxt: dict[int, int] = {}
        for f in sorted(finals, key=lambda f: (f.partition, f.offset)):
            if f.offset < stored.get(f.partition, 0):
                continue
            if f.closed:
                rows.setdefault(closed_table(table), []).append(
                    (f.log_time, f.window_end, f.series, f.log_count, f.grace))
            else:
                rows.setdefault(final_table(table, f.minutes), []).append(
                    (f.log_time, *(v for _, v in f.dims), f.log_count, f.window_end, f.grace))
            nxt[f.partition] = f.offset + 1
        for name in sorted(rows, key=lambda n: (n == closed_table(table), n != table, n)):
            sql = insert_closed(table) if name == closed_table(table) \
                else insert_finals(name, dims)
            try:
                cur.executemany(sql, rows[name])
            except pymysql.err.IntegrityError as exc:
                if exc.args and exc.args[0] == _DUPLICATE_KEY:
                    conn.rollback()  # the store keeps its connection through our own errors
                    raise _duplicate(name, exc, topic) from None
                raise
        return _store_offsets(cur, group, topic, stored, nxt, ends), None


def connect(url: MySQLUrl, create_database: bool = False,
            tls_ca: str | None = None) -> pymysql.connections.Connection:
    """A connection to the URL's database (creating it only when asked), autocommit off."""
    u = url
    kw = dict(host=u.host, port=u.port, user=u.user, password=u.password,
              connect_timeout=MYSQL_CONNECT_TIMEOUT_S, read_timeout=MYSQL_IO_TIMEOUT_S,
              write_timeout=MYSQL_IO_TIMEOUT_S, autocommit=False,
              charset="utf8mb4")
    if tls_ca:
        kw.update(ssl_ca=tls_ca, ssl_verify_cert=True, ssl_verify_identity=True)
    try:
        return _require_tls(pymysql.connect(database=u.database, **kw), url, tls_ca)
    except pymysql.err.OperationalError as exc:
        if exc.args[0] != _UNKNOWN_DB:
            raise
        if not create_database:
            # A typo in the URL must not fill an empty database that nobody reads.
            raise DependencyError(
                f"MySQL database {u.database} does not exist on {u.host}:{u.port}; create "
                f"it (CREATE DATABASE {u.database}) or pass --create-database") from None
    conn = _require_tls(pymysql.connect(**kw), url, tls_ca)  # asked to: create it, then use it
    with conn.cursor() as cur:
        cur.execute(f"CREATE DATABASE IF NOT EXISTS `{u.database}`")
        cur.execute(f"USE `{u.database}`")
    return conn


def _require_tls(conn: pymysql.connections.Connection, url: MySQLUrl, tls_ca: str | None):
    """With --mysql-tls-ca, a server that does not offer TLS is refused: PyMySQL would
    otherwise carry on in plain text without a word."""
    if tls_ca:
        with conn.cursor() as cur:
            cur.execute("SHOW SESSION STATUS LIKE 'Ssl_cipher'")
            row = cur.fetchone()
        if not row or not row[1]:
            conn.close()
            raise DependencyError(f"MySQL at {url.host}:{url.port}: TLS failed: "
                                  f"the server does not speak TLS, and --mysql-tls-ca "
                                  f"requires it")
    return conn


def create_tables(conn) -> None:
    with conn.cursor() as cur:
        for ddl in SCHEMA:
            cur.execute(ddl)


def create_counts_table(conn, table: str) -> None:
    """At start: the counts table in today's (ungrouped) shape if there is none, so a sink
    that has seen no records yet leaves the table a reader expects."""
    with conn.cursor() as cur:
        cur.execute(READ_COLUMNS, (table,))
        if not cur.fetchall():
            cur.execute(counts_ddl(table, (), None))


def ensure_counts_table(conn, table: str, topic: str, dims: Sequence[str]) -> None:
    """Create the counts table for records of these dimensions if missing; reshape an empty
    ungrouped one (as a start leaves it) for grouped records; refuse one of other columns."""
    with conn.cursor() as cur:
        columns = _made(cur, table, dims, counts_ddl, reshape=bool(dims))
    check_columns(table, topic, dims, columns)


def read_offsets(conn, group: str, topic: str) -> dict[int, int]:
    with conn.cursor() as cur:
        cur.execute(READ_OFFSETS, (group, topic))
        return {int(p): int(o) for p, o in cur.fetchall()}


def reconcile_topic(conn, group: str, topic: str, current_id: str | None,
                    ends: Mapping[int, int]) -> str | None:
    """The drift check: if MySQL's offsets are not of the topic as it is now (`topic_drift`),
    delete them; store the current id. Return the drift's reason."""
    with conn.cursor() as cur:
        cur.execute(LOCK_TOPIC, (group, topic))
        row = cur.fetchone()
        stored_id = row[0] if row else None
        cur.execute(LOCK_OFFSETS, (group, topic))
        stored = {int(p): int(o) for p, o in cur.fetchall()}
        reason = topic_drift(stored_id, stored, current_id, ends)
        if reason is not None:
            cur.execute(DELETE_OFFSETS, (group, topic))
        if current_id is not None and current_id != stored_id:
            cur.execute(UPSERT_TOPIC, (group, topic, current_id))
        return reason


def write_batch(conn, group: str, topic: str, totals: Sequence[Total],
                ends: Mapping[int, int] | None, topic_id: str | None,
                table: str = DEFAULT_TABLE,
                dims: Sequence[str] = ()) -> tuple[dict[int, int], str | None]:
    """Upsert the last total per minute and the next offsets; return the offsets, and the topic
    id MySQL holds when it is not `topic_id` (then nothing is written). The totals have the
    dimensions `dims` (batch_dims), whose table exists (ensure_counts_table).

    Records below the stored offset of their partition were applied already (a replay, or a
    zombie's late batch) and are skipped under the row lock. `ends` are positions the
    consumer reached (partition EOF): on a transactional topic the last record is followed by
    a commit marker, so "last offset + 1" would sit one below the end forever; storing the
    reader's position makes the stored offsets equal the topic's end when drained.
    """
    with conn.cursor() as cur:
        stored, changed = _lock(cur, group, topic, topic_id)
        if changed is not None:
            return {}, changed
        last: dict[tuple[str, ...], int] = {}
        nxt: dict[int, int] = {}
        for t in sorted(totals, key=lambda t: (t.partition, t.offset)):
            if t.offset < stored.get(t.partition, 0):
                continue
            last[(t.log_time, *(v for _, v in t.dims))] = t.log_count
            nxt[t.partition] = t.offset + 1
        if last:
            cur.executemany(upsert_counts(table, dims),
                            [(*key, n) for key, n in sorted(last.items())])
        return _store_offsets(cur, group, topic, stored, nxt, ends), None


def _lock(cur, group: str, topic: str,
          topic_id: str | None) -> tuple[dict[int, int], str | None]:
    """A batch's first statements: lock the topic's row, then the stored offsets (one order for
    every transaction: no deadlock with a drift check). The offsets, and the id MySQL holds when
    it is not `topic_id` (then the batch writes nothing)."""
    cur.execute(LOCK_TOPIC, (group, topic))
    row = cur.fetchone()
    if topic_id is not None and row is not None and row[0] != topic_id:
        return {}, row[0]
    cur.execute(LOCK_OFFSETS, (group, topic))
    return {int(p): int(o) for p, o in cur.fetchall()}, None


def _store_offsets(cur, group: str, topic: str, stored: Mapping[int, int],
                   nxt: dict[int, int], ends: Mapping[int, int] | None) -> dict[int, int]:
    """A batch's last statement: the next offsets, the ends reached included (never one below
    what is stored)."""
    for p, end in (ends or {}).items():
        if end > max(nxt.get(p, 0), stored.get(p, 0)):
            nxt[p] = end
    if nxt:
        cur.executemany(UPSERT_OFFSETS, [(group, topic, p, o) for p, o in sorted(nxt.items())])
    return nxt


def read_table(url: MySQLUrl) -> dict[str, int]:
    """error_log as {'YYYY-MM-DD HH:MM:00': count} (the demo's verdict, the tests); {} while
    there is none."""
    conn = pymysql.connect(host=url.host, port=url.port, user=url.user, password=url.password,
                           database=url.database)
    try:
        with conn.cursor() as cur:
            try:
                cur.execute(READ_TABLE)
            except pymysql.err.ProgrammingError as exc:
                if exc.args[0] != _NO_SUCH_TABLE:
                    raise
                return {}
            return {t.strftime("%Y-%m-%d %H:%M:00"): int(c) for t, c in cur.fetchall()}
    finally:
        conn.close()


def read_series(url: MySQLUrl, table: str, dims: Sequence[str]) -> dict[tuple[str, ...], int]:
    """A grouped counts table as {('YYYY-MM-DD HH:MM:00', value, ...): count} (the grouped demo's
    verdict); {} while there is none."""
    cols = ", ".join(["log_time", *(f"`{check_name('dimension', d)}`" for d in dims), "log_count"])
    conn = pymysql.connect(host=url.host, port=url.port, user=url.user, password=url.password,
                           database=url.database, charset="utf8mb4")
    try:
        with conn.cursor() as cur:
            try:
                cur.execute(f"SELECT {cols} FROM `{check_name('--table', table)}`")
            except pymysql.err.ProgrammingError as exc:
                if exc.args[0] != _NO_SUCH_TABLE:
                    raise
                return {}
            return {(t.strftime("%Y-%m-%d %H:%M:00"), *values): int(c)
                    for t, *values, c in cur.fetchall()}
    finally:
        conn.close()
