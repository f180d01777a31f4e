"""--continuation-lines: the rule (logcount/formats/rule.py CONTINUATION) on what JVM and Python
traces print, the lines it must leave alone, the flag's checks and its place in the identity, the
batch's count and its log line."""

from __future__ import annotations

import random
from typing import Any

import pytest

from logcount.core.batch_line import BatchLine, parse_batch_line
from logcount.formats.rule import CONTINUED, Malformed, Parsed, is_continuation, parse_record
from logcount.formats.spec import FormatError, LineFormat
from logcount.pipeline.job import batch_result
from logcount.pipeline.offsets import OffsetRange
from tests.support.corpus import FORMATS, TRACE_HEADS, corpus

SKIP = LineFormat.from_flags(continuation_lines="skip")
LOG4J2 = (r"(?<time>\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}[.,]\d{1,9}) \[[^\]]*\] +"
          r"(?<level>[A-Za-z]+)")
PYTHON = r"(?<time>\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2},\d{3}) - \S+ - (?<level>[A-Za-z]+) - "

# As OpenJDK 17 prints a chained exception with a suppressed one (Throwable.printStackTrace),
# then the same uncaught.
JAVA = b"""java.lang.RuntimeException: outer failure
\tat Boom.middle(Boom.java:4)
\tat java.base/java.lang.reflect.Method.invoke(Method.java:569)
\tSuppressed: java.io.IOException: close failed
\t\tat Boom.main(Boom.java:8)
\t\t... 7 more
Caused by: java.lang.IllegalStateException: inner cause
\tat Boom.inner(Boom.java:2)
\t... 9 more
Exception in thread "main" java.lang.RuntimeException: outer failure
Caused by: com.example.Boom$Inner
\t... 12 common frames omitted
... 3 common frames omitted""".split(b"\n")
# As CPython 3.11 prints chained exceptions (logging.exception's text), blank lines included.
PYTHON_TRACE = b"""Traceback (most recent call last):
  File "/tmp/boom.py", line 5, in inner
    raise KeyError("missing")
KeyError: 'missing'

During handling of the above exception, another exception occurred:

Traceback (most recent call last):
  File "/tmp/boom.py", line 9, in middle
    raise ValueError("bad value") from exc
    ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
ValueError: bad value

The above exception was the direct cause of the following exception:

__main__.BoomError: outer
KeyboardInterrupt
  [Previous line repeated 996 more times]
  + Exception Group Traceback (most recent call last):
  | ExceptionGroup: two (2 sub-exceptions)""".split(b"\n")
NOT_CONTINUATION = [b"hello", b"foo.bar baz", b"17 Error", b"error: lower case", b"Oops: x",
                    b"Caused by", b"..  12 more", b"... x more", b"\xc2\xa0at x", b"\x0bat x",
                    b"\xffValueError: x",
                    b"a..b: x", b"1a.b: x", b".Foo: x", b"Foo.: x", b"ValueError bad",
                    b"ValueError\r\r", b"java.lang.X\x85"]


@pytest.mark.parametrize("line", JAVA + PYTHON_TRACE)
def test_every_line_of_a_java_or_python_trace_is_a_continuation(line):
    assert parse_record(line, SKIP) is CONTINUED
    assert isinstance(parse_record(line, LineFormat()), Malformed)  # dlq: as before
    for terminated in (line + b"\n", line + b"\r\n"):
        assert parse_record(terminated, SKIP) is CONTINUED


@pytest.mark.parametrize("line", NOT_CONTINUATION)
def test_other_refused_lines_stay_malformed(line):
    assert not is_continuation(line)
    assert parse_record(line, SKIP) == parse_record(line, LineFormat())
    assert isinstance(parse_record(line, SKIP), Malformed)


@pytest.mark.parametrize("regex, logged", [
    (LOG4J2, b"2017-07-30 14:09:08.123 [main] ERROR com.example.OrderService - payment declined"),
    (PYTHON, b"2017-07-30 14:09:08,123 - app.db - ERROR - query failed"),
    (None, b"2017-07-30 14:09:08 ERROR x"),
])
def test_a_trace_under_each_text_recipe_and_inside_an_envelope(regex, logged):
    fmt = LineFormat.from_flags(line_regex=regex, continuation_lines="skip")
    assert isinstance(parse_record(logged, fmt), Parsed)
    assert all(parse_record(line, fmt) is CONTINUED for line in JAVA + PYTHON_TRACE)
    env = LineFormat.from_flags(json_line_field="log", line_regex=regex, continuation_lines="skip")
    assert parse_record(b'{"log": "\\tat a.B(B.java:1)\\n", "stream": "stderr"}', env) is CONTINUED
    assert parse_record(b'{"log": ""}', env) is CONTINUED
    # the envelope's own faults stay malformed: no line to continue anything
    assert parse_record(b'{"msg": "\\tat x"}', env) == Malformed(
        "line field missing or not a string")
    assert parse_record(b"\tat x", env) == Malformed("not a JSON object")


