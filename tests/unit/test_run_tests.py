"""scripts/run_tests.py: every tier runs in exactly one lane, and its report counts what ran."""

from __future__ import annotations

import tomllib
from pathlib import Path

from scripts.run_tests import (
    FIRST,
    LAST,
    TIERS,
    TIMED,
    TIMED_AT_ONCE,
    Case,
    cases,
    closing_line,
    jobs,
    pick,
)

ROOT = Path(__file__).resolve().parents[2]
OPT_IN = {"compat"}  # collected only when named (tests/conftest.py)


def test_every_test_file_runs_in_exactly_one_job():
    markers = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"][
        "ini_options"]["markers"]
    assert {m.split(":")[0] for m in markers} - OPT_IN == {*TIERS, "docker"}

    def files(path: str) -> set[str]:
        p = ROOT / path
        return {path} if p.is_file() else {
            f.relative_to(ROOT).as_posix() for f in p.rglob("test_*.py")}

    covered = [f for job in jobs() for path in job for f in files(path)]
    every = {f.relative_to(ROOT).as_posix() for tier in (*TIERS, "docker")
             for f in (ROOT / "tests" / tier).rglob("test_*.py")}
    assert sorted(covered) == sorted(every)  # each once, none left out


def test_the_named_jobs_come_first_with_the_timed_ones_at_the_head():
    got = jobs()
    assert got[:len(FIRST)] == list(FIRST)
    assert got[:len(TIMED)] == list(TIMED)
    assert got.count(LAST) == 1


def test_pick_holds_timed_jobs_to_two_at_once_and_the_docker_tier_until_none_is_left():
    untimed = ("tests/unit",)
    queue = [*TIMED, LAST, untimed]
    assert pick(queue, 0) == 0
    assert pick(queue, TIMED_AT_ONCE - 1) == 0
    assert pick(queue, TIMED_AT_ONCE) == len(TIMED) + 1  # not timed, not the docker tier
    assert pick([LAST, untimed], 1) == 1  # a timed job still runs
    assert pick([TIMED[-1], LAST], 0) == 0
    assert pick([LAST, untimed], 0) == 0
    assert pick([LAST], 1) is None  # wait
    assert pick([TIMED[0]], TIMED_AT_ONCE) is None
    assert pick([], 0) is None


def test_a_junit_report_is_read_with_each_status(tmp_path: Path):
    junit = tmp_path / "junit.xml"
    junit.write_text(
        '<testsuites><testsuite name="pytest">'
        '<testcase classname="suite.test_a" name="test_ok" time="1.5"/>'
        '<testcase classname="suite.test_a" name="test_bad" time="0.2">'
        '<failure message="x"/></testcase>'
        '<testcase classname="suite.test_a" name="test_err" time="0.1">'
        '<error message="x"/></testcase>'
        '<testcase classname="suite.test_b" name="test_skip[1]" time="0">'
        '<skipped message="x"/></testcase>'
        '</testsuite></testsuites>')
    got = cases(junit)
    assert got[0] == Case("suite/test_a.py::test_ok", 1.5, "passed")
    assert [c.status for c in got] == ["passed", "failed", "error", "skipped"]
    assert closing_line(got) == "tests: 1 passed, 2 failed, 1 skipped"
    assert closing_line(got[:1]) == "tests: 1 passed, 0 failed"
    assert cases(tmp_path / "missing.xml") == []
