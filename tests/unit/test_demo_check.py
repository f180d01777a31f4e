"""pipeline/demo_check's wait: poll error_log until it equals the expectation, or give up."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from logcount.core.settings import MySQLUrl
from logcount.pipeline import demo_check

URL = MySQLUrl.parse("mysql://u:p@db:3306/logs")
WANT = {"2024-01-01 00:00": 3}


def _reads(monkeypatch: pytest.MonkeyPatch, expectations: list, tables: list) -> None:
    monkeypatch.setattr(demo_check, "_expected",
                        lambda path: expectations.pop(0) if len(expectations) > 1
                        else expectations[0])
    monkeypatch.setattr(demo_check, "_table",
                        lambda url: tables.pop(0) if len(tables) > 1 else tables[0])


def test_waits_until_the_table_equals_the_expectation(sleeps, monkeypatch, capsys):
    _reads(monkeypatch, [None, WANT], [{}, {"2024-01-01 00:00": 1}, WANT])
    assert demo_check.wait_for_verdict(URL, Path("x"), 60.0, every_s=0.0, poll_s=2.0)
    out = capsys.readouterr().out
    assert sleeps == [2.0, 2.0]
    assert "demo: waiting (0 s): no expectation yet, 0 ERROR lines in error_log" in out
    assert "0 of 1 minutes exact, 1 ERROR lines in error_log" in out
    assert "RESULT: error_log EQUALS the expectation" in out


def test_gives_up_at_the_timeout(monkeypatch, capsys):
    _reads(monkeypatch, [WANT], [{}])
    real_sleep = time.sleep
    slept: list[float] = []

    def sleep(s: float) -> None:  # time.sleep is global: another test's lingering thread
        if threading.current_thread() is threading.main_thread():  # must not count here
            slept.append(s)
        real_sleep(s)

    monkeypatch.setattr(time, "sleep", sleep)
    assert not demo_check.wait_for_verdict(URL, Path("x"), 0.05, every_s=30.0, poll_s=0.02)
    out = capsys.readouterr().out
    # Real time: a loaded machine's 0.02 s pause may take 0.04, and the next would pass 0.05 s.
    assert 1 <= len(slept) <= 3 and set(slept) == {0.02}
    assert "demo: gave up after 0 s" in out and "RESULT: MISMATCH" in out


def test_a_zero_timeout_looks_once_and_says_the_expectation_never_came(sleeps, monkeypatch,
                                                                      capsys):
    _reads(monkeypatch, [None], [{}])
    assert not demo_check.wait_for_verdict(URL, Path("exp.json"), 0.0)
    out = capsys.readouterr().out
    assert sleeps == [] and "gave up" not in out
    assert "demo: the generator never wrote exp.json" in out


# -- the final minutes' table (the docker demo's --final check) ---------------------------------
FINAL_WANT = {"2026-11-29 10:01:00": 4, "2026-11-29 10:03:00": 2}
QUIET = "2026-11-29 10:04:00"
ALL = {"2026-11-29 10:01:00": 4, "2026-11-29 10:02:00": 0, "2026-11-29 10:03:00": 2, QUIET: 0}


def test_the_quiet_minute_is_the_one_after_the_last_counted():
    assert demo_check.quiet_after(FINAL_WANT) == QUIET
    assert demo_check.quiet_after({"2026-11-29 23:59:00": 1}) == "2026-11-30 00:00:00"


@pytest.mark.parametrize(("table", "closed", "ok"), [
    (ALL, set(ALL), True),
    ({m: n for m, n in ALL.items() if m != QUIET}, set(ALL), False),  # the quiet minute's row
    (ALL, set(ALL) - {QUIET}, False),  # the clock has not closed the minute after the last
    (ALL, set(ALL) - {"2026-11-29 10:02:00"}, False),  # a zero minute not closed
    ({**ALL, "2026-11-29 10:03:00": 3}, set(ALL), False),  # a count off by one
    ({m: n for m, n in ALL.items() if n}, set(ALL), False),  # a gap: a zero minute has no row
])
def test_the_final_verdict_wants_every_minute_exact_and_closed_through_the_quiet_one(
        table, closed, ok):
    assert demo_check.finals_rows(table, closed, FINAL_WANT, QUIET)[0] is ok


def test_waits_for_the_final_table_and_says_equal(sleeps, monkeypatch, capsys):
    reads = [({}, set()), ({"2026-11-29 10:01:00": 4}, {"2026-11-29 10:01:00"}), (ALL, set(ALL))]
    monkeypatch.setattr(demo_check, "_expected", lambda path: FINAL_WANT)
    monkeypatch.setattr(demo_check, "read_finals",
                        lambda url, name: reads.pop(0) if len(reads) > 1 else reads[0])
    assert demo_check.wait_for_finals(URL, Path("x"), "error_log_final", 60.0, every_s=0.0)
    out = capsys.readouterr().out
    assert sleeps == [2.0, 2.0]
    assert "1 minutes closed, 4 ERROR lines in error_log_final" in out
    assert "2026-11-29 10:04:00       0          0   (closed by the clock)" in out
    assert "RESULT: error_log_final EQUALS the expectation" in out
