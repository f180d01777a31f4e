"""The synthetic shapes (logcount/formats/shapes.py) are what they claim: every record's generation
metadata agrees with the pure rule under the shape's own `logcount run` flags, the seed shape is
today's generator, and docs/log-formats.md shows RUN_FLAGS verbatim."""

from __future__ import annotations

import hashlib
import re
import shlex
from datetime import datetime
from pathlib import Path

import pytest

from logcount.formats.catalogue import RUN_FLAGS, SHAPES, TRACE_SHAPES, ZONELESS, run_format
from logcount.formats.rule import Malformed, Parsed, expected_counts, parse_record
from logcount.formats.shapes import (
    SyntheticRecord,
    expected_from_records,
    synthetic_lines,
    synthetic_records,
)
from logcount.formats.spec import LineFormat

ROOT = Path(__file__).resolve().parents[2]
ZONES = ("UTC", "America/New_York", "+05:30", "-03:30", "Australia/Lord_Howe")


def line_format(shape: str, timezone: str = "UTC", level: str | None = None) -> LineFormat:
    """LineFormat.from_flags built from RUN_FLAGS[shape] (and `timezone`, `level`)."""
    return run_format(shape, timezone=timezone, **({"level": level} if level is not None else {}))


def assert_agrees(records: list[SyntheticRecord], fmt: LineFormat) -> None:
    for r in records:
        got = parse_record(r.value, fmt)
        if r.minute is None:
            assert r.level is None
            assert isinstance(got, Malformed), f"{r.value!r} should be malformed, got {got}"
        else:
            assert r.level is not None
            assert got == Parsed(r.minute, r.level), f"{r.value!r}: generated as {r}, read {got}"


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("timezone", ZONES)
def test_every_record_agrees_with_the_rule(shape, timezone):
    fmt = line_format(shape, timezone)
    for seed in (1, 2, 3):
        records = list(synthetic_records(shape, 600, seed, 0.05, timezone=timezone))
        assert_agrees(records, fmt)
        assert expected_from_records(records, fmt.levels) == expected_counts(
            (r.value for r in records), fmt)


@pytest.mark.parametrize("shape", sorted(set(SHAPES) - ZONELESS))
def test_zoned_shapes_need_no_timezone(shape):
    records = list(synthetic_records(shape, 600, 4, 0.05, timezone="Asia/Kolkata"))
    assert_agrees(records, line_format(shape, "UTC"))


@pytest.mark.parametrize("shape", sorted(ZONELESS))
@pytest.mark.parametrize("start", (datetime(2017, 11, 5, 4), datetime(2017, 3, 12, 5)))
def test_zone_less_shapes_across_dst_changes(shape, start):
    """New York's fall-back (the repeated 01:xx) and spring-forward (the skipped 02:xx) inside the
    span: a repeated local time is never written for its second pass (it would read back as the
    first), and no skipped local time is ever written."""
    records = list(synthetic_records(shape, 1500, 5, 0.02, timezone="America/New_York",
                                     span_minutes=240, start=start))
    assert_agrees(records, line_format(shape, "America/New_York"))
    minutes = {r.minute for r in records if r.minute is not None}
    second_pass = range(minute_index(datetime(2017, 11, 5, 6)), minute_index(
        datetime(2017, 11, 5, 7)))  # 01:00-01:59 EST, written 01:xx like the EDT pass before
    assert len(minutes) > 160 and not minutes & set(second_pass)


def minute_index(t: datetime) -> int:
    return (t.toordinal() - 1) * 1440 + t.hour * 60 + t.minute


@pytest.mark.parametrize("shape", SHAPES)
def test_malformed_records_are_malformed_and_varied(shape):
    fmt = line_format(shape)
    records = list(synthetic_records(shape, 400, 6, malformed_ratio=1.0))
    assert all(r.minute is None and r.level is None for r in records)
    assert_agrees(records, fmt)
    reasons = {o.reason for o in (parse_record(r.value, fmt) for r in records)
               if isinstance(o, Malformed)}  # all of them (assert_agrees)
    assert len({r.value for r in records}) >= 7 and len(reasons) >= 3, reasons


@pytest.mark.parametrize("shape", SHAPES)
def test_levels_mix_and_the_malformed_ratio(shape):
    records = list(synthetic_records(shape, 3000, 8))
    fmt = line_format(shape)
    levels = {r.level for r in records if r.level is not None}
    # MariaDB writes three levels only: [Note], [Warning] and [ERROR].
    assert set(fmt.levels) & levels and len(levels) >= (3 if shape == "mariadb" else 4)
    malformed = sum(r.minute is None for r in records)
    assert 10 <= malformed <= 60  # about 1% of 3000
    assert sum(expected_from_records(records, fmt.levels).values()) > 300


