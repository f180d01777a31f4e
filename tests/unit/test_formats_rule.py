"""logcount/formats/rule.py, the pure twin of the line rule: each kind of format on the shapes real
services
and shippers write, every DLQ reason, time zones across DST, and the counts per minute."""

from __future__ import annotations

import json

import pytest

from logcount.formats.rule import (
    REASON_DIMENSION,
    REASON_EMPTY,
    REASON_FORMAT,
    REASON_LATE,
    REASON_LINE_FIELD,
    REASON_NO_LEVEL,
    REASON_NO_MATCH,
    REASON_NOT_JSON,
    REASON_RANGE,
    REASON_TIME_FIELD,
    REASON_TIMESTAMP,
    REASONS,
    Malformed,
    Parsed,
    expected_counts,
    minute_label,
    parse_record,
)
from logcount.formats.spec import EPOCH_MINUTE, MINUTE_END, LineFormat

DEFAULT = LineFormat()
LOG4J2 = LineFormat.from_flags(
    line_regex=r"(?<time>\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}[.,]\d{1,9}) \[[^\]]*\] +"
               r"(?<level>[A-Za-z]+)")
PYTHON = LineFormat.from_flags(
    line_regex=r"(?<time>\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2},\d{3}) - \S+ - (?<level>[A-Za-z]+) - ")
SPARK = LineFormat.from_flags(
    line_regex=r"(?<time>\d{2}/\d{2}/\d{2} \d{2}:\d{2}:\d{2}) (?<level>[A-Za-z]+) ",
    time_pattern="yy/MM/dd HH:mm:ss")
# An Apache access log counted by status: the level group is the status code.
APACHE = LineFormat.from_flags(
    level="500,503", line_regex=r'\S+ \S+ \S+ \[(?<time>[^\]]+)\] "[^"]*" (?<level>\d+)',
    time_pattern="dd/MMM/yyyy:HH:mm:ss Z")
FILEBEAT = LineFormat.from_flags(json_line_field="message")
DOCKER = LineFormat.from_flags(json_line_field="log")
LOGSTASH = LineFormat.from_flags(json_time_field="@timestamp", json_level_field="level")
ECS = LineFormat.from_flags(json_time_field="@timestamp", json_level_field="log.level")
ZAP = LineFormat.from_flags(json_time_field="ts", json_level_field="level")
PINO = LineFormat.from_flags(level="50,60", json_time_field="time", json_level_field="level")
NEW_YORK = LineFormat.from_flags(timezone="America/New_York")


def outcome(raw: bytes | str | dict, fmt: LineFormat = DEFAULT) -> tuple[str, str] | str:
    """(UTC minute label, level) of a well formed record, else its DLQ reason."""
    if isinstance(raw, dict):
        raw = json.dumps(raw)
    if isinstance(raw, str):
        raw = raw.encode()
    got = parse_record(raw, fmt)
    if isinstance(got, Malformed):
        return got.reason
    assert isinstance(got, Parsed) and 0 <= got.minute < MINUTE_END
    return minute_label(got.minute), got.level


M = "2017-07-30 14:09:00"


