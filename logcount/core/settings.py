"""One frozen settings object per command, read from flags, then `LOGCOUNT_*` env, then defaults.

The commands' settings classes, the groups of settings they share (`Kafka`, `Counting`,
`Service`), and the README's configuration reference (`reference_markdown()`). Each `Setting`
(logcount/core/settings_fields.py) is the single source for its flag, its env variable, its help
text and its line in the reference; a secret is marked where it is declared and masked in
`repr()`, and therefore in every log line that prints settings.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal
from urllib.parse import unquote, urlparse

from logcount.core import redact
from logcount.core.client_properties import ClientProperties, load_client_properties
from logcount.core.client_properties.secrets import is_secret_key
from logcount.core.errors import ConfigError
from logcount.core.redact import MASK
from logcount.core.settings_fields import (
    AT_LEAST_1,
    ENV_PREFIX,
    PORT,
    POSITIVE,
    Setting,
    Settings,
    add_arguments,
    command,
    env_of,
    flag_of,
    read,
)
from logcount.formats.shapes import SHAPES
from logcount.formats.spec import FormatError, LineFormat

__all__ = [
    "DemoSettings",
    "ENV_PREFIX",
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
                                     s.json_line_field, s.json_time_field, s.json_level_field)
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


class _Settings(Settings):
    """What the commands share beyond the framework: the Kafka clients' settings, from
    --client-config and --kafka-config, for the commands that take them."""

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


class Kafka:
    """The Kafka client group: where the cluster is and how every client of a command reaches
    it (run, state show, sink and produce; bench has a bootstrap_servers of its own)."""

    bootstrap_servers = Setting(str, _KAFKA, "Kafka bootstrap servers")
    client_config = Setting(str | None, None, (
        "a Java Kafka client properties file (the one kafka-console-consumer --consumer.config "
        "takes: security.protocol, sasl.jaas.config, ssl.truststore.*...) for every Kafka "
        "client: verbatim for Spark's executors, translated for librdkafka; its "
        "bootstrap.servers applies when no flag or env gives one"), metavar="PATH")
    kafka_config = Setting(tuple[str, ...], (), (
        "a librdkafka setting KEY=VALUE for the driver's and the sink's clients, on top of "
        "--client-config; repeatable; env: comma-separated"), secret=_masked_config)


class Counting:
    """The counting group: what a line counts as (logcount/formats/spec.py), for run and for
    produce's --expect, which say so in their own words."""

    level = Setting(str, "ERROR", "the log level to count, or a comma-separated list counted "
                    "together (ERROR,FATAL,CRITICAL); compared case-insensitively",
                    metavar="LEVELS")
    timezone = Setting(str, "UTC", "the zone of timestamps that carry none: an IANA name "
                       "(Europe/Paris) or +HH:MM; output minutes are UTC", metavar="ZONE")
    line_regex = Setting(str | None, None, "a Java regex with named groups time and level, "
                         "matched at the start of each line, instead of the default line rule",
                         metavar="REGEX")
    time_pattern = Setting(str | None, None, "a Spark datetime pattern (yy/MM/dd HH:mm:ss) for "
                           "times that are not ISO 8601", metavar="PATTERN")
    json_line_field = Setting(str | None, None, "each record is a JSON object whose string "
                              "field PATH is the log line (Filebeat and Vector: message; Fluent "
                              "Bit and Docker: log)", metavar="PATH")
    json_time_field = Setting(str | None, None, "structured JSON logs: the time field (ISO 8601 "
                              "text, --time-pattern text, or epoch seconds or milliseconds); "
                              "PATH is a literal key first, then a dotted path", metavar="PATH")
    json_level_field = Setting(str | None, None, "structured JSON logs: the level field (text or "
                               "number)", metavar="PATH")