@pytest.mark.parametrize("shape", ("zap", "ecs-dotted", "ecs-nested"))
def test_lower_case_levels_where_the_shape_writes_them(shape):
    values = b"\n".join(r.value for r in synthetic_records(shape, 500, 9))
    assert b'"error"' in values


def test_the_stamps_vary_in_the_ways_real_logs_do():
    rfc = b"\n".join(r.value for r in synthetic_records("rfc3339", 500, 10))
    for zone in (rb"Z ", rb"[+-]\d\d:\d\d ", rb"[+-]\d{4} ", rb"\.\d{9}[+Z-]", rb",\d+[+Z-]"):
        assert re.search(zone, rfc), zone
    docker = [r.value for r in synthetic_records("fluentbit", 200, 11, 0) if b'"log"' in r.value]
    assert all(re.search(rb'\\n",', v) for v in docker)  # Docker's json-file keeps the \n


def test_the_same_seed_gives_the_same_records():
    for shape in SHAPES:
        assert list(synthetic_records(shape, 200, 12)) == list(synthetic_records(shape, 200, 12))


@pytest.mark.parametrize(("args", "digest"), [
    ((5000, 1, 0.01), "7392ca824015fc2f5dbb8b54e04463a63a2ee6a0ba2ff008c50caeff8e2bc57c"),
    ((20000, 7, 0.05), "c15a44d94077a2ead6d4bbb5bb335a40538c0bccfd8d31eec8c9a7676af00045"),
    ((3000, 3, 0.2, 90), "8d464aa271d99963c4d7d394483b805f1579ef7909d31abd1f349b2a23f415c2"),
])
def test_the_seed_shape_is_todays_generator(args, digest):
    """Digests of the seed generator's output before the formats, its one malformed line that
    the widened rule now reads (2017-07-30T14:09:08 ERROR iso separator) replaced by
    2017-07-30T14:09 ERROR no seconds."""
    lines = list(synthetic_lines(*args))
    assert hashlib.sha256(b"\n".join(lines)).hexdigest() == digest
    n, seed, malformed_ratio = args[:3]
    assert lines == [r.value for r in synthetic_records("seed", n, seed, malformed_ratio,
                                                        span_minutes=(args[3:] or (1440,))[0])]


def test_expected_from_records_counts_the_given_levels_by_minute():
    m = minute_index(datetime(2017, 7, 30, 3, 49))
    records = [SyntheticRecord(b"a", m, "ERROR"), SyntheticRecord(b"b", m, "FATAL"),
               SyntheticRecord(b"c", m + 1, "INFO"), SyntheticRecord(b"", None, None)]
    assert expected_from_records(records, ("error", "FATAL")) == {"2017-07-30 03:49:00": 2}


def test_an_unknown_shape_is_refused():
    with pytest.raises(ValueError, match="unknown shape"):
        next(synthetic_records("syslog", 1, 1))


# --- docs/log-formats.md ----------------------------------------------------------------------


def documented_shapes() -> dict[str, tuple[str, str]]:
    """shape -> (sample line, run command) from docs/log-formats.md's "Each source's flags"."""
    doc = (ROOT / "docs" / "log-formats.md").read_text()
    section = doc.split("\n## Each source's flags\n", 1)[1].split("\n## ", 1)[0]
    found = re.findall(r"\(`--shape ([a-z0-9-]+)`\):\n\n```text\n(.*?)\n```\n\n```sh\n(.*?)\n```",
                       section, flags=re.S)
    return {shape: (sample, run) for shape, sample, run in found}


def test_the_log_formats_doc_shows_every_shape_with_its_run_flags_verbatim():
    shown = documented_shapes()
    assert list(shown) == list(SHAPES)
    for shape, (_sample, run) in shown.items():
        flags = RUN_FLAGS[shape] + (("--continuation-lines", "skip") if shape in TRACE_SHAPES
                                    else ())
        assert run == " ".join(("logcount run", shlex.join(flags))).rstrip(), shape
        assert shlex.split(run)[2:] == list(flags)


def test_the_documented_samples_are_counted_by_their_flags():
    for shape, (sample, _run) in documented_shapes().items():
        fmt = line_format(shape)
        got = parse_record(sample.encode(), fmt)
        assert isinstance(got, Parsed) and got.level in fmt.levels, (shape, got)


def test_every_level_is_expected_with_a_star():
    from logcount.formats.shapes import expected_from_records, synthetic_records

    records = list(synthetic_records("log4j2", 300, 5))
    every = expected_from_records(records, ("*",))
    assert sum(every.values()) == sum(r.minute is not None for r in records)
    assert sum(every.values()) > sum(expected_from_records(records, ("ERROR",)).values())
