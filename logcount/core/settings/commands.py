"""One settings class per command, composed of the field groups it shares (groups.py) and its
own fields. The order of a command's flags is its `flag_order`, where the fields' own is not it."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from logcount.core import redact
from logcount.core.errors import ConfigError
from logcount.core.settings.framework import (
    AT_LEAST_1,
    PORT,
    POSITIVE,
    Settings,
    derived,
    opt,
    set_derived,
)
from logcount.core.settings.groups import CountingFields, KafkaClientFields, ServiceFields
from logcount.core.settings.values import (
    MySQLUrl,
    mask_url,
    parse_duration_minutes,
    parse_grace_seconds,
    parse_latency_seconds,
    parse_rollups,
)
from logcount.formats.catalogue import DIMENSIONS, SHAPES, check_group_by
from logcount.formats.spec import DEFAULT_MAX_SERIES, FormatError, parse_group_by

_MYSQL = "mysql://root@127.0.0.1:3306/logcount"
# `demo --group-by`: the shape its records take, and its names for the sources that shape writes.
DEMO_SHAPE = "filebeat"
DEMO_DIMENSIONS = {"service": "key", "host": "host.name", "namespace": "kubernetes.namespace",
                   "container": "kubernetes.container.name", "pod": "kubernetes.pod.name",
                   "level": "level"}
MYSQL_NAME_MAX = 64
FINAL_SUFFIX = "-final"  # --final-topic's default: the output topic's name plus this
_TABLE = re.compile(r"[A-Za-z][A-Za-z0-9_]*")


def _dim_pairs(text: str, flag: str) -> tuple[tuple[str, str], ...]:
    """A --group-by-syntax flag as (name, source) pairs: run's parser and rules, every source
    but level and key read as a field path (check_group_by or the demo vouches for it)."""
    try:
        return tuple((d.name, d.source) for d in parse_group_by(text, "json", None, flag))
    except FormatError as exc:
        raise ConfigError(str(exc)) from None


@dataclass(frozen=True, kw_only=True, repr=False)
class RunSettings(ServiceFields, CountingFields, KafkaClientFields):
    """`logcount run`: the Spark stage."""

    flag_order = ("once", "bootstrap_servers", "input_topic", "output_topic", "dlq_topic",
                  "group_id", "transactional_id", "master", CountingFields, "continuation_lines",
                  "group_by", "max_series", "trigger_interval", "min_batch_interval",
                  "target_latency", "max_records_per_batch", "starting_offsets", "delivery",
                  "input_partitions", "output_partitions", "dlq_partitions",
                  "max_malformed_per_batch", "startup_timeout", "metrics_port",
                  "health_stall_seconds", "refusal_hold_seconds", "replication_factor",
                  "lateness_horizon", "emit_final", "final_topic", "rollup", "client_config",
                  "kafka_config")

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
    continuation_lines: Literal["dlq", "skip"] = field(default="dlq", metadata=opt(
        "stack-trace continuation lines (a line the line rule refuses that starts with a "
        "space or tab, Caused by:, Traceback, an exception's name...: docs/contract.md): dlq "
        "sends them to the DLQ as malformed; skip takes them as part of the event before "
        "them, neither counted nor malformed"))
    group_by: str | None = field(default=None, metadata=opt(
        "count per series: up to 3 dimensions, each NAME or NAME=SOURCE, SOURCE a JSON field "
        "path, a --line-regex named group, level or key (the record key); NAME defaults to "
        "the source's last path segment", metavar="DIM[,DIM...]"))
    max_series: int = field(default=DEFAULT_MAX_SERIES, metadata=opt(
        "with --group-by: distinct dimension tuples named; lines of further tuples count under "
        "the overflow series, every dimension __other__", metavar="N", **AT_LEAST_1))
    trigger_interval: float = field(
        default=1.0, metadata=opt("seconds to sleep when there is nothing new to read",
                                 **POSITIVE)
    )
    # A caught-up stage at 0 runs a Spark job per ~100 ms of input, each a fixed ~80 ms of CPU: a
    # core for a per-minute count. One batch a second costs a fraction of that for <= ~1 s more
    # latency; 0 stays the low-latency mode. Figures: docs/tuning.md#pacing
    min_batch_interval: float = field(
        default=1.0, metadata=opt("pacing: at least this many seconds from one batch's start to "
                                  "the next while the stage is caught up, so a steady input "
                                  "runs fewer, fuller batches (less CPU, up to this much more "
                                  "latency); a backlog still runs back to back; 0: no pacing "
                                  "(the low-latency mode)",
                                  lo=0, hi=60))
    target_latency: str | None = field(default=None, metadata=opt(
        "pace a caught-up stage to this latency instead (e.g. 250ms): each batch starts as late "
        "as lets a line written just after the last one began be committed within it, given the "
        "recent batches' lengths; fewer batches than --min-batch-interval 0 at the same "
        "latency, a backlog still back to back (default: off)", metavar="DURATION"))
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

    emit_final: str | None = field(
        default=None,
        metadata=opt("publish each minute's final total once, to --final-topic, when it closes: "
                     "once the input's event time (the oldest of its partitions' newest, a "
                     "partition caught up this long no longer holding it) is this far past the "
                     "minute's end, or, with every partition caught up this long, the wall clock "
                     "(UTC) is; a counted line of a closed minute then goes to the DLQ as 'late' "
                     "(e.g. 30s, 2m, 1h; default: off)", metavar="GRACE"))
    final_topic: str | None = field(
        default=None,
        metadata=opt("with --emit-final: the append-only topic of final records (default: "
                     "OUTPUT_TOPIC-final)", metavar="TOPIC"))
    rollup: str | None = field(
        default=None,
        metadata=opt("with --emit-final: also publish each UTC hour's (1h) and/or day's (1d) "
                     "final totals per series to the final topic, once every minute of it is "
                     "final", metavar="1h[,1d]"))

    horizon_minutes: int | None = derived()  # --lateness-horizon in minutes (None: off)
    target_latency_seconds: float | None = derived()  # --target-latency (None: off)
    grace_seconds: int | None = derived()  # --emit-final in seconds (None: off)
    rollup_minutes: tuple[int, ...] = derived()  # --rollup's windows in minutes, ascending

    @property
    def txn_id(self) -> str:
        """The transactional.id in use: the flag's, or one derived from the group id."""
        return self.transactional_id or f"{self.group_id}-stage"

    @property
    def paced(self) -> bool:
        """A caught-up stage waits a second or so between batches (the default cadence): its
        driver JVM is the paced one (pipeline/spark.py PACED_JVM_OPTIONS). A latency target's
        batches come as often as the low-latency mode's, and its JVM is that mode's."""
        return self.min_batch_interval > 0 and self.target_latency_seconds is None

    def __post_init__(self) -> None:
        """Validate, and parse once what the stage reads: the counting flags, the clients'
        settings, the horizon (in this order, so a mistake's message is the first one's)."""
        self.parse_line_format()
        if not (self.master.startswith(("local", "spark://"))):
            raise ConfigError(f"--master must be local[...] or spark://..., got {self.master!r}")
        if len({self.input_topic, self.output_topic, self.dlq_topic}) != 3:
            raise ConfigError("--input-topic, --output-topic and --dlq-topic must differ")
        self.parse_kafka_client()
        set_derived(self, "horizon_minutes",
                    parse_duration_minutes(self.lateness_horizon, "--lateness-horizon"))
        self._check_emit_final()
        set_derived(self, "target_latency_seconds",
                    parse_latency_seconds(self.target_latency, "--target-latency"))
        if (self.target_latency_seconds or 0) >= self.health_stall_seconds:
            raise ConfigError(f"--target-latency ({self.target_latency}) must be below "
                              f"--health-stall-seconds ({self.health_stall_seconds:g} s)")
        if self.min_batch_interval >= self.health_stall_seconds:
            # /healthz would call a paced stage with lag stalled between two of its batches
            raise ConfigError(f"--min-batch-interval ({self.min_batch_interval:g} s) must be "
                              f"below --health-stall-seconds ({self.health_stall_seconds:g} s)")


    @property
    def final_topic_name(self) -> str | None:
        """The final topic in use (--emit-final), or None when minutes are not closed."""
        if self.grace_seconds is None:
            return None
        return self.final_topic or self.output_topic + FINAL_SUFFIX

    def _check_emit_final(self) -> None:
        set_derived(self, "grace_seconds",
                    parse_grace_seconds(self.emit_final, "--emit-final"))
        set_derived(self, "rollup_minutes", parse_rollups(self.rollup, "--rollup"))
        if self.grace_seconds is None:
            if self.final_topic is not None or self.rollup_minutes:
                raise ConfigError(f"{'--final-topic' if self.final_topic else '--rollup'} needs "
                                  f"--emit-final GRACE")
            return
        if self.delivery != "exactly-once":
            raise ConfigError("--emit-final needs --delivery exactly-once: a final record is "
                              "published once only inside the batch's transaction")
        final = self.final_topic_name
        taken = {self.input_topic, self.output_topic, self.dlq_topic,
                 self.output_topic + "-state"}
        if final in taken:
            raise ConfigError(f"--final-topic {final} is already the input, output, DLQ or state "
                              f"topic; it must be a topic of its own")
        if self.horizon_minutes is not None and self.grace_seconds >= self.horizon_minutes * 60:
            # Minutes leave memory at the horizon: one evicted before it closed would have no
            # final total to publish.
            raise ConfigError(f"--emit-final {self.emit_final} must be shorter than "
                              f"--lateness-horizon {self.lateness_horizon}: minutes leave "
                              f"memory at the horizon, before they could close")