class Service:
    """The service group: a long-running command's patience at start and its /metrics and
    /healthz (run and sink, each with its own port and words)."""

    startup_timeout = Setting(float, 60.0, "seconds to keep retrying an unreachable broker at "
                              "start", **POSITIVE)
    metrics_port = Setting(int, 9108, "port of /metrics and /healthz (0: off)", **PORT)
    health_stall_seconds = Setting(float, 300.0, "/healthz fails when no batch commits this long "
                                   "under lag", **POSITIVE)


@command
class RunSettings(_Settings):
    """`logcount run`: the Spark stage."""

    once = Setting(bool, False, "process what is readable at start, commit, exit")
    bootstrap_servers = Kafka.bootstrap_servers
    input_topic = Setting(str, "logs", "topic of raw log lines")
    output_topic = Setting(str, "error-counts", "compacted topic of per-minute totals")
    dlq_topic = Setting(str, "logs-dlq", "topic of malformed lines")
    group_id = Setting(str, "logcount", "consumer group that holds the committed input offsets")
    transactional_id = Setting(str | None, None, "fixed transactional.id; a restart fences the "
                               "previous instance (default: GROUP_ID-stage, so stages of "
                               "different groups never fence each other)")
    master = Setting(str, "local[*]", "Spark master: local[N] or spark://...")
    level = Counting.level
    timezone = Counting.timezone
    line_regex = Counting.line_regex
    time_pattern = Counting.time_pattern
    json_line_field = Counting.json_line_field
    json_time_field = Counting.json_time_field
    json_level_field = Counting.json_level_field
    trigger_interval = Setting(float, 1.0, "seconds to sleep when there is nothing new to read",
                               **POSITIVE)
    # Pacing: a caught-up stage otherwise runs a Spark job per ~100 ms of input, and each pays
    # a fixed ~85 ms of CPU whatever it holds.
    min_batch_interval = Setting(float, 0.0, "pacing: at least this many seconds from one "
                                 "batch's start to the next while the stage is caught up, so a "
                                 "steady input runs fewer, fuller batches (less CPU, up to this "
                                 "much more latency); a backlog still runs back to back; 0: no "
                                 "pacing", lo=0, hi=60)
    max_records_per_batch = Setting(int, 2_000_000, "cap on input records per batch, spread over "
                                    "partitions (a process's first batches ramp up to it: 2000, "
                                    "20000, ...)", **AT_LEAST_1)
    starting_offsets = Setting(Literal["earliest", "latest"], "earliest",
                               "where to start when the group has no committed offset")
    delivery = Setting(Literal["exactly-once", "at-least-once"], "exactly-once",
                       "at-least-once: no transaction, offsets committed after (benchmarks, "
                       "tests)")
    input_partitions = Setting(int, 4, "partitions of the input topic when the stage creates it",
                               **AT_LEAST_1)
    # One partition each by default: the output is a table of minutes (a few hundred records a
    # batch) and the DLQ a trickle; every partition a transaction writes to costs an
    # AddPartitionsToTxn entry and a commit marker, so copying the input's count (256 on a
    # production log topic) made one commit take seconds. Only used when the stage
    # creates the topic: an existing one is used as it is (a compacted table is never
    # repartitioned: its keys would move to other partitions, and a reader could then take an
    # older total in one partition for the last one).
    output_partitions = Setting(int, 1, "partitions of the output topic when the stage creates "
                                "it", **AT_LEAST_1)
    dlq_partitions = Setting(int, 1, "partitions of the DLQ topic when the stage creates it",
                             **AT_LEAST_1)
    max_malformed_per_batch = Setting(int, 50_000, "malformed lines one batch may carry to the "
                                      "DLQ; past it the batch is cut", **AT_LEAST_1)
    startup_timeout = Service.startup_timeout
    metrics_port = Service.metrics_port
    health_stall_seconds = Service.health_stall_seconds
    # 0 by default: a refusal at a terminal (or in a test) should be one line at once. Under a
    # supervisor, a hold of two scrape intervals lets Prometheus see why the stage is down
    # (deploy/prometheus/alerts.yml), and it slows a restart loop that cannot succeed.
    refusal_hold_seconds = Setting(float, 0.0, "when the state check refuses to run (exit 2), "
                                   "keep /metrics up this long first, with "
                                   "logcount_stage_start_refused 1", lo=0)
    replication_factor = Setting(int | None, None, "replication factor of the topics the stage "
                                 "creates (default: the cluster's default.replication.factor)",
                                 metavar="N", lo=1)
    lateness_horizon = Setting(str | None, None, "count lines at most this far behind the newest "
                               "minute counted (e.g. 90m, 6h, 7d); older lines go to the DLQ as "
                               "'late' and their minutes leave memory (default: off, every line "
                               "counts)", metavar="DURATION")
    client_config = Kafka.client_config
    kafka_config = Kafka.kafka_config

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


