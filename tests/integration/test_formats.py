"""Every log shape of logcount/formats/shapes.py through the real CLI, broker and MySQL: `logcount
produce
--synthetic --shape`, `logcount run --once` with the shape's RUN_FLAGS, `logcount sink --once`.

The expectation is never the project's parser: a synthetic record's minute (its UTC instant was
drawn before it was rendered) and level are how it was generated, and the DST and fixed-offset
lines carry UTC minutes worked out by hand. Each test ends exact: the output topic's last total
per minute, MySQL's error_log, and a DLQ holding exactly the malformed records, found by reading
the input back.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

import pytest

from logcount.core.settings import MySQLUrl
from logcount.formats.catalogue import RUN_FLAGS, ZONELESS
from logcount.formats.rule import REASONS
from logcount.formats.shapes import expected_from_records, synthetic_records
from logcount.formats.spec import parse_levels
from tests.support.databases import fresh_database
from tests.support.exact import assert_exact
from tests.support.inputs import write_lines
from tests.support.names import Names
from tests.support.readers import last_totals, read_all
from tests.support.run import cli, sink_args, stage_args

N = 1500  # records per shape through `produce --synthetic` (about 1% malformed)
N_MALFORMED = 120  # malformed records of the shape written besides, so the DLQ sees each kind


def _flag(flags: list[str], name: str, default: str) -> str:
    return flags[flags.index(name) + 1] if name in flags else default


def assert_shape_exact(endpoints, names, url, expected: dict[str, int], malformed: set[bytes],
                 n_malformed: int, level_label: str) -> None:
    """Output topic, MySQL and DLQ against an expectation known by construction."""
    values = {(m.partition(), m.offset()): m.value() or b""
              for m in read_all(endpoints.bootstrap, names.topic("in"))}
    want = {ref for ref, v in values.items() if v in malformed}
    assert len(want) == n_malformed, "every malformed record generated is in the input"
    assert_exact(endpoints.bootstrap, names, expected, url=url, malformed=want)
    out = read_all(endpoints.bootstrap, names.topic("out"))
    assert {json.loads(m.value())["level"] for m in out} == {level_label}
    dlq = [json.loads(m.value()) for m in read_all(endpoints.bootstrap, names.topic("dlq"))]
    for d in dlq:
        raw = values[(d["partition"], d["offset"])]
        assert d["reason"] in REASONS, d
        assert d["raw_length"] == len(raw)
        assert base64.b64decode(d["raw_prefix_base64"]) == raw[:256]


# (shape, the zone its zone-less times are written in, extra `run` flags)
CASES = [
    ("log4j2", "Europe/Berlin", ()),
    ("kafka", "UTC", ()),
    ("python", "Asia/Tokyo", ()),
    ("spark", "America/Los_Angeles", ()),
    ("rfc3339", "UTC", ()),
    ("filebeat", "Europe/London", ()),
    ("fluentbit", "UTC", ()),
    ("logstash", "Europe/Berlin", ()),  # written with +02:00; the stage needs no --timezone
    ("ecs-dotted", "UTC", ()),
    ("ecs-nested", "UTC", ()),
    ("zap", "UTC", ()),
    ("pino", "UTC", ()),
    ("python", "UTC", ("--level", "error,CRITICAL,Fatal")),  # several levels at once
    ("kafka", "+05:30", ()),  # a fixed offset
]


@dataclass
class ShapeRun:
    names: Names
    url: MySQLUrl
    expected: dict[str, int]
    malformed: set[bytes]
    n_malformed: int
    levels: tuple[str, ...]


def _run_case(endpoints, names: Names, url: MySQLUrl, workdir: Path,
              case: tuple[str, str, tuple[str, ...]]) -> ShapeRun:
    """produce --synthetic (and the extra malformed records), run --once, sink --once."""
    shape, zone, extra = case
    flags = [*RUN_FLAGS[shape], *extra]
    level = _flag(flags, "--level", "ERROR")
    levels = parse_levels(level)
    seed = 100 + CASES.index(case)
    records = list(synthetic_records(shape, N, seed, timezone=zone))
    extra_bad = list(synthetic_records(shape, N_MALFORMED, seed + 1, malformed_ratio=1.0,
                                       timezone=zone))
    expected = expected_from_records(records, levels)
    malformed = {r.value for r in records + extra_bad if r.minute is None}
    n_malformed = sum(r.minute is None for r in records) + len(extra_bad)
    assert expected and malformed

    expect = workdir / "expected.json"
    cli("produce", "--bootstrap-servers", endpoints.bootstrap, "--topic", names.topic("in"),
        "--synthetic", str(N), "--shape", shape, "--seed", str(seed), "--timezone", zone,
        "--level", level, "--expect", str(expect))
    assert json.loads(expect.read_text()) == expected, "produce --expect"
    write_lines(endpoints.bootstrap, names.topic("in"), [r.value for r in extra_bad])

    run_flags = [*flags, *(("--timezone", zone) if shape in ZONELESS and zone != "UTC" else ())]
    # Side by side, so no fixed /metrics port (it is no part of what a shape's run counts).
    cli(*stage_args(endpoints, names, "--once", "--metrics-port", "0", *run_flags))
    cli(*sink_args(endpoints, names, url, "--once", "--metrics-port", "0"))
    return ShapeRun(names, url, expected, malformed, n_malformed, levels)


@pytest.fixture(scope="module")
def shape_runs(request, endpoints, tmp_path_factory) -> Iterator[dict[tuple, Future[ShapeRun]]]:
    """The selected cases' runs, two at a time, each with its own topics, group, transactional
    id and database: a `run --once` is mostly a JVM starting and waiting on the broker, so two
    side by side on 2 cores finish sooner. Figures: docs/tuning.md#test-suite-time"""
    selected = {tuple(item.callspec.params[k] for k in ("shape", "zone", "extra"))
                for item in request.session.items
                if item.originalname == "test_each_shape_is_counted_exactly"}
    with ExitStack() as stack:
        urls = {}
        for i, case in enumerate(CASES):
            if case in selected:
                names = Names.unique(f"shape-{i}")
                urls[case] = names, stack.enter_context(
                    fresh_database(endpoints.mysql, names.database))
        # Entered last, so it waits for every run before the databases are dropped.
        pool = stack.enter_context(ThreadPoolExecutor(max_workers=2))
        yield {case: pool.submit(_run_case, endpoints, names, url,
                                 tmp_path_factory.mktemp("shape"), case)
               for case, (names, url) in urls.items()}


