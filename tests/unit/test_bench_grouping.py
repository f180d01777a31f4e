"""bench --grouping's pure parts: the probe reader's key of a grouped record, the medians and
ratios the goals judge, and the report."""

from __future__ import annotations

from typing import cast

import pytest

from logcount.bench import grouping
from logcount.bench.latency import ProbeReader
from logcount.bench.runner import Bench
from logcount.core.errors import ConfigError
from logcount.core.settings import BenchSettings


class _Msg:
    def __init__(self, key: bytes) -> None:
        self._key = key

    def key(self) -> bytes:
        return self._key


def test_a_grouped_record_is_seen_as_its_minute():
    reader = ProbeReader.__new__(ProbeReader)
    reader.seen = {}
    reader.record(_Msg(b'["2031-01-01 00:07:00","svc-00001"]'), 5.0)
    reader.record(_Msg(b"2031-01-01 00:08:00"), 6.0)
    reader.record(_Msg(b'["2031-01-01 00:07:00","__other__"]'), 7.0)
    assert reader.seen == {"2031-01-01 00:07:00": 5.0, "2031-01-01 00:08:00": 6.0}


def test_medians_and_ratios_skip_runs_without_a_steady_state():
    runs: list[dict] = [{"s": 100}, {"s": None}, {"s": 300}, {"s": 200}]
    assert grouping._median(runs, "s") == 200
    assert grouping._median([{"s": None}], "s") is None
    assert grouping._ratio(90, 100) == 0.9 and grouping._ratio(None, 1) is None
    assert grouping._ratio(1, 0) is None


def test_the_report_gives_every_run_and_each_verdict():
    shape = {"A_steady": [95, 97], "B_steady": [100, 99], "A_median": 96, "B_median": 99.5,
             "ratio": 0.965, "goal": 0.95, "met": True}
    live = {"p50": 300, "p99": 700, "max": 900, "rate_lines_per_s": 19_990,
            "commit_p99_ms": 80, "batches": 100, "cpu_s_per_m_lines": 50}
    r = {"lines": 1000, "seed": 1, "ab_base": "/base", "ab_repeats": 2,
         "shapes": {"kafka": shape},
         "filebeat": {"group_by": "h,n", "series": 40, "ungrouped_steady": [10], "grouped_steady":
                      [7], "ungrouped_median": 10, "grouped_median": 7, "ratio": 0.7,
                      "goal": 0.8, "met": False},
         "latency": {"series": 10_000, "rate": 20_000, "goal": 1.25, "met": False, "cadences": {
             "default": {"flags": [], "runs": {"ungrouped": [live], "grouped": [live]},
                         "ungrouped_p99_median": 700, "grouped_p99_median": 700, "ratio": 1.0,
                         "met": True},
             "unpaced": {"flags": ["--min-batch-interval", "0"],
                         "runs": {"ungrouped": [live], "grouped": [live]},
                         "ungrouped_p99_median": 500, "grouped_p99_median": 700, "ratio": 1.4,
                         "met": False}}}}
    md = grouping.markdown(r)
    assert "| kafka | [95, 97] | [100, 99] | 96 | 99.5 | 0.965 | >= 0.95 | True |" in md
    assert "(40 series)" in md and "| 0.7 | >= 0.8 | False |" in md
    assert "| grouped 0 | 300 | 700 | 900 |" in md
    assert "p99 median (default): grouped 700 ms, ungrouped 700 ms, ratio 1.0 (goal <= 1.25): met" \
        in md
    assert "unpaced cadence: --min-batch-interval 0" in md
    assert "ratio 1.4 (goal <= 1.25): missed" in md
    del r["latency"]
    assert grouping.markdown(r).endswith("(the run stopped here)\n")


def test_grouping_parts_selects_parts_in_the_bench_order():
    s = BenchSettings(grouping=True, grouping_parts="latency, filebeat").validate()
    assert s.grouping_part_names == ("filebeat", "latency")
    no_bench = cast(Bench, None)  # the parts are named, never run: no bench behind them
    assert [n for n, _ in grouping.selected_parts(no_bench, s, None, s.grouping_part_names)] == [
        "filebeat", "latency"]
    every = BenchSettings(grouping=True, ab_base="/base").validate()
    assert every.grouping_part_names == ("shapes", "filebeat", "latency")


def test_grouping_parts_refuses_unknown_parts_and_shapes_without_a_base():
    with pytest.raises(ConfigError, match="the parts are shapes, filebeat, latency"):
        BenchSettings(grouping_parts="filebeat,speed").validate()
    with pytest.raises(ConfigError, match="the parts are"):
        BenchSettings(grouping_parts=",").validate()
    with pytest.raises(ConfigError, match="--ab-base"):
        BenchSettings(grouping=True, grouping_parts="shapes").validate()


def test_the_report_of_one_part_shows_only_that_part():
    f = {"group_by": "h,n", "series": 100, "ungrouped_steady": [10], "grouped_steady": [8],
         "ungrouped_median": 10, "grouped_median": 8, "ratio": 0.8, "goal": 0.8, "met": True}
    r = {"lines": 1000, "seed": 1, "ab_base": None, "ab_repeats": 1, "parts": ["filebeat"],
         "filebeat": f}
    md = grouping.markdown(r)
    assert "(100 series)" in md and "| 0.8 | >= 0.8 | True |" in md
    assert "A/B" not in md and "live series" not in md and "stopped" not in md
