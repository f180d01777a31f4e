"""Field groups that commands share. A command's settings class derives from the groups it takes;
a field is declared once here, and a command may declare it again to say it in its own words
(another help or default; its type and place stay)."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from logcount.core import redact
from logcount.core.client_properties import ClientProperties, load_client_properties
from logcount.core.client_properties.secrets import is_secret_key
from logcount.core.errors import ConfigError
from logcount.core.settings.framework import (
    PORT,
    POSITIVE,
    Settings,
    derived,
    opt,
    set_derived,
)
from logcount.core.settings.values import mask_kafka_config, parse_kafka_config
from logcount.formats.spec import DEFAULT_MAX_SERIES, FormatError, LineFormat

_KAFKA = "127.0.0.1:9092"
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


@functools.lru_cache(maxsize=8)
def _load_client_properties(path: str) -> ClientProperties:
    """Read once per process: the file is consulted for bootstrap.servers and again for its
    clients, and its INFO/DEBUG lines about dropped keys should say so once."""
    return load_client_properties(path)


@dataclass(frozen=True, kw_only=True, repr=False)
class KafkaClientFields(Settings):
    """A Kafka client: where the brokers are and how to log in (the properties file, then
    librdkafka's own keys on top)."""

    bootstrap_servers: str = field(default=_KAFKA, metadata=opt("Kafka bootstrap servers"))
    client_config: str | None = field(
        default=None, metadata=opt(_CLIENT_CONFIG_HELP, metavar="PATH"))
    kafka_config: tuple[str, ...] = field(
        default=(), metadata=opt(_KAFKA_CONFIG_HELP, secret=mask_kafka_config))

    @classmethod
    def complete(cls, values: dict[str, Any]) -> None:
        super().complete(values)
        if values.get("client_config") and "bootstrap_servers" not in values:
            # The properties file's bootstrap.servers applies when no flag or env gives one.
            found = _load_client_properties(values["client_config"]).bootstrap_servers
            if found:
                values["bootstrap_servers"] = found

    @functools.cached_property
    def client_properties(self) -> ClientProperties | None:
        """The --client-config file, read and translated once; its secrets remembered."""
        if not self.client_config:
            return None
        props = _load_client_properties(self.client_config)
        redact.remember(*props.secrets)
        return props

    # Parsed once at construction (parse_kafka_client): librdkafka settings for the driver's
    # and the sink's clients, and the --client-config file verbatim for Spark's executors.
    kafka_client_config: Mapping[str, str] = derived()
    spark_kafka_options: Mapping[str, str] = derived()

    def parse_kafka_client(self) -> None:
        """Validate and keep the clients' settings: the --client-config file's translation, then
        --kafka-config (librdkafka's own keys) on top. Secrets are remembered so that nothing
        printed shows them. bootstrap.servers is the settings' own (flag, env, then the file's)."""
        props = self.client_properties
        conf = dict(props.rdkafka) if props else {}
        extra = parse_kafka_config(self.kafka_config)
        redact.remember(*(v for k, v in extra.items() if is_secret_key(k)))
        conf.update(extra)
        conf.pop("bootstrap.servers", None)
        opts = dict(props.spark_kafka_options) if props else {}
        opts.pop("bootstrap.servers", None)
        set_derived(self, "kafka_client_config", MappingProxyType(conf))
        set_derived(self, "spark_kafka_options", MappingProxyType(opts))


@dataclass(frozen=True, kw_only=True, repr=False)
class CountingFields(Settings):
    """What a line counts as: its level, its format, its time zone (logcount/formats/spec.py)."""

    level: str = field(default="ERROR", metadata=opt(
        "the log level to count, or a comma-separated list counted together "
        "(ERROR,FATAL,CRITICAL); compared case-insensitively; '*': every level",
        metavar="LEVELS"))
    timezone: str = field(default="UTC", metadata=opt(
        "the zone of timestamps that carry none: an IANA name (Europe/Paris) or +HH:MM (west of "
        "UTC: --timezone=-05:00, with '='); output minutes are UTC", metavar="ZONE"))
    line_regex: str | None = field(default=None, metadata=opt(
        "a Java regex with named groups time and level, matched at the start of each line, "
        "instead of the default line rule", metavar="REGEX"))
    time_pattern: str | None = field(default=None, metadata=opt(
        "a Spark datetime pattern for times that are not ISO 8601 (yy/MM/dd HH:mm:ss; "
        "[ ] an optional section): the letters docs/log-formats.md lists",
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

    # The counting flags as one validated LineFormat, parsed once at construction.
    line_format: LineFormat = derived()

    def parse_line_format(self) -> None:
        """Validate and keep the counting flags as one LineFormat; a mistake is a ConfigError."""
        try:
            # --continuation-lines, --group-by and --max-series are run's own (RunSettings)
            fmt = LineFormat.from_flags(self.level, self.timezone, self.line_regex,
                                        self.time_pattern, self.json_line_field,
                                        self.json_time_field, self.json_level_field,
                                        getattr(self, "continuation_lines", "dlq"),
                                        getattr(self, "group_by", None),
                                        getattr(self, "max_series", DEFAULT_MAX_SERIES))
        except FormatError as exc:
            raise ConfigError(str(exc)) from None
        set_derived(self, "line_format", fmt)


@dataclass(frozen=True, kw_only=True, repr=False)
class ServiceFields(Settings):
    """A long-running process: --once, patience at start, /metrics and /healthz."""

    once: bool = field(
        default=False, metadata=opt("process what is readable at start, commit, exit")
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
