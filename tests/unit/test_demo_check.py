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
