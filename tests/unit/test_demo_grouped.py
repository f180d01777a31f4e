"""`logcount demo --group-by`: its names for the Filebeat fleet's sources, its table, its
mistakes in one line, and the per-series verdict it prints."""

from __future__ import annotations

import pytest

from logcount.core.errors import ConfigError
from logcount.core.settings import DemoSettings
from logcount.pipeline.demo_check import report_series


@pytest.mark.parametrize("text, dims, table", [
    ("service", (("service", "key"),), "error_log_by_service"),
    ("service,level", (("service", "key"), ("level", "level")), "error_log_by_service_level"),
    ("ns=namespace,host", (("ns", "kubernetes.namespace"), ("host", "host.name")),
     "error_log_by_ns_host"),
    ("node=host.name", (("node", "host.name"),), "error_log_by_node"),
])
def test_the_demos_names_take_the_fleets_sources(text, dims, table):
    s = DemoSettings(group_by=text).validate()
    assert s.group_by_dims == dims and s.table == table


def test_without_group_by_the_demo_is_as_before():
    s = DemoSettings().validate()
    assert s.group_by_dims == () and s.table == "error_log"


@pytest.mark.parametrize("text, error", [
    ("stream", "the demo's records have service, host, namespace"),
    ("a=level,b=key,c=pod,d=host", "at most 3"),
    ("log_time=service", "log_time"),
    ("a" * 30 + "=service," + "b" * 30 + "=host", "longer than MySQL's 64"),
])
def test_a_demo_group_by_mistake_is_one_line(text, error):
    with pytest.raises(ConfigError, match=error):
        DemoSettings(group_by=text).validate()


EXPECTED: dict[tuple[str, ...], int] = {("2017-07-30 10:00:00", "checkout", "ERROR"): 5,
    ("2017-07-30 10:01:00", "checkout", "ERROR"): 2,
    ("2017-07-30 10:00:00", "auth", "WARN"): 1}


def test_the_verdict_names_the_busiest_series_and_says_equal(capsys):
    assert report_series(dict(EXPECTED), EXPECTED, "error_log_by_service_level",
                         ["service", "level"], "by construction")
    out = capsys.readouterr().out
    lines = out.splitlines()
    first = next(i for i, ln in enumerate(lines) if ln.startswith("  service"))
    assert lines[first + 1].split() == ["checkout", "ERROR", "7"]
    assert lines[first + 2].split() == ["auth", "WARN", "1"]
    assert "2 series, 2 minutes, 3 rows, 8 lines in all" in out
    assert out.rstrip().endswith("RESULT: error_log_by_service_level EQUALS the expectation")


def test_a_row_off_by_one_or_one_too_many_is_a_mismatch(capsys):
    table: dict[tuple[str, ...], int] = {
        **EXPECTED, ("2017-07-30 10:01:00", "checkout", "ERROR"): 3,
        ("2017-07-30 10:02:00", "cart", "INFO"): 1}
    assert not report_series(table, EXPECTED, "t", ["service", "level"], "by construction")
    assert capsys.readouterr().out.rstrip().endswith(
        "RESULT: MISMATCH: 1 rows differ, 1 unexpected")