@pytest.mark.parametrize(("raw", "expected"), [
    # the seed format
    (b"2017-07-30 14:09:08 ERROR some message", (M, "ERROR")),
    (b"2017-07-30 14:09:59 INFO  padded level", (M, "INFO")),
    # Kafka's own broker logs (log4j 1)
    (b"[2017-07-30 14:09:08,123] ERROR [KafkaServer id=1] Fatal error during startup "
     b"(kafka.server.KafkaServer)", (M, "ERROR")),
    (b"[2017-07-30 14:09:08,123] WARN x", (M, "WARN")),
    (b"[2017-07-30T14:09:08.5Z] ERROR x", (M, "ERROR")),
    # RFC 3339 / ISO 8601: zones are converted to UTC, fractions ignored
    (b"2017-07-30T14:09:08Z ERROR boom", (M, "ERROR")),
    (b"2017-07-30T14:09:08.123+08:00 ERROR boom", ("2017-07-30 06:09:00", "ERROR")),
    (b"2017-07-30T14:09:08.123456789-0530 ERROR boom", ("2017-07-30 19:39:00", "ERROR")),
    (b"2017-07-30 14:09:08,1+00:00 ERROR boom", (M, "ERROR")),
    (b"2017-07-30T23:59:59.999-01:00 ERROR", ("2017-07-31 00:59:00", "ERROR")),
    (b"2017-01-01T00:00:00+00:01 ERROR", ("2016-12-31 23:59:00", "ERROR")),
    (b"2016-02-29T23:30:00-01:00 ERROR", ("2016-03-01 00:30:00", "ERROR")),
    (b"2017-07-30T14:09:08+18:00 ERROR", ("2017-07-29 20:09:00", "ERROR")),
    (b"2017-07-30T14:09:08-18:00 ERROR", ("2017-07-31 08:09:00", "ERROR")),
    (b"9999-12-31T23:59:59Z ERROR", ("9999-12-31 23:59:00", "ERROR")),
    (b"0001-01-01 00:00:00 ERROR", ("0001-01-01 00:00:00", "ERROR")),
    # levels are compared case-insensitively: the twin upper-cases them
    (b"2017-07-30 14:09:08 error x", (M, "ERROR")),
    (b"2017-07-30 14:09:08 Error", (M, "ERROR")),
    # one trailing terminator is ignored
    (b"2017-07-30 14:09:08 ERROR\n", (M, "ERROR")),
    (b"2017-07-30 14:09:08 ERROR\r\n", (M, "ERROR")),
    (b"2017-07-30 14:09:08 ERROR\r", (M, "ERROR")),
    (b"2017-07-30 14:09:08 ERROR \n", (M, "ERROR")),
    (b"2017-07-30 14:09:08 ERROR msg\r\n", (M, "ERROR")),
    (b"2017-07-30 14:09:08 ERROR \xff\xfe not utf-8", (M, "ERROR")),
    # malformed
    (b"", REASON_EMPTY),
    (b"\n", REASON_EMPTY),
    (b"\r\n", REASON_EMPTY),
    (b"\n\n", REASON_FORMAT),
    (b"2017-07-30 14:09:08 ERROR\r\r", REASON_FORMAT),
    (b"2017-07-30 14:09:08 ERROR\n\r", REASON_FORMAT),
    (b"2017-07-30 14:09:08 ERROR\n\n", REASON_FORMAT),
    (b"2017-07-30 14:09:08", REASON_FORMAT),
    (b"2017-07-30 14:09:08 ", REASON_FORMAT),
    (b"2017-07-30 14:09 ERROR no seconds", REASON_FORMAT),
    (b"2017-07-30 14:09:08  ERROR two spaces", REASON_FORMAT),
    (b"2017-07-30 14:09:08\tERROR", REASON_FORMAT),
    (b"2017-07-30t14:09:08 ERROR", REASON_FORMAT),
    (b"2017-07-30_14:09:08 ERROR", REASON_FORMAT),
    (b"2017-07-30 14:09:08. ERROR", REASON_FORMAT),
    (b"2017-07-30 14:09:08.1234567890 ERROR", REASON_FORMAT),
    (b"2017-07-30 14:09:08z ERROR", REASON_FORMAT),
    (b"2017-07-30 14:09:08+08 ERROR", REASON_FORMAT),
    (b"2017-07-30 14:09:08+8:00 ERROR", REASON_FORMAT),
    (b"2017-07-30 14:09:08 +08:00 ERROR", REASON_FORMAT),
    (b"[2017-07-30 14:09:08 ERROR", REASON_FORMAT),
    (b"2017-07-30 14:09:08] ERROR", REASON_FORMAT),
    (b"[2017-07-30 14:09:08]ERROR", REASON_FORMAT),
    (b"[ 2017-07-30 14:09:08] ERROR", REASON_FORMAT),
    (b"2017-07-30 14:09:08 ERRORS1 x", REASON_FORMAT),
    (b"2017-07-30 14:09:08 ERROR: x", REASON_FORMAT),
    (b"2017-07-30 14:09:08 \xc3\x89RROR x", REASON_FORMAT),
    (b" 2017-07-30 14:09:08 ERROR x", REASON_FORMAT),
    (b"2017-7-30 14:09:08 ERROR x", REASON_FORMAT),
    ("2017-07-30 14:09:0\u0669 ERROR x".encode(), REASON_FORMAT),
    (b"2017-02-30 10:00:00 ERROR x", REASON_TIMESTAMP),
    (b"2017-07-30 24:00:00 ERROR x", REASON_TIMESTAMP),
    (b"2017-07-30 14:60:00 ERROR x", REASON_TIMESTAMP),
    (b"2017-07-30 14:09:60 ERROR x", REASON_TIMESTAMP),
    (b"2017-13-01 00:00:00 ERROR x", REASON_TIMESTAMP),
    (b"0000-01-01 00:00:00 ERROR x", REASON_TIMESTAMP),
    (b"[1900-02-29 00:00:00] ERROR x", REASON_TIMESTAMP),
    (b"2017-07-30T14:09:08+18:01 ERROR", REASON_TIMESTAMP),
    (b"2017-07-30T14:09:08+05:60 ERROR", REASON_TIMESTAMP),
    (b"2017-07-30T14:09:08-1900 ERROR", REASON_TIMESTAMP),
    (b"0001-01-01T00:00:00+00:01 ERROR", REASON_RANGE),
    (b"9999-12-31T23:59:00-00:01 ERROR", REASON_RANGE),
])
def test_the_default_rule(raw, expected):
    assert outcome(raw) == expected