@dataclass(frozen=True, kw_only=True, repr=False)
class SinkSettings(ServiceFields, KafkaClientFields):
    """`logcount sink`: the MySQL sink service."""

    flag_order = ("once", "bootstrap_servers", "topic", "group_id", "mysql_url", "table",
                  "mysql_tls_ca", "create_database", "startup_timeout", "metrics_port",
                  "health_stall_seconds", "client_config", "kafka_config")

    # The service fields, in the sink's own words.
    once: bool = field(default=False, metadata=opt("drain the topic to its end, then exit"))
    topic: str = field(default="error-counts", metadata=opt(
        "the stage's output topic (totals upserted), or its final topic (--emit-final: each "
        "record inserted once as a row)"))
    group_id: str = field(default="logcount-sink", metadata=opt(
        "the sink's consumer group (one a topic)"))
    mysql_url: str = field(
        default=_MYSQL,
        metadata=opt("mysql://USER[:PASSWORD]@HOST:PORT/DATABASE", secret=mask_url)
    )
    table: str = field(default="error_log", metadata=opt(
        "the MySQL table of the totals (letters, digits and _, starting with a letter); with "
        "--group-by output, one column per dimension, all of them in its key; of a final topic, "
        "the minutes' final rows, with NAME_1h and NAME_1d (rollups) and NAME_closed beside it",
        metavar="NAME"))
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

    mysql: MySQLUrl = derived()  # --mysql-url parsed, its password remembered as a secret

    def __post_init__(self) -> None:
        """Validate, and parse once the MySQL URL and the clients' settings."""
        url = MySQLUrl.parse(self.mysql_url)
        redact.remember(url.password)
        set_derived(self, "mysql", url)
        if not _TABLE.fullmatch(self.table):
            raise ConfigError(f"--table {self.table!r}: letters, digits and _, starting with a "
                              f"letter")
        if self.mysql_tls_ca is not None and not Path(self.mysql_tls_ca).is_file():
            raise ConfigError(f"--mysql-tls-ca {self.mysql_tls_ca}: no such file")
        self.parse_kafka_client()


