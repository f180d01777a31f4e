import pytest

from pipeline.lines import (
    REASON_EMPTY,
    REASON_FORMAT,
    REASON_TIMESTAMP,
    Malformed,
    Parsed,
    expected_counts,
    parse_line,
)

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (b"2017-07-30 14:09:08 ERROR some message", Parsed("2017-07-30 14:09:00", "ERROR")),
        (b"2017-07-30 14:09:59 INFO  padded level", Parsed("2017-07-30 14:09:00", "INFO")),
        (b"2017-07-30 14:09:08 ERROR", Parsed("2017-07-30 14:09:00", "ERROR")),
        (b"2017-07-30 14:09:08 ERROR\r", Parsed("2017-07-30 14:09:00", "ERROR")),
        (b"2017-07-30 14:09:08 ERROR msg\r", Parsed("2017-07-30 14:09:00", "ERROR")),
        (b"2017-07-30 14:09:08 ERROR \xff\xfe not utf-8", Parsed("2017-07-30 14:09:00", "ERROR")),
        (b"2016-02-29 23:59:59 WARN leap day", Parsed("2016-02-29 23:59:00", "WARN")),
        (b"", Malformed(REASON_EMPTY)),
        (b"\r", Malformed(REASON_EMPTY)),
        (b"garbage", Malformed(REASON_FORMAT)),
        (b"2017-07-30 14:09:08", Malformed(REASON_FORMAT)),
        (b"2017-07-30 14:09:08 ", Malformed(REASON_FORMAT)),
        (b"2017-07-30 14:09:08 ERRORS1 x", Malformed(REASON_FORMAT)),
        (b"2017-07-30 14:09:08\tERROR x", Malformed(REASON_FORMAT)),
        (b"2017-07-30 14:09:08 ERROR\n", Malformed(REASON_FORMAT)),
        (b"2017-07-30 14:09:08 ERROR\r\r", Malformed(REASON_FORMAT)),
        (b" 2017-07-30 14:09:08 ERROR x", Malformed(REASON_FORMAT)),
        (b"2017-7-30 14:09:08 ERROR x", Malformed(REASON_FORMAT)),
        ("2017-07-30 14:09:0\u0669 ERROR x".encode(), Malformed(REASON_FORMAT)),
        (b"2017-02-30 10:00:00 ERROR x", Malformed(REASON_TIMESTAMP)),
        (b"2017-07-30 25:00:00 ERROR x", Malformed(REASON_TIMESTAMP)),
        (b"2017-07-30 14:60:00 ERROR x", Malformed(REASON_TIMESTAMP)),
        (b"2017-07-30 14:09:60 ERROR x", Malformed(REASON_TIMESTAMP)),
        (b"0000-01-01 00:00:00 ERROR x", Malformed(REASON_TIMESTAMP)),
        (b"2017-13-01 00:00:00 ERROR x", Malformed(REASON_TIMESTAMP)),
    ],
)
def test_parse_line(raw, expected):
    assert parse_line(raw) == expected


def test_expected_counts_counts_only_the_level_per_minute():
    lines = [
        b"2017-07-30 14:09:08 ERROR a",
        b"2017-07-30 14:09:50 ERROR b",
        b"2017-07-30 14:10:00 ERROR c",
        b"2017-07-30 14:09:08 INFO d",
        b"2017-02-30 14:09:08 ERROR invalid",
        b"junk",
    ]
    assert expected_counts(lines) == {"2017-07-30 14:09:00": 2, "2017-07-30 14:10:00": 1}
    assert expected_counts(lines, "INFO") == {"2017-07-30 14:09:00": 1}