def test_seed_lines_count_as_they_always_did_under_any_zone_less_reading():
    """A zone-less line is UTC by default; a fixed offset or IANA zone moves it, a zoned line
    keeps its own offset whatever --timezone says."""
    seed = b"2017-07-30 14:09:08 ERROR x"
    assert outcome(seed, LineFormat.from_flags(timezone="+05:30")) == ("2017-07-30 08:39:00",
                                                                       "ERROR")
    assert outcome(seed, LineFormat.from_flags(timezone="-03:00")) == ("2017-07-30 17:09:00",
                                                                       "ERROR")
    assert outcome(seed, NEW_YORK) == ("2017-07-30 18:09:00", "ERROR")  # EDT
    assert outcome(b"2017-01-30 14:09:08 ERROR", NEW_YORK) == ("2017-01-30 19:09:00", "ERROR")
    for zoned in (b"2017-07-30T14:09:08Z ERROR", b"2017-07-30T16:09:08+02:00 ERROR"):
        assert outcome(zoned, NEW_YORK) == (M, "ERROR")
        assert outcome(zoned, LineFormat.from_flags(timezone="+05:30")) == (M, "ERROR")


@pytest.mark.parametrize(("local", "utc"), [
    # DST ends: 01:00-01:59 happens twice; java.time takes the earlier offset (EDT, -04:00)
    ("2017-11-05 00:59:59", "2017-11-05 04:59:00"),
    ("2017-11-05 01:30:00", "2017-11-05 05:30:00"),
    ("2017-11-05 01:59:59", "2017-11-05 05:59:00"),
    ("2017-11-05 02:00:00", "2017-11-05 07:00:00"),
    # DST starts: 02:00-02:59 does not exist; it moves forward by the gap (to EDT)
    ("2017-03-12 01:59:59", "2017-03-12 06:59:00"),
    ("2017-03-12 02:00:00", "2017-03-12 07:00:00"),
    ("2017-03-12 02:30:00", "2017-03-12 07:30:00"),
    ("2017-03-12 03:00:00", "2017-03-12 07:00:00"),
])
def test_dst_under_an_iana_zone(local, utc):
    assert outcome(f"{local} ERROR x".encode(), NEW_YORK) == (utc, "ERROR")
    assert outcome(f"[{local.replace(' ', 'T')},250] error x".encode(), NEW_YORK) == (utc,
                                                                                      "ERROR")


def test_a_fixed_offset_can_leave_the_range():
    east = LineFormat.from_flags(timezone="+01:00")
    west = LineFormat.from_flags(timezone="-01:00")
    assert outcome(b"0001-01-01 00:30:00 ERROR", east) == REASON_RANGE
    assert outcome(b"0001-01-01 01:30:00 ERROR", east) == ("0001-01-01 00:30:00", "ERROR")
    assert outcome(b"9999-12-31 23:30:00 ERROR", west) == REASON_RANGE
    assert outcome(b"9999-12-31 22:30:00 ERROR", west) == ("9999-12-31 23:30:00", "ERROR")


