"""The pure twin's --group-by values (logcount/formats/rule.py): sources, missing and odd
values, the 255-byte cut, and the expectation per series."""

from __future__ import annotations

import json

from logcount.formats.rule import (
    REASON_DIMENSION,
    REASON_NOT_JSON,
    Malformed,
    Parsed,
    cut_dimension,
    expected_series,
    parse_record,
)
from logcount.formats.spec import LineFormat

LINE = "2017-07-30 14:09:08 ERROR boom"
FILEBEAT = LineFormat.from_flags(json_line_field="message",
                                 group_by="host.name,ns=kubernetes.namespace_name,level")


def _rec(**fields) -> bytes:
    return json.dumps({"message": LINE, **fields}).encode()


def test_envelope_fields_literal_key_first_then_dotted():
    p = parse_record(_rec(host={"name": "web-1"}, kubernetes={"namespace_name": "prod"}),
                     FILEBEAT)
    assert isinstance(p, Parsed) and p.dims == ("web-1", "prod", "ERROR")
    p = parse_record(_rec(**{"host.name": "lit", "host": {"name": "nested"}}), FILEBEAT)
    assert isinstance(p, Parsed) and p.dims[0] == "lit"


def test_missing_null_numbers_and_booleans():
    for value, text in [(None, ""), (42, "42"), (True, "true"), (False, "false"), ("", ""),
                        ('a|b "c"\nd', 'a|b "c"\nd')]:
        p = parse_record(_rec(host={"name": value}), FILEBEAT)
        assert isinstance(p, Parsed) and p.dims[0] == text, value
    p = parse_record(_rec(), FILEBEAT)
    assert isinstance(p, Parsed) and p.dims[:2] == ("", "")


def test_objects_and_arrays_are_invalid_dimensions_but_other_reasons_win():
    assert parse_record(_rec(host={"name": {"a": 1}}), FILEBEAT) == Malformed(REASON_DIMENSION)
    assert parse_record(_rec(host={"name": [1]}), FILEBEAT) == Malformed(REASON_DIMENSION)
    bad_line = json.dumps({"message": "junk", "host": {"name": []}}).encode()
    assert parse_record(bad_line, FILEBEAT) != Malformed(REASON_DIMENSION)


def test_values_are_cut_at_255_bytes_on_a_character_boundary():
    assert cut_dimension("a" * 300) == "a" * 255
    cut = cut_dimension("a" * 254 + "\u00e9" * 3)  # 2-byte characters across the cut
    assert cut == "a" * 254 and len(cut.encode()) == 254
    cut = cut_dimension("\U0001f600" * 100)  # 4-byte characters
    assert cut == "\U0001f600" * 63 and len(cut.encode()) == 252
    p = parse_record(_rec(host={"name": "\u00e9" * 1000}), FILEBEAT)
    assert isinstance(p, Parsed) and p.dims[0] == "\u00e9" * 127


def test_regex_groups_level_and_key():
    fmt = LineFormat.from_flags(line_regex=r"(?<time>\S+ \S+) (?<level>\w+) (?<logger>\S+)?",
                                group_by="logger,level,k=key", level="*")
    p = parse_record(b"2017-07-30 14:09:08 warn com.x.Y rest", fmt, b"k\xff1")
    assert isinstance(p, Parsed)
    assert p == Parsed(p.minute, "WARN", ("com.x.Y", "WARN", "k\ufffd1"))
    p = parse_record(b"2017-07-30 14:09:08 info ", fmt, None)
    assert isinstance(p, Parsed) and p.dims == ("", "INFO", "")


def test_expected_series_counts_per_minute_and_values():
    fmt = LineFormat.from_flags(level="*", group_by="level")
    records = [(None, b"2017-07-30 14:09:08 ERROR a"), (None, b"2017-07-30 14:09:09 INFO b"),
               (None, b"2017-07-30 14:09:10 error c"), (None, b"junk")]
    assert expected_series(records, fmt) == {("2017-07-30 14:09:00", "ERROR"): 2,
                                             ("2017-07-30 14:09:00", "INFO"): 1}


def test_an_escaped_lone_surrogate_is_not_json_as_in_spark_4_2_and_a_pair_is_one_character():
    assert cut_dimension("\ud800x") == "?x"
    for doc in (b'"host": {"name": "\\ud800"}', b'"other": ["\\udc00"]', b'"\\udbff": 1'):
        p = parse_record(b'{"message": "' + LINE.encode() + b'", ' + doc + b'}', FILEBEAT)
        assert p == Malformed(REASON_NOT_JSON), doc
    p = parse_record(b'{"message": "' + LINE.encode() + b'", "host": {"name": "\\ud83d\\ude00"}}',
                     FILEBEAT)
    assert isinstance(p, Parsed) and p.dims[0] == "\U0001f600"
