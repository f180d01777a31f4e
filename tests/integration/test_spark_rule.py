"""The Spark SQL line rule (logcount/formats/spark.py, in pipeline/job.py's batch_frame) against the
independent reference and against its pure twin (logcount/formats/rule.py).

The rule's tests need no Kafka: the same plan runs on a DataFrame of (partition, offset, value)
built in memory, over tricky lines and thousands of generated ones, and must agree line by line
with tests/support/reference.py on what is malformed and per minute on what is counted, and, for
every format kind, with formats.rule.parse_record on each record's reason, minute and counted flag.
The last tests read a real topic: a batch's two shapes (one task, or a scan per partition with
exchanges) must give the same result.
"""

import os
import random
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from pyspark.sql import functions as F

from logcount.formats.rule import Continued, Malformed, Parsed, minute_label, parse_record
from logcount.formats.spark import dim_columns, line_frame
from logcount.formats.spec import LineFormat
from logcount.pipeline.hour_records import minute_index
from logcount.pipeline.job import batch_frame, batch_result, compute_batch, projections, read_ranges
from logcount.pipeline.offsets import OffsetRange
from tests.support.corpus import FORMATS, GROUPED, corpus, grouped_corpus
from tests.support.inputs import build_input
from tests.support.pattern_corpus import Tok, pattern_text, patterns, text_for
from tests.support.readers import end_offsets
from tests.support.reference import is_counted, reference_parse

T = b"2017-07-30 14:09:08 "
TRICKY = [
    T + b"ERROR some message", T + b"ERROR", T + b"ERROR\r", T + b"ERROR\r\r", T + b"ERROR\n",
    T + b"ERRORS x", T + b"ERROR  padded", T + b" ERROR x", T + b"error x", T + b"INFO  x",
    T + b"E" * 100 + b" long level", T + b"ERROR" + b"x" * 70, T + b"ERROR \xff\xfe",
    T + b"ERR0R x", T + b"\xc3\x89RROR x", T, T[:-1], b"2016-02-29 00:00:00 ERROR leap",
    b"1900-02-29 00:00:00 ERROR not leap", b"2000-02-29 00:00:00 ERROR leap",
    b"2017-04-31 00:00:00 ERROR", b"2017-02-30 10:00:00 ERROR x", b"2017-07-30 24:00:00 ERROR x",
    b"2017-07-30 23:60:00 ERROR x", b"2017-07-30 23:59:60 ERROR x", b"0000-01-01 00:00:00 ERROR x",
    b"0001-01-01 00:00:00 ERROR x", b"2017-13-01 00:00:00 ERROR x", b"2017-00-10 00:00:00 ERROR x",
    b"2017-07-00 00:00:00 ERROR x", b"", b"\r", b"\x00\x01garbage", b"2017-07-30T14:09:08 ERROR x",
    b"2017-07-30 14:09:08\tERROR x", b"\xc3\x89017-07-30 14:09:08 ERROR x",
    b"\xd9\xa2017-07-30 14:09:08 ERROR arabic digit", b"x" * 1000,
    # the widened default rule: brackets, T, fractions, zones, case, terminators
    b"[2017-07-30 14:09:08,123] ERROR x (kafka.server.KafkaServer)", b"[2017-07-30 14:09:08] ERROR",
    b"[2017-07-30 14:09:08 ERROR x", b"2017-07-30 14:09:08] ERROR x",
    b"2017-07-30T14:09:08.123456789+08:00 ERROR x", b"2017-07-30T14:09:08-0530 error x\r\n",
    b"2017-07-30 14:09:08.1234567890 ERROR x", b"2017-07-30 14:09:08, ERROR x",
    b"2017-07-30T14:09:08+18:01 ERROR x", b"2017-07-30T14:09:08+05:60 ERROR x",
    b"2017-07-30T00:00:00+00:01 ERROR x", b"0001-01-01T00:00:00+00:01 ERROR below year 1",
    b"9999-12-31T23:59:00-00:01 ERROR past 9999", b"9999-12-31T23:59:59Z ERROR",
    T + b"Error\n", T + b"ERROR\r\n", T + b"ERROR\n\n", T + b"eRRor x",
]


def _generated(n: int, seed: int) -> list[bytes]:
    """Lines near the rule's edges: fields out of range, odd separators and levels, binary."""
    rng = random.Random(seed)
    levels = [b"ERROR", b"INFO", b"WARN", b"error", b"ERRORX", b"E", b"ERR0R", b"", b"\xc3\x89RROR"]
    seps = [b" ", b"  ", b"\t", b"", b"\r", b"\n", b" \r"]
    out = []
    for _ in range(n):
        if rng.random() < 0.1:
            out.append(rng.randbytes(rng.randrange(60)))
            continue
        ts = b"%04d-%02d-%02d %02d:%02d:%02d" % (
            rng.choice([0, 1, 1900, 2000, 2016, 2017, 9999]), rng.randrange(14), rng.randrange(33),
            rng.randrange(26), rng.randrange(62), rng.randrange(62))
        out.append(ts + rng.choice(seps) + rng.choice(levels) + rng.choice(seps)
                   + rng.randbytes(rng.randrange(30)) + rng.choice([b"", b"\r", b"\r\r"]))
    return out


