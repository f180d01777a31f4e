"""The catalogue of log shapes real services and shippers put in Kafka: the `logcount run` flags
that count each (docs/log-formats.md is held to this table by a test), and the sources a shape's
records carry, which a --group-by of that shape may name. Production data, pure: the synthetic
generator that writes these shapes (logcount/formats/shapes.py) builds on it, never the reverse.

`SHAPES` names them; `RUN_FLAGS[shape]` are the counting flags a stage needs for that shape (the
seed shape and the widened default rule's shapes need none). `ZONELESS` are the shapes whose
times carry no zone: the generator writes them in `timezone`'s local time, and the stage needs
the same `--timezone`.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from logcount.formats.spec import FormatError, LineFormat

__all__ = ["SHAPES", "RUN_FLAGS", "TRACE_SHAPES", "ZONELESS", "DIMENSIONS", "run_format",
           "check_group_by"]

# log4j2's default PatternLayout: %d{yyyy-MM-dd HH:mm:ss.SSS} [%t] %-5level %logger{36} - %msg%n
_LOG4J2 = r"(?<time>\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}[.,]\d{1,9}) \[[^\]]*\] +(?<level>[A-Za-z]+)"
# Python's logging with '%(asctime)s - %(name)s - %(levelname)s - %(message)s'
_PYTHON = r"(?<time>\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2},\d{3}) - \S+ - (?<level>[A-Za-z]+) - "
# Spark's own log4j2 layout: %d{yy/MM/dd HH:mm:ss} %p %c{1}: %m%n
_SPARK = r"(?<time>\d{2}/\d{2}/\d{2} \d{2}:\d{2}:\d{2}) (?<level>[A-Za-z]+) "
# MariaDB's error log: "%d-%02d-%02d %2d:%02d:%02d %lu [%s] ", the hour padded with a space
# (2026-11-26  3:34:44) before 10:00, then the thread id and [Note], [Warning] or [ERROR].
_MARIADB = r"(?<time>\d{4}-\d{2}-\d{2} [ \d]\d:\d{2}:\d{2}) \d+ \[(?<level>[A-Za-z]+)\]"

RUN_FLAGS: dict[str, tuple[str, ...]] = {
    "seed": (),  # YYYY-MM-DD HH:MM:SS LEVEL message
    "kafka": (),  # [2017-07-30 14:09:08,123] ERROR message (kafka.server.KafkaServer)
    "rfc3339": (),  # 2017-07-30T14:09:08.123+08:00 ERROR message
    "log4j2": ("--line-regex", _LOG4J2),
    "python": ("--line-regex", _PYTHON),
    "spark": ("--line-regex", _SPARK, "--time-pattern", "yy/MM/dd HH:mm:ss"),
    "mariadb": ("--line-regex", _MARIADB, "--time-pattern", "yyyy-MM-dd [ ]H:mm:ss"),
    "filebeat": ("--json-line-field", "message"),  # Filebeat and Vector
    "fluentbit": ("--json-line-field", "log"),  # Fluent Bit and Docker's json-file log
    "logstash": ("--json-time-field", "@timestamp", "--json-level-field", "level"),
    "ecs-dotted": ("--json-time-field", "@timestamp", "--json-level-field", "log.level"),
    "ecs-nested": ("--json-time-field", "@timestamp", "--json-level-field", "log.level"),
    "zap": ("--json-time-field", "ts", "--json-level-field", "level"),
    # pino's levels are numbers: 50 error, 60 fatal.
    "pino": ("--json-time-field", "time", "--json-level-field", "level", "--level", "50,60"),
}
SHAPES = tuple(RUN_FLAGS)


def run_format(shape: str, **overrides: Any) -> LineFormat:
    """The LineFormat a stage builds from RUN_FLAGS[shape] (`overrides`: more from_flags
    arguments, e.g. timezone or level)."""
    flags = RUN_FLAGS[shape]
    kwargs: dict[str, Any] = {flags[i].removeprefix("--").replace("-", "_"): flags[i + 1]
                              for i in range(0, len(flags), 2)}
    return LineFormat.from_flags(**{**kwargs, **overrides})


# Shapes of programs that log stack traces (the JVM's, Python's): docs/log-formats.md adds
# --continuation-lines skip to RUN_FLAGS for each (the generator's counts are made for it).
TRACE_SHAPES = frozenset({"kafka", "log4j2", "python", "spark"})
# Shapes whose times name no zone: written in the generator's `timezone`, read with --timezone.
ZONELESS = frozenset({"seed", "kafka", "log4j2", "python", "spark", "mariadb", "filebeat",
                      "fluentbit"})

# The sources each shape's records carry (written with --dimensions) besides `level` and `key`:
# field paths of the JSON shapes, the `logger` a --line-regex group can take in the text ones.
# Filebeat's are its add_kubernetes_metadata names, Fluent Bit's its kubernetes filter's.
DIMENSIONS: dict[str, tuple[str, ...]] = {
    "seed": (), "kafka": ("logger",), "rfc3339": (), "log4j2": ("logger",),
    "python": ("logger",), "spark": ("logger",), "mariadb": (),
    "filebeat": ("host.name", "kubernetes.namespace", "kubernetes.container.name",
                 "kubernetes.pod.name"),
    "fluentbit": ("kubernetes.namespace_name", "kubernetes.container_name",
                  "kubernetes.pod_name", "kubernetes.host"),
    "logstash": ("logger_name",), "ecs-dotted": ("service.name", "host.name", "log.logger"),
    "ecs-nested": ("service.name", "host.name", "log.logger"), "zap": ("logger",),
    "pino": ("hostname",),
}


def check_group_by(shape: str, dims: Iterable[tuple[str, str]], dimensions: bool) -> None:
    """--expect-group-by: each source must be one `shape`'s records carry (DIMENSIONS, level,
    key): the generator knows those values without parsing; any other it cannot vouch for."""
    for name, source in dims:
        if source == "level":
            continue
        known = ("key", *DIMENSIONS[shape])
        if source not in known:
            raise FormatError(f"--expect-group-by {name}={source}: --shape {shape} writes "
                              f"{', '.join(known)} (and level)")
        if not dimensions:
            raise FormatError(f"--expect-group-by {name}={source}: the records have dimensions "
                              f"only with --dimensions")