@pytest.mark.parametrize(("fmt", "raw", "expected"), [
    (LOG4J2, b"2017-07-30 14:09:08.123 [main] ERROR com.example.Foo - boom", (M, "ERROR")),
    (LOG4J2, b"2017-07-30 14:09:08,123 [pool-1-thread-2] WARN  com.example.Foo - w", (M, "WARN")),
    (LOG4J2, b"2017-07-30 14:09:08.123 [main] error com.example.Foo - lower\n", (M, "ERROR")),
    (LOG4J2, b"2017-07-30 14:09:08 [main] ERROR no fraction", REASON_NO_MATCH),
    (LOG4J2, b"x 2017-07-30 14:09:08.123 [main] ERROR not at the start", REASON_NO_MATCH),
    (LOG4J2, b"2017-02-30 14:09:08.123 [main] ERROR bad day", REASON_TIMESTAMP),
    (LOG4J2, b"0000-07-30 14:09:08.123 [main] ERROR year zero", REASON_TIMESTAMP),
    (LOG4J2, b"", REASON_EMPTY),
    (LOG4J2, b"\r\n", REASON_EMPTY),
    (PYTHON, b"2017-07-30 14:09:08,123 - app.db - ERROR - query failed", (M, "ERROR")),
    (PYTHON, b"2017-07-30 14:09:08,123 - app.db - CRITICAL - down", (M, "CRITICAL")),
    (PYTHON, b"2017-07-30 14:09:08,123 - app.db - ERROR query failed", REASON_NO_MATCH),
    (SPARK, b"17/07/30 14:09:08 ERROR Executor: Exception in task 0.0", (M, "ERROR")),
    (SPARK, b"17/07/30 14:09:08 INFO SparkContext: Running Spark", (M, "INFO")),
    (SPARK, b"99/12/31 23:59:59 ERROR x", ("2099-12-31 23:59:00", "ERROR")),
    (SPARK, b"17/02/29 14:09:08 ERROR not a leap year", REASON_TIMESTAMP),
    (SPARK, b"17/07/30 24:09:08 ERROR x", REASON_TIMESTAMP),
    (SPARK, b"2017-07-30 14:09:08 ERROR x", REASON_NO_MATCH),
    (APACHE, b'127.0.0.1 - - [30/Jul/2017:14:09:08 +0200] "GET / HTTP/1.1" 500 12',
     ("2017-07-30 12:09:00", "500")),
    (APACHE, b'127.0.0.1 - frank [30/Jul/2017:14:09:08 -0000] "GET /x HTTP/1.1" 200 2326',
     (M, "200")),
    (APACHE, b'::1 - - [30/Jul/2017:14:09:08 +0000] "GET / HTTP/1.1" 503 0', (M, "503")),
    # Spark reads pattern text case-insensitively (month names, AM/PM, z), and so does the twin
    (APACHE, b'::1 - - [30/jul/2017:14:09:08 +0000] "GET / HTTP/1.1" 503 0', (M, "503")),
    (APACHE, b'::1 - - [30/JUL/2017:14:09:08 +0000] "GET / HTTP/1.1" 503 0', (M, "503")),
    (APACHE, b'::1 - - [31/Jun/2017:14:09:08 +0000] "GET / HTTP/1.1" 503 0', REASON_TIMESTAMP),
    (APACHE, b'::1 - - [30/Jul/2017:14:09:08] "GET / HTTP/1.1" 503 0', REASON_TIMESTAMP),
    # A group that may be empty: a line without a level word
    (LineFormat.from_flags(line_regex=r"(?<time>\S+ \S+) (?<level>[A-Z]*)"),
     b"2017-07-30 14:09:08 - no level", REASON_NO_LEVEL),
    # ISO 8601 is the time group's reading without --time-pattern
    (LineFormat.from_flags(line_regex=r"(?<time>\S+) (?<level>\w+)"),
     b"2017-07-30T14:09:08+02:00 ERROR", ("2017-07-30 12:09:00", "ERROR")),
    (LineFormat.from_flags(line_regex=r"(?<time>\S+) (?<level>\w+)"),
     b"30/07/2017T14:09:08 ERROR", REASON_TIMESTAMP),
])
def test_line_regex_and_time_pattern(fmt, raw, expected):
    assert outcome(raw, fmt) == expected


MARIADB_RE = r"(?<time>\d{4}-\d{2}-\d{2} [ \d]\d:\d{2}:\d{2}) \d+ \[(?<level>[A-Za-z]+)\]"
ANY_TIME = r"(?<time>[^|]*)\|(?<level>\w+)"


def pattern_outcome(pattern: str, time: str, timezone: str = "UTC"):
    fmt = LineFormat.from_flags(line_regex=ANY_TIME, time_pattern=pattern, timezone=timezone)
    return outcome(f"{time}|ERROR", fmt)


def test_mariadb_both_hour_widths_in_utc_and_tokyo():
    utc = LineFormat.from_flags(line_regex=MARIADB_RE, time_pattern="yyyy-MM-dd [ ]H:mm:ss")
    tokyo = LineFormat.from_flags(line_regex=MARIADB_RE, time_pattern="yyyy-MM-dd [ ]H:mm:ss",
                                  timezone="Asia/Tokyo")
    early = b"2026-11-26  3:34:44 0 [ERROR] mariadbd: Table is marked as crashed"
    late = b"2026-11-26 13:34:44 12 [Warning] Access denied for user 'root'@'localhost'"
    assert outcome(early, utc) == ("2026-11-26 03:34:00", "ERROR")
    assert outcome(late, utc) == ("2026-11-26 13:34:00", "WARNING")
    assert outcome(early, tokyo) == ("2026-11-25 18:34:00", "ERROR")
    assert outcome(late, tokyo) == ("2026-11-26 04:34:00", "WARNING")
    assert expected_counts([early, late, early], utc) == {"2026-11-26 03:34:00": 2}


