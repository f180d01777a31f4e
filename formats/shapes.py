"""The log shapes real services and shippers put in Kafka, and the `logcount run` flags that
count each (the README's "Your log format" is held to this table by a test).

`SHAPES` names them for `logcount produce --synthetic N --shape SHAPE`; `RUN_FLAGS[shape]` are
the counting flags a stage needs for that shape (the seed shape and the widened default rule's
shapes need none).
"""

from __future__ import annotations

__all__ = ["SHAPES", "RUN_FLAGS"]

# log4j2's default PatternLayout: %d{yyyy-MM-dd HH:mm:ss.SSS} [%t] %-5level %logger{36} - %msg%n
_LOG4J2 = r"(?<time>\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}[.,]\d{1,9}) \[[^\]]*\] +(?<level>[A-Za-z]+)"
# Python's logging with '%(asctime)s - %(name)s - %(levelname)s - %(message)s'
_PYTHON = r"(?<time>\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2},\d{3}) - \S+ - (?<level>[A-Za-z]+) - "
# Spark's own log4j2 layout: %d{yy/MM/dd HH:mm:ss} %p %c{1}: %m%n
_SPARK = r"(?<time>\d{2}/\d{2}/\d{2} \d{2}:\d{2}:\d{2}) (?<level>[A-Za-z]+) "

RUN_FLAGS: dict[str, tuple[str, ...]] = {
    "seed": (),  # YYYY-MM-DD HH:MM:SS LEVEL message
    "kafka": (),  # [2017-07-30 14:09:08,123] ERROR message (kafka.server.KafkaServer)
    "rfc3339": (),  # 2017-07-30T14:09:08.123+08:00 ERROR message
    "log4j2": ("--line-regex", _LOG4J2),
    "python": ("--line-regex", _PYTHON),
    "spark": ("--line-regex", _SPARK, "--time-pattern", "yy/MM/dd HH:mm:ss"),
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