def test_a_log_line_is_never_a_continuation_whatever_it_starts_with():
    indented = LineFormat.from_flags(line_regex=r"[ \t]*(?<time>\S+ \S+) (?<level>[A-Za-z]+)",
                                     continuation_lines="skip")
    plain = parse_record(b"2017-07-30 14:09:08 ERROR x", SKIP)
    assert isinstance(plain, Parsed)
    assert parse_record(b"\t2017-07-30 14:09:08 ERROR x", indented) == Parsed(plain.minute, "ERROR")
    # refused for its time, and starting with a blank: a continuation
    assert parse_record(b"\t2017-07-30 25:09:08 ERROR x", indented) is CONTINUED
    # a Python exception line that is a valid log line under the layout
    exc = LineFormat.from_flags(line_regex=r"(?<level>[A-Za-z]+): (?<time>\S+ \S+)",
                                continuation_lines="skip", level="ValueError")
    assert isinstance(parse_record(b"ValueError: 2017-07-30 14:09:08", exc), Parsed)
    assert parse_record(b"ValueError: bad", exc) is CONTINUED


@pytest.mark.parametrize("name", [n for n in FORMATS if n.endswith("-skip")])
def test_skip_changes_only_refused_lines_that_continue(name):
    """Property over the spark-rule corpus: skip's outcome is dlq's, except a line dlq refuses
    that is empty or matches the rule."""
    skip = FORMATS[name][0]
    dlq = LineFormat.from_identity({**skip.identity(), "continuation_lines": "dlq"})
    assert dlq.continuation == "dlq" and dlq != skip
    for raw in corpus(name, 1500, random.Random(name).randrange(1000)):
        a, b = parse_record(raw, dlq), parse_record(raw, skip)
        if b is CONTINUED:
            assert isinstance(a, Malformed) and a.reason not in (
                "not a JSON object", "line field missing or not a string"), raw
        else:
            assert a == b, raw


def test_the_trace_corpus_holds_every_kind():
    assert sum(map(is_continuation, TRACE_HEADS)) > 20
    assert sum(not is_continuation(h) for h in TRACE_HEADS) > 10


def test_the_flag_is_checked_and_belongs_to_the_identity():
    with pytest.raises(FormatError, match="must be dlq or skip"):
        LineFormat.from_flags(continuation_lines="drop")
    with pytest.raises(FormatError, match="structured JSON logs"):
        LineFormat.from_flags(json_time_field="t", json_level_field="l", continuation_lines="skip")
    assert LineFormat.from_flags(json_time_field="t", json_level_field="l").continuation == "dlq"
    assert LineFormat().identity()["continuation_lines"] == "dlq"
    assert LineFormat.from_identity(SKIP.identity()) == SKIP
    assert LineFormat.from_identity({"--level": "ERROR"}).continuation == "dlq"  # an older state


def test_the_batch_counts_continuation_rows_apart():
    rows: list[dict[str, Any]] = [
        {"p": None, "minute": b"2017-07-30 14:09", "mi": None, "bad_offset": None, "reason": None,
         "raw": None, "len": None, "n": 3, "rn": None, "cont": None},
        {"p": None, "minute": None, "mi": None, "bad_offset": None, "reason": None, "raw": None,
         "len": None, "n": 7, "rn": None, "cont": True},
        {"p": 0, "minute": None, "mi": None, "bad_offset": 4, "reason": "empty line", "raw": b"",
         "len": 0, "n": 1, "rn": None, "cont": None},
    ]
    res = batch_result(rows, [OffsetRange(0, 0, 11)])
    assert (res.records, res.continuation, sum(res.counts.values()), len(res.malformed)) == (
        11, 7, 3, 1)
    no_cont = [{k: v for k, v in r.items() if k != "cont"} for r in rows if not r["cont"]]
    assert batch_result(no_cont, [OffsetRange(0, 0, 4)]).continuation == 0


def test_the_batch_line_shows_continuation_only_when_skipped():
    dlq = BatchLine(3, ((0, 0, 9),), 9, 1, 0, 2, 0.5, 0.01)
    assert "continuation" not in dlq.text() and parse_batch_line(dlq.text()) == dlq
    skip = BatchLine(3, ((0, 0, 9),), 9, 1, 0, 2, 0.5, 0.01, 6)
    assert "late 0, continuation 6, minutes touched 2" in skip.text()
    assert parse_batch_line(skip.text()) == skip
