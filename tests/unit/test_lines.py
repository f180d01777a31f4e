"""The seed format under the default line rule (logcount/formats/rule.py): seed lines count exactly
as
they always did; the one change is that a trailing \\n (like \\r and \\r\\n) is now ignored."""

import pytest

from logcount.formats.rule import (
    REASON_EMPTY,
    REASON_FORMAT,
    REASON_TIMESTAMP,
    Malformed,
    Parsed,
    expected_counts,
    minute_label,
    parse_record,
)
from logcount.formats.spec import LineFormat


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (b"2017-07-30 14:09:08 ERROR some message", ("2017-07-30 14:09:00", "ERROR")),
        (b"2017-07-30 14:09:59 INFO  padded level", ("2017-07-30 14:09:00", "INFO")),
        (b"2017-07-30 14:09:08 ERROR", ("2017-07-30 14:09:00", "ERROR")),
        (b"2017-07-30 14:09:08 ERROR\r", ("2017-07-30 14:09:00", "ERROR")),
        (b"2017-07-30 14:09:08 ERROR msg\r", ("2017-07-30 14:09:00", "ERROR")),
        (b"2017-07-30 14:09:08 ERROR \xff\xfe not utf-8", ("2017-07-30 14:09:00", "ERROR")),
        (b"2016-02-29 23:59:59 WARN leap day", ("2016-02-29 23:59:00", "WARN")),
        # one trailing \n is now ignored too (it was malformed before the widened rule)
        (b"2017-07-30 14:09:08 ERROR\n", ("2017-07-30 14:09:00", "ERROR")),
        (b"", Malformed(REASON_EMPTY)),
        (b"\r", Malformed(REASON_EMPTY)),
        (b"garbage", Malformed(REASON_FORMAT)),
        (b"2017-07-30 14:09:08", Malformed(REASON_FORMAT)),
        (b"2017-07-30 14:09:08 ", Malformed(REASON_FORMAT)),
        (b"2017-07-30 14:09:08 ERRORS1 x", Malformed(REASON_FORMAT)),
        (b"2017-07-30 14:09:08\tERROR x", Malformed(REASON_FORMAT)),
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
def test_seed_lines(raw, expected):
    got = parse_record(raw, LineFormat())
    if isinstance(expected, Malformed):
        assert got == expected
    else:
        assert isinstance(got, Parsed) and (minute_label(got.minute), got.level) == expected


def test_expected_counts_counts_only_the_level_per_minute():
    lines = [
        b"2017-07-30 14:09:08 ERROR a",
        b"2017-07-30 14:09:50 ERROR b",
        b"2017-07-30 14:10:00 ERROR c",
        b"2017-07-30 14:09:08 INFO d",
        b"2017-02-30 14:09:08 ERROR invalid",
        b"junk",
    ]
    assert expected_counts(lines, LineFormat()) == {"2017-07-30 14:09:00": 2,
                                                    "2017-07-30 14:10:00": 1}
    assert expected_counts(lines, LineFormat.from_flags(level="INFO")) == {
        "2017-07-30 14:09:00": 1}
