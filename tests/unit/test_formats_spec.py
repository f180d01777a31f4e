"""logcount/formats/spec.py: every counting-flag mistake is a FormatError, and what is valid
normalises."""

from __future__ import annotations

from typing import Any

import pytest

from logcount.formats.spec import FormatError, LineFormat, TimePattern, java_regex_groups

LOG4J2 = r"(?<time>\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}[.,]\d{1,9}) \[[^\]]*\] +(?<level>[A-Za-z]+)"


def test_the_defaults_are_the_seed_rule():
    fmt = LineFormat.from_flags()
    assert fmt == LineFormat()
    assert (fmt.levels, fmt.timezone, fmt.kind, fmt.line_kind, fmt.pattern) == (
        ("ERROR",), "UTC", "default", "default", None)
    assert fmt.level_label == "ERROR"


@pytest.mark.parametrize(("text", "levels"), [
    ("ERROR", ("ERROR",)),
    ("error", ("ERROR",)),
    ("fatal, ERROR", ("ERROR", "FATAL")),
    ("ERROR,FATAL", ("ERROR", "FATAL")),
    ("Critical ,fatal,error,ERROR", ("CRITICAL", "ERROR", "FATAL")),
    ("50,60", ("50", "60")),
    ("level_5", ("LEVEL_5",)),
])
def test_levels_are_upper_cased_unique_and_sorted(text, levels):
    fmt = LineFormat.from_flags(level=text)
    assert fmt.levels == levels
    assert fmt.level_label == ",".join(levels)


@pytest.mark.parametrize("text", ["", " ", "ERROR,", ",ERROR", "ERROR,,FATAL", "ERR OR", "E-R",
                                  "\u00c9RROR", "ERROR;FATAL", "E*", "**"])
def test_a_bad_level_list_is_a_format_error(text):
    with pytest.raises(FormatError, match="--level"):
        LineFormat.from_flags(level=text)


@pytest.mark.parametrize("zone", ["UTC", "America/New_York", "Europe/Paris", "Asia/Kolkata",
                                  "+05:30", "-03:00", "+18:00", "-18:00", "+00:00", "EST5EDT"])
def test_known_zones_and_offsets_are_taken_as_given(zone):
    assert LineFormat.from_flags(timezone=zone).timezone == zone


@pytest.mark.parametrize("zone", ["", "Mars/Olympus_Mons", "utc", "Z", "+5:30", "+0530",
                                  "+19:00", "-18:01", "+05:60", "../etc/passwd", "America/"])
def test_an_unknown_zone_is_a_format_error(zone):
    with pytest.raises(FormatError, match="--timezone"):
        LineFormat.from_flags(timezone=zone)


def test_a_regex_needs_both_named_groups():
    fmt = LineFormat.from_flags(line_regex=LOG4J2)
    assert (fmt.kind, fmt.line_kind) == ("regex", "regex")
    for regex, missing in [(r"(?<time>\S+ \S+) (?<lvl>\w+)", "level"),
                           (r"(?<ts>\S+ \S+) (?<level>\w+)", "time"),
                           (r"(\S+ \S+) (\w+)", "level and time"),
                           # Python's spelling is not Java's named group
                           (r"(?P<time>\S+ \S+) (?P<level>\w+)", "level and time"),
                           # escaped parentheses and lookbehinds are not groups
                           (r"\(?<time>x\) (?<level>\w+)", "time"),
                           (r"(?<=x)(?<time>\S+) (?<!y)\w+", "level")]:
        with pytest.raises(FormatError, match=f"--line-regex.*{missing} missing"):
            LineFormat.from_flags(line_regex=regex)
    with pytest.raises(FormatError, match="--line-regex is empty"):
        LineFormat.from_flags(line_regex="")


def test_a_regex_java_cannot_compile_is_left_to_the_jvm_check():
    """Compiling is Java's business (the driver asks java.util.regex before any job runs); here
    only the named groups are checked."""
    regex = r"(?<time>[0-9) (?<level>\w+)"
    assert java_regex_groups(regex) == {"time", "level"}
    assert LineFormat.from_flags(line_regex=regex).line_regex == regex


@pytest.mark.parametrize(("pattern", "has_zone"), [
    ("yy/MM/dd HH:mm:ss", False),
    ("dd/MMM/yyyy:HH:mm:ss Z", True),
    ("yyyy-MM-dd'T'HH:mm:ss.SSSXXX", True),
    ("yyyy-MM-dd hh:mm:ss a", False),
    ("yyyyMMddHHmm", False),
    ("d/M/yyyy H:m", False),
    ("yyyy-MM-dd [ ]H:mm:ss", False),  # MariaDB's error log
    ("yyyy-MM-dd HH:mm[:ss[.SSS]]", False),  # nested optional sections
    ("yyyy-MM-dd HH:mm:ss[]", False),  # an empty one
    ("yyyy-MM-dd'T'HH:mm:ss''XX", True),  # a quote, quoted
    ("yyyy年MM月dd日 HH時mm分", False),  # characters but ASCII letters are literal
    ("yyyyMMddHHmmssSSS", False),
    ("dd.MM.yy hh:mm:ss.S a ZZZ", True),
    ("yyyy-MM-dd HH:mm:ss [.SSSSSSSSS]", False),
    ("yyyy-MM-dd HH:mm:ss[", False),  # java.time closes an open section at the end
])
def test_supported_time_patterns_compile(pattern, has_zone):
    assert TimePattern.compile(pattern).has_zone is has_zone
    fmt = LineFormat.from_flags(line_regex=LOG4J2, time_pattern=pattern)
    assert fmt.pattern == TimePattern.compile(pattern)