@pytest.mark.parametrize(("shape", "zone", "extra"), CASES,
                         ids=[f"{s}-{z}{'-levels' if e else ''}" for s, z, e in CASES])
def test_each_shape_is_counted_exactly(endpoints, shape_runs, shape, zone, extra):
    run = shape_runs[(shape, zone, extra)].result()  # a failed command fails this case only
    assert_shape_exact(endpoints, run.names, run.url, run.expected, run.malformed,
                       run.n_malformed, ",".join(run.levels))


@pytest.mark.parametrize("zone", ["UTC", "Asia/Tokyo"])
def test_mariadb_expect_and_run_agree(endpoints, names, tmp_path, zone):
    """MariaDB pads the hour with a space before 10:00 ('2026-11-26  3:34:44'); its recipe reads
    that with the optional section of 'yyyy-MM-dd [ ]H:mm:ss'. The generator's counts (produce
    --synthetic --expect), the pure twin's (produce --file --expect, by the recipe's flags) and
    the stage's totals are the same, in UTC and in Tokyo's local time."""
    seed = 43
    records = list(synthetic_records("mariadb", N, seed, timezone=zone))
    stamps = [r.value[:20] for r in records if r.minute is not None]
    assert any(s[10:12] == b"  " for s in stamps) and any(s[11:12] != b" " for s in stamps)
    expected = expected_from_records(records, ("ERROR",))
    flags = [*RUN_FLAGS["mariadb"], "--timezone", zone]
    synthetic, twin, path = tmp_path / "synthetic.json", tmp_path / "twin.json", tmp_path / "log"
    cli("produce", "--bootstrap-servers", endpoints.bootstrap, "--topic", names.topic("in"),
        "--synthetic", str(N), "--shape", "mariadb", "--seed", str(seed), "--timezone", zone,
        "--expect", str(synthetic))
    path.write_bytes(b"\n".join(r.value for r in records) + b"\n")
    cli("produce", "--bootstrap-servers", endpoints.bootstrap, "--topic", names.topic("file"),
        "--file", str(path), "--expect", str(twin), *flags)
    assert json.loads(synthetic.read_text()) == expected, "produce --synthetic --expect"
    assert json.loads(twin.read_text()) == expected, "produce --file --expect (the pure twin)"

    cli(*stage_args(endpoints, names, "--once", *flags))
    assert last_totals(read_all(endpoints.bootstrap, names.topic("out"))) == expected