@command
class SinkSettings(_Settings):
    """`logcount sink`: the MySQL sink service."""

    once = Setting(bool, False, "drain the topic to its end, then exit")
    bootstrap_servers = Kafka.bootstrap_servers
    topic = Setting(str, "error-counts", "the stage's output topic")
    group_id = Setting(str, "logcount-sink", "the sink's consumer group")
    mysql_url = Setting(str, _MYSQL, "mysql://USER[:PASSWORD]@HOST:PORT/DATABASE",
                        secret=mask_url)
    mysql_tls_ca = Setting(str | None, None, "require TLS to MySQL, its certificate verified "
                           "against this CA (PEM) and its host name", metavar="PATH")
    create_database = Setting(bool, False, "create the database of --mysql-url when it is "
                              "missing (without it, a missing database is an error: a typo "
                              "must not fill an empty database nobody reads)")
    startup_timeout = Service.startup_timeout(
        help="seconds to keep retrying an unreachable broker or MySQL at start")
    metrics_port = Service.metrics_port(default=9109)
    health_stall_seconds = Service.health_stall_seconds(
        help="/healthz fails when nothing is written this long under lag")
    client_config = Kafka.client_config
    kafka_config = Kafka.kafka_config

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


@command
class ProduceSettings(_Settings):
    """`logcount produce`: load log lines into a topic."""

    bootstrap_servers = Kafka.bootstrap_servers
    topic = Setting(str, "logs", "topic to write the lines to")
    file = Setting(str | None, None, "read lines from this file, '-' for stdin", metavar="PATH")
    synthetic = Setting(int | None, None, "generate N synthetic lines instead", metavar="N",
                        lo=0)
    seed = Setting(int, 1, "seed of the synthetic generator")
    partitions = Setting(int, 4, "partitions when the topic has to be created", **AT_LEAST_1)
    expect = Setting(str | None, None, "write the expected per-minute counts (JSON) here",
                     metavar="PATH")
    shape = Setting(str, "seed", "the shape --synthetic lines take: " + ", ".join(SHAPES),
                    metavar="SHAPE")
    level = Counting.level(help="the levels --expect counts (as run's --level)")
    timezone = Counting.timezone(
        help="the zone --synthetic writes zone-less shapes' local times in, and --file with "
             "--expect reads them in (as run's --timezone)")
    line_regex = Counting.line_regex(help="for --file with --expect: as run's --line-regex")
    time_pattern = Counting.time_pattern(help="for --file with --expect: as run's --time-pattern")
    json_line_field = Counting.json_line_field(
        help="for --file with --expect: as run's --json-line-field")
    json_time_field = Counting.json_time_field(
        help="for --file with --expect: as run's --json-time-field")
    json_level_field = Counting.json_level_field(
        help="for --file with --expect: as run's --json-level-field")
    client_config = Kafka.client_config
    kafka_config = Kafka.kafka_config

    @property
    def line_format(self) -> LineFormat:
        """The rule --expect counts a --file by (a --synthetic shape knows its own counts)."""
        return _line_format(self)

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
        if self.expect is not None:
            folder = Path(self.expect).resolve().parent
            if not folder.is_dir() or not os.access(folder, os.W_OK):
                raise ConfigError(f"--expect {self.expect}: folder {folder} does not exist or "
                                  f"is not writable")
        self.kafka_client_config  # noqa: B018
        return self