@dataclass(frozen=True, kw_only=True, repr=False)
class ProduceSettings(CountingFields, KafkaClientFields):
    """`logcount produce`: load log lines into a topic."""

    flag_order = ("bootstrap_servers", "topic", "file", "synthetic", "seed", "recent", "partitions",
                  "expect", "shape", "dimensions", "expect_group_by",
                  CountingFields, "client_config", "kafka_config")

    topic: str = field(default="logs", metadata=opt("topic to write the lines to"))
    file: str | None = field(
        default=None, metadata=opt("read lines from this file, '-' for stdin", metavar="PATH")
    )
    synthetic: int | None = field(
        default=None, metadata=opt("generate N synthetic lines instead", metavar="N", lo=0)
    )
    seed: int = field(default=1, metadata=opt("seed of the synthetic generator"))
    recent: int | None = field(default=None, metadata=opt(
        "--synthetic lines of the last MINUTES minutes (UTC), in time order, instead of a day "
        "of 2017 in random order (a stage with --emit-final closes them live)",
        metavar="MINUTES", lo=1, hi=24 * 60))
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
    # The counting fields, in produce's own words: they count a --file for --expect.
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

    group_by_dims: tuple[tuple[str, str], ...] = derived()  # --expect-group-by; () without

    def __post_init__(self) -> None:
        """Validate, and parse once the counting flags, --expect-group-by and the clients'."""
        if self.shape not in SHAPES:
            raise ConfigError(f"--shape must be one of {', '.join(SHAPES)}, got {self.shape!r}")
        if self.file is not None and self.shape != "seed":
            raise ConfigError("--shape is what --synthetic writes; a --file is loaded as it is")
        self.parse_line_format()
        if (self.file is None) == (self.synthetic is None):
            raise ConfigError("produce needs exactly one of --file PATH or --synthetic N")
        if self.file not in (None, "-"):
            path = Path(self.file)
            if not path.is_file() or not os.access(path, os.R_OK):
                raise ConfigError(f"--file {self.file}: no such readable file")
        if self.dimensions and self.synthetic is None:
            raise ConfigError("--dimensions is what --synthetic writes; a --file is loaded as "
                              "it is")
        set_derived(self, "group_by_dims", ())
        if self.expect_group_by is not None:
            if self.expect is None or self.synthetic is None:
                raise ConfigError("--expect-group-by needs --synthetic and --expect: the "
                                  "generator's own records give the series")
            set_derived(self, "group_by_dims",
                        _dim_pairs(self.expect_group_by, "--expect-group-by"))
            try:
                check_group_by(self.shape, self.group_by_dims, self.dimensions)
            except FormatError as exc:
                raise ConfigError(str(exc)) from None
        if self.expect is not None:
            folder = Path(self.expect).resolve().parent
            if not folder.is_dir() or not os.access(folder, os.W_OK):
                raise ConfigError(f"--expect {self.expect}: folder {folder} does not exist or "
                                  f"is not writable")
        self.parse_kafka_client()