# Lines in New York's repeated hour (2017-11-05 01:xx, EDT -4 then EST -5) and skipped hour
# (2017-03-12 02:xx), with the UTC minute each must count for, worked out by hand: a repeated
# local time takes the earlier offset (EDT), a skipped one moves forward by the gap (one hour).
NEW_YORK = [
    (b"2017-11-05 00:59:30 ERROR before the repeated hour", "2017-11-05 04:59:00"),
    (b"2017-11-05 01:00:00 ERROR the repeated hour begins", "2017-11-05 05:00:00"),
    (b"2017-11-05 01:30:15 ERROR inside the repeated hour", "2017-11-05 05:30:00"),
    (b"2017-11-05 01:30:59.999 ERROR inside it again", "2017-11-05 05:30:00"),
    (b"[2017-11-05 01:59:59,999] ERROR its last second (kafka.server.KafkaServer)",
     "2017-11-05 05:59:00"),
    (b"2017-11-05T01:30:00-05:00 ERROR the second pass, with its offset", "2017-11-05 06:30:00"),
    (b"2017-11-05 02:00:00 ERROR after it, EST", "2017-11-05 07:00:00"),
    (b"2017-11-05 01:30:20 INFO not counted", None),
    (b"2017-03-12 01:59:59 ERROR before the gap, EST", "2017-03-12 06:59:00"),
    (b"2017-03-12 02:00:00 ERROR the gap begins", "2017-03-12 07:00:00"),
    (b"2017-03-12 02:30:00 ERROR inside the gap", "2017-03-12 07:30:00"),
    (b"2017-03-12 02:59:59.5 ERROR the gap's last second", "2017-03-12 07:59:00"),
    (b"2017-03-12 03:00:00 ERROR after the gap, EDT", "2017-03-12 07:00:00"),
    (b"2017-03-12 03:30:00 error after the gap, lower case", "2017-03-12 07:30:00"),
]
# +05:30 all year: local minutes 05:30 ahead of UTC, across midnight.
KOLKATA_OFFSET = [
    (b"2017-07-30 00:10:00 ERROR just after local midnight", "2017-07-29 18:40:00"),
    (b"2017-07-30 05:29:59 ERROR the last local minute of the UTC day before",
     "2017-07-29 23:59:00"),
    (b"2017-07-30 05:30:00,001 ERROR UTC midnight", "2017-07-30 00:00:00"),
    (b"2017-07-30T05:30:00Z ERROR a zone of its own wins", "2017-07-30 05:30:00"),
    (b"2017-07-30T05:30:00+05:30 ERROR so does an explicit offset", "2017-07-30 00:00:00"),
    (b"2017-07-30 23:59:59 WARN not counted", None),
]
BAD = [b"2017-03-12 02:30 ERROR no seconds", b"", b"2017-11-05 01:30:00 "]


@pytest.mark.parametrize(("zone", "lines"), [("America/New_York", NEW_YORK),
                                             ("+05:30", KOLKATA_OFFSET)],
                         ids=["dst-new-york", "fixed-offset"])
def test_zone_less_times_in_a_timezone(endpoints, names, mysql_db, tmp_path, zone, lines):
    expected: dict[str, int] = {}
    for _line, minute in lines:
        if minute is not None:
            expected[minute] = expected.get(minute, 0) + 1
    path = tmp_path / "logs.txt"
    path.write_bytes(b"\n".join([line for line, _ in lines] + BAD) + b"\n")
    expect = tmp_path / "expected.json"
    cli("produce", "--bootstrap-servers", endpoints.bootstrap, "--topic", names.topic("in"),
        "--file", str(path), "--timezone", zone, "--expect", str(expect))
    assert json.loads(expect.read_text()) == expected, "produce --expect (the pure rule)"

    cli(*stage_args(endpoints, names, "--once", "--timezone", zone))
    cli(*sink_args(endpoints, names, mysql_db, "--once"))
    assert_shape_exact(endpoints, names, mysql_db, expected, set(BAD), len(BAD), "ERROR")


def test_a_regex_only_java_reads_is_one_line_for_produce_expect(tmp_path: Path):
    """produce --expect counts a --file with the pure twin, which reads --line-regex with
    Python's re: a Java-only construct is one clear error, exit 2, before any topic."""
    path = tmp_path / "logs.txt"
    path.write_bytes(b"2017-07-30 14:09:08 ERROR x\n")
    proc = cli("produce", "--bootstrap-servers", "127.0.0.1:1", "--file", str(path),
               "--expect", str(tmp_path / "e.json"), "--line-regex",
               r"(?<time>\S+ \S+)\p{javaWhitespace}(?<level>\w+)", check=False)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "--line-regex" in lines[0], proc.stderr
