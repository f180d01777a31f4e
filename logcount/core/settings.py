"""One frozen settings object per command, read from flags, then `LOGCOUNT_*` env, then defaults.

Each field's metadata (`opt(...)`) is the single source for its flag, its env variable, its help
text and the README's configuration reference (`reference_markdown()`). Secrets are masked in
`repr()` and therefore in every log line that prints settings.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import math
import os
import re
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal
from urllib.parse import unquote, urlparse

from logcount.core import redact
from logcount.core.client_properties import ClientProperties, load_client_properties
from logcount.core.client_properties.secrets import is_secret_key
from logcount.core.errors import ConfigError
from logcount.core.redact import MASK
from logcount.formats.shapes import SHAPES, check_group_by, parse_group_by
from logcount.formats.spec import FormatError, LineFormat

__all__ = [
    "DemoSettings",
    "MySQLUrl",
    "ProduceSettings",
    "RunSettings",
    "SinkSettings",
    "StackSettings",
    "StateShowSettings",
    "add_arguments",
    "from_namespace",
    "reference_markdown",
]

ENV_PREFIX = "LOGCOUNT_"
# Environment variables that are not flags: where things are, and deployment details.
EXTRA_ENV = {
    "LOGCOUNT_HOME": "the checkout or install root (default: found from the package)",
    "LOGCOUNT_JARS_DIR": "the fetched jars (default: $LOGCOUNT_HOME/.cache/jars)",
    "LOGCOUNT_STATE_DIR": "the embedded stack's data, logs, pids (default: $LOGCOUNT_HOME/.stack)",
    "LOGCOUNT_SPARK_DRIVER_HOST": "address executors use to reach the driver (cluster mode)",
    "LOGCOUNT_SPARK_DRIVER_MEMORY": "spark.driver.memory (default 2g)",
    "LOGCOUNT_SPARK_JAVA_OPTIONS": "more options of the driver JVM the stage starts, after its "
                                   "own (they win; docs/deploy.md, Sizing)",
    "LOGCOUNT_VERBOSE": "1: the Spark JVM's and librdkafka's own output on stderr too (--verbose)",
    "LOGCOUNT_LOG_DIR": "where that output goes otherwise (default: $LOGCOUNT_STATE_DIR/logs)",
    "LOGCOUNT_CDS": "0: start the Spark driver JVM without set-up's class-data-sharing archive",
    "LOGCOUNT_CRASH_AT": "fault tests only: crash point and batch, e.g. after_produce:2",
    "LOGCOUNT_CRASH_MODE": "fault tests only: exit (default), stop (SIGSTOP) or hang (the thread)",
}


def opt(help: str, *, flag: str | None = None, secret: bool = False, metavar: str | None = None,
        lo: float | None = None, hi: float | None = None, above: float | None = None):
    """Field metadata: help text, optional explicit flag, whether the value is a secret, and
    for numbers their range (`lo`/`hi` inclusive, `above` exclusive), checked where it is read."""
    return {"help": help, "flag": flag, "secret": secret, "metavar": metavar, "lo": lo,
            "hi": hi, "above": above}


# Ranges shared by many flags.
PORT: dict[str, Any] = {"lo": 0, "hi": 65535}  # 0: off
POSITIVE: dict[str, Any] = {"above": 0}  # seconds, sizes
AT_LEAST_1: dict[str, Any] = {"lo": 1}


def _check_range(f: dataclasses.Field, value: float, source: str) -> None:
    lo, hi, above = f.metadata.get("lo"), f.metadata.get("hi"), f.metadata.get("above")
    if ((lo is not None and value < lo) or (hi is not None and value > hi)
            or (above is not None and value <= above)):
        if lo is not None and hi is not None:
            want = f"between {lo:g} and {hi:g}"
        elif above is not None:
            want = f"greater than {above:g}"
        else:
            want = f"at least {lo:g}" if lo is not None else f"at most {hi:g}"
        raise ConfigError(f"{source} must be {want}, got {value:g}")


@dataclass(frozen=True)
class MySQLUrl:
    """`mysql://USER[:PASSWORD]@HOST:PORT/DATABASE`, parsed; the password never printed."""

    user: str
    password: str
    host: str
    port: int
    database: str

    @classmethod
    def parse(cls, url: str) -> MySQLUrl:
        p = urlparse(url)
        redact.remember(p.password and unquote(p.password), p.password)
        if p.scheme != "mysql" or not p.hostname or not p.path.strip("/") or not p.username:
            raise ConfigError(
                f"--mysql-url must look like mysql://USER[:PASSWORD]@HOST:PORT/DATABASE, "
                f"got {mask_url(url)!r}"
            )
        try:
            port = p.port or 3306
        except ValueError as exc:
            raise ConfigError(f"--mysql-url has a bad port: {mask_url(url)!r}") from exc
        database = p.path.strip("/")
        if not re.fullmatch(r"[A-Za-z0-9_$]+", database):
            raise ConfigError(f"--mysql-url database name {database!r} is not a plain identifier")
        return cls(unquote(p.username), unquote(p.password or ""), p.hostname, port, database)

    def __repr__(self) -> str:
        pw = f":{MASK}" if self.password else ""
        return f"mysql://{self.user}{pw}@{self.host}:{self.port}/{self.database}"

    def with_database(self, database: str) -> MySQLUrl:
        return dataclasses.replace(self, database=database)


def mask_url(url: str) -> str:
    """The URL with its password (if any, user or not) replaced by ***: everything from the
    user's colon to the last @, so that an unencoded / or @ in a password cannot leak a part."""
    return re.sub(r"(//[^:/@]*:).*@", rf"\g<1>{MASK}@", url)


