"""The default line rule (logcount/formats/rule.py) against the independent reference
(tests/support/reference.py), by hypothesis: lines near every edge of
`[DATE[T| ]TIME[fraction][zone]] LEVEL ...`."""

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from logcount.formats.rule import Malformed, Parsed, minute_label, parse_record
from logcount.formats.spec import LineFormat
from tests.support.reference import reference_parse

DEFAULT = LineFormat()


# Each part of a line: what the rule takes (`ok`) and what it does not (`bad`). A line is built
# either from takeable parts only (timestamps may still be out of range: day 31 in a 30-day
# month, hour 24, second 60, zones past 18:00) or from any parts, or is random bytes.
def _two(lo: int, hi: int):
    return st.integers(lo, hi).map(lambda n: b"%02d" % n)


def _part(ok, bad, takeable: bool):
    return ok if takeable else st.one_of(ok, bad)


years = (st.sampled_from([0, 1, 2, 1900, 2000, 2016, 2017, 9998, 9999])
         | st.integers(0, 9999)).map(lambda n: b"%04d" % n)
dates = st.builds(lambda y, mo, d: b"%s-%s-%s" % (y, mo, d), years, _two(0, 13), _two(0, 32))
clocks = st.builds(lambda h, mi, s: b"%s:%s:%s" % (h, mi, s), _two(0, 25), _two(0, 61),
                   _two(0, 61))
PARTS = {
    "bracket": (st.sampled_from([(b"", b""), (b"[", b"]")]),
                st.sampled_from([(b"[", b""), (b"", b"]"), (b"[", b"] "), (b"(", b")")])),
    "t": (st.sampled_from([b" ", b"T"]), st.sampled_from([b"t", b"_", b"  ", b""])),
    "clock": (clocks, st.sampled_from([b"14:09", b"14:09:0", b"14:9:08", b"14-09-08"])),
    "fraction": (st.just(b"") | st.builds(lambda sep, n: sep + b"123456789"[:n],
                                          st.sampled_from([b".", b","]), st.integers(1, 9)),
                 st.sampled_from([b".", b",", b".1234567890", b":123", b".12a", b"\xd9\xa1"])),
    "zone": (st.just(b"") | st.just(b"Z")
             | st.builds(lambda sign, hh, colon, mm: sign + hh + colon + mm,
                         st.sampled_from([b"+", b"-"]), _two(0, 20), st.sampled_from([b":", b""]),
                         _two(0, 61)),
             st.sampled_from([b"z", b"+", b"-0", b"+08", b"+8:00", b"UTC", b"+08:0", b" Z"])),
    "sep": (st.just(b" "), st.sampled_from([b"  ", b"\t", b"", b"\r", b"\n", b" \r"])),
    "level": (st.sampled_from([b"ERROR", b"INFO", b"WARN", b"error", b"Error", b"E"]),
              st.sampled_from([b"ERR0R", b"", b"\xc3\x89RROR", b"ERROR:", b"ERROR-X"])),
    "after": (st.sampled_from([b" ", b""]), st.sampled_from([b"  ", b"\t", b"\r", b"\n", b"1"])),
    "end": (st.sampled_from([b"", b"\r", b"\n", b"\r\n"]),
            st.sampled_from([b"\n\r", b"\r\r", b"\n\n", b" \n"])),
}


@st.composite
def shaped(draw, takeable: bool) -> bytes:
    p = {name: draw(_part(ok, bad, takeable)) for name, (ok, bad) in PARTS.items()}
    after = p["after"]
    message = draw(st.binary(max_size=30)) if after == b" " or not takeable else b""
    return (p["bracket"][0] + draw(dates) + p["t"] + p["clock"] + p["fraction"] + p["zone"]
            + p["bracket"][1] + p["sep"] + p["level"] + after + message + p["end"])


lines = st.one_of(shaped(True), shaped(False), st.binary(max_size=60))


@given(lines)
@settings(max_examples=3000, suppress_health_check=[HealthCheck.too_slow])
@example(b"2016-02-29 00:00:00 ERROR")
@example(b"1900-02-29 00:00:00 ERROR x")
@example(b"2000-02-29 00:00:00 ERROR x")
@example(b"2017-04-31 00:00:00 ERROR x")
@example(b"2017-07-30 14:09:08 ERROR\n")
@example(b"[2017-07-30 14:09:08,123] ERROR x (kafka.server.KafkaServer)")
@example(b"2017-07-30T14:09:08.123456789+08:00 error x\r\n")
@example(b"2017-12-31T23:30:00-01:00 ERROR new year")
@example(b"2016-03-01T00:30:00+01:00 ERROR back to the leap day")
@example(b"0001-01-01T00:00:00+00:01 ERROR below year 1")
@example(b"9999-12-31T23:59:00-00:01 ERROR past year 9999")
@example(b"2017-07-30T14:09:08+18:00 ERROR")
@example(b"2017-07-30T14:09:08+18:01 ERROR")
@example(b"2017-07-30T14:09:08+0560 ERROR")
def test_the_default_rule_agrees_with_the_reference(raw):
    ref = reference_parse(raw)
    got = parse_record(raw, DEFAULT)
    if ref is None:
        assert isinstance(got, Malformed), (raw, got)
    else:
        assert isinstance(got, Parsed), (raw, got, ref)
        assert (minute_label(got.minute), got.level) == (ref[0], ref[1].upper()), (raw, got, ref)


@pytest.mark.parametrize(("raw", "expected"), [
    (b"2017-07-30 14:09:08 ERROR x", ("2017-07-30 14:09:00", "ERROR")),
    (b"[2017-07-30T14:09:08,5] error", ("2017-07-30 14:09:00", "error")),
    (b"2017-12-31T23:30:00-01:00 ERROR", ("2018-01-01 00:30:00", "ERROR")),
    (b"2018-01-01T00:29:59.9+01:00 ERROR", ("2017-12-31 23:29:00", "ERROR")),
    (b"2016-02-28T23:30:00-0100 ERROR", ("2016-02-29 00:30:00", "ERROR")),
    (b"2017-02-28T23:30:00-01:00 ERROR", ("2017-03-01 00:30:00", "ERROR")),
    (b"2017-07-30T14:09:08+05:30 ERROR", ("2017-07-30 08:39:00", "ERROR")),
    (b"2017-07-30T14:09:08Z WARN\r\n", ("2017-07-30 14:09:00", "WARN")),
    (b"9999-12-31T23:59:59Z ERROR", ("9999-12-31 23:59:00", "ERROR")),
    (b"2017-07-30 14:09:08 ERROR\n\n", None),
    (b"[2017-07-30 14:09:08 ERROR", None),
    (b"2017-07-30T14:09:08+18:01 ERROR", None),
    (b"0001-01-01T00:00:00+00:01 ERROR", None),
    (b"9999-12-31T23:59:00-00:01 ERROR", None),
])
def test_the_reference_by_hand(raw, expected):
    """The oracle itself, on cases worked out by hand (days, months and years carried)."""
    assert reference_parse(raw) == expected