# Each outcome as Spark 4's try_to_timestamp gives it (checked with the venv's pyspark): java.time
# parses greedily and never backtracks, an optional section is kept whole or skipped whole.
@pytest.mark.parametrize(("pattern", "time", "expected"), [
    ("yyyy-MM-dd [ ]H:mm:ss", "2026-11-26  3:34:44", "2026-11-26 03:34:00"),
    ("yyyy-MM-dd [ ]H:mm:ss", "2026-11-26 13:34:44", "2026-11-26 13:34:00"),
    ("yyyy-MM-dd [ ]H:mm:ss", "2026-11-26 3:34:44", "2026-11-26 03:34:00"),
    ("yyyy-MM-dd [ ]H:mm:ss", "2026-11-26   3:34:44", REASON_TIMESTAMP),
    ("yyyy-MM-dd [ ]HH:mm:ss", "2026-11-26  03:34:44", "2026-11-26 03:34:00"),
    ("yyyy-MM-dd [ ]HH:mm:ss", "2026-11-26  3:34:44", REASON_TIMESTAMP),  # HH is two digits
    ("yyyy-MM-dd[ ] HH:mm:ss", "2026-11-26 13:34:44", REASON_TIMESTAMP),  # no backtracking
    ("yyyy-MM-dd [ [ ]]H:mm", "2026-11-26   3:34", "2026-11-26 03:34:00"),  # nested
    ("yyyy-MM-dd [ [ ]]H:mm", "2026-11-26  3:34", "2026-11-26 03:34:00"),
    ("yyyy-MM-dd HH:mm[:ss[.SSS]]", "2026-11-26 13:34", "2026-11-26 13:34:00"),
    ("yyyy-MM-dd HH:mm[:ss[.SSS]]", "2026-11-26 13:34:44.12", "2026-11-26 13:34:00"),
    ("yyyy-MM-dd HH:mm:ss[.SSS]", "2026-11-26 13:34:44.", REASON_TIMESTAMP),
    ("yyyy-MM-dd HH:mm:ss.SSS", "2026-11-26 13:34:44.1234", REASON_TIMESTAMP),
    ("yyyy-MM-dd'T'HH:mm:ss", "2026-11-26t13:34:44", "2026-11-26 13:34:00"),  # any case
    ("yyyy-MM-dd''HH:mm:ss", "2026-11-26'13:34:44", "2026-11-26 13:34:00"),
    # numbers next to each other share the digits; a one-letter one before them takes them all
    ("yyyyMMddHHmm", "202611261334", "2026-11-26 13:34:00"),
    ("yyyyMMdd Hmm", "20261126 934", "2026-11-26 09:34:00"),
    ("yyyyMMddHmm", "202611261334", REASON_TIMESTAMP),
    # a year wider than yyyy needs its sign; years outside 1-9999 are out of range
    ("yyyy-MM-dd HH:mm:ss", "+12026-11-26 13:34:44", REASON_RANGE),
    ("yyyy-MM-dd HH:mm:ss", "-2026-11-26 13:34:44", REASON_RANGE),
    ("yyyy-MM-dd HH:mm:ss", "+2026-11-26 13:34:44", REASON_TIMESTAMP),
    ("yyyy-MM-dd HH:mm:ss", "12026-11-26 13:34:44", REASON_TIMESTAMP),
    ("yyyy-MM-dd HH:mm:ss", "-0000-11-26 13:34:44", REASON_TIMESTAMP),  # minus zero
    ("yyyy-MM-dd HH:mm:ss", "0000-11-26 13:34:44", REASON_TIMESTAMP),
    # a sign and six digits would overflow Spark's parser (and fail the job): invalid
    ("yyyy-MM-dd HH:mm:ss", "+294247-01-01 00:00:00", REASON_TIMESTAMP),
    ("dd/MMM/yyyy:HH:mm:ss Z", "30/Jul/+300000:14:09:08 +0000", REASON_TIMESTAMP),
    ("d/M/yyyy H:m", "30/7/+300000 14:09", REASON_TIMESTAMP),
    # ... but only where the year is, when that place is known
    ("yyyyMMdd-HHmmss", "20261126-133444", "2026-11-26 13:34:00"),
    ("dd-MM-yyyy-HHmmss", "26-11-2026-133444", "2026-11-26 13:34:00"),
    ("yyyy-MM-dd HH:mm:ss", "2026-11-26 24:00:00", REASON_TIMESTAMP),
    ("yyyy-MM-dd hh:mm:ss a", "2026-11-26 12:02:03 am", "2026-11-26 00:02:00"),
    ("yyyy-MM-dd hh:mm:ss a", "2026-11-26 00:02:03 am", REASON_TIMESTAMP),
    ("yyyy-MM-dd HH:mm:ssX", "2026-09-26 01:02:03+0530", "2026-09-25 19:32:00"),
    ("yyyy-MM-dd HH:mm:ssX", "2026-09-26 01:02:03+05:30", REASON_TIMESTAMP),
    ("yyyy-MM-dd HH:mm:ssXXX", "2026-09-26 01:02:03+18:01", REASON_TIMESTAMP),
    ("yyyy-MM-dd HH:mm:ssZ", "2026-09-26 01:02:03Z", REASON_TIMESTAMP),  # Z is +HHMM only
])
def test_time_patterns_read_as_spark_reads_them(pattern, time, expected):
    got = pattern_outcome(pattern, time)
    assert (got[0] if isinstance(got, tuple) else got) == expected