_UNITS = {"m": 1, "h": 60, "d": 24 * 60}


def parse_duration_minutes(text: str | None, source: str) -> int | None:
    """'90m', '6h', '7d' -> minutes; None, '' or 'off' -> None (off). Whole minutes: totals are
    per minute, so a finer horizon would mean nothing."""
    if text is None or text.strip().lower() in ("", "off"):
        return None
    m = re.fullmatch(r"\s*(\d+)\s*([mhd])\s*", text.lower())
    # At most 100 years: beyond that every minute a line can name is inside it anyway.
    if not m or not 1 <= int(m.group(1)) * _UNITS[m.group(2)] <= 100 * 366 * 24 * 60:
        raise ConfigError(f"{source} takes a whole number of minutes, hours or days such as "
                          f"90m, 6h or 7d, up to 100 years (or 'off'), got {text!r}")
    return int(m.group(1)) * _UNITS[m.group(2)]


@functools.lru_cache(maxsize=8)
def _load_client_properties(path: str) -> ClientProperties:
    """Read once per process: the file is consulted for bootstrap.servers and again for its
    clients, and its INFO/DEBUG lines about dropped keys should say so once."""
    return load_client_properties(path)


def _line_format(s) -> LineFormat:
    """The counting flags of `s` as one validated LineFormat; a mistake is a ConfigError."""
    try:
        return LineFormat.from_flags(s.level, s.timezone, s.line_regex, s.time_pattern,
                                     s.json_line_field, s.json_time_field, s.json_level_field,
                                     getattr(s, "continuation_lines", "dlq"))
    except FormatError as exc:
        raise ConfigError(str(exc)) from None


def parse_kafka_config(items: tuple[str, ...]) -> dict[str, str]:
    """`("security.protocol=SASL_SSL", ...)` -> dict; a bad item is a ConfigError."""
    out: dict[str, str] = {}
    for n, item in enumerate(items, 1):
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            # The item itself is not echoed: it may be the tail of a password.
            raise ConfigError(f"--kafka-config item {n} of {len(items)} is not KEY=VALUE "
                              f"(in LOGCOUNT_KAFKA_CONFIG, items are separated by newlines, or "
                              f"by commas when there is no newline)")
        out[key.strip()] = value
    return out


