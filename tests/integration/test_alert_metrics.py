"""Every metric the alert rules name exists in the /metrics of a real running stage and sink.

A renamed or dropped metric breaks this test, not the pager: the rules in
deploy/prometheus/alerts.yml would otherwise match nothing and never fire.
"""

from __future__ import annotations

import re
import signal
from pathlib import Path

import yaml

from tests.support.inputs import build_input
from tests.support.metrics import families, metric
from tests.support.ports import free_port
from tests.support.run import sink_args, stage_args, start_cli, wait_for

RULES = Path(__file__).resolve().parents[2] / "deploy" / "prometheus" / "alerts.yml"
# Sample names a healthy process declares (# TYPE) without any sample yet: a labelled counter
# has no series before its first increment (a hang, here).
DECLARED_ONLY = {"logcount_kafka_hung_calls_total"}
# What each type's samples are called, for a family declared without samples.
_SUFFIXES = {"counter": ("_total",), "gauge": ("",), "histogram": ("_bucket", "_sum", "_count"),
             "summary": ("", "_sum", "_count")}


def rule_metric_names() -> set[str]:
    """Every logcount_* name in the rules' expressions."""
    names: set[str] = set()
    for group in yaml.safe_load(RULES.read_text())["groups"]:
        for rule in group["rules"]:
            names |= set(re.findall(r"\blogcount_[a-zA-Z0-9_]+", rule["expr"]))
    return names


def scrape(port: int) -> tuple[set[str], set[str]]:
    """(names with samples, names only declared) in a /metrics answer."""
    sampled: set[str] = set()
    declared: set[str] = set()
    for family in families(port):
        sampled |= {s.name for s in family.samples}
        if not family.samples:
            declared |= {family.name + suffix for suffix in _SUFFIXES.get(family.type, ("",))}
    return sampled, declared


def _stop(proc) -> None:
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(60)  # a SIGTERM'd stage finishes its batch and stops Spark: seconds
    finally:
        if proc.poll() is None:
            proc.kill()


def test_every_metric_the_alert_rules_name_is_exported(endpoints, names, mysql_db, tmp_path):
    wanted = rule_metric_names()
    assert len(wanted) >= 10, f"the rules' metric names were not found: {wanted}"
    # A little input with malformed lines: every counter, histogram and labelled gauge of a
    # healthy stage gets a sample.
    build_input(endpoints.bootstrap, names.topic("in"), names.txn_id + "-producer",
                n_plain=200, n_txn=60)
    stage_port, sink_port = free_port(), free_port()
    # --emit-final: its gauges are exported only with the flag; the input's minutes close by
    # the watermark in the batch after the first (the start's first commit closes nothing).
    stage = start_cli(*stage_args(endpoints, names, "--metrics-port", str(stage_port),
                                  "--trigger-interval", "0.2", "--emit-final", "1m"),
                      log_path=tmp_path / "stage.log")
    sink = None
    try:
        # A cold Spark start on a loaded 2-core machine: up to minutes before the first commit.
        # 0 while a process is not listening yet.
        wait_for(lambda: metric(stage_port, "logcount_batches_committed_total", down=0.0) >= 1,
                 timeout_s=180, what="the stage's first commit")
        wait_for(lambda: metric(stage_port, "logcount_last_closed_minute_timestamp_seconds",
                                down=0.0) > 0, timeout_s=60, what="the stage's first close")
        sink = start_cli(*sink_args(endpoints, names, mysql_db, "--metrics-port",
                                    str(sink_port)), log_path=tmp_path / "sink.log")
        # The sink starts in seconds; its first write follows its first poll (0.5 s).
        wait_for(lambda: metric(sink_port, "logcount_sink_batches_written_total", down=0.0) >= 1,
                 timeout_s=60, what="the sink's first MySQL write")
        stage_sampled, stage_declared = scrape(stage_port)
        sink_sampled, sink_declared = scrape(sink_port)
    finally:
        _stop(stage)
        if sink is not None:
            _stop(sink)

    sampled, declared = stage_sampled | sink_sampled, stage_declared | sink_declared
    missing = sorted(n for n in wanted - sampled
                     if n not in DECLARED_ONLY or n not in declared)
    assert not missing, (f"alerts.yml names metrics that a running stage and sink do not "
                         f"export: {missing}")
    # The lag gauges are labelled: they must have had samples by now, not only a declaration.
    assert {"logcount_input_lag_records", "logcount_sink_lag_records"} <= sampled