def test_a_local_year_10000_can_still_be_9999_in_utc():
    assert pattern_outcome("yyyy-MM-dd HH:mm:ss", "+10000-01-01 00:30:00", "+01:00") == (
        "9999-12-31 23:30:00", "ERROR")
    assert pattern_outcome("yyyy-MM-dd HH:mm:ss", "+10000-01-01 00:30:00") == REASON_RANGE
    assert pattern_outcome("yyyy-MM-dd HH:mm:ssXX", "+10000-01-01 00:30:00+0100") == (
        "9999-12-31 23:30:00", "ERROR")


def test_a_time_pattern_without_a_zone_takes_the_timezone():
    fmt = LineFormat.from_flags(line_regex=SPARK.line_regex, time_pattern="yy/MM/dd HH:mm:ss",
                                timezone="America/New_York")
    assert outcome(b"17/11/05 01:30:00 ERROR x", fmt) == ("2017-11-05 05:30:00", "ERROR")
    assert outcome(b"17/03/12 02:30:00 ERROR x", fmt) == ("2017-03-12 07:30:00", "ERROR")
    zoned = LineFormat.from_flags(line_regex=APACHE.line_regex, time_pattern=APACHE.time_pattern,
                                  timezone="America/New_York")
    raw = b'::1 - - [30/Jul/2017:14:09:08 +0000] "GET / HTTP/1.1" 500 0'
    assert outcome(raw, zoned) == (M, "500")


@pytest.mark.parametrize(("fmt", "record", "expected"), [
    # Filebeat and Vector: the line in "message"
    (FILEBEAT, {"@timestamp": "2017-07-30T14:09:09.000Z", "message":
                "2017-07-30 14:09:08 ERROR boom", "host": {"name": "web-1"}}, (M, "ERROR")),
    (FILEBEAT, {"message": "[2017-07-30 14:09:08,123] ERROR x (kafka.Log)"}, (M, "ERROR")),
    (FILEBEAT, {"message": "2017-07-30 14:09:08 error \u00e9t\u00e9"}, (M, "ERROR")),
    (FILEBEAT, {"message": "garbage"}, REASON_FORMAT),
    (FILEBEAT, {"message": ""}, REASON_EMPTY),
    (FILEBEAT, {"message": "2017-02-30 14:09:08 ERROR x"}, REASON_TIMESTAMP),
    (FILEBEAT, {"msg": "2017-07-30 14:09:08 ERROR boom"}, REASON_LINE_FIELD),
    (FILEBEAT, {"message": None}, REASON_LINE_FIELD),
    (FILEBEAT, {"message": 42}, REASON_LINE_FIELD),
    (FILEBEAT, {"message": ["2017-07-30 14:09:08 ERROR boom"]}, REASON_LINE_FIELD),
    (FILEBEAT, {"message": {"text": "2017-07-30 14:09:08 ERROR boom"}}, REASON_LINE_FIELD),
    # Docker's json-file log and Fluent Bit: the line in "log", with its trailing \n
    (DOCKER, {"log": "2017-07-30T14:09:08.123456789Z ERROR boom\n", "stream": "stderr",
              "time": "2017-07-30T14:09:08.123456789Z"}, (M, "ERROR")),
    (DOCKER, {"log": "[2017-07-30 14:09:08,123] INFO started\r\n", "stream": "stdout"},
     (M, "INFO")),
    (DOCKER, {"log": "2017-07-30 14:09:08 ERROR\n\n"}, REASON_FORMAT),
    (DOCKER, {"log": "\n"}, REASON_EMPTY),
    # a dotted path into nested objects
    (LineFormat.from_flags(json_line_field="kubernetes.log"),
     {"kubernetes": {"log": "2017-07-30 14:09:08 ERROR x"}}, (M, "ERROR")),
    # the line rule inside may be a regex
    (LineFormat.from_flags(json_line_field="log", line_regex=PYTHON.line_regex),
     {"log": "2017-07-30 14:09:08,123 - app - ERROR - x\n"}, (M, "ERROR")),
    (LineFormat.from_flags(json_line_field="log", line_regex=PYTHON.line_regex),
     {"log": "2017-07-30 14:09:08 ERROR x"}, REASON_NO_MATCH),
])
def test_json_line(fmt, record, expected):
    assert outcome(record, fmt) == expected


@pytest.mark.parametrize(("raw", "reason"), [
    (b"2017-07-30 14:09:08 ERROR not json", REASON_NOT_JSON),
    (b"", REASON_NOT_JSON),
    (b"[]", REASON_NOT_JSON),
    (b'"2017-07-30 14:09:08 ERROR x"', REASON_NOT_JSON),
    (b"null", REASON_NOT_JSON),
    (b'{"message": "2017-07-30 14:09:08 ERROR x"', REASON_NOT_JSON),
    (b'{"message": "2017-07-30 14:09:08 ERROR x", "message": "x"}', REASON_NOT_JSON),
    (b"{'message': '2017-07-30 14:09:08 ERROR x'}", REASON_NOT_JSON),
    (b'{"message": NaN}', REASON_NOT_JSON),
    # invalid UTF-8 inside a string becomes U+FFFD: still an object
    (b'{"message": "2017-07-30 14:09:08 ERROR \xff"}', None),
    # what follows the first value is ignored, as Spark's parser does
    (b' \n{"message": "2017-07-30 14:09:08 ERROR x"} trailing', None),
])
def test_what_is_not_a_json_object(raw, reason):
    expected = reason if reason is not None else (M, "ERROR")
    assert outcome(raw, FILEBEAT) == expected