def _masked_config(items: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(
        f"{k}={MASK}" if is_secret_key(k) else f"{k}={v}"
        for k, v in (i.partition("=")[::2] for i in items)
    )


class _Settings:
    """Shared behaviour: masked repr, parsed client config."""

    def __repr__(self) -> str:
        parts = []
        for f in dataclasses.fields(self):  # type: ignore[arg-type]
            value = getattr(self, f.name)
            if f.metadata.get("secret"):
                value = MASK if value else value
            elif f.name == "kafka_config":
                value = _masked_config(value)
            elif f.name == "mysql_url":
                value = mask_url(value)
            parts.append(f"{f.name}={value!r}")
        return f"{type(self).__name__}({', '.join(parts)})"

    __str__ = __repr__

    @functools.cached_property
    def client_properties(self) -> ClientProperties | None:
        """The --client-config file, read and translated once; its secrets remembered."""
        path = getattr(self, "client_config", None)
        if not path:
            return None
        props = _load_client_properties(path)
        redact.remember(*props.secrets)
        return props

    @property
    def kafka_client_config(self) -> dict[str, str]:
        """librdkafka settings for the driver's and the sink's clients: the --client-config
        file's translation, then --kafka-config (librdkafka's own keys) on top. Secrets are
        remembered so that nothing printed shows them. bootstrap.servers is the settings' own
        (flag, env, then the file's)."""
        props = self.client_properties
        conf = dict(props.rdkafka) if props else {}
        extra = parse_kafka_config(getattr(self, "kafka_config", ()))
        redact.remember(*(v for k, v in extra.items() if is_secret_key(k)))
        conf.update(extra)
        conf.pop("bootstrap.servers", None)
        return conf

    @property
    def spark_kafka_options(self) -> dict[str, str]:
        """The --client-config file, verbatim, for Spark's executors (Java client)."""
        props = self.client_properties
        opts = dict(props.spark_kafka_options) if props else {}
        opts.pop("bootstrap.servers", None)
        return opts


_KAFKA = "127.0.0.1:9092"
_MYSQL = "mysql://root@127.0.0.1:3306/logcount"
_KAFKA_CONFIG_HELP = (
    "a librdkafka setting KEY=VALUE for the driver's and the sink's clients, on top of "
    "--client-config; repeatable; env: comma-separated"
)
_CLIENT_CONFIG_HELP = (
    "a Java Kafka client properties file (the one kafka-console-consumer --consumer.config "
    "takes: security.protocol, sasl.jaas.config, ssl.truststore.*...) for every Kafka client: "
    "verbatim for Spark's executors, translated for librdkafka; its bootstrap.servers applies "
    "when no flag or env gives one"
)


@dataclass(frozen=True, repr=False)
class RunSettings(_Settings):
    """`logcount run`: the Spark stage."""

    once: bool = field(
        default=False, metadata=opt("process what is readable at start, commit, exit")
    )
    bootstrap_servers: str = field(default=_KAFKA, metadata=opt("Kafka bootstrap servers"))
    input_topic: str = field(default="logs", metadata=opt("topic of raw log lines"))
    output_topic: str = field(
        default="error-counts", metadata=opt("compacted topic of per-minute totals")
    )
    dlq_topic: str = field(default="logs-dlq", metadata=opt("topic of malformed lines"))
    group_id: str = field(
        default="logcount", metadata=opt("consumer group that holds the committed input offsets")
    )
    transactional_id: str | None = field(
        default=None,
        metadata=opt("fixed transactional.id; a restart fences the previous instance "
                     "(default: GROUP_ID-stage, so stages of different groups never fence "
                     "each other)"),
    )
    master: str = field(default="local[*]", metadata=opt("Spark master: local[N] or spark://..."))
    level: str = field(default="ERROR", metadata=opt(
        "the log level to count, or a comma-separated list counted together "
        "(ERROR,FATAL,CRITICAL); compared case-insensitively", metavar="LEVELS"))
    timezone: str = field(default="UTC", metadata=opt(
        "the zone of timestamps that carry none: an IANA name (Europe/Paris) or +HH:MM (west of "
        "UTC: --timezone=-05:00, with '='); output minutes are UTC", metavar="ZONE"))
    line_regex: str | None = field(default=None, metadata=opt(
        "a Java regex with named groups time and level, matched at the start of each line, "
        "instead of the default line rule", metavar="REGEX"))
    time_pattern: str | None = field(default=None, metadata=opt(
        "a Spark datetime pattern for times that are not ISO 8601 (yy/MM/dd HH:mm:ss; "
        "[ ] an optional section): the letters README's Your log format lists",
        metavar="PATTERN"))
    json_line_field: str | None = field(default=None, metadata=opt(
        "each record is a JSON object whose string field PATH is the log line (Filebeat and "
        "Vector: message; Fluent Bit and Docker: log)", metavar="PATH"))
    json_time_field: str | None = field(default=None, metadata=opt(
        "structured JSON logs: the time field (ISO 8601 text, --time-pattern text, or epoch "
        "seconds or milliseconds); PATH is a literal key first, then a dotted path",
        metavar="PATH"))
    json_level_field: str | None = field(default=None, metadata=opt(
        "structured JSON logs: the level field (text or number)", metavar="PATH"))
    continuation_lines: Literal["dlq", "skip"] = field(default="dlq", metadata=opt(
        "stack-trace continuation lines (a line the line rule refuses that starts with a "
        "space or tab, Caused by:, Traceback, an exception's name...: docs/contract.md): dlq "
        "sends them to the DLQ as malformed; skip takes them as part of the event before "
        "them, neither counted nor malformed"))
    trigger_interval: float = field(
        default=1.0, metadata=opt("seconds to sleep when there is nothing new to read",
                                 **POSITIVE)
    )
    # Pacing (CPU against Kafka Streams): a caught-up stage otherwise runs a Spark job per ~100 ms
    # of input, and each pays a fixed ~85 ms of CPU whatever it holds.
    # Figures: docs/tuning.md#pacing
    min_batch_interval: float = field(
        default=0.0, metadata=opt("pacing: at least this many seconds from one batch's start to "
                                  "the next while the stage is caught up, so a steady input "
                                  "runs fewer, fuller batches (less CPU, up to this much more "
                                  "latency); a backlog still runs back to back; 0: no pacing",
                                  lo=0, hi=60))
    max_records_per_batch: int = field(
        default=2_000_000, metadata=opt("cap on input records per batch, spread over partitions (a "
                                       "process's first batches ramp up to it: 2000, 20000, ...)",
                                       **AT_LEAST_1)
    )
    starting_offsets: Literal["earliest", "latest"] = field(
        default="earliest", metadata=opt("where to start when the group has no committed offset")
    )
    delivery: Literal["exactly-once", "at-least-once"] = field(
        default="exactly-once",
        metadata=opt("at-least-once: no transaction, offsets committed after (benchmarks, tests)"),
    )
    input_partitions: int = field(
        default=4, metadata=opt("partitions of the input topic when the stage creates it",
                                **AT_LEAST_1)
    )
    # One partition each by default: every partition a transaction writes costs an entry and a
    # commit marker, so copying the input's count (256) made a commit take seconds. Only for
    # topics the stage creates: an existing one is kept (a compacted table is never repartitioned).
    # Figures: docs/tuning.md#output-partitions
    output_partitions: int = field(
        default=1, metadata=opt("partitions of the output topic when the stage creates it",
                                **AT_LEAST_1)
    )
    dlq_partitions: int = field(
        default=1, metadata=opt("partitions of the DLQ topic when the stage creates it",
                                **AT_LEAST_1)
    )
    max_malformed_per_batch: int = field(
        default=50_000,
        metadata=opt("malformed lines one batch may carry to the DLQ; past it the batch is cut",
                     **AT_LEAST_1),
    )
    startup_timeout: float = field(
        default=60.0, metadata=opt("seconds to keep retrying an unreachable broker at start",
                                  **POSITIVE)
    )
    metrics_port: int = field(
        default=9108, metadata=opt("port of /metrics and /healthz (0: off)", **PORT)
    )
    health_stall_seconds: float = field(
        default=300.0, metadata=opt("/healthz fails when no batch commits this long under lag",
                                   **POSITIVE)
    )
    # 0 by default: a refusal at a terminal (or in a test) should be one line at once. Under a
    # supervisor, a hold of two scrape intervals lets Prometheus see why the stage is down
    # (deploy/prometheus/alerts.yml), and it slows a restart loop that cannot succeed.
    refusal_hold_seconds: float = field(
        default=0.0, metadata=opt("when the state check refuses to run (exit 2), keep /metrics "
                                  "up this long first, with logcount_stage_start_refused 1",
                                  lo=0))
    replication_factor: int | None = field(
        default=None, metadata=opt("replication factor of the topics the stage creates "
                                   "(default: the cluster's default.replication.factor)",
                                   metavar="N", lo=1))
    lateness_horizon: str | None = field(
        default=None,
        metadata=opt("count lines at most this far behind the newest minute counted (e.g. 90m, "
                     "6h, 7d); older lines go to the DLQ as 'late' and their minutes leave "
                     "memory (default: off, every line counts)", metavar="DURATION"),
    )
    client_config: str | None = field(
        default=None, metadata=opt(_CLIENT_CONFIG_HELP, metavar="PATH"))
    kafka_config: tuple[str, ...] = field(default=(), metadata=opt(_KAFKA_CONFIG_HELP))

    @property
    def txn_id(self) -> str:
        """The transactional.id in use: the flag's, or one derived from the group id."""
        return self.transactional_id or f"{self.group_id}-stage"

    @property
    def horizon_minutes(self) -> int | None:
        return parse_duration_minutes(self.lateness_horizon, "--lateness-horizon")

    @property
    def line_format(self) -> LineFormat:
        """What decides what a record counts as (logcount/formats/spec.py): the state's identity."""
        return _line_format(self)

    def validate(self) -> RunSettings:
        self.line_format  # noqa: B018 - validates the counting settings
        if not (self.master.startswith(("local", "spark://"))):
            raise ConfigError(f"--master must be local[...] or spark://..., got {self.master!r}")
        if len({self.input_topic, self.output_topic, self.dlq_topic}) != 3:
            raise ConfigError("--input-topic, --output-topic and --dlq-topic must differ")
        self.kafka_client_config  # noqa: B018 - validates KEY=VALUE items and --client-config
        self.horizon_minutes  # noqa: B018 - validates the duration
        if self.min_batch_interval >= self.health_stall_seconds:
            # /healthz would call a paced stage with lag stalled between two of its batches
            raise ConfigError(f"--min-batch-interval ({self.min_batch_interval:g} s) must be "
                              f"below --health-stall-seconds ({self.health_stall_seconds:g} s)")
        return self


@dataclass(frozen=True, repr=False)
class SinkSettings(_Settings):
    """`logcount sink`: the MySQL sink service."""

    once: bool = field(default=False, metadata=opt("drain the topic to its end, then exit"))
    bootstrap_servers: str = field(default=_KAFKA, metadata=opt("Kafka bootstrap servers"))
    topic: str = field(default="error-counts", metadata=opt("the stage's output topic"))
    group_id: str = field(default="logcount-sink", metadata=opt("the sink's consumer group"))
    mysql_url: str = field(
        default=_MYSQL, metadata=opt("mysql://USER[:PASSWORD]@HOST:PORT/DATABASE")
    )
    mysql_tls_ca: str | None = field(
        default=None, metadata=opt("require TLS to MySQL, its certificate verified against this "
                                   "CA (PEM) and its host name", metavar="PATH"))
    create_database: bool = field(
        default=False, metadata=opt("create the database of --mysql-url when it is missing "
                                    "(without it, a missing database is an error: a typo must "
                                    "not fill an empty database nobody reads)"))
    startup_timeout: float = field(
        default=60.0, metadata=opt("seconds to keep retrying an unreachable broker or MySQL at "
                                   "start", **POSITIVE)
    )
    metrics_port: int = field(
        default=9109, metadata=opt("port of /metrics and /healthz (0: off)", **PORT)
    )
    health_stall_seconds: float = field(
        default=300.0, metadata=opt("/healthz fails when nothing is written this long under lag",
                                   **POSITIVE)
    )
    client_config: str | None = field(
        default=None, metadata=opt(_CLIENT_CONFIG_HELP, metavar="PATH"))
    kafka_config: tuple[str, ...] = field(default=(), metadata=opt(_KAFKA_CONFIG_HELP))

    @property
    def mysql(self) -> MySQLUrl:
        url = MySQLUrl.parse(self.mysql_url)
        redact.remember(url.password)
        return url

    def validate(self) -> SinkSettings:
        self.mysql  # noqa: B018 - validates the URL
        if self.mysql_tls_ca is not None and not Path(self.mysql_tls_ca).is_file():
            raise ConfigError(f"--mysql-tls-ca {self.mysql_tls_ca}: no such file")
        self.kafka_client_config  # noqa: B018
        return self


@dataclass(frozen=True, repr=False)
class ProduceSettings(_Settings):
    """`logcount produce`: load log lines into a topic."""

    bootstrap_servers: str = field(default=_KAFKA, metadata=opt("Kafka bootstrap servers"))
    topic: str = field(default="logs", metadata=opt("topic to write the lines to"))
    file: str | None = field(
        default=None, metadata=opt("read lines from this file, '-' for stdin", metavar="PATH")
    )
    synthetic: int | None = field(
        default=None, metadata=opt("generate N synthetic lines instead", metavar="N", lo=0)
    )
    seed: int = field(default=1, metadata=opt("seed of the synthetic generator"))
    partitions: int = field(
        default=4, metadata=opt("partitions when the topic has to be created", **AT_LEAST_1)
    )
    expect: str | None = field(
        default=None, metadata=opt("write the expected per-minute counts (JSON) here",
                                   metavar="PATH")
    )
    shape: str = field(default="seed", metadata=opt(
        "the shape --synthetic lines take: " + ", ".join(SHAPES), metavar="SHAPE"))
    dimensions: bool = field(default=False, metadata=opt(
        "--synthetic records come from a fleet of services (a few busy ones), keyed by their "
        "service, with the hosts, namespaces, containers and loggers each shape writes"))
    expect_group_by: str | None = field(default=None, metadata=opt(
        "--expect writes per-series counts grouped by these dimensions (run's --group-by "
        "syntax), from what the generator wrote", metavar="DIM[,DIM]"))
    level: str = field(default="ERROR", metadata=opt(
        "the levels --expect counts (as run's --level)", metavar="LEVELS"))
    timezone: str = field(default="UTC", metadata=opt(
        "the zone --synthetic writes zone-less shapes' local times in, and --file with --expect "
        "reads them in (as run's --timezone)", metavar="ZONE"))
    line_regex: str | None = field(default=None, metadata=opt(
        "for --file with --expect: as run's --line-regex", metavar="REGEX"))
    time_pattern: str | None = field(default=None, metadata=opt(
        "for --file with --expect: as run's --time-pattern", metavar="PATTERN"))
    json_line_field: str | None = field(default=None, metadata=opt(
        "for --file with --expect: as run's --json-line-field", metavar="PATH"))
    json_time_field: str | None = field(default=None, metadata=opt(
        "for --file with --expect: as run's --json-time-field", metavar="PATH"))
    json_level_field: str | None = field(default=None, metadata=opt(
        "for --file with --expect: as run's --json-level-field", metavar="PATH"))
    client_config: str | None = field(
        default=None, metadata=opt(_CLIENT_CONFIG_HELP, metavar="PATH"))
    kafka_config: tuple[str, ...] = field(default=(), metadata=opt(_KAFKA_CONFIG_HELP))

    @property
    def line_format(self) -> LineFormat:
        """The rule --expect counts a --file by (a --synthetic shape knows its own counts)."""
        return _line_format(self)

    @property
    def group_by_dims(self) -> tuple[tuple[str, str], ...]:
        """--expect-group-by as (name, source) pairs; () without it."""
        if self.expect_group_by is None:
            return ()
        try:
            return parse_group_by(self.expect_group_by)
        except FormatError as exc:
            raise ConfigError(str(exc)) from None

    def validate(self) -> ProduceSettings:
        if self.shape not in SHAPES:
            raise ConfigError(f"--shape must be one of {', '.join(SHAPES)}, got {self.shape!r}")
        if self.file is not None and self.shape != "seed":
            raise ConfigError("--shape is what --synthetic writes; a --file is loaded as it is")
        self.line_format  # noqa: B018 - validates the counting settings
        if (self.file is None) == (self.synthetic is None):
            raise ConfigError("produce needs exactly one of --file PATH or --synthetic N")
        if self.file not in (None, "-"):
            path = Path(self.file)
            if not path.is_file() or not os.access(path, os.R_OK):
                raise ConfigError(f"--file {self.file}: no such readable file")
        if self.dimensions and self.synthetic is None:
            raise ConfigError("--dimensions is what --synthetic writes; a --file is loaded as "
                              "it is")
        if self.expect_group_by is not None:
            if self.expect is None or self.synthetic is None:
                raise ConfigError("--expect-group-by needs --synthetic and --expect: the "
                                  "generator's own records give the series")
            try:
                check_group_by(self.shape, self.group_by_dims, self.dimensions)
            except FormatError as exc:
                raise ConfigError(str(exc)) from None
        if self.expect is not None:
            folder = Path(self.expect).resolve().parent
            if not folder.is_dir() or not os.access(folder, os.W_OK):
                raise ConfigError(f"--expect {self.expect}: folder {folder} does not exist or "
                                  f"is not writable")
        self.kafka_client_config  # noqa: B018
        return self


@dataclass(frozen=True, repr=False)
class StateShowSettings(RunSettings):
    """`logcount state show`: the stage's state, and what a start with these settings would do.
    Takes every flag of `logcount run` (the same command line and environment, the same
    answer); reads only, fences nobody, safe beside a running stage."""

    json: bool = field(default=False, metadata=opt("print the report as JSON, for scripts"))


@dataclass(frozen=True, repr=False)
class DemoSettings(_Settings):
    """`logcount demo`: everything on the embedded stack, then the table and the verdict."""

    lines: int = field(default=200_000, metadata=opt("synthetic lines to produce", **AT_LEAST_1))
    seed: int = field(default=7, metadata=opt("seed of the synthetic generator"))
    master: str = field(default="local[*]", metadata=opt("Spark master"))


@dataclass(frozen=True, repr=False)
class BenchSettings(_Settings):
    """`logcount bench`: the side-by-side benchmark on the embedded stack (with --soak: the
    endurance run)."""

    lines: int = field(default=5_000_000, metadata=opt("synthetic lines in the backlog (N)"))
    out: str = field(default="bench-results", metadata=opt("directory for results.json, "
                                                           "results.md and results.png (with "
                                                           "--soak: soak.*)"))
    seed: int = field(default=1, metadata=opt("seed of the synthetic generator"))
    bootstrap_servers: str | None = field(
        default=None, metadata=opt("use this broker instead of starting the embedded stack"))
    latency_rate: int = field(default=20_000,
                              metadata=opt("lines/s of the steady-state latency producer"))
    latency_seconds: float = field(default=60.0,
                                   metadata=opt("seconds each latency run produces for"))
    latency_warmup_seconds: float = field(
        default=15.0, metadata=opt("seconds produced before the latency measurement starts"))
    latency_repeats: int = field(default=3, metadata=opt(
        "runs of the stage's and Kafka Streams' latency at the latency rate, interleaved; the "
        "goals judge the median p99 and the report shows each run's", lo=1, hi=10))
    large_factor: int = field(default=10, metadata=opt("the RSS run reads this many times N"))
    quix_lines: int | None = field(
        default=None, metadata=opt("lines Quix Streams processes (default: N)", metavar="N"))
    soak: float | None = field(default=None, metadata=opt(
        "run the endurance benchmark instead (logcount/bench/soak.py): the stage at a fixed rate "
        "for MINUTES, sampled; writes soak.json, soak.md and soak.png", metavar="MINUTES",
        **POSITIVE))
    soak_rate: int = field(default=2_000, metadata=opt("lines/s the soak produces", lo=20))
    sample_seconds: float = field(default=15.0, metadata=opt(
        "seconds between the soak's samples", lo=1))

    def validate(self) -> BenchSettings:
        if self.lines < 1000:
            raise ConfigError("--lines must be at least 1000")
        if self.latency_rate < 20 or self.latency_seconds <= 0 or self.latency_warmup_seconds < 0:
            raise ConfigError("--latency-rate must be at least 20, --latency-seconds > 0 and "
                              "--latency-warmup-seconds >= 0")
        if self.large_factor < 1 or (self.quix_lines is not None and self.quix_lines < 1):
            raise ConfigError("--large-factor and --quix-lines must be at least 1")
        return self


@dataclass(frozen=True, repr=False)
class StackSettings(_Settings):
    """`logcount stack up|down|status`."""

    spark_cluster: bool = field(
        default=False, metadata=opt("also a Spark standalone master and two workers")
    )


# --- flags and env ------------------------------------------------------------------------------


def _flag(f: dataclasses.Field) -> str:
    return f.metadata.get("flag") or "--" + f.name.replace("_", "-")


def _env(f: dataclasses.Field) -> str:
    return ENV_PREFIX + f.name.upper()


def _kind(cls: type, f: dataclasses.Field) -> tuple[type, tuple[str, ...] | None]:
    """(base type, choices) of a field, from its annotation."""
    tp = typing.get_type_hints(cls)[f.name]
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        tp = next(a for a in typing.get_args(tp) if a is not type(None))
    if typing.get_origin(tp) is Literal:
        return str, typing.get_args(tp)
    if typing.get_origin(tp) is tuple:
        return tuple, None
    return tp, None


def add_arguments(parser: argparse.ArgumentParser, cls: type) -> None:
    """One flag per field; defaults stay out of argparse so env can fill what flags leave."""
    for f in dataclasses.fields(cls):
        kind, choices = _kind(cls, f)
        meta = f.metadata
        help_text = f"{meta['help']} (env {_env(f)}; default: {f.default!r})"
        if kind is bool:
            parser.add_argument(_flag(f), dest=f.name, action="store_true", default=None,
                                help=help_text)
        elif kind is tuple:
            parser.add_argument(_flag(f), dest=f.name, action="append", default=None,
                                metavar="KEY=VALUE", help=help_text)
        else:
            parser.add_argument(_flag(f), dest=f.name, type=str, default=None, choices=choices,
                                metavar=meta.get("metavar") or (None if choices else "VALUE"),
                                help=help_text)


def _convert(cls: type, f: dataclasses.Field, raw: Any, source: str) -> Any:
    kind, choices = _kind(cls, f)
    if kind is bool:
        if isinstance(raw, bool):
            return raw
        low = str(raw).strip().lower()
        if low in ("1", "true", "yes", "on"):
            return True
        if low in ("0", "false", "no", "off", ""):
            return False
        raise ConfigError(f"{source} must be true or false, got {raw!r}")
    if kind is tuple:
        # From the environment: one item a line, so a value may hold commas (a password);
        # a single line is split on commas, the short form for simple settings.
        text = str(raw)
        parts = text.splitlines() if "\n" in text else text.split(",")
        items = raw if isinstance(raw, list) else [p for p in parts if p.strip()]
        return tuple(items)
    if choices and raw not in choices:
        raise ConfigError(f"{source} must be one of {', '.join(choices)}, got {raw!r}")
    if kind in (int, float):
        try:
            value = kind(str(raw).strip())
        except ValueError:
            what = "a whole number" if kind is int else "a number"
            raise ConfigError(f"{source} must be {what}, got {raw!r}") from None
        if not math.isfinite(value):
            raise ConfigError(f"{source} must be a finite number, got {raw!r}")
        _check_range(f, value, source)
        return value
    return raw


def from_namespace(cls: type, ns: argparse.Namespace | None = None,
                   env: Mapping[str, str] | None = None):
    """Build `cls` from parsed flags, then env, then defaults; validate if it can."""
    env = os.environ if env is None else env
    values = {}
    for f in dataclasses.fields(cls):
        raw = getattr(ns, f.name, None) if ns is not None else None
        source = _flag(f)
        if raw is None and _env(f) in env:
            raw, source = env[_env(f)], _env(f)
        if raw is not None:
            values[f.name] = _convert(cls, f, raw, source)
    if values.get("client_config") and "bootstrap_servers" not in values:
        # The properties file's bootstrap.servers applies when no flag or env gives one.
        found = _load_client_properties(values["client_config"]).bootstrap_servers
        if found:
            values["bootstrap_servers"] = found
    settings = cls(**values)
    validate = getattr(settings, "validate", None)
    return validate() if validate else settings


def reference_markdown() -> str:
    """The README's configuration reference, generated from the settings classes."""
    sections = [
        ("run", RunSettings), ("state show", StateShowSettings), ("sink", SinkSettings),
        ("produce", ProduceSettings), ("demo", DemoSettings), ("bench", BenchSettings),
        ("stack up", StackSettings),
    ]
    out = []
    for name, cls in sections:
        out.append(f"#### `logcount {name}`\n")
        fields = dataclasses.fields(cls)
        if cls is StateShowSettings:  # run's flags, then its own
            out.append("Every flag and variable of `logcount run`, and:\n")
            fields = fields[len(dataclasses.fields(RunSettings)):]
        out.append("| flag | env | default | meaning |")
        out.append("|---|---|---|---|")
        for f in fields:
            default = "" if f.default in (None, ()) else f"`{f.default}`"
            out.append(f"| `{_flag(f)}` | `{_env(f)}` | {default} | {f.metadata['help']} |")
        out.append("")
    out.append("#### Other environment variables\n")
    out.append("| env | meaning |")
    out.append("|---|---|")
    out += [f"| `{k}` | {v} |" for k, v in EXTRA_ENV.items()]
    out.append("")
    return "\n".join(out)


if __name__ == "__main__":
    print(reference_markdown())