@command
class StateShowSettings(RunSettings):
    """`logcount state show`: the stage's state, and what a start with these settings would do.
    Takes every flag of `logcount run` (the same command line and environment, the same
    answer); reads only, fences nobody, safe beside a running stage."""

    json = Setting(bool, False, "print the report as JSON, for scripts")


@command
class DemoSettings(_Settings):
    """`logcount demo`: everything on the embedded stack, then the table and the verdict."""

    lines = Setting(int, 200_000, "synthetic lines to produce", **AT_LEAST_1)
    seed = Setting(int, 7, "seed of the synthetic generator")
    master = Setting(str, "local[*]", "Spark master")


@command
class BenchSettings(_Settings):
    """`logcount bench`: the side-by-side benchmark on the embedded stack (with --soak: the
    endurance run)."""

    lines = Setting(int, 5_000_000, "synthetic lines in the backlog (N)")
    out = Setting(str, "bench-results", "directory for results.json, results.md and results.png "
                  "(with --soak: soak.*)")
    seed = Setting(int, 1, "seed of the synthetic generator")
    bootstrap_servers = Setting(str | None, None,
                                "use this broker instead of starting the embedded stack")
    latency_rate = Setting(int, 20_000, "lines/s of the steady-state latency producer")
    latency_seconds = Setting(float, 60.0, "seconds each latency run produces for")
    latency_warmup_seconds = Setting(float, 15.0, "seconds produced before the latency "
                                     "measurement starts")
    latency_repeats = Setting(int, 3, "runs of the stage's and Kafka Streams' latency at the "
                              "latency rate, interleaved; the goals judge the median p99 and the "
                              "report shows each run's", lo=1, hi=10)
    large_factor = Setting(int, 10, "the RSS run reads this many times N")
    quix_lines = Setting(int | None, None, "lines Quix Streams processes (default: N)",
                         metavar="N")
    soak = Setting(float | None, None, "run the endurance benchmark instead "
                   "(logcount/bench/soak.py): the stage at a fixed rate for MINUTES, sampled; "
                   "writes soak.json, soak.md and soak.png", metavar="MINUTES", **POSITIVE)
    soak_rate = Setting(int, 2_000, "lines/s the soak produces", lo=20)
    sample_seconds = Setting(float, 15.0, "seconds between the soak's samples", lo=1)

    def validate(self) -> BenchSettings:
        if self.lines < 1000:
            raise ConfigError("--lines must be at least 1000")
        if self.latency_rate < 20 or self.latency_seconds <= 0 or self.latency_warmup_seconds < 0:
            raise ConfigError("--latency-rate must be at least 20, --latency-seconds > 0 and "
                              "--latency-warmup-seconds >= 0")
        if self.large_factor < 1 or (self.quix_lines is not None and self.quix_lines < 1):
            raise ConfigError("--large-factor and --quix-lines must be at least 1")
        return self


@command
class StackSettings(_Settings):
    """`logcount stack up|down|status`."""

    spark_cluster = Setting(bool, False, "also a Spark standalone master and two workers")


# --- reading and the reference -----------------------------------------------------------------


def from_namespace(cls: type, ns: argparse.Namespace | None = None,
                   env: Mapping[str, str] | None = None):
    """Build `cls` from parsed flags, then env, then defaults; validate if it can."""
    values = read(cls, ns, os.environ if env is None else env)
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
            out.append(f"| `{flag_of(f)}` | `{env_of(f)}` | {default} | {f.metadata['help']} |")
        out.append("")
    out.append("#### Other environment variables\n")
    out.append("| env | meaning |")
    out.append("|---|---|")
    out += [f"| `{k}` | {v} |" for k, v in EXTRA_ENV.items()]
    out.append("")
    return "\n".join(out)


if __name__ == "__main__":
    print(reference_markdown())