@dataclass(frozen=True, kw_only=True, repr=False)
class StateShowSettings(RunSettings):
    """`logcount state show`: the stage's state, and what a start with these settings would do.
    Takes every flag of `logcount run` (the same command line and environment, the same
    answer); reads only, fences nobody, safe beside a running stage."""

    json: bool = field(default=False, metadata=opt("print the report as JSON, for scripts"))


@dataclass(frozen=True, kw_only=True, repr=False)
class DemoSettings(Settings):
    """`logcount demo`: everything on the embedded stack, then the table and the verdict."""

    lines: int = field(default=200_000, metadata=opt("synthetic lines to produce", **AT_LEAST_1))
    seed: int = field(default=7, metadata=opt("seed of the synthetic generator"))
    master: str = field(default="local[*]", metadata=opt("Spark master"))
    group_by: str | None = field(default=None, metadata=opt(
        "count per series instead: Filebeat records of a fleet of services (a few busy ones) "
        "into MySQL table error_log_by_<NAMES>; each DIM is " + ", ".join(DEMO_DIMENSIONS)
        + " (with level: every level, counted apart) or run's NAME=SOURCE",
        metavar="DIM[,DIM...]"))
    emit_final: str | None = field(default=None, metadata=opt(
        "show final minutes instead: lines of the last minutes in time order, the stage run "
        "with --emit-final GRACE until the clock closes the minute after the last line, and "
        "the final topic compared with the generator's counts", metavar="GRACE"))

    # --group-by as run's (name, source) pairs, the demo's names given their sources (() without
    # it), and the MySQL table the demo's totals go to.
    group_by_dims: tuple[tuple[str, str], ...] = derived()
    table: str = derived()

    def __post_init__(self) -> None:
        """Validate, and parse --group-by once."""
        if parse_grace_seconds(self.emit_final, "--emit-final") and self.group_by:
            raise ConfigError("demo: --emit-final shows final minutes of the plain demo; "
                              "leave out --group-by")
        dims = () if self.group_by is None else _dim_pairs(self.group_by, "--group-by")
        set_derived(self, "group_by_dims",
                    tuple((n, DEMO_DIMENSIONS.get(src, src)) for n, src in dims))
        set_derived(self, "table", "_".join(["error_log", "by", *(n for n, _ in dims)])
                    if self.group_by else "error_log")
        known = {*DEMO_DIMENSIONS.values(), *DIMENSIONS[DEMO_SHAPE]}
        for name, source in self.group_by_dims:
            if source not in known:
                raise ConfigError(f"--group-by {name}={source}: the demo's records have "
                                  f"{', '.join(DEMO_DIMENSIONS)} (or a source of theirs: "
                                  f"{', '.join(DIMENSIONS[DEMO_SHAPE])})")
        if len(self.table) > MYSQL_NAME_MAX:
            raise ConfigError(f"--group-by {self.group_by}: the table {self.table} is longer "
                              f"than MySQL's {MYSQL_NAME_MAX} characters; choose shorter NAMEs")


