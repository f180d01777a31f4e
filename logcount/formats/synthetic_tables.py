"""What the synthetic generator (logcount/formats/shapes.py) writes besides well-formed records:
the malformed records of each shape and the level words each shape writes, with weights."""

from __future__ import annotations

import json

__all__ = ["MALFORMED", "LEVEL_WORDS"]


def _js(obj: object) -> bytes:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode()


# Malformed records: realistic ways each shape goes wrong. A line shape meets stack traces,
# banners and impossible dates; a JSON shape also meets broken JSON, other JSON values and
# missing or mistyped fields.
_GARBAGE = (b"", b"\x00\x01\x02binary garbage\xff\xfe")
_NOT_JSON = (
    b'{"level":"error","ts":15013',  # cut off
    b"[1,2,3]",
    b'"just a string"',
    b"null",
    b"2017-07-30 14:09:08 ERROR a plain line in a JSON topic",
)


def _jsons(*objs: object) -> tuple[bytes, ...]:
    return tuple(_js(o) for o in objs)


MALFORMED: dict[str, tuple[bytes, ...]] = {
    "kafka": _GARBAGE + (
        b"[2017-02-29 10:00:00,000] ERROR 2017 is not a leap year (kafka.log.LogManager)",
        b"\tat kafka.server.KafkaApis.handle(KafkaApis.scala:175)",
        b"org.apache.kafka.common.errors.TimeoutException: Expiring 3 record(s)",
        b"[2017-07-30 14:09:08,123]",
        b"[2017-07-30 14:09:08,123 ERROR no closing bracket",
        b"[2017-07-30 14:09,123] ERROR no seconds",
    ),
    "rfc3339": _GARBAGE + (
        b"2017-07-30T14:09:08.123+25:00 ERROR an offset past 18 hours",
        b"2017-07-30T24:00:00Z ERROR hour 24",
        b"2017-07-30T14:09:08.1234567890Z ERROR ten fraction digits",
        b"2017-07-30T14:09:08+08 ERROR an offset of hours only",
        b"2017-07-30T14:09:08Z",
        b"2017-07-30T14:09:08.123+08:00 \xe2\x9c\x93 the level is no word",
    ),
    "log4j2": _GARBAGE + (
        b"java.lang.IllegalStateException: connection pool exhausted",
        b"\tat com.example.OrderService.place(OrderService.java:42)",
        b"2017-02-30 10:00:00.000 [main] ERROR com.example.Foo - february 30th",
        b"2017-07-30 14:09:08 [main] ERROR com.example.Foo - no milliseconds",
        b"2017-07-30 14:09:08.123 [main]",
    ),
    "python": _GARBAGE + (
        b"Traceback (most recent call last):",
        b'  File "/app/db.py", line 42, in query',
        b"psycopg2.OperationalError: server closed the connection unexpectedly",
        b"2017-07-30 25:00:00,000 - app.db - ERROR - hour 25",
        b"2017-07-30 14:09:08 - app.db - ERROR - no milliseconds",
    ),
    "spark": _GARBAGE + (
        b'Setting default log level to "WARN".',
        b"To adjust logging level use sc.setLogLevel(newLevel).",
        b"17/02/30 10:00:00 ERROR Executor: february 30th",
        b"\tat org.apache.spark.scheduler.Task.run(Task.scala:141)",
        b"2017-07-30 14:09:08 ERROR Executor: a four-digit year",
    ),
    "mariadb": _GARBAGE + (
        b"Version: '10.11.6-MariaDB-0+deb12u1'  socket: '/run/mysqld/mysqld.sock'  port: 3306",
        b"2017-02-29  3:34:44 0 [ERROR] 2017 is not a leap year",
        b"2017-07-30 24:00:00 0 [ERROR] hour 24",
        b"2017-07-30 13:60:44 0 [ERROR] minute 60",
        b"2017-07-30   3:34:44 0 [ERROR] three spaces",
        b"170730  3:34:44 [ERROR] mysqld before 10.1.2: a two-digit year and no thread id",
        b"2017-07-30  3:34:44 0 [] no level",
        b"Attempting backtrace. You can use the following information to find out",
    ),
    "filebeat": _GARBAGE + _NOT_JSON + _jsons(
        {"@timestamp": "2017-07-30T14:09:08.123Z", "event": {"original": "no message"}},
        {"@timestamp": "2017-07-30T14:09:08.123Z", "message": 42},
        {"@timestamp": "2017-07-30T14:09:08.123Z", "message": None},
        {"@timestamp": "2017-07-30T14:09:08.123Z", "message": {"text": "an object"}},
        {"@timestamp": "2017-07-30T14:09:08.123Z", "message": ""},
        {"message": 'Exception in thread "main" java.lang.NullPointerException'},
        {"message": "2017-02-30 10:00:00 ERROR february has no 30th"},
        {"message": "2017-07-30 14:09 ERROR no seconds"},
    ),
    "fluentbit": _GARBAGE + _NOT_JSON + _jsons(
        {"log": "\n", "stream": "stdout", "time": "2017-07-30T14:09:08.123456789Z"},
        {"log": "\tat com.example.OrderService.place(OrderService.java:42)\n",
         "stream": "stderr", "time": "2017-07-30T14:09:08.123456789Z"},
        {"log": "2017-07-30 25:00:00 ERROR hour 25\n", "stream": "stderr"},
        {"stream": "stderr", "time": "2017-07-30T14:09:08.123456789Z"},
        {"log": None, "stream": "stdout"},
        {"log": ["a", "list"], "stream": "stdout"},
    ),
    "logstash": _GARBAGE + _NOT_JSON + _jsons(
        {"@timestamp": "30/Jul/2017:14:09:08 +0000", "message": "apache's time", "level": "ERROR"},
        {"@timestamp": "2017-13-01T00:00:00.000+02:00", "message": "month 13", "level": "ERROR"},
        {"@timestamp": "2017-07-30T14:09:08.123+02:00", "message": "no level"},
        {"@timestamp": "2017-07-30T14:09:08.123+02:00", "message": "empty", "level": ""},
        {"message": "no timestamp", "level": "ERROR"},
        {"@timestamp": {"$date": "2017-07-30T14:09:08Z"}, "message": "x", "level": "ERROR"},
    ) + (  # an MDC entry named like a standard field: the key twice
        b'{"@timestamp":"2017-07-30T14:09:08.123Z","level":"ERROR","level":"INFO"}',
    ),
    "ecs-dotted": _GARBAGE + _NOT_JSON + _jsons(
        {"@timestamp": "2017-07-30T14:09:08.123Z", "log.level": None, "message": "null level"},
        {"@timestamp": "2017-07-30T14:09:08.123Z", "message": "no level"},
        {"@timestamp": "2017-02-30T14:09:08.123Z", "log.level": "error", "message": "feb 30"},
        {"@timestamp": True, "log.level": "error", "message": "a boolean time"},
        {"log.level": "error", "message": "no timestamp"},
    ),
    "ecs-nested": _GARBAGE + _NOT_JSON + _jsons(
        {"@timestamp": "2017-07-30T14:09:08.123Z", "log": "error", "message": "log a string"},
        {"@timestamp": "2017-07-30T14:09:08.123Z", "log": {"logger": "x"}, "message": "none"},
        {"@timestamp": "2017-07-30T25:09:08.123Z", "log": {"level": "error"}, "message": "25"},
        {"@timestamp": None, "log": {"level": "error"}, "message": "a null time"},
        {"log": {"level": "error"}, "message": "no timestamp"},
    ),
    "zap": _GARBAGE + _NOT_JSON + _jsons(
        {"level": "error", "msg": "no ts"},
        {"level": "error", "ts": "yesterday", "msg": "a word for a time"},
        {"level": "error", "ts": True, "msg": "a boolean time"},
        {"level": "error", "ts": None, "msg": "a null time"},
        {"ts": 1501394948.5, "msg": "no level"},
        {"level": "", "ts": 1501394948.5, "msg": "an empty level"},
        {"level": "error", "ts": 1e20, "msg": "beyond year 9999"},
    ),
    "pino": _GARBAGE + _NOT_JSON + _jsons(
        {"level": 50, "pid": 4242, "msg": "no time"},
        {"level": 50, "time": "1501394948123", "msg": "epoch milliseconds as text"},
        {"level": 50, "time": 999999999999999999, "msg": "beyond year 9999"},
        {"time": 1501394948123, "msg": "no level"},
        {"level": None, "time": 1501394948123, "msg": "a null level"},
    ),
}

