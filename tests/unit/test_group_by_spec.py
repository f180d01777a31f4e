"""--group-by, --max-series and --level '*' as the spec layer reads them: each mistake is one
FormatError line, and what is valid normalises into the state's identity."""

from __future__ import annotations

import pytest

from logcount.formats.spec import DEFAULT_MAX_SERIES, Dim, FormatError, LineFormat

REGEX = r"(?<time>\S+ \S+) (?<level>\w+) (?<logger>\S+)"


def test_names_default_to_the_last_path_segment_and_sources_are_classified():
    fmt = LineFormat.from_flags(json_line_field="message",
                                group_by="host.name, ns=kubernetes.namespace_name,level")
    assert fmt.group_by == (Dim("name", "field", "host.name"),
                            Dim("ns", "field", "kubernetes.namespace_name"),
                            Dim("level", "level", "level"))
    fmt = LineFormat.from_flags(line_regex=REGEX, group_by="logger,k=key")
    assert fmt.group_by == (Dim("logger", "group", "logger"), Dim("k", "key", "key"))
    assert LineFormat.from_flags(group_by="level").group_by == (Dim("level", "level", "level"),)


@pytest.mark.parametrize(("flags", "match"), [
    ({"line_regex": REGEX, "group_by": "thread"}, "no such named group"),
    ({"line_regex": REGEX, "group_by": "time"}, "no such named group"),
    ({"group_by": "host.name"}, "default text rule"),
    ({"json_line_field": "message", "group_by": "log_time=host"}, "reserved"),
    ({"json_line_field": "message", "group_by": "log_count"}, "reserved"),
    ({"json_line_field": "message", "group_by": "a.host,b.host"}, "twice"),
    ({"json_line_field": "message", "group_by": "1x=host"}, "not a dimension NAME"),
    ({"json_line_field": "message", "group_by": "kubernetes.pod-name"}, "not a dimension NAME"),
    ({"json_line_field": "message", "group_by": "a,b,c,d"}, "at most 3"),
    ({"json_line_field": "message", "group_by": "a,,b"}, "DIM"),
    ({"json_line_field": "message", "group_by": ""}, "DIM"),
    ({"json_line_field": "message", "group_by": "x=a..b"}, "field path"),
    ({"group_by": "level", "max_series": 0}, "--max-series"),
    ({"level": "*,ERROR"}, "alone"),
    ({"level": "ERROR,*"}, "alone"),
])
def test_each_mistake_is_one_format_error(flags, match):
    with pytest.raises(FormatError, match=match) as err:
        LineFormat.from_flags(**flags)
    assert "\n" not in str(err.value)


def test_level_star_counts_every_level():
    fmt = LineFormat.from_flags(level="*", group_by="level")
    assert fmt.levels == ("*",) and fmt.level_label == "*"
    assert fmt.counts("ERROR") and fmt.counts("TRACE") and fmt.counts("50")
    plain = LineFormat.from_flags(level="error,fatal")
    assert plain.counts("FATAL") and not plain.counts("INFO")


def test_defaults_keep_the_identity_and_group_by_joins_it():
    plain = LineFormat.from_flags()
    assert plain.identity()["group_by"] is None and plain.identity()["max_series"] is None
    assert LineFormat.from_flags(max_series=5).identity() == plain.identity()
    fmt = LineFormat.from_flags(json_line_field="message", group_by="host.name,level",
                                max_series=500)
    ident = fmt.identity()
    assert ident["group_by"] == "name=host.name,level=level"
    assert ident["max_series"] == "500"
    assert LineFormat.from_identity(ident) == fmt
    same = LineFormat.from_flags(json_line_field="message", group_by="name=host.name,level",
                                 max_series=500)
    assert same.identity() == ident
    assert LineFormat.from_flags(json_line_field="message", group_by="host.name").identity() \
        ["max_series"] == str(DEFAULT_MAX_SERIES)