def test_the_spark_rule_agrees_with_the_reference(spark):
    lines = TRICKY + _generated(5000, seed=11)
    df = spark.createDataFrame([(i % 3, i, v) for i, v in enumerate(lines)],
                               "partition int, offset long, value binary")
    rows = batch_frame(df, LineFormat(), len(lines)).collect()
    result = batch_result(rows, [OffsetRange(p, 0, len(lines)) for p in range(3)])

    expected_bad = {i for i, v in enumerate(lines) if reference_parse(v) is None}
    got_bad = {m.offset: m for m in result.malformed}
    wrong = sorted((lines[i], "malformed" if i in got_bad else "valid")
                   for i in expected_bad ^ set(got_bad))
    assert not wrong, wrong[:10]
    expected_counts: dict[str, int] = {}
    for v in lines:
        ref = reference_parse(v)
        if ref is not None and is_counted(ref[1]):
            expected_counts[ref[0]] = expected_counts.get(ref[0], 0) + 1
    assert {minute_label(k): n for k, n in result.counts.items()} == expected_counts
    assert result.records == len(lines)
    for i, bad in got_bad.items():  # each malformed ref carries its own line's facts
        assert bad.partition == i % 3
        assert bad.raw_prefix == lines[i][:256] and bad.raw_length == len(lines[i])
    assert {m.reason for m in result.malformed} >= {"empty line", "invalid timestamp"}
    assert 100 < len(expected_bad) < len(lines) - 100  # the corpus exercises both sides


# Records per format in the Spark-vs-twin test (one DataFrame, one job per format), and the
# seed of its corpus: LOGCOUNT_FORMAT_SEED=n runs another draw (the failure names the lines).
TWIN_LINES = 2500
TWIN_SEED = int(os.environ.get("LOGCOUNT_FORMAT_SEED", "26"))


def twin_disagreements(spark, fmt: LineFormat, lines: list[bytes],
                       keys: list[bytes | None] | None = None) -> list[tuple]:
    """Every record on which formats.spark.line_frame and formats.rule.parse_record disagree:
    (record, the twin's outcome, Spark's (reason, minute label, counted[, dimension values]))."""
    keys = keys or [None] * len(lines)
    df = spark.createDataFrame([(i % 4, i, v, k) for i, (v, k) in enumerate(zip(lines, keys,
                                                                                strict=True))],
                               "partition int, offset long, value binary, key binary")
    dcols = dim_columns(len(fmt.group_by))
    skip = fmt.continuation == "skip"
    cont = [F.col("cont")] if skip else [F.lit(False).alias("cont")]
    rows = line_frame(df, fmt).select("offset", "reason", "counted", "minute", "mi",
                                      *dcols, *cont).collect()
    assert sorted(r["offset"] for r in rows) == list(range(len(lines)))
    wrong: list[tuple] = []
    for r in rows:
        raw = lines[r["offset"]]
        twin = parse_record(raw, fmt, keys[r["offset"]])
        minute = None
        if isinstance(twin, Continued) or r["cont"]:  # neither counted nor malformed
            if not (isinstance(twin, Continued) and r["cont"] and r["reason"] is None
                    and not r["counted"]):
                wrong.append((raw, twin, ("cont", r["cont"], r["reason"], r["counted"])))
            continue
        if r["reason"] is None:  # a well formed record has exactly one of minute and mi
            if (r["minute"] is None) == (r["mi"] is None):
                wrong.append((raw, twin, ("minute", r["minute"], "mi", r["mi"])))
                continue
            minute = minute_index(bytes(r["minute"])) if r["minute"] is not None else r["mi"]
        if isinstance(twin, Malformed):
            ok = r["reason"] == twin.reason
        else:
            ok = (r["reason"] is None and minute == twin.minute
                  and r["counted"] == fmt.counts(twin.level)
                  and tuple(r[c] for c in dcols) == twin.dims)
        if not ok:
            label = minute_label(minute) if minute is not None else None
            wrong.append((raw, keys[r["offset"]], twin,
                          (r["reason"], label, r["counted"], *(r[c] for c in dcols))))
    return wrong


@pytest.mark.parametrize("interpreted", [False, True], ids=["generated", "interpreted"])
@pytest.mark.parametrize("name", list(FORMATS))
def test_the_spark_plan_and_the_pure_twin_agree_on_every_record(spark, name, interpreted):
    """For every kind of format (the default rule with its fast path and under
    IANA zones and offsets, --line-regex with and without --time-pattern, JSON envelopes,
    structured JSON), generated records near every edge (tests/support/corpus.py)
    get the same DLQ reason from both, or the same UTC minute and counted flag; with the row
    projections generated and interpreted alike (a batch of few records per range runs
    interpreted: pipeline/job.py batch_shape)."""
    fmt = FORMATS[name][0]
    lines = corpus(name, TWIN_LINES, TWIN_SEED)
    with projections(spark, interpreted):
        wrong = twin_disagreements(spark, fmt, lines)
    assert not wrong, f"{len(wrong)} of {len(lines)} disagree under {fmt}: {wrong[:8]}"
    outcomes = [parse_record(v, fmt) for v in lines]
    malformed = sum(isinstance(o, Malformed) for o in outcomes)
    counted = sum(not isinstance(o, Malformed | Continued) and o.level in fmt.levels
                  for o in outcomes)
    assert malformed > 100 and counted > 100, "the corpus must exercise both sides"
    continued = sum(isinstance(o, Continued) for o in outcomes)
    assert (continued > 100) == (fmt.continuation == "skip"), "and continuation lines"