# The level words each shape writes, with weights: DEBUG/INFO/WARN/ERROR and their kin.
_UPPER = (("DEBUG", 25), ("INFO", 45), ("WARN", 15), ("ERROR", 15))
LEVEL_WORDS: dict[str, tuple[tuple[str, int], ...]] = {
    "kafka": _UPPER,
    "rfc3339": _UPPER,
    "log4j2": (("TRACE", 5), ("DEBUG", 20), ("INFO", 45), ("WARN", 15), ("ERROR", 12),
               ("FATAL", 3)),
    "python": (("DEBUG", 25), ("INFO", 45), ("WARNING", 15), ("ERROR", 12), ("CRITICAL", 3)),
    "spark": _UPPER,
    "mariadb": (("Note", 60), ("Warning", 25), ("ERROR", 15)),
    "filebeat": _UPPER + (("error", 3), ("Error", 2)),
    "fluentbit": _UPPER + (("error", 3),),
    "logstash": (("TRACE", 5), ("DEBUG", 20), ("INFO", 45), ("WARN", 15), ("ERROR", 15)),
    "ecs-dotted": (("debug", 10), ("info", 30), ("warn", 10), ("error", 10), ("DEBUG", 10),
                   ("INFO", 15), ("WARN", 5), ("ERROR", 5)),
    "ecs-nested": (("debug", 25), ("info", 45), ("warn", 15), ("error", 15)),
    "zap": (("debug", 25), ("info", 45), ("warn", 15), ("error", 13), ("fatal", 2)),
    "pino": (("10", 5), ("20", 20), ("30", 45), ("40", 15), ("50", 13), ("60", 2)),
}
