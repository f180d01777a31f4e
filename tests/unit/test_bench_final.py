"""bench --final's pure parts: the lines stamped with the current time, a minute's deadline, the
delay percentiles, the CPU ratio, the goals' verdicts, the closed-record reader and the report."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta, timezone

import pytest

from logcount.bench import emit_final as ef
from logcount.core.errors import ConfigError
from logcount.core.records import FinalRecord, encode_final
from logcount.core.settings import BenchSettings

_SEED = re.compile(rb"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d (DEBUG|INFO|WARN|ERROR) ")


def test_a_stamp_is_the_utc_time_of_a_seed_line():
    t = datetime(2026, 11, 29, 14, 9, 8, 999_000, tzinfo=UTC)
    assert ef.stamp(t) == b"2026-11-29 14:09:08"
    # an aware time of another zone is written as UTC
    assert ef.stamp(t.astimezone(timezone(timedelta(hours=2)))) == b"2026-11-29 14:09:08"
    assert ef.minute_of(b"2026-11-29 14:09:08") == "2026-11-29 14:09:00"


def test_the_filler_keeps_the_seed_mix_with_the_time_replaced():
    lines = ef.filler(5000, 1)
    stamped = [f for f in lines if f.stamped]
    malformed = [f for f in lines if not f.stamped]
    assert 0 < len(malformed) < 0.03 * len(lines)  # ~1 % malformed, sent as they are
    errors = sum(f.error for f in stamped) / len(stamped)
    assert 0.10 < errors < 0.20  # the seed generator's 15 % ERROR
    now = b"2026-11-29 14:09:08"
    for f in stamped[:200]:
        out = ef.line(f, now)
        assert out.startswith(now + b" ")
        m = _SEED.match(out)
        assert m is not None and (m[1] == b"ERROR") == f.error
    assert ef.line(malformed[0], now) == malformed[0].rest


def test_a_minute_is_due_at_its_end_plus_grace():
    d = ef.deadline("2026-11-29 14:10:00", 60)
    assert d == datetime(2026, 11, 29, 14, 11, tzinfo=UTC).timestamp()


def test_delays_give_p50_and_a_p99_that_is_the_max_under_100_minutes():
    got = ef.delay_summary([900.0, 700.0, 1200.0, 800.0, 1000.0])
    assert got == {"minutes": 5, "p50_ms": 900.0, "p99_ms": 1200.0, "max_ms": 1200.0}
    assert ef.delay_summary([])["p99_ms"] is None


def test_the_cpu_ratio_and_the_goals():
    assert ef.ratio(10.5, 10.0) == 1.05
    assert ef.ratio(None, 10.0) is None and ef.ratio(1.0, 0) is None
    assert ef.judge(1.05, 1500.0, 0, True) == {"cpu": True, "delay": True}
    assert ef.judge(1.051, 1500.1, 0, True) == {"cpu": False, "delay": False}
    # a missing minute or a wrong closed count fails the delay goal whatever the p99
    assert not ef.judge(1.0, 900.0, 1, True)["delay"]
    assert not ef.judge(1.0, 900.0, 0, False)["delay"]
    assert ef.judge(None, None, 0, True) == {"cpu": False, "delay": False}


class _Msg:
    def __init__(self, value: bytes) -> None:
        self._value = value

    def value(self) -> bytes:
        return self._value


def test_the_reader_keeps_each_closed_record_once_and_skips_series_records():
    reader = ef.ClosedReader.__new__(ef.ClosedReader)
    reader.closed = {}
    start, end = "2026-11-29 14:10:00", "2026-11-29 14:11:00"
    series = FinalRecord(start, end, "1m", "ERROR", 17)
    closed = FinalRecord(start, end, "1m", "ERROR", 17, closed=True, series=1)
    reader.record(_Msg(encode_final(series)[1]), 0.0)
    assert reader.closed == {}
    reader.record(_Msg(encode_final(closed)[1]), 0.0)
    first = reader.closed[start]
    reader.record(_Msg(encode_final(closed)[1]), 0.0)
    assert reader.closed[start] == first and first[1:] == (end, 17)


def test_closed_minutes_in_the_window_with_their_delays_counts_and_missing_ones():
    class _Producer:
        errors = {"2026-11-29 14:10:00": 17, "2026-11-29 14:11:00": 20}

    reader = ef.ClosedReader.__new__(ef.ClosedReader)
    due = ef.deadline("2026-11-29 14:11:00", 60)  # 14:10's deadline: 14:12:00
    reader.closed = {"2026-11-29 14:09:00": (due - 50, "2026-11-29 14:10:00", 5),  # before
                     "2026-11-29 14:10:00": (due + 0.8, "2026-11-29 14:11:00", 17),
                     "2026-11-29 14:11:00": (due + 61.2, "2026-11-29 14:12:00", 19)}
    got = ef.closed_minutes(reader, _Producer(), due - 30, due + 200)  # type: ignore[arg-type]
    minutes = got["minutes"]
    assert [m["minute"] for m in minutes] == ["2026-11-29 14:10:00", "2026-11-29 14:11:00",
                                              "2026-11-29 14:12:00"]
    assert minutes[0]["delay_ms"] == 800.0 and minutes[0]["exact"]
    assert minutes[1]["closed_lines"] == 19 and not minutes[1]["exact"]
    assert minutes[2]["missing"]  # due at 14:14:00, 140 s before the stop, never seen
    assert got["missing"] == 1 and not got["exact"]
    assert got["delay_minutes"] == 2 and got["delay_p99_ms"] == got["delay_max_ms"] == 1200.0


def test_final_rates_are_parsed_and_checked():
    assert BenchSettings(final_rates="2000,20000").final_rate_list == (2000, 20000)
    for bad in ("", "2000,x", "10"):
        with pytest.raises(ConfigError, match="--final-rates"):
            BenchSettings(final_rates=bad)


def test_the_report_gives_both_rates_each_minute_and_each_verdict():
    def run(cpu, emit):
        x = {"cpu_s_per_m_lines": cpu, "window_lines": 360_000, "window_seconds": 180.0,
             "rate_lines_per_s": 2000, "window_cpu_seconds": 30.0, "peak_rss_mb": 700.0}
        if emit:
            x.update({"minutes": [{"minute": "2026-11-29 14:10:00", "delay_ms": 800.0,
                                   "closed_lines": 17, "stamped_errors": 17, "exact": True},
                                  {"minute": "2026-11-29 14:11:00", "delay_ms": None,
                                   "missing": True}],
                      "delay_minutes": 1, "delay_p50_ms": 800.0, "delay_p99_ms": 800.0,
                      "delay_max_ms": 800.0, "missing": 1, "exact": True,
                      "whole_run_seconds": 400.0, "whole_run_cpu_s_per_m_lines": 80.0})
        return x

    rate = {"rate": 2000, "order": ["without", "with"], "without": run(80.0, False),
            "with": run(82.0, True), "cpu_ratio": 1.025, "met": {"cpu": True, "delay": False}}
    md = ef.markdown({"grace": "1m", "min_batch_interval_s": 1.0, "warmup_seconds": 15.0,
                      "final_seconds": 180.0, "cpu_goal": 1.05, "delay_goal_ms": 1500.0,
                      "rates": [rate]})
    assert "| 2,000 | 80.0 | 82.0 | 1.025 x | <= 1.05 x | yes | 1 (1 missing) | 800.0 |" in md
    assert "| 2026-11-29 14:11:00 | missing |" in md
    assert "run order without then with" in md and "p99 is the max" in md