def _whole_stage(frame) -> bool:
    """Whether the frame's physical plan has whole-stage generated code ("*(1) Project ...")."""
    return "*(" in frame._jdf.queryExecution().executedPlan().toString()


def test_an_interpreted_batch_generates_no_code_and_leaves_the_session_as_it_was(spark):
    """A small batch (pipeline/job.py projections) runs with neither generated projections nor
    whole-stage code (Spark collapses no stage under NO_CODEGEN); the setting is unset again
    after it, and a value set on purpose (spark-submit --conf) wins and stays."""
    key = "spark.sql.codegen.factoryMode"

    def frame():
        return spark.range(0, 100).groupBy((F.col("id") % 7).alias("k")).count()

    assert _whole_stage(frame())
    with projections(spark, True):
        assert spark.conf.get(key) == "NO_CODEGEN"
        small = frame()
        assert not _whole_stage(small)
        assert sorted(r["count"] for r in small.collect()) == [14, 14, 14, 14, 14, 15, 15]
    assert spark.conf.get(key, None) is None and _whole_stage(frame())
    with projections(spark, False):
        assert _whole_stage(frame())
    spark.conf.set(key, "CODEGEN_ONLY")
    try:
        with projections(spark, True):
            assert spark.conf.get(key) == "CODEGEN_ONLY" and _whole_stage(frame())
        assert spark.conf.get(key, None) == "CODEGEN_ONLY"
    finally:
        spark.conf.unset(key)


@pytest.mark.parametrize("name", list(GROUPED))
def test_the_plan_and_the_twin_agree_on_every_dimension_value(spark, name):
    """--group-by values (JSON fields, regex groups, the level, the record key) and --level '*'
    on generated (key, value) records (tests/support/corpus.py GROUPED): the same reason, or
    the same minute, counted flag and every dimension value, cut and replaced alike."""
    fmt = GROUPED[name][0]
    records = grouped_corpus(name, TWIN_LINES, TWIN_SEED)
    keys, lines = [k for k, _ in records], [v for _, v in records]
    for interpreted in (False, True):
        with projections(spark, interpreted):
            wrong = twin_disagreements(spark, fmt, lines, keys)
        assert not wrong, f"{len(wrong)} of {len(lines)} disagree under {fmt}: {wrong[:6]}"
    outcomes = [parse_record(v, fmt, k) for k, v in records]
    dims = {o.dims for o in outcomes if isinstance(o, Parsed) and fmt.counts(o.level)}
    assert len(dims) >= 3, "the corpus must exercise several series"


def _edge(reason: str, raw: bytes, **flags: Any):  # from_flags' keywords
    return pytest.param(LineFormat.from_flags(**flags), raw, id=reason.split(":")[0])


_NY = {"timezone": "America/New_York"}
_ANY = r"(?<time>\S+ \S+) (?<level>\S+)"
_APACHE = {"level": "500", "line_regex": r'\S+ \S+ \S+ \[(?<time>[^\]]+)\] "[^"]*" (?<level>\d+)',
           "time_pattern": "dd/MMM/yyyy:HH:mm:ss Z"}
