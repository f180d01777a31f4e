"""`logcount demo --group-by` through the CLI on the embedded stack (the one the demo starts
itself): the per-series table it fills equals what the generator wrote, and it says so."""

from __future__ import annotations

from collections import Counter

import pymysql
import pytest

from logcount.formats.rule import minute_label
from logcount.formats.shapes import synthetic_records
from tests.support.run import cli

LINES, SEED = 3000, 11


def test_demo_group_by_service_and_level_equals_the_generators_series(endpoints):
    if endpoints.kind != "embedded":
        pytest.skip("logcount demo runs on the embedded stack")
    done = cli("demo", "--lines", str(LINES), "--seed", str(SEED), "--master", "local[2]",
               "--group-by", "service,level", timeout=900)
    assert "RESULT: error_log_by_service_level EQUALS the expectation" in done.stdout, done.stdout

    # The table, read here, against the records' own keys and levels (every level counted apart).
    want: Counter = Counter()
    for r in synthetic_records("filebeat", LINES, SEED, dimensions=True):
        if r.minute is not None:
            assert r.key is not None and r.level is not None
            want[(minute_label(r.minute), r.key.decode(), r.level)] += 1
    conn = pymysql.connect(host="127.0.0.1", port=3306, user="root", database="logcount_demo")
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT log_time, service, level, log_count "
                        "FROM error_log_by_service_level")
            got = {(t.strftime("%Y-%m-%d %H:%M:00"), s, lv): n for t, s, lv, n in cur.fetchall()}
    finally:
        conn.close()
    assert got == dict(want)
    busiest: Counter = Counter()
    for (_, service, _), n in got.items():
        busiest[service] += n
    assert len(busiest) == 12 and busiest.most_common(1)[0][0] == "checkout"
    assert {lv for _, _, lv in got} == {"DEBUG", "INFO", "WARN", "ERROR"}
    # the printout names the busiest series first
    table = done.stdout.split("error_log_by_service_level: the busiest", 1)[1].splitlines()
    assert table[2].split()[0] == "checkout", done.stdout


def test_demo_emit_final_closes_every_minute_once_and_the_one_after_the_last_line_by_clock(
        endpoints):
    if endpoints.kind != "embedded":
        pytest.skip("logcount demo runs on the embedded stack")
    done = cli("demo", "--lines", str(LINES), "--seed", str(SEED), "--master", "local[2]",
               "--emit-final", "30s", timeout=900)
    assert "RESULT: error_log_final EQUALS the expectation" in done.stdout, done.stdout
    rows = [line.split() for line in done.stdout.splitlines()
            if line.startswith("  20") and len(line.split()) >= 4]
    # every minute's final beside the generator's, the last one empty and closed by the clock
    assert rows and all(r[2] == r[3] for r in rows), done.stdout
    assert rows[-1][2:] == ["0", "0", "(closed", "by", "the", "clock)"], done.stdout
    assert sum(int(r[2]) for r in rows) > 0