T = "2017-07-30T14:09:08.123Z"
EPOCH_S = 1501423748  # 2017-07-30 14:09:08 UTC


@pytest.mark.parametrize(("fmt", "record", "expected"), [
    # logstash-logback-encoder
    (LOGSTASH, {"@timestamp": "2017-07-30T16:09:08.123+02:00", "@version": "1", "message": "boom",
                "logger_name": "com.example.Foo", "thread_name": "main", "level": "ERROR",
                "level_value": 40000}, (M, "ERROR")),
    (LOGSTASH, {"@timestamp": T, "level": "WARN"}, (M, "WARN")),
    (LOGSTASH, {"@timestamp": "2017-07-30 14:09:08", "level": "error"}, (M, "ERROR")),
    # ECS: "log.level" as one literal key, or nested
    (ECS, {"@timestamp": T, "log.level": "error", "message": "boom", "ecs.version": "1.6.0"},
     (M, "ERROR")),
    (ECS, {"@timestamp": T, "log": {"level": "error", "logger": "app"}}, (M, "ERROR")),
    (ECS, {"@timestamp": T, "log.level": "error", "log": {"level": "info"}}, (M, "ERROR")),
    (ECS, {"@timestamp": T, "log.level": None, "log": {"level": "info"}}, (M, "INFO")),
    (ECS, {"@timestamp": T, "log": {"logger": "app"}}, REASON_NO_LEVEL),
    (ECS, {"@timestamp": T, "log": "error"}, REASON_NO_LEVEL),
    # zap: float epoch seconds
    (ZAP, {"level": "error", "ts": EPOCH_S + 0.123456, "caller": "main.go:12", "msg": "boom"},
     (M, "ERROR")),
    (ZAP, {"level": "error", "ts": EPOCH_S - 8}, (M, "ERROR")),
    (ZAP, {"level": "error", "ts": EPOCH_S - 8.000001}, ("2017-07-30 14:08:00", "ERROR")),
    (ZAP, {"level": "error", "ts": 1.501423748e9}, (M, "ERROR")),
    (ZAP, {"level": "error", "ts": 0}, ("1970-01-01 00:00:00", "ERROR")),
    (ZAP, {"level": "error", "ts": -0.5}, ("1969-12-31 23:59:00", "ERROR")),
    # pino: integer epoch milliseconds, numeric levels (50 error, 60 fatal)
    (PINO, {"level": 50, "time": EPOCH_S * 1000 + 123, "pid": 1, "hostname": "h", "msg": "boom"},
     (M, "50")),
    (PINO, {"level": 30, "time": EPOCH_S * 1000}, (M, "30")),
    (PINO, {"level": 50.0, "time": EPOCH_S * 1000}, (M, "50")),
    (PINO, {"level": "50", "time": EPOCH_S * 1000}, (M, "50")),
    (PINO, {"level": True, "time": EPOCH_S * 1000}, (M, "TRUE")),
    # time field: text may use --timezone, numbers are instants
    (LineFormat.from_flags(json_time_field="t", json_level_field="l", timezone="America/New_York"),
     {"t": "2017-11-05 01:30:00", "l": "ERROR"}, ("2017-11-05 05:30:00", "ERROR")),
    (LineFormat.from_flags(json_time_field="t", json_level_field="l", timezone="+05:30"),
     {"t": EPOCH_S, "l": "ERROR"}, (M, "ERROR")),
    (LineFormat.from_flags(json_time_field="t", json_level_field="l",
                           time_pattern="dd/MMM/yyyy:HH:mm:ss Z"),
     {"t": "30/Jul/2017:16:09:08 +0200", "l": "ERROR"}, (M, "ERROR")),
    (LineFormat.from_flags(json_time_field="a.b", json_level_field="l"),
     {"a": {"b": T}, "l": "ERROR"}, (M, "ERROR")),
    # DLQ reasons
    (LOGSTASH, {"level": "ERROR"}, REASON_TIME_FIELD),
    (LOGSTASH, {"@timestamp": None, "level": "ERROR"}, REASON_TIME_FIELD),
    (LOGSTASH, {"@timestamp": True, "level": "ERROR"}, REASON_TIME_FIELD),
    (LOGSTASH, {"@timestamp": {"s": 1}, "level": "ERROR"}, REASON_TIME_FIELD),
    (LOGSTASH, {"@timestamp": [T], "level": "ERROR"}, REASON_TIME_FIELD),
    (LOGSTASH, {"@timestamp": "yesterday", "level": "ERROR"}, REASON_TIMESTAMP),
    (LOGSTASH, {"@timestamp": "", "level": "ERROR"}, REASON_TIMESTAMP),
    (LOGSTASH, {"@timestamp": "2017-02-30T00:00:00Z", "level": "ERROR"}, REASON_TIMESTAMP),
    (LOGSTASH, {"@timestamp": "0001-01-01T00:00:00+01:00", "level": "ERROR"}, REASON_RANGE),
    (ZAP, {"ts": 1e300, "level": "error"}, REASON_RANGE),
    (ZAP, {"ts": -1e11, "level": "error"}, ("1966-10-31 14:13:00", "ERROR")),
    (PINO, {"time": 10**17, "level": 50}, REASON_RANGE),
    (LOGSTASH, {"@timestamp": T}, REASON_NO_LEVEL),
    (LOGSTASH, {"@timestamp": T, "level": None}, REASON_NO_LEVEL),
    (LOGSTASH, {"@timestamp": T, "level": ""}, REASON_NO_LEVEL),
    (LOGSTASH, [T, "ERROR"], REASON_NOT_JSON),
])
def test_structured_json(fmt, record, expected):
    raw = json.dumps(record) if not isinstance(record, dict) else record
    assert outcome(raw, fmt) == expected