# bench --grouping's parts (logcount/bench/grouping.py), in the order they run.
GROUPING_PARTS = ("shapes", "filebeat", "latency")


# --soak-modes: each cadence's --min-batch-interval (the soak's stage is otherwise at its defaults)
SOAK_MODES = {"defaults": RunSettings.min_batch_interval, "unpaced": 0.0}


@dataclass(frozen=True, kw_only=True, repr=False)
class BenchSettings(Settings):
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
    soak_modes: str = field(default="defaults,unpaced", metadata=opt(
        "with --soak: the stage's cadences to soak, one after the other, each MINUTES long: "
        "defaults (a batch a second when caught up), unpaced (--min-batch-interval 0, the "
        "low-latency mode); with more than one, each writes its soak.* in --out/MODE",
        metavar="MODE[,MODE...]"))
    sample_seconds: float = field(default=15.0, metadata=opt(
        "seconds between the soak's samples", lo=1))
    grouping: bool = field(default=False, metadata=opt(
        "run the --group-by figures instead (logcount/bench/grouping.py): every shape ungrouped "
        "A/B against --ab-base, Filebeat grouped against ungrouped, the latency of 10,000 live "
        "series; writes grouping.json and grouping.md"))
    ab_base: str | None = field(default=None, metadata=opt(
        "with --grouping: a checkout of the code to compare with (the A/B's B side imports "
        "all of its code, pipeline and connectors included: logcount/bench/checkout.py)",
        metavar="DIR"))
    ab_repeats: int = field(default=3, metadata=opt(
        "with --grouping: runs of each side of the A/B and of the Filebeat pair, interleaved",
        lo=1, hi=10))
    grouping_parts: str = field(default=",".join(GROUPING_PARTS), metadata=opt(
        "with --grouping: the parts to run, in their order: shapes (needs --ab-base), filebeat, "
        "latency", metavar="PART[,PART...]"))

    final: bool = field(default=False, metadata=opt(
        "run the --emit-final figures instead (logcount/bench/emit_final.py): at each of "
        "--final-rates, the stage at its defaults without and with --emit-final 1m on lines "
        "stamped with the current time: CPU per line both ways, and each live minute's closed "
        "record's delay past its end + GRACE; writes final.json and final.md"))
    final_rates: str = field(default="2000,20000", metadata=opt(
        "with --final: the rates (lines/s) to run, in this order", metavar="RATE[,RATE...]"))
    final_seconds: float = field(default=180.0, metadata=opt(
        "with --final: seconds of each run's CPU window, after --latency-warmup-seconds",
        **POSITIVE))
    final_minutes: int = field(default=5, metadata=opt(
        "with --final: closed minutes the emit-final run waits for after its warm-up (their "
        "delays are the figures)", lo=1, hi=60))

    target: bool = field(default=False, metadata=opt(
        "run the --target-latency figures instead (logcount/bench/target.py): at each of "
        "--target-rates, Kafka Streams, the stage with --target-latency at Kafka Streams' p99 "
        "of that run, and the stage unpaced: latency, CPU per line and batches; writes "
        "target.json and target.md"))
    target_rates: str = field(default="2000,20000", metadata=opt(
        "with --target: the rates (lines/s) to run, in this order", metavar="RATE[,RATE...]"))

    grouping_part_names: tuple[str, ...] = derived()  # --grouping-parts, in the bench's order
    final_rate_list: tuple[int, ...] = derived()  # --final-rates, parsed
    target_rate_list: tuple[int, ...] = derived()  # --target-rates, parsed
    soak_mode_list: tuple[str, ...] = derived()  # --soak-modes, in the order given

    def __post_init__(self) -> None:
        """Validate, and parse --grouping-parts once."""
        if self.lines < 1000:
            raise ConfigError("--lines must be at least 1000")
        named = [p.strip() for p in self.grouping_parts.split(",")]
        unknown = [p for p in named if p not in GROUPING_PARTS]
        if unknown or not any(named):
            raise ConfigError(f"--grouping-parts {self.grouping_parts!r}: the parts are "
                              f"{', '.join(GROUPING_PARTS)}")
        parts = tuple(p for p in GROUPING_PARTS if p in named)
        set_derived(self, "grouping_part_names", parts)
        set_derived(self, "final_rate_list", _rates(self.final_rates, "--final-rates"))
        set_derived(self, "target_rate_list", _rates(self.target_rates, "--target-rates"))
        modes = tuple(dict.fromkeys(m.strip() for m in self.soak_modes.split(",")))
        if not modes or not set(modes) <= set(SOAK_MODES):
            raise ConfigError(f"--soak-modes {self.soak_modes!r}: one or more of "
                              f"{', '.join(SOAK_MODES)}, comma-separated")
        set_derived(self, "soak_mode_list", modes)
        if self.grouping and "shapes" in parts and not self.ab_base:
            raise ConfigError("--grouping needs --ab-base DIR (a checkout of the code before "
                              "grouping, run as the A/B's B side) unless --grouping-parts "
                              "leaves out shapes")
        if self.latency_rate < 20 or self.latency_seconds <= 0 or self.latency_warmup_seconds < 0:
            raise ConfigError("--latency-rate must be at least 20, --latency-seconds > 0 and "
                              "--latency-warmup-seconds >= 0")
        if self.large_factor < 1 or (self.quix_lines is not None and self.quix_lines < 1):
            raise ConfigError("--large-factor and --quix-lines must be at least 1")


@dataclass(frozen=True, kw_only=True, repr=False)
class StackSettings(Settings):
    """`logcount stack up|down|status`."""

    spark_cluster: bool = field(
        default=False, metadata=opt("also a Spark standalone master and two workers")
    )


def _rates(text: str, flag: str) -> tuple[int, ...]:
    """'2000,20000' -> (2000, 20000): whole lines/s of at least 20."""
    try:
        rates = tuple(int(r) for r in text.split(","))
    except ValueError:
        rates = ()
    if not rates or min(rates) < 20:
        raise ConfigError(f"{flag} {text!r}: whole lines/s of at least 20, comma-separated")
    return rates