@pytest.mark.parametrize("pattern", [
    "",
    "yyyy-MM-dd",  # no hour, no minute
    "yyyy-MM-dd HH",  # no minute
    "MM-dd HH:mm",  # no year
    "yyyy-MM-dd hh:mm",  # h without a
    "yyyy-MM-dd HH:mm a",  # a without h
    "yyy-MM-dd HH:mm",  # three-letter year
    "yyyy-MMMM-dd HH:mm",  # full month names
    "yyyy-MM-dd HH:mm:ss VV",  # zone ids
    "yyyy-MM-dd HH:mm:ss.SSSSSSSSSS",  # ten fraction digits
    "yyyy-MM-dd HH:mm yyyy",  # a letter twice
    "yyyy-MM-dd'T HH:mm",  # an unclosed quote
    "EEE yyyy-MM-dd HH:mm",  # day names
    "uuuu-MM-dd HH:mm",  # Spark refuses u
    "yyyy-MM-dd kk:mm",  # other hour letters
    "yyyy-MM-dd HH:mm:ss.SSS'T",  # an unclosed quote after S
    "yyyy-MM-dd hh:mm a[ a]",  # a letter twice, optional or not
    "yyyy-MM-dd [HH]:mm",  # the hour in an optional section: 1970's dates and midnights
    "yyyy-MM[-dd] HH:mm",
    "yyyy-MM-dd HH:mm[ XXX]",  # a zone the plan could not tell apart from none
    "yyyy-MM-dd HH:mm hh",  # H and h
    "yyyy-MM-dd HH:mm:ss]",  # a ] without its [
    "yyyy-MM-dd HH:mm:ss {x}",  # java.time's reserved characters
    "yyyy-MM-dd HH:mm:ss #",
    "yyyy-MM-dd\nHH:mm",  # a line break
    "yyyy-MM-dd HH:mm XXXX",  # offsets with seconds
    "yyyy-MM-dd HH:mm ZZZZ",  # localized offsets
    "yyyy-MM-dd HH:mm '\U0001F600'",  # one character for Python, two for Java
])
def test_an_invalid_or_unsupported_time_pattern_is_a_format_error(pattern):
    with pytest.raises(FormatError, match="--time-pattern") as err:
        LineFormat.from_flags(line_regex=LOG4J2, time_pattern=pattern)
    assert "\n" not in str(err.value).replace("\\n", "")  # one line


def test_a_pattern_is_compiled_once():
    assert TimePattern.compile("yyyy-MM-dd [ ]H:mm:ss") is TimePattern.compile(
        "yyyy-MM-dd [ ]H:mm:ss")


@pytest.mark.parametrize("path", ["", " ", "a..b", ".a", "a.", "a[0]", "a'b", "a\\.b", "[a]"])
@pytest.mark.parametrize("flag", ["json_line_field", "json_time_field", "json_level_field"])
def test_an_empty_or_odd_field_path_is_a_format_error(flag, path):
    flags: dict[str, Any] = {"json_time_field": "@timestamp", "json_level_field": "level"} \
        if flag != "json_line_field" else {}
    flags[flag] = path
    with pytest.raises(FormatError, match="--json-"):
        LineFormat.from_flags(**flags)


def test_json_kinds_and_their_conflicts():
    assert LineFormat.from_flags(json_line_field="message").kind == "json-line"
    line_regex = LineFormat.from_flags(json_line_field="log", line_regex=LOG4J2)
    assert (line_regex.kind, line_regex.line_kind) == ("json-line", "regex")
    assert LineFormat.from_flags(json_time_field="@timestamp",
                                 json_level_field="log.level").kind == "json"
    with pytest.raises(FormatError, match="not both"):
        LineFormat.from_flags(json_line_field="message", json_time_field="@timestamp",
                              json_level_field="level")
    with pytest.raises(FormatError, match="not both"):
        LineFormat.from_flags(json_line_field="message", json_time_field="@timestamp")
    with pytest.raises(FormatError, match="need both"):
        LineFormat.from_flags(json_time_field="@timestamp")
    with pytest.raises(FormatError, match="need both"):
        LineFormat.from_flags(json_level_field="level")
    with pytest.raises(FormatError, match="--line-regex"):
        LineFormat.from_flags(json_time_field="t", json_level_field="l", line_regex=LOG4J2)


def test_a_time_pattern_is_taken_by_structured_logs_too():
    fmt = LineFormat.from_flags(json_time_field="time", json_level_field="level",
                                time_pattern="dd/MMM/yyyy:HH:mm:ss Z")
    assert fmt.kind == "json" and fmt.pattern is not None and fmt.pattern.has_zone


@pytest.mark.parametrize("fmt", [
    LineFormat(),
    LineFormat.from_flags(level="fatal,error", timezone="America/New_York"),
    LineFormat.from_flags(line_regex=LOG4J2, time_pattern="yy/MM/dd HH:mm:ss"),
    LineFormat.from_flags(json_line_field="log", timezone="+05:30"),
    LineFormat.from_flags(level="50,60", json_time_field="time", json_level_field="level"),
    LineFormat.from_flags(json_line_field="log", continuation_lines="skip"),
])
def test_identity_round_trips(fmt):
    ident = fmt.identity()
    assert ident["level"] == fmt.level_label
    assert LineFormat.from_identity(ident) == fmt
    # a state written before the schema names keyed them by flag: read as the same format
    flags = {"--" + k.replace("_", "-"): v for k, v in ident.items()}
    assert LineFormat.from_identity(flags) == fmt


def test_the_same_levels_in_another_order_are_the_same_identity():
    assert (LineFormat.from_flags(level="FATAL,error").identity()
            == LineFormat.from_flags(level="error, fatal").identity())
    assert (LineFormat.from_flags(timezone="UTC").identity()
            != LineFormat.from_flags(timezone="+00:00").identity())