# Records on which the plan and the twin once disagreed, one per kind: the edges where Java's
# readings (java.time, java.util.regex, Spark's variant) differ from Python's by default.
EDGES = [
    _edge("lmt-new-york: java.time keeps New York's LMT offset -4:56:02 with its seconds, the "
         "twin floors it to -4:57 (twin 05:27, Spark 05:26)", b"0002-01-29 00:30:32 error x",
         **_NY),
    _edge("lmt-lord-howe: LMT +10:36:20, floored to +10:36 by the twin (twin 12:24, Spark 12:23)",
         b"0001-01-29 23:00:06 ERROR x", timezone="Australia/Lord_Howe"),
    _edge("exponent-level: 5.0E1 is a double in Spark's variant ('50.0'), Decimal('50') in the "
         "twin ('50', counted)", b'{"time": 1501423748123, "level": 5.0E1}', level="50",
         json_time_field="time", json_level_field="level"),
    _edge("month-case: Spark's MMM reads 'jul' (counted at 12:09), the twin only 'Jul' (invalid "
         "timestamp)", b'::1 - - [30/jul/2017:14:09:08 +0200] "GET / HTTP/1.1" 500 1', **_APACHE),
    _edge("ampm-case: Spark's a reads 'pm', the twin only 'PM'", b"2017-07-30 02:09:08 pm ERROR",
         line_regex=r"(?<time>\S+ \S+ \S+) (?<level>\w+)", time_pattern="yyyy-MM-dd hh:mm:ss a"),
    _edge("year-edge-local-0000: a local year 0000 moved into year 1 by its zone is counted by "
         "Spark (0001-01-01 05:29), invalid for the twin",
         b'::1 - - [31/Dec/0000:23:59:42 -0530] "GET / HTTP/1.1" 500 1', **_APACHE),
    _edge("year-edge-utc-0000: a local year 0001 moved into year 0 by its zone is an invalid "
         "timestamp for Spark, out of range for the twin",
         b'::1 - - [01/Jan/0001:00:00:23 +1800] "GET / HTTP/1.1" 500 1', **_APACHE),
    _edge("single-letter-width: Spark's d, M, H, m, s read three digits ('030'), the twin one or "
         "two", b"030/07/2017 04:09:08 ERROR", line_regex=r"(?<time>\S+ \S+) (?<level>\w+)",
         time_pattern="d/M/yyyy H:m:s"),
    _edge("fraction-width: Spark's SSS reads .12, the twin exactly three digits",
         b"2017-07-30T14:09:08.12+02:00 ERROR", line_regex=r"(?<time>\S+) (?<level>\w+)",
         time_pattern="yyyy-MM-dd'T'HH:mm:ss.SSSXXX"),
    _edge("lowercase-z: Spark's XXX reads 'z' as UTC, the twin only 'Z'",
         b"2017-07-30T14:09:08.123z ERROR", line_regex=r"(?<time>\S+) (?<level>\w+)",
         time_pattern="yyyy-MM-dd'T'HH:mm:ss.SSSXXX"),
    _edge("java-dot: Java's . stops at \\r, U+0085, U+2028 and U+2029 (no match), Python's only "
         "at \\n", b"2017-07-30 14:09:08 [a\rb] ERROR x",
         line_regex=r"(?<time>\S+ \S+) \[.*\] (?<level>\w+)"),
    _edge("java-dollar: Java's $ also matches before a final \\r (counted), Python's only before "
         "\\n", b"2017-07-30 14:09:08 ERROR\r\r", line_regex=r"(?<time>\S+ \S+) (?<level>\w+)$"),
    _edge("nul-in-level: the plan splits the groups at NUL, so a level 'X\\x00ERROR' counts as "
         "ERROR", b"2017-07-30 14:09:08 X\x00ERROR", line_regex=_ANY),
    _edge("nul-in-time: the plan reads a time cut at NUL ('...14:09:08' of '...14:09:08\\x00x'), "
         "the twin the whole group (invalid)", b"2017-07-30 14:09:08\x00x ERROR",
         line_regex=_ANY),
    _edge("mariadb-early: the twin read [ ] as literal brackets (invalid), Spark as an optional "
         "space (counted)", b"2026-11-26  3:34:44 0 [ERROR] x", timezone="Asia/Tokyo",
         line_regex=r"(?<time>\S+ +\S+) \d+ \[(?<level>\w+)\]",
         time_pattern="yyyy-MM-dd [ ]H:mm:ss"),
    _edge("mariadb-late: the hour of two digits after the skipped section",
         b"2026-11-26 13:34:44 0 [ERROR] x", timezone="Asia/Tokyo",
         line_regex=r"(?<time>\S+ +\S+) \d+ \[(?<level>\w+)\]",
         time_pattern="yyyy-MM-dd [ ]H:mm:ss"),
    _edge("no-backtracking: an optional space taken is never given back (invalid for Spark, "
         "counted by a regex)", b"2026-11-26 13:34:44 ERROR",
         line_regex=r"(?<time>\S+ \S+) (?<level>\w+)", time_pattern="yyyy-MM-dd[ ] HH:mm:ss"),
    _edge("adjacent-digits: a one-letter hour before mm takes every digit (invalid for Spark)",
         b"202611261334 ERROR", line_regex=r"(?<time>\S+) (?<level>\w+)",
         time_pattern="yyyyMMddHmm"),
    _edge("overflow: a year past 294247 failed the whole job (long overflow); both say invalid",
         b"+300000-01-01 00:00:00 ERROR", line_regex=r"(?<time>\S+ \S+) (?<level>\w+)",
         time_pattern="yyyy-MM-dd HH:mm:ss"),
    _edge("overflow-apache: the same year inside the Apache pattern",
         b'::1 - - [30/Jul/+300000:14:09:08 +0000] "GET / HTTP/1.1" 500 1', **_APACHE),
    _edge("sign-in-text: a '-' before six digits of the clock is no year: counted",
         b"20261126-133444 ERROR", line_regex=r"(?<time>\S+) (?<level>\w+)",
         time_pattern="yyyyMMdd-HHmmss"),
    _edge("year-10000: a local year 10000 in Auckland's summer (+13:00) is 9999 in UTC",
         b"+10000-01-01 00:30:00 ERROR", timezone="Pacific/Auckland",
         line_regex=r"(?<time>\S+ \S+) (?<level>\w+)", time_pattern="yyyy-MM-dd HH:mm:ss"),
]


@pytest.mark.parametrize(("fmt", "raw"), EDGES)
def test_the_plan_and_the_twin_agree_where_java_and_python_read_differently(spark, fmt, raw):
    assert twin_disagreements(spark, fmt, [raw]) == []


# The time group up to a tab, then the level: a generated time text is read whole.
TAB_RE = r"(?<time>[^\t]*)\t(?<level>\w+)"
PATTERN_ZONES = ("UTC", "+05:30", "America/New_York", "-10:00")


@given(tokens=patterns(), seed=st.integers(0, 2**32 - 1), zone=st.sampled_from(PATTERN_ZONES))
@settings(max_examples=int(os.environ.get("LOGCOUNT_PATTERN_EXAMPLES", "24")), deadline=None,
          suppress_health_check=list(HealthCheck), database=None)
@example(tokens=[Tok("yyyy"), Tok("lit", "-"), Tok("MM"), Tok("lit", "-"), Tok("dd"),
                 Tok("lit", " "), Tok("opt", inner=(Tok("lit", " "),)), Tok("H"), Tok("lit", ":"),
                 Tok("mm"), Tok("lit", ":"), Tok("ss")], seed=43, zone="Asia/Tokyo")
