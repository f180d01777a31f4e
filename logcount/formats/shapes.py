"""A synthetic generator for every log shape of the catalogue (logcount/formats/catalogue.py):
`logcount produce --synthetic N --shape SHAPE`, the tests, the bench. Core never imports it.

The generator knows every record's outcome before rendering it: it draws a UTC instant and a
level, then writes them in the shape's own way. `SyntheticRecord.minute` (the UTC minute index,
logcount/formats/rule.py) and `.level` (upper-cased, as `--level` compares it) are that metadata,
so an expectation built from them does not depend on the project's parser. Malformed records
(bad JSON, missing fields, impossible dates, garbage; logcount/formats/synthetic_tables.py) have
neither.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta, timezone, tzinfo
from typing import TypeVar
from zoneinfo import ZoneInfo

from logcount.formats.catalogue import (
    RUN_FLAGS,
    SHAPES,
    ZONELESS,
)
from logcount.formats.rule import minute_label
from logcount.formats.spec import ALL_LEVELS, check_timezone
from logcount.formats.synthetic_tables import LEVEL_WORDS, MALFORMED


@dataclass(frozen=True, slots=True)
class SyntheticRecord:
    """One generated record: its value and what it was generated as (None, None: malformed)."""

    value: bytes
    minute: int | None  # the UTC minute index (logcount/formats/rule.py), drawn before rendering
    level: str | None  # upper-cased, as --level compares it ("ERROR", pino's "50")
    # With dimensions (DIMENSIONS): the record's key, and the value written at each source.
    key: bytes | None = None
    fields: dict[str, str] | None = None


def expected_from_records(records: Iterable[SyntheticRecord],
                          levels: Iterable[str]) -> dict[str, int]:
    """Per-minute counts ('YYYY-MM-DD HH:MM:00' -> n) of the records of `levels`, by key
    (`*`: every level)."""
    wanted = {lv.upper() for lv in levels}
    out: dict[int, int] = {}
    for r in records:
        if r.minute is not None and (r.level in wanted or ALL_LEVELS in wanted):
            out[r.minute] = out.get(r.minute, 0) + 1
    return {minute_label(m): n for m, n in sorted(out.items())}


# --- per-series expectations (produce --expect-group-by) --------------------------------------



class SeriesCounts:
    """Per (minute, dimension values) counts of the records of `levels`, from what the generator
    wrote (SyntheticRecord.key and .fields); a source it did not write is ''."""

    def __init__(self, dims: Sequence[tuple[str, str]], levels: Iterable[str]) -> None:
        self.dims = tuple(dims)
        self.levels = {lv.upper() for lv in levels}
        self.counts: dict[tuple[int, tuple[str, ...]], int] = {}

    def add(self, r: SyntheticRecord) -> None:
        if r.minute is None or (r.level not in self.levels and ALL_LEVELS not in self.levels):
            return
        values = tuple(self._value(r, source) for _, source in self.dims)
        k = (r.minute, values)
        self.counts[k] = self.counts.get(k, 0) + 1

    @staticmethod
    def _value(r: SyntheticRecord, source: str) -> str:
        if source == "level":
            return r.level or ""
        if source == "key":
            return "" if r.key is None else r.key.decode("utf-8", "replace")
        return (r.fields or {}).get(source, "")

    def document(self) -> dict:
        """The --expect file (produce; docs/log-formats.md): the grouping, then one entry per
        series and minute, sorted by minute, then by the values."""
        return {"group_by": {n: s for n, s in self.dims}, "levels": ",".join(sorted(self.levels)),
                "series": [{"minute": minute_label(m), "dims": dict(zip(
                    (n for n, _ in self.dims), values, strict=True)), "count": c}
                           for (m, values), c in sorted(self.counts.items())]}


_BASE = datetime(2017, 7, 30)  # the synthetic day, naive UTC
T = TypeVar("T")


def synthetic_records(shape: str, n: int, seed: int, malformed_ratio: float = 0.01,
                      timezone: str = "UTC", span_minutes: int = 24 * 60,
                      start: datetime = _BASE, dimensions: bool = False
                      ) -> Iterator[SyntheticRecord]:
    """`n` records of `shape` over `span_minutes` from `start` (naive UTC), in random order,
    about `malformed_ratio` of them malformed. Zone-less shapes are written in `timezone`'s local
    time (an IANA name, UTC or ±HH:MM), the others carry their own zone or epoch number.
    With `dimensions`, each record comes from one service of a fleet (_Fleet: keyed by it, its
    host, namespace, container and logger written where the shape writes them) and says what
    it wrote (SyntheticRecord.key and .fields); without, the records are those of before."""
    if shape not in RUN_FLAGS:
        raise ValueError(f"unknown shape {shape!r}; one of {', '.join(SHAPES)}")
    tz = _tzinfo(check_timezone(timezone))
    rng = random.Random(seed)
    if dimensions:
        yield from _with_dimensions(shape, n, seed, malformed_ratio, timezone, span_minutes,
                                    start)
        return
    if shape == "seed":
        yield from _seed(rng, n, malformed_ratio, span_minutes * 60, tz, start)
        return
    yield from _records(shape, rng, n, malformed_ratio, tz, span_minutes, start, None)


def _records(shape: str, rng: random.Random, n: int, malformed_ratio: float, tz: tzinfo,
             span_minutes: int, start: datetime, fleet: _Fleet | None
             ) -> Iterator[SyntheticRecord]:
    render, levels, malformed = _SHAPE_TABLE[shape]
    words = [w for w, _ in levels]
    weights = [wt for _, wt in levels]
    span_us = span_minutes * 60 * 10**6
    zoneless = shape in ZONELESS
    for i in range(n):
        if rng.random() < malformed_ratio:
            yield SyntheticRecord(malformed[rng.randrange(len(malformed))], None, None)
            continue
        while True:
            instant = start + timedelta(microseconds=rng.randrange(span_us))
            local = _local(instant, tz)
            if local is not None or not zoneless:
                break  # a zone-less time that repeats (DST's fall-back hour) is drawn again
        word = rng.choices(words, weights)[0]
        msg = _MESSAGES[rng.randrange(len(_MESSAGES))]
        if fleet is None:
            value = render(_Ctx(rng, instant, local, tz, word, msg, i))
            yield SyntheticRecord(value, _minute_index(instant), word.upper())
        else:
            ctx = _Ctx(rng, instant, local, tz, word, msg, i, fleet, fleet.member())
            value = render(ctx)
            yield SyntheticRecord(value, _minute_index(instant), word.upper(),
                                  ctx.who("service").encode(), ctx.fields)


def _with_dimensions(shape: str, n: int, seed: int, malformed_ratio: float, timezone: str,
                     span_minutes: int, start: datetime) -> Iterator[SyntheticRecord]:
    """synthetic_records with a fleet: its draws come from a generator of their own, so the
    times, levels and messages are those the same seed draws without dimensions."""
    tz = _tzinfo(timezone)
    rng = random.Random(seed)
    fleet = _Fleet(random.Random(f"dimensions:{seed}"))
    if shape != "seed":
        yield from _records(shape, rng, n, malformed_ratio, tz, span_minutes, start, fleet)
        return
    for r in _seed(rng, n, malformed_ratio, span_minutes * 60, tz, start):
        if r.minute is None:
            yield r
        else:  # the seed line has no field: only the key says where it came from
            yield SyntheticRecord(r.value, r.minute, r.level,
                                  fleet.member()["service"].encode(), {})


def synthetic_lines(n: int, seed: int, malformed_ratio: float = 0.01,
                    span_minutes: int = 24 * 60) -> Iterator[bytes]:
    """The seed shape's lines only (the demo's, the bench's and the chaos tests' input)."""
    for r in synthetic_records("seed", n, seed, malformed_ratio, span_minutes=span_minutes):
        yield r.value


# --- times ------------------------------------------------------------------------------------


def _tzinfo(name: str) -> tzinfo:
    if name == "UTC":
        return UTC
    if name[0] in "+-":
        off = timedelta(hours=int(name[1:3]), minutes=int(name[4:6]))
        return timezone(-off if name[0] == "-" else off)
    return ZoneInfo(name)


def _local(instant: datetime, tz: tzinfo) -> datetime | None:
    """A naive UTC instant as naive local time in `tz`; None when that local time repeats and
    reads back (earlier offset, java.time's rule) as another instant."""
    local = instant.replace(tzinfo=UTC).astimezone(tz).replace(tzinfo=None)
    back = local.replace(tzinfo=tz, fold=0).astimezone(UTC).replace(tzinfo=None)
    return local if back == instant else None


def _minute_index(instant: datetime) -> int:
    return (instant.toordinal() - 1) * 1440 + instant.hour * 60 + instant.minute


def _offset_text(minutes: int, colon: bool = True) -> str:
    sign = "-" if minutes < 0 else "+"
    h, m = divmod(abs(minutes), 60)
    return f"{sign}{h:02d}:{m:02d}" if colon else f"{sign}{h:02d}{m:02d}"


def _iso_z(t: datetime, digits: int = 3) -> str:
    """A naive UTC time as 2017-07-30T14:09:08.123Z (`digits` fraction digits, at most 6)."""
    return f"{t:%Y-%m-%dT%H:%M:%S}.{t.microsecond:06d}"[:20 + digits] + "Z"


# --- the seed shape: today's generator, unchanged but for one malformed line -----------------

# Padded levels as in the seed data ("INFO " is a level followed by padding).
_SEED_LEVELS = (b"DEBUG", b"INFO ", b"WARN ", b"ERROR")
_SEED_WEIGHTS = (25, 45, 15, 15)
_SEED_MESSAGES = (
    b"connection to db-primary timed out after 30000 ms",
    b"user login succeeded for account",
    b"cache miss for key session",
    b"request completed in 23 ms status=200 path=/api/v1/orders",
    b"disk usage at 91 percent on /var/lib/data",
    b"retrying upstream call attempt 3 of 5",
)
_SEED_MALFORMED = (
    b"",
    b"\x00\x01\x02binary garbage\xff\xfe",
    b"2017-02-30 10:00:00 ERROR february has no 30th",
    b"2017-07-30 25:00:00 ERROR hour 25",
    b"Jul 30 14:09:08 ERROR wrong timestamp format",
    b"2017-07-30 14:09:08",
    b"2017-07-30T14:09 ERROR no seconds",
)


def _seed(rng: random.Random, n: int, malformed_ratio: float, span_s: int, tz: tzinfo,
          start: datetime) -> Iterator[SyntheticRecord]:
    """Lines of 60-100 bytes; some valid ones carry non-UTF-8 message bytes or a trailing \\r,
    which the contract counts normally. The random draws are today's, so under UTC the lines
    are byte for byte those of the generator before the formats."""
    for i in range(n):
        r = rng.random()
        if r < malformed_ratio:
            yield SyntheticRecord(_SEED_MALFORMED[rng.randrange(len(_SEED_MALFORMED))], None,
                                  None)
            continue
        while True:
            instant = start + timedelta(seconds=rng.randrange(span_s))
            local = _local(instant, tz)
            if local is not None:
                break
        level = rng.choices(_SEED_LEVELS, _SEED_WEIGHTS)[0]
        msg = _SEED_MESSAGES[rng.randrange(len(_SEED_MESSAGES))]
        line = b"%s %s %s id=%d" % (local.strftime("%Y-%m-%d %H:%M:%S").encode(), level, msg, i)
        if r > 0.998:
            line += b" \xc3\x28 invalid utf-8"
        elif r > 0.996:
            line += b"\r"
        yield SyntheticRecord(line, _minute_index(instant), level.strip().decode())


# --- the other shapes -------------------------------------------------------------------------

_MESSAGES = (
    "connection to db-primary timed out after 30000 ms",
    "user login succeeded for account 4711",
    "cache miss for key session:9f2c",
    "request completed in 23 ms status=200 path=/api/v1/orders",
    "disk usage at 91 percent on /var/lib/data",
    "retrying upstream call attempt 3 of 5",
    'payment "declined" for order 1042: card expired',
    "Müller's café order: naïve UTF-8 text ✓",
    "query failed: SELECT * FROM t WHERE a = 'x' AND b = \"y\"\tafter 3 tries",
)
_HOSTS = ("web-1", "web-2", "worker-7")
_LOGGERS = ("com.example.OrderService", "o.a.k.clients.NetworkClient", "c.e.db.Pool")


# --- dimensions: a fleet of services, a few of them busy ---------------------------------------

# (service, its namespace), busiest first; the 20 nodes the pods run on (x 5 namespaces: ~100
# host and namespace series, the bench's grouped Filebeat); loggers per kind of program.
_SERVICES = (("checkout", "shop"), ("orders", "shop"), ("payments", "billing"),
             ("catalog", "shop"), ("search", "discovery"), ("auth", "platform"), ("cart", "shop"),
             ("shipping", "logistics"), ("recommend", "discovery"), ("email", "platform"),
             ("inventory", "logistics"), ("gateway", "platform"))
_NODES = tuple(f"node-{k}" for k in range(1, 21))
_JAVA_LOGGERS = ("com.example.OrderService", "o.a.k.clients.NetworkClient", "c.e.db.Pool",
                 "org.hibernate.SQL", "com.example.http.Server", "io.netty.channel.Epoll",
                 "com.zaxxer.hikari.HikariPool", "org.springframework.web.Dispatcher")
_PY_LOGGERS = ("app.db", "urllib3.connectionpool", "root", "celery.worker", "app.api",
               "sqlalchemy.engine", "gunicorn.error", "app.billing")
_KAFKA_LOGGERS = ("kafka.server.ReplicaManager", "kafka.log.LogCleaner",
                  "kafka.coordinator.group.GroupCoordinator", "kafka.network.Processor",
                  "kafka.controller.KafkaController", "kafka.server.KafkaApis")
_SPARK_CLASSES = ("SparkContext", "TaskSetManager", "Executor", "BlockManagerInfo", "DAGScheduler",
                  "ShuffleBlockFetcherIterator", "MemoryStore")
_GO_LOGGERS = ("http", "db", "cache", "grpc.server", "scheduler")
# Zipf's exponent: with it the busiest of 12 services writes a third of the lines, the last 2 %.
ZIPF_S = 1.1


class _Fleet:
    """Where a record comes from: a service (Zipf over _SERVICES), its namespace, a node (Zipf),
    its container (a sidecar's now and then) and pod, drawn from the fleet's own generator."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self._weights: dict[int, list[float]] = {}

    def zipf(self, seq: Sequence[T]) -> T:
        w = self._weights.get(len(seq))
        if w is None:
            w = self._weights[len(seq)] = [1 / k ** ZIPF_S for k in range(1, len(seq) + 1)]
        return self.rng.choices(seq, w)[0]

    def member(self) -> dict[str, str]:
        service, namespace = self.zipf(_SERVICES)
        sidecar = self.rng.random() < 0.1
        return {"service": service, "namespace": namespace, "host": self.zipf(_NODES),
                "container": "istio-proxy" if sidecar else service,
                "pod": f"{service}-7d9f{len(service):x}c-{self.rng.randrange(3)}"}


@dataclass(frozen=True, slots=True)
class _Ctx:
    """What a renderer writes: the instant (naive UTC, microseconds), its local time in the
    generator's zone (None for a repeated local time, never given to a zone-less shape), the
    zone, the level word as the shape writes it, a message and the record's number."""

    rng: random.Random
    t: datetime
    local: datetime | None
    tz: tzinfo
    word: str
    msg: str
    i: int
    fleet: _Fleet | None = None  # with dimensions: where this record's dimensions come from
    member: dict[str, str] | None = None  # the fleet's service, host, namespace... it is from
    fields: dict[str, str] = field(default_factory=dict)  # source -> the value written there

    @property
    def lt(self) -> datetime:
        assert self.local is not None
        return self.local

    def who(self, role: str) -> str:
        assert self.member is not None
        return self.member[role]

    def dim(self, source: str, default: str, pick: tuple[str, ...] = (),
            role: str | None = None) -> str:
        """Without dimensions, `default` (the renderer's own draw); with them, the member's
        `role` or a Zipf draw from `pick`, kept in `fields` under `source`."""
        if self.fleet is None:
            return default
        got = self.who(role) if role is not None else self.fleet.zipf(pick)
        self.fields[source] = got
        return got


def _js(obj: object) -> bytes:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode()


def _kafka(c: _Ctx) -> bytes:
    # log4j 1 in Kafka's config/log4j.properties: [%d] %p %m (%c)%n
    where = c.dim("logger", c.rng.choice(("kafka.server.ReplicaManager", "kafka.log.LogCleaner",
                                          "kafka.coordinator.group.GroupCoordinator")),
                  _KAFKA_LOGGERS)
    return (f"[{c.lt:%Y-%m-%d %H:%M:%S},{c.lt.microsecond // 1000:03d}] {c.word} "
            f"[Broker id=1] {c.msg} id={c.i} ({where})").encode()


# (offset in minutes, how it is written): Z, ±HH:MM and ±HHMM, with and without a fraction.
_RFC_OFFSETS = (0, 0, 480, -330, 330, -300, 60, 345, -600, 840)


def _rfc3339(c: _Ctx) -> bytes:
    rng = c.rng
    off = _RFC_OFFSETS[rng.randrange(len(_RFC_OFFSETS))]
    style = rng.randrange(3)
    zone = "Z" if off == 0 and style == 0 else _offset_text(off, colon=style != 2)
    lt = c.t + timedelta(minutes=off)
    digits = rng.choice((0, 1, 3, 3, 6, 9))
    frac = f"{lt.microsecond:06d}{rng.randrange(1000):03d}"[:digits]
    sep = "," if digits and rng.random() < 0.1 else "."
    stamp = f"{lt:%Y-%m-%d}{'T' if rng.random() < 0.9 else ' '}{lt:%H:%M:%S}"
    stamp += (sep + frac if digits else "") + zone
    return f"{stamp} {c.word} {c.msg} id={c.i}".encode()


def _log4j2(c: _Ctx) -> bytes:
    thread = c.rng.choice(("main", "http-nio-8080-exec-3", "pool-2-thread-1",
                           "kafka-producer-network-thread | producer-1"))
    logger = c.dim("logger", c.rng.choice(_LOGGERS), _JAVA_LOGGERS)
    return (f"{c.lt:%Y-%m-%d %H:%M:%S}.{c.lt.microsecond // 1000:03d} [{thread}] {c.word:<5} "
            f"{logger} - {c.msg} id={c.i}").encode()


def _python(c: _Ctx) -> bytes:
    name = c.dim("logger", c.rng.choice(("app.db", "urllib3.connectionpool", "root",
                                         "celery.worker")), _PY_LOGGERS)
    return (f"{c.lt:%Y-%m-%d %H:%M:%S},{c.lt.microsecond // 1000:03d} - {name} - {c.word} - "
            f"{c.msg} id={c.i}").encode()


def _spark(c: _Ctx) -> bytes:
    cls = c.dim("logger", c.rng.choice(("SparkContext", "TaskSetManager", "Executor",
                                        "BlockManagerInfo")), _SPARK_CLASSES)
    return f"{c.lt:%y/%m/%d %H:%M:%S} {c.word} {cls}: {c.msg} id={c.i}".encode()


_MARIADB_MESSAGES = {
    "Note": ("InnoDB: Buffer pool(s) load completed at 170730 14:09:08",
             "Server socket created on IP: '0.0.0.0'.",
             "mariadbd: ready for connections.",
             "InnoDB: Initializing buffer pool, total size = 128.000MiB, chunk size = 2.000MiB",
             "Starting MariaDB 10.11.6-MariaDB-0+deb12u1 source revision  as process 712"),
    "Warning": ("Access denied for user 'root'@'localhost' (using password: NO)",
                "Aborted connection 42 to db: 'logcount' user: 'app' host: '10.0.0.7' (Got an "
                "error reading communication packets)",
                "'proxies_priv' entry '@% root@db-1' ignored in --skip-name-resolve mode."),
    "ERROR": ("mariadbd: Table './logcount/error_log' is marked as crashed and should be "
              "repaired",
              "InnoDB: Unable to lock ./ibdata1 error: 11",
              "Can't start server: Bind on TCP/IP port. Got error: 98: Address already in use",
              "Incorrect definition of table mysql.column_stats: expected column 'hist_type' at "
              "position 9 to have type enum('SINGLE_PREC_HB','DOUBLE_PREC_HB','JSON_HB')"),
}


def _mariadb(c: _Ctx) -> bytes:
    # log.cc's print_buffer_to_file: the hour is %2d; the thread id is 0 outside a connection.
    thread = 0 if c.rng.random() < 0.6 else c.rng.randrange(1, 5000)
    msg = c.rng.choice(_MARIADB_MESSAGES[c.word])
    return (f"{c.lt:%Y-%m-%d} {c.lt.hour:2d}:{c.lt:%M:%S} {thread} [{c.word}] {msg}").encode()


def _app_line(c: _Ctx) -> str:
    """A line an application wrote, as a shipper picks it up: the default rule's shapes."""
    lt, ms = c.lt, c.lt.microsecond // 1000
    form = c.rng.randrange(4)
    if form == 0:
        return f"{lt:%Y-%m-%d %H:%M:%S} {c.word} {c.msg} id={c.i}"
    if form == 1:
        return f"{lt:%Y-%m-%d %H:%M:%S}.{ms:03d} {c.word} {c.msg} id={c.i}"
    if form == 2:
        return f"[{lt:%Y-%m-%d %H:%M:%S},{ms:03d}] {c.word} {c.msg} id={c.i}"
    return f"{_iso_z(c.t, 6)} {c.word} {c.msg} id={c.i}"  # UTC, with its Z


def _filebeat(c: _Ctx) -> bytes:
    rng = c.rng
    shipped = _iso_z(c.t + timedelta(milliseconds=rng.randrange(3000)))
    host = c.dim("host.name", rng.choice(_HOSTS), role="host")
    filebeat = rng.random() < 0.5
    if c.fleet is not None:  # Filebeat on Kubernetes, with add_kubernetes_metadata
        return _js({"@timestamp": shipped,
                    "@metadata": {"beat": "filebeat", "type": "_doc", "version": "8.11.0"},
                    "log": {"offset": c.i * 97, "file": {"path": "/var/log/app/app.log"}},
                    "message": _app_line(c), "input": {"type": "container"},
                    "kubernetes": {
                        "namespace": c.dim("kubernetes.namespace", "", role="namespace"),
                        "pod": {"name": c.dim("kubernetes.pod.name", "", role="pod")},
                        "container": {"name": c.dim("kubernetes.container.name", "",
                                                    role="container")},
                        "node": {"name": host}},
                    "host": {"name": host}, "agent": {"type": "filebeat", "version": "8.11.0"},
                    "ecs": {"version": "8.0.0"}})
    if filebeat:
        return _js({"@timestamp": shipped,
                    "@metadata": {"beat": "filebeat", "type": "_doc", "version": "8.11.0"},
                    "log": {"offset": c.i * 97, "file": {"path": "/var/log/app/app.log"}},
                    "message": _app_line(c), "input": {"type": "filestream"},
                    "host": {"name": host}, "agent": {"type": "filebeat", "version": "8.11.0"},
                    "ecs": {"version": "8.0.0"}})
    return _js({"file": "/var/log/app/app.log", "host": host, "message": _app_line(c),  # Vector
                "source_type": "file", "timestamp": shipped})


def _fluentbit(c: _Ctx) -> bytes:
    rng = c.rng
    line = _app_line(c) + ("\r\n" if rng.random() < 0.05 else "\n")
    stream = rng.choice(("stdout", "stderr"))
    docker_time = _iso_z(c.t, 6)[:-1] + f"{rng.randrange(1000):03d}Z"
    docker = rng.random() < 0.5
    if c.fleet is not None:  # the kubernetes filter's metadata
        return _js({"@timestamp": round(c.t.replace(tzinfo=UTC).timestamp(), 3), "log": line,
                    "stream": stream, "time": docker_time, "kubernetes": {
                        "pod_name": c.dim("kubernetes.pod_name", "", role="pod"),
                        "namespace_name": c.dim("kubernetes.namespace_name", "",
                                                role="namespace"),
                        "container_name": c.dim("kubernetes.container_name", "",
                                                role="container"),
                        "host": c.dim("kubernetes.host", "", role="host")}})
    if docker:  # Docker's json-file log, as is
        return _js({"log": line, "stream": stream, "time": docker_time})
    return _js({"@timestamp": round(c.t.replace(tzinfo=UTC).timestamp(), 3), "log": line,
                "stream": stream, "time": docker_time,
                "kubernetes": {"pod_name": f"orders-{c.i % 5}", "namespace_name": "shop"}})


_LEVEL_VALUES = {"TRACE": 5000, "DEBUG": 10000, "INFO": 20000, "WARN": 30000, "ERROR": 40000}


def _logstash(c: _Ctx) -> bytes:
    # logstash-logback-encoder: ISO_OFFSET_DATE_TIME in the JVM's zone, milliseconds with their
    # trailing zeros dropped, Z at offset zero.
    aware = c.t.replace(tzinfo=UTC).astimezone(c.tz)
    off = aware.utcoffset()
    minutes = int(off.total_seconds() // 60) if off is not None else 0
    frac = f"{aware.microsecond // 1000:03d}".rstrip("0")
    stamp = f"{aware:%Y-%m-%dT%H:%M:%S}" + (f".{frac}" if frac else "")
    stamp += "Z" if minutes == 0 else _offset_text(minutes)
    return _js({"@timestamp": stamp, "@version": "1", "message": c.msg,
                "logger_name": c.dim("logger_name", c.rng.choice(_LOGGERS), _JAVA_LOGGERS),
                "thread_name": "main", "level": c.word,
                "level_value": _LEVEL_VALUES[c.word]})


def _ecs_dotted(c: _Ctx) -> bytes:
    # ecs-logging (Java writes ERROR, Python and Node.js error): dotted keys at the top level.
    service = c.dim("service.name", "orders", role="service")
    obj = {"@timestamp": _iso_z(c.t), "log.level": c.word, "message": c.msg,
           "ecs.version": "1.2.0", "service.name": service, "event.dataset": f"{service}.log",
           "process.thread.name": "main",
           "log.logger": c.dim("log.logger", c.rng.choice(_LOGGERS), _JAVA_LOGGERS)}
    if c.fleet is not None:
        obj["host.name"] = c.dim("host.name", "", role="host")
    return _js(obj)


def _ecs_nested(c: _Ctx) -> bytes:
    # ECS as Filebeat or Elastic Agent nest it: {"log": {"level": ...}}.
    return _js({"@timestamp": _iso_z(c.t),
                "log": {"level": c.word, "logger": c.dim("log.logger", "orders", _JAVA_LOGGERS)},
                "message": c.msg, "ecs": {"version": "8.11.0"},
                "service": {"name": c.dim("service.name", "orders", role="service")},
                "host": {"name": c.dim("host.name", c.rng.choice(_HOSTS), role="host")}})


def _zap(c: _Ctx) -> bytes:
    # zap's production encoder: ts as float epoch seconds (the shortest form, as Go's strconv
    # writes it), lower-case levels.
    us = (c.t - datetime(1970, 1, 1)) // timedelta(microseconds=1)
    obj: dict[str, object] = {"level": c.word, "ts": us / 1e6}
    if c.fleet is not None:  # a named logger (zap's Named)
        obj["logger"] = c.dim("logger", "", _GO_LOGGERS)
    obj.update({"caller": "server/handler.go:142", "msg": c.msg, "request_id": f"{c.i:08x}"})
    return _js(obj)


def _pino(c: _Ctx) -> bytes:
    ms = (c.t - datetime(1970, 1, 1)) // timedelta(milliseconds=1)
    return _js({"level": int(c.word), "time": ms, "pid": 4242,
                "hostname": c.dim("hostname", c.rng.choice(_HOSTS), role="host"), "msg": c.msg})


_RENDER: dict[str, Callable[[_Ctx], bytes]] = {
    "kafka": _kafka, "rfc3339": _rfc3339, "log4j2": _log4j2, "python": _python, "spark": _spark,
    "mariadb": _mariadb,
    "filebeat": _filebeat, "fluentbit": _fluentbit, "logstash": _logstash,
    "ecs-dotted": _ecs_dotted, "ecs-nested": _ecs_nested, "zap": _zap, "pino": _pino,
}
_SHAPE_TABLE = {s: (_RENDER[s], LEVEL_WORDS[s], MALFORMED[s]) for s in SHAPES if s != "seed"}