def test_epoch_seconds_below_ten_to_the_eleven_else_milliseconds():
    for value in (EPOCH_S, EPOCH_S * 1000, EPOCH_S + 0.999, EPOCH_S * 1000 + 999):
        assert outcome({"time": value, "level": 50}, PINO) == (M, "50")
    # 10^11 - 1 seconds is year 5138; 10^11 itself is read as milliseconds (1973)
    assert outcome({"time": 10**11 - 1, "level": 50}, PINO)[0].startswith("5138-")
    assert outcome({"time": 10**11, "level": 50}, PINO)[0].startswith("1973-03-03")


def test_every_reason_the_rule_gives_is_covered_here():
    """One record per DLQ reason; `late` is the stage's (a closed minute), never the rule's."""
    samples = {
        REASON_EMPTY: (b"", DEFAULT),
        REASON_FORMAT: (b"garbage", DEFAULT),
        REASON_TIMESTAMP: (b"2017-02-30 00:00:00 ERROR", DEFAULT),
        REASON_RANGE: (b"0001-01-01T00:00:00+01:00 ERROR", DEFAULT),
        REASON_NO_MATCH: (b"garbage", PYTHON),
        REASON_NOT_JSON: (b"garbage", FILEBEAT),
        REASON_LINE_FIELD: (b"{}", FILEBEAT),
        REASON_TIME_FIELD: (b"{}", LOGSTASH),
        REASON_NO_LEVEL: (b'{"@timestamp": "2017-07-30T14:09:08Z"}', LOGSTASH),
        REASON_DIMENSION: (b'{"message": "2017-07-30 14:09:08 ERROR x", "host": {"a": 1}}',
                           LineFormat.from_flags(json_line_field="message", group_by="host")),
    }
    assert set(samples) | {REASON_LATE} == set(REASONS)
    for reason, (raw, fmt) in samples.items():
        assert parse_record(raw, fmt) == Malformed(reason)


def test_expected_counts_per_utc_minute_of_the_levels_counted():
    lines = [b"2017-07-30 14:09:08 ERROR a", b"[2017-07-30 14:09:50,1] error b",
             b"2017-07-30T16:10:00+02:00 ERROR c", b"2017-07-30 14:09:08 FATAL d",
             b"2017-07-30 14:09:08 INFO e", b"2017-02-30 14:09:08 ERROR invalid", b"junk"]
    assert expected_counts(lines, DEFAULT) == {M: 2, "2017-07-30 14:10:00": 1}
    assert expected_counts(lines, LineFormat.from_flags(level="fatal,ERROR")) == {
        M: 3, "2017-07-30 14:10:00": 1}
    assert expected_counts(lines, LineFormat.from_flags(level="info")) == {M: 1}
    assert expected_counts([json.dumps({"level": 60, "time": EPOCH_S * 1000}).encode()],
                           PINO) == {M: 1}


def test_minute_label_and_the_minute_index():
    assert minute_label(0) == "0001-01-01 00:00:00"
    assert minute_label(EPOCH_MINUTE) == "1970-01-01 00:00:00"
    assert minute_label(MINUTE_END - 1) == "9999-12-31 23:59:00"
    assert parse_record(b"1970-01-01 00:00:59 ERROR", DEFAULT) == Parsed(EPOCH_MINUTE, "ERROR")