def test_generated_patterns_are_read_alike_by_the_plan_and_the_twin(spark, tokens, seed, zone):
    """Patterns as well as lines are generated (tests/support/pattern_corpus.py): every
    letter and width --time-pattern takes, quoted text, optional sections, adjacent numbers and
    zones, each with time texts near its edges. Every pattern the flags accept is read alike
    by Spark's try_to_timestamp and the twin's parser, line by line."""
    pattern = pattern_text(tokens)
    fmt = LineFormat.from_flags(line_regex=TAB_RE, time_pattern=pattern, timezone=zone)
    rng = random.Random(seed)
    lines = [(text_for(tokens, rng) + "\t" + rng.choice(("ERROR", "INFO"))).encode()
             for _ in range(80)]
    wrong = twin_disagreements(spark, fmt, lines)
    assert not wrong, f"{len(wrong)} of {len(lines)} under {pattern!r} ({zone}): {wrong[:6]}"


def test_malformed_refs_come_back_bounded_per_partition(spark):
    lines = [b"garbage %d" % i for i in range(300)] + [b"2017-07-30 14:09:08 ERROR x"] * 30
    df = spark.createDataFrame([(i % 2, i, v) for i, v in enumerate(lines)],
                               "partition int, offset long, value binary")
    rows = batch_frame(df, LineFormat(), 10).collect()
    bad = [r for r in rows if r["bad_offset"] is not None]
    # 10 per partition plus the one that says where to cut, the first by offset
    assert sorted((r["p"], r["rn"]) for r in bad) == sorted(
        (p, k) for p in (0, 1) for k in range(1, 12))
    assert max(r["bad_offset"] for r in bad if r["p"] == 0) == 20
    assert sum(r["n"] for r in rows if r["minute"] is not None or r["mi"] is not None) == 30


@pytest.mark.parametrize("name", [*FORMATS, *GROUPED])
def test_the_rule_is_two_steps_and_its_plan_the_chain_of_selects(spark, name, monkeypatch):
    """line_frame builds the rule's columns in one select that refers to its own earlier columns
    (lateral column aliases) instead of one select per stage. Ungrouped, the batch's optimised
    plan must be the chain's, Project for Project (expression ids aside), for every kind of
    format, continuation lines and a lateness horizon included. Grouped, Spark may compute a
    dimension's field in an earlier Project than the chain did: each column is still defined
    once, and the rows are the same."""
    import re

    from pyspark import SparkContext

    from logcount.formats import spark as rule_plan
    from logcount.pipeline import job

    fmt = (FORMATS.get(name) or GROUPED[name])[0]
    rule = rule_plan._stages(SparkContext._active_spark_context, fmt)
    assert rule.lateral is not None, "every format's names are distinct: two steps"
    if name in FORMATS:
        lines, keys = corpus(name, 400, TWIN_SEED), None
    else:
        records = grouped_corpus(name, 400, TWIN_SEED)
        keys, lines = [k for k, _ in records], [v for _, v in records]
    df = spark.createDataFrame(
        [(i % 4, i, v, keys[i] if keys else None) for i, v in enumerate(lines)],
        "partition int, offset long, value binary, key binary")

    def chain(frame, fmt, cut=True):
        for stage in rule.stages:
            frame = frame.select(*stage)
        return rule_plan.cut_dims(frame, len(fmt.group_by)) if cut else frame

    def built() -> tuple[list[str], list[str]]:
        frames = [batch_frame(df, fmt, bound, minute_index("2017-07-30 14:09"))
                  for bound in (10, None)]
        plans = [re.sub(r"#\d+L?", "#", f._jdf.queryExecution().optimizedPlan().toString())
                 for f in frames]
        return plans, sorted(map(str, frames[0].collect()))

    (plans, rows) = built()
    monkeypatch.setattr(job, "line_frame", chain)
    (chained, chained_rows) = built()
    assert rows == chained_rows and len(rows) > 10
    if name in FORMATS:
        assert plans == chained
    else:
        def defined(plan: str) -> list[str]:
            return sorted(re.findall(r" AS (\w+)#", plan))

        assert [defined(p) for p in plans] == [defined(p) for p in chained]


def test_plans_built_once_keep_their_format_bound_and_horizon_apart(spark):
    """batch_frame reuses its columns per (session, format, bound, horizon): a batch must still
    get exactly its own, whatever was built before it, and the same twice in a row; on the seed
    fast path (UTC: minutes as text) and the general path (+00:00: the same minutes, as
    indexes) alike, the late cut included."""
    lines = [b"2017-07-30 14:08:59 ERROR early", b"2017-07-30 14:09:08 ERROR a",
             b"2017-07-30 14:09:09 INFO b", b"2017-07-30 14:10:00 INFO c"] + [b"junk"] * 5
    df = spark.createDataFrame([(0, i, v) for i, v in enumerate(lines)],
                               "partition int, offset long, value binary")
    other = spark.createDataFrame([(1, 100 + i, v) for i, v in enumerate(reversed(lines))],
                                  "partition int, offset long, value binary")

    def run(frame, fmt, bound, late=None):
        rows = batch_frame(frame, fmt, bound, late).collect()
        res = batch_result(rows, [OffsetRange(0, 0, len(lines))])
        return ({minute_label(k): n for k, n in res.counts.items()},
                sorted((m.offset, m.reason) for m in res.malformed))

    errors = ({"2017-07-30 14:08:00": 1, "2017-07-30 14:09:00": 1}, 5)
    late = minute_index("2017-07-30 14:09")
    for zone in ("UTC", "+00:00", "UTC", "+00:00"):
        error = LineFormat.from_flags(timezone=zone)
        info = LineFormat.from_flags(level="info", timezone=zone)
        counts, bad = run(df, error, 10)
        assert (counts, len(bad)) == errors
        counts, bad = run(df, info, 10)
        assert counts == {"2017-07-30 14:09:00": 1, "2017-07-30 14:10:00": 1} and len(bad) == 5
        counts, bad = run(df, error, 2)  # two refs plus the one that says where to cut
        assert [o for o, _ in bad] == [4, 5, 6]
        counts, bad = run(df, error, None)  # no bound: every ref, none numbered
        assert (counts, [o for o, _ in bad]) == (errors[0], [4, 5, 6, 7, 8])
        assert "rn" not in batch_frame(df, error, None).columns  # not numbered: no rn step
        counts, bad = run(df, error, 10, late)
        assert counts == {"2017-07-30 14:09:00": 1} and (0, "late") in bad
        counts, bad = run(df, info, 10, late)  # only counted lines are late
        assert counts == {"2017-07-30 14:09:00": 1, "2017-07-30 14:10:00": 1} and len(bad) == 5
        counts, bad = run(other, error, 10)  # another DataFrame, the same columns
        assert (counts, len(bad)) == errors and min(o for o, _ in bad) == 100


