"""The Spark SQL line rule (pipeline/job.py batch_frame) against the independent reference.

The rule's tests need no Kafka: the same plan runs on a DataFrame of (partition, offset, value)
built in memory, over tricky lines and thousands of generated ones, and must agree line by line
with tests/reference.py on what is malformed and per minute on what is counted. The last test
reads a real topic: a batch's two shapes (one task, or a scan per partition with exchanges)
must give the same result.
"""

import random

import pytest

from pipeline.job import batch_frame, batch_result, compute_batch, read_ranges
from pipeline.offsets import OffsetRange
from tests.helpers import end_offsets
from tests.integration.input_builder import build_input
from tests.reference import reference_parse

pytestmark = pytest.mark.integration

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


@pytest.fixture(scope="module")
def spark():
    from pipeline.spark import spark_session

    session = spark_session("local[2]", "logcount-rule-test")
    yield session
    session.stop()


def test_the_spark_rule_agrees_with_the_reference(spark):
    lines = TRICKY + _generated(5000, seed=11)
    df = spark.createDataFrame([(i % 3, i, v) for i, v in enumerate(lines)],
                               "partition int, offset long, value binary")
    rows = batch_frame(df, "ERROR", len(lines)).collect()
    result = batch_result(rows, [OffsetRange(p, 0, len(lines)) for p in range(3)])

    expected_bad = {i for i, v in enumerate(lines) if reference_parse(v) is None}
    got_bad = {m.offset: m for m in result.malformed}
    wrong = sorted((lines[i], "malformed" if i in got_bad else "valid")
                   for i in expected_bad ^ set(got_bad))
    assert not wrong, wrong[:10]
    expected_counts: dict[str, int] = {}
    for v in lines:
        ref = reference_parse(v)
        if ref is not None and ref[1] == "ERROR":
            expected_counts[ref[0]] = expected_counts.get(ref[0], 0) + 1
    assert result.counts == expected_counts
    assert result.records == len(lines)
    for i, ref in got_bad.items():  # each malformed ref carries its own line's facts
        assert ref.partition == i % 3
        assert ref.raw_prefix == lines[i][:256] and ref.raw_length == len(lines[i])
    assert {m.reason for m in result.malformed} >= {"empty line", "invalid timestamp"}
    assert 100 < len(expected_bad) < len(lines) - 100  # the corpus exercises both sides


def test_malformed_refs_come_back_bounded_per_partition(spark):
    lines = [b"garbage %d" % i for i in range(300)] + [b"2017-07-30 14:09:08 ERROR x"] * 30
    df = spark.createDataFrame([(i % 2, i, v) for i, v in enumerate(lines)],
                               "partition int, offset long, value binary")
    rows = batch_frame(df, "ERROR", 10).collect()
    bad = [r for r in rows if r["bad_offset"] is not None]
    # 10 per partition plus the one that says where to cut, the first by offset
    assert sorted((r["p"], r["rn"]) for r in bad) == sorted(
        (p, k) for p in (0, 1) for k in range(1, 12))
    assert max(r["bad_offset"] for r in bad if r["p"] == 0) == 20
    assert sum(r["n"] for r in rows if r["minute"] is not None) == 30


def test_plans_built_once_keep_their_level_bound_and_horizon_apart(spark):
    """batch_frame reuses its columns per (session, level, bound, horizon): a batch must still
    get exactly its own, whatever was built before it, and the same twice in a row."""
    lines = [b"2017-07-30 14:08:59 ERROR early", b"2017-07-30 14:09:08 ERROR a",
             b"2017-07-30 14:09:09 INFO b", b"2017-07-30 14:10:00 INFO c"] + [b"junk"] * 5
    df = spark.createDataFrame([(0, i, v) for i, v in enumerate(lines)],
                               "partition int, offset long, value binary")
    other = spark.createDataFrame([(1, 100 + i, v) for i, v in enumerate(reversed(lines))],
                                  "partition int, offset long, value binary")

    def run(frame, level, bound, late=None):
        rows = batch_frame(frame, level, bound, late).collect()
        res = batch_result(rows, [OffsetRange(0, 0, len(lines))])
        return res.counts, sorted((m.offset, m.reason) for m in res.malformed)

    errors = ({"2017-07-30 14:08:00": 1, "2017-07-30 14:09:00": 1}, 5)
    for _ in range(2):
        counts, bad = run(df, "ERROR", 10)
        assert (counts, len(bad)) == errors
        counts, bad = run(df, "INFO", 10)
        assert counts == {"2017-07-30 14:09:00": 1, "2017-07-30 14:10:00": 1} and len(bad) == 5
        counts, bad = run(df, "ERROR", 2)  # two refs plus the one that says where to cut
        assert [o for o, _ in bad] == [4, 5, 6]
        counts, bad = run(df, "ERROR", None)  # no bound: every ref, none numbered
        assert (counts, [o for o, _ in bad]) == (errors[0], [4, 5, 6, 7, 8])
        assert {r["rn"] for r in batch_frame(df, "ERROR", None).collect()} == {None}
        counts, bad = run(df, "ERROR", 10, "2017-07-30 14:09")
        assert counts == {"2017-07-30 14:09:00": 1} and (0, "late") in bad
        counts, bad = run(other, "ERROR", 10)  # another DataFrame, the same columns
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
        got = [compute_batch(spark, endpoints.bootstrap, inp.topic, ranges, "ERROR",
                             {"group.id": f"{names.group}-spark"}, max_malformed,
                             single_task_max=bound) for bound in (total, total - 1)]
        one, parted = [(r.counts, r.malformed, r.ranges, r.records) for r in got]
        assert one == parted
        return got[0]

    whole = both(len(ranges) * total)  # no range is longer than its share: no numbering
    assert whole.counts == dict(inp.expected)
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


def test_kafka_is_read_through_v2_and_agrees_with_v1(spark, endpoints, names):
    """The session reads Kafka through DataSource V2 (pipeline/spark.py SQL_CONF): the plan is a
    BatchScan, Spark's own default still lists kafka as V1 (what we take it out of), and V1
    reading the same transactional input with malformed lines gives the same batch."""
    from pipeline.spark import V1_SOURCES_DEFAULT, V1_SOURCES_KEY

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
        r = compute_batch(spark, endpoints.bootstrap, inp.topic, ranges, "ERROR", options)
        return r.counts, r.malformed, r.ranges, r.records

    v2 = batch()
    ours = spark.conf.get(V1_SOURCES_KEY)
    spark.conf.set(V1_SOURCES_KEY, default)
    try:
        v1 = batch()
    finally:
        spark.conf.set(V1_SOURCES_KEY, ours)
    assert v2 == v1
    assert v2[0] == dict(inp.expected)
    assert {(m.partition, m.offset) for m in v2[1]} == inp.malformed
