"""pipeline/lines.py against the independent reference (tests/reference.py), by hypothesis."""

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from pipeline.lines import Malformed, Parsed, parse_line
from tests.reference import reference_parse

pytestmark = pytest.mark.unit


def _two(lo: int, hi: int):
    return st.integers(lo, hi).map(lambda n: b"%02d" % n)


# Timestamps near and beyond the valid ranges (day 31 in a 30-day month, hour 24, second 60...).
timestamps = st.builds(
    lambda y, mo, d, h, mi, s: b"%s-%s-%s %s:%s:%s" % (y, mo, d, h, mi, s),
    st.integers(0, 9999).map(lambda n: b"%04d" % n), _two(0, 13), _two(0, 32),
    _two(0, 25), _two(0, 61), _two(0, 61),
)
levels = st.sampled_from([b"ERROR", b"INFO", b"WARN", b"DEBUG", b"error", b"ERRORX", b"E",
                          b"ERR0R", b"", b"\xc3\x89RROR"])
separators = st.sampled_from([b" ", b"  ", b"\t", b"", b"\r", b"\n", b" \r"])
tails = st.binary(max_size=40)
lines = st.one_of(
    st.builds(lambda t, s1, lv, s2, m, cr: t + s1 + lv + s2 + m + cr,
              timestamps, separators, levels, separators, tails,
              st.sampled_from([b"", b"\r", b"\r\r"])),
    st.binary(max_size=60),
)


@given(lines)
@settings(max_examples=3000, suppress_health_check=[HealthCheck.too_slow])
@example(b"2016-02-29 00:00:00 ERROR")
@example(b"1900-02-29 00:00:00 ERROR x")
@example(b"2000-02-29 00:00:00 ERROR x")
@example(b"2017-04-31 00:00:00 ERROR x")
def test_parse_line_agrees_with_the_reference(raw):
    ref = reference_parse(raw)
    got = parse_line(raw)
    if ref is None:
        assert isinstance(got, Malformed), (raw, got)
    else:
        assert got == Parsed(*ref), (raw, got, ref)