def test_one_task_and_partitioned_batches_agree(spark, endpoints, names):
    """compute_batch runs a small batch as one task (coalesce(1), no exchange) and a large one
    partitioned, and numbers the malformed refs only when a range is longer than its share of
    them: the same ranges must give the same counts, refs and cut either way, on input with
    committed and aborted transactions and malformed lines."""
    inp = build_input(endpoints.bootstrap, names.topic("in"), names.txn_id + "-in")
    ranges = [OffsetRange(p, 0, end) for p, end in sorted(end_offsets(
        endpoints.bootstrap, inp.topic).items())]
    total = sum(r.size for r in ranges)

    def both(max_malformed: int):
        got = [compute_batch(spark, endpoints.bootstrap, inp.topic, ranges, LineFormat(),
                             {"group.id": f"{names.group}-spark"}, max_malformed,
                             single_task_max=bound) for bound in (total, total - 1)]
        one, parted = [(r.counts, r.malformed, r.ranges, r.records) for r in got]
        assert one == parted
        return got[0]

    whole = both(len(ranges) * total)  # no range is longer than its share: no numbering
    assert whole.counts == {minute_index(m): n for m, n in inp.expected.items()}
    assert {(m.partition, m.offset) for m in whole.malformed} == inp.malformed
    assert whole.ranges == ranges
    # A share just above the most malformed lines of a partition: numbered, but nothing cut.
    most = max(sum(1 for p, _ in inp.malformed if p == r.partition) for r in ranges)
    assert most < max(r.size for r in ranges), "the input must make this batch numbered"
    numbered = both(len(ranges) * most)
    assert ((numbered.counts, numbered.malformed, numbered.ranges, numbered.records)
            == (whole.counts, whole.malformed, whole.ranges, whole.records))
    cut = both(8)  # two refs per partition: every partition with more is cut
    assert len(cut.malformed) <= 8 and cut.ranges != ranges
    assert {(m.partition, m.offset) for m in cut.malformed} <= inp.malformed


def test_a_lateness_bound_is_applied_only_when_a_batch_needs_it(spark, endpoints, names,
                                                                monkeypatch):
    """compute_batch runs a batch without its lateness bound, and again with it only when it
    counted a minute before the bound (or at once with late_first): each way must give what the
    bound's plan gives (counts, late and malformed refs, the cut, records), and a batch with no
    earlier minute must take one job, not two."""
    from logcount.pipeline import job

    inp = build_input(endpoints.bootstrap, names.topic("in"), names.txn_id + "-in")
    ranges = [OffsetRange(p, 0, end) for p, end in sorted(end_offsets(
        endpoints.bootstrap, inp.topic).items())]
    options = {"group.id": f"{names.group}-spark"}
    built: list[int | None] = []
    plan = job.batch_plan

    def noted(*a, **kw):
        built.append(a[7])  # late_before
        return plan(*a, **kw)

    monkeypatch.setattr(job, "batch_plan", noted)
    minutes = sorted(minute_index(m) for m in inp.expected)
    total = sum(r.size for r in ranges)

    def batch(late, first, max_malformed):
        built.clear()
        r = compute_batch(spark, endpoints.bootstrap, inp.topic, ranges, LineFormat(), options,
                          max_malformed, late_before=late, late_first=first)
        return (r.counts, r.malformed, r.ranges, r.records), list(built)

    for max_malformed in (4 * total, 8):  # whole; cut
        middle = minutes[len(minutes) // 2]
        on_demand, jobs = batch(middle, False, max_malformed)
        at_once, first_jobs = batch(middle, True, max_malformed)
        assert on_demand == at_once
        assert jobs[0] is None and middle in jobs and set(first_jobs) == {middle}
        assert min(on_demand[0], default=middle) >= middle
        if max_malformed > total:
            assert any(m.reason == "late" for m in on_demand[1])
            assert sum(on_demand[0].values()) == sum(
                n for m, n in inp.expected.items() if minute_index(m) >= middle)
        # Nothing before the bound: one plan, without it, and what the bound's plan gives.
        none_late, jobs = batch(minutes[0], False, max_malformed)
        assert set(jobs) == {None}
        assert none_late == batch(minutes[0], True, max_malformed)[0]


def test_each_partition_s_newest_minute_comes_with_the_counts_unchanged(spark, endpoints,
                                                                        names):
    """With `newest` (--emit-final) the batch also gives each partition's newest minute of its
    committed well-formed lines of any level (not of malformed, aborted or late ones) from the
    partition masks, on one task or partitioned, with the counts, refs and cut of the batch
    without it; a partition with no such line has none."""
    inp = build_input(endpoints.bootstrap, names.topic("in"), names.txn_id + "-in")
    ranges = [OffsetRange(p, 0, end) for p, end in sorted(end_offsets(
        endpoints.bootstrap, inp.topic).items())]
    options = {"group.id": f"{names.group}-spark"}
    total = sum(r.size for r in ranges)

    def batch(newest, bound, max_malformed=4 * total, late=None):
        return compute_batch(spark, endpoints.bootstrap, inp.topic, ranges, LineFormat(), options,
                             max_malformed, late_before=late, single_task_max=bound,
                             newest=newest)

    want = {p: minute_index(m) for p, m in inp.newest.items()}
    assert len(want) == 4
    for bound in (total, total - 1):  # one task; partitioned
        plain, with_newest = batch(False, bound), batch(True, bound)
        assert with_newest.newest == want and plain.newest == {}
        assert ((with_newest.counts, with_newest.malformed, with_newest.ranges)
                == (plain.counts, plain.malformed, plain.ranges))
        cut = batch(True, bound, 8)
        assert (cut.counts, cut.malformed) == (batch(False, bound, 8).counts,
                                               batch(False, bound, 8).malformed)
        assert all(cut.newest[p] <= want[p] for p in cut.newest)
    # A late line gives its partition no time: with every minute late, only the other levels'
    # lines do.
    late = batch(True, total, late=max(want.values()) + 1)
    assert late.counts == {} and sum(m.reason == "late" for m in late.malformed) == sum(
        inp.expected.values())
    assert late.newest == {p: minute_index(m) for p, m in inp.newest_other.items()}


def test_kafka_is_read_through_v2_and_agrees_with_v1(spark, endpoints, names):
    """The session reads Kafka through DataSource V2 (pipeline/spark.py SQL_CONF): the plan is a
    BatchScan, Spark's own default still lists kafka as V1 (what we take it out of), and V1
    reading the same transactional input with malformed lines gives the same batch."""
    from logcount.pipeline.spark import V1_SOURCES_DEFAULT, V1_SOURCES_KEY

    jvm = spark.sparkContext._jvm
    default = jvm.org.apache.spark.sql.internal.SQLConf.USE_V1_SOURCE_LIST().defaultValueString()
    assert default == V1_SOURCES_DEFAULT, "Spark's default changed: update V1_SOURCES_DEFAULT"
    inp = build_input(endpoints.bootstrap, names.topic("in"), names.txn_id + "-in")
    ranges = [OffsetRange(p, 0, end) for p, end in sorted(end_offsets(
        endpoints.bootstrap, inp.topic).items())]
    options = {"group.id": f"{names.group}-spark"}
    plan = read_ranges(spark, endpoints.bootstrap, inp.topic, ranges, options) \
        ._jdf.queryExecution().executedPlan().toString()
    assert "BatchScan" in plan, plan

    def batch():
        r = compute_batch(spark, endpoints.bootstrap, inp.topic, ranges, LineFormat(), options)
        return r.counts, r.malformed, r.ranges, r.records

    v2 = batch()
    ours = spark.conf.get(V1_SOURCES_KEY)
    spark.conf.set(V1_SOURCES_KEY, default)
    try:
        v1 = batch()
    finally:
        spark.conf.set(V1_SOURCES_KEY, ours)
    assert v2 == v1
    assert v2[0] == {minute_index(m): n for m, n in inp.expected.items()}
    assert {(m.partition, m.offset) for m in v2[1]} == inp.malformed


def test_a_batch_counts_continuation_lines_apart_only_when_skipped(spark):
    """batch_frame under --continuation-lines: skip keeps a trace's lines out of the DLQ and the
    counts, in the batch's records and its continuation count; dlq sends them to the DLQ as
    before; a late cut still applies to the counted lines alone."""
    lines = [b"2017-07-30 14:09:08 ERROR boom", b"java.lang.IllegalStateException: x",
             b"\tat a.B.c(B.java:1)", b"Caused by: y.Z: w", b"\t... 3 more", b"garbage", b"",
             b"2017-07-30 14:10:01 ERROR again", b"Traceback (most recent call last):"]
    df = spark.createDataFrame([(i % 2, i, v) for i, v in enumerate(lines)],
                               "partition int, offset long, value binary")
    ranges = [OffsetRange(p, 0, len(lines)) for p in (0, 1)]

    def run(mode: str, late=None):
        fmt = LineFormat.from_flags(continuation_lines=mode)
        res = batch_result(batch_frame(df, fmt, 10, late).collect(), ranges)
        return ({minute_label(k): n for k, n in res.counts.items()},
                sorted(m.offset for m in res.malformed), res.continuation, res.records)

    both = {"2017-07-30 14:09:00": 1, "2017-07-30 14:10:00": 1}
    assert run("dlq") == (both, [1, 2, 3, 4, 5, 6, 8], 0, 9)
    assert run("skip") == (both, [5], 6, 9)
    late = minute_index("2017-07-30 14:10")
    assert run("skip", late) == ({"2017-07-30 14:10:00": 1}, [0, 5], 6, 9)


def _thirds(ranges: list[OffsetRange]) -> list[list[OffsetRange]]:
    """Consecutive batches over `ranges`: each partition in three slices, then a batch that
    reads only two of the partitions (another `assign`)."""
    cuts = [[OffsetRange(r.partition, r.start + r.size * k // 3, r.start + r.size * (k + 1) // 3)
             for r in ranges] for k in range(3)]
    return [*cuts, [r for r in ranges if r.partition in (0, 2)]]


def test_a_kept_plan_reads_each_batch_s_own_ranges(spark, endpoints, names, monkeypatch):
    """The stage keeps a batch's analysed plan per shape and only replaces its Kafka offsets
    (pipeline/plan_reuse.py): batch after batch over other ranges and partitions, numbered or
    not, grouped or not, it must give exactly what a plan built anew gives, and the slices'
    counts must add up to the input's."""
    from logcount.pipeline import plan_reuse

    inp = build_input(endpoints.bootstrap, names.topic("in"), names.txn_id + "-in")
    ranges = [OffsetRange(p, 0, end) for p, end in sorted(end_offsets(
        endpoints.bootstrap, inp.topic).items())]
    options = {"group.id": f"{names.group}-spark"}
    replays: list[int] = []
    replayed = plan_reuse._replayed

    def counted_replay(*a):
        replays.append(1)
        return replayed(*a)

    monkeypatch.setattr(plan_reuse, "_replayed", counted_replay)

    def batch(rs, fmt, max_malformed, reuse):
        monkeypatch.setattr(plan_reuse, "enabled", reuse)
        r = compute_batch(spark, endpoints.bootstrap, inp.topic, rs, fmt, options, max_malformed)
        return r.counts, r.series, r.malformed, r.ranges, r.records

    total = sum(r.size for r in ranges)
    for fmt in (LineFormat(), LineFormat.from_flags(group_by="level", level="ERROR,INFO")):
        for max_malformed in (4 * total, 40):  # not numbered; numbered, and cut
            summed: dict[int, int] = {}
            for rs in _thirds(ranges) * 2:  # twice: the second round's first batch reuses too
                kept = batch(rs, fmt, max_malformed, True)
                assert kept == batch(rs, fmt, max_malformed, False)
                assert kept[4] > 0  # records read (aborted ones and markers are not)
                if max_malformed > total and len(rs) == 4:
                    for minute, n in kept[0].items():
                        summed[minute] = summed.get(minute, 0) + n
            if max_malformed > total and not fmt.group_by:
                assert summed == {minute_index(m): 2 * n for m, n in inp.expected.items()}
    assert len(replays) > 20, "the kept plans were not reused"


def test_a_kept_plan_keeps_to_its_source_kind_and_source(spark, endpoints, names, monkeypatch,
                                                        caplog):
    """A plan is kept per Kafka source kind: with kafka read through V1 again, a batch is not
    the kept V2 plan. A plan with no Kafka relation is built anew every time, and a kept plan
    this Spark cannot replay is built anew from then on, said once."""
    from py4j.protocol import Py4JError

    from logcount.pipeline import plan_reuse
    from logcount.pipeline.job import batch_plan
    from logcount.pipeline.spark import V1_SOURCES_DEFAULT, V1_SOURCES_KEY

    topic = names.topic("in")
    build_input(endpoints.bootstrap, topic, names.txn_id + "-in", n_plain=40, n_txn=12)
    ranges = [OffsetRange(p, 0, end) for p, end in sorted(end_offsets(
        endpoints.bootstrap, topic).items())]
    options = {"group.id": f"{names.group}-spark"}

    def plan() -> str:
        frame = batch_plan(spark, endpoints.bootstrap, topic, ranges, LineFormat(), options,
                           None, None, 1)
        return frame._jdf.queryExecution().executedPlan().toString()

    assert "BatchScan" in plan() and "BatchScan" in plan()
    ours = spark.conf.get(V1_SOURCES_KEY)
    spark.conf.set(V1_SOURCES_KEY, V1_SOURCES_DEFAULT)
    try:
        assert "BatchScan" not in plan() and "BatchScan" not in plan()
    finally:
        spark.conf.set(V1_SOURCES_KEY, ours)

    local = spark.createDataFrame([(0, 0, b"x")], "partition int, offset long, value binary")
    built: list[int] = []

    def build():
        built.append(1)
        return batch_frame(local, LineFormat(), None)

    for _ in range(3):
        plan_reuse.frame(spark, ("local",), {"startingOffsets": "x"}, build)
    assert len(built) == 3

    def broken(*_):
        raise Py4JError("An error occurred while calling o1.transformDown")

    monkeypatch.setattr(plan_reuse, "_replayed", broken)
    shape = ("broken", names.topic("x"))
    n = read_ranges(spark, endpoints.bootstrap, topic, ranges, options).count()
    fresh: list[int] = []

    def read():
        fresh.append(1)
        return read_ranges(spark, endpoints.bootstrap, topic, ranges, options)

    for _ in range(3):
        frame = plan_reuse.frame(
            spark, shape, {**dict.fromkeys(plan_reuse.OFFSET_OPTIONS, "?"), "topic": topic}, read)
        assert frame.count() == n > 0
    assert len(fresh) == 3
    assert sum("built anew from here on" in r.getMessage() for r in caplog.records) == 1
