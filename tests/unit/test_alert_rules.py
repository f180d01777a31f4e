"""deploy/prometheus/alerts.yml loads in Prometheus as it is, and its promtool unit tests pass.

`promtool` comes from Debian's `prometheus` package (scripts/setup.sh installs it). Without it
the promtool tests skip, except under CI=true, where a missing promtool is a broken set-up.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
RULES_DIR = ROOT / "deploy" / "prometheus"
RULES = RULES_DIR / "alerts.yml"
RULE_TESTS = RULES_DIR / "alerts_test.yml"
OPERATIONS_DOC = ROOT / "docs" / "operations.md"  # the scrape config and the per-series PromQL
HEALTHY = "a healthy stage and sink for two hours"


def _promtool() -> str:
    path = shutil.which("promtool")
    if path is None:
        (pytest.fail if os.environ.get("CI") else pytest.skip)(
            "promtool not found: run scripts/setup.sh (it installs Debian's prometheus package)")
    return path


def _run(*args: str) -> subprocess.CompletedProcess:
    # promtool answers in well under a second; 60 s only bounds a wedged binary on a loaded box.
    return subprocess.run([_promtool(), *args], capture_output=True, text=True, timeout=60,
                          cwd=RULES_DIR)


def _rules() -> list[dict]:
    groups = yaml.safe_load(RULES.read_text())["groups"]
    return [rule for group in groups for rule in group["rules"]]


def test_promtool_check_rules_passes() -> None:
    proc = _run("check", "rules", str(RULES))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"SUCCESS: {len(_rules())} rules found" in proc.stdout


def test_promtool_unit_tests_pass() -> None:
    proc = _run("test", "rules", str(RULE_TESTS))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "SUCCESS" in proc.stdout


def test_every_alert_is_labelled_explained_and_tested_both_ways() -> None:
    """Each alert has a severity and both annotations, fires in some promtool test, and is
    checked silent (at every evaluation time listed) in the healthy series."""
    rules = _rules()
    assert {r["alert"] for r in rules if "alert" in r} and all("alert" in r for r in rules)
    tests = yaml.safe_load(RULE_TESTS.read_text())["tests"]
    fired = {t["alertname"] for group in tests for t in group.get("alert_rule_test", [])
             if t.get("exp_alerts")}
    healthy = [g for g in tests if g.get("name") == HEALTHY]
    assert len(healthy) == 1, f"alerts_test.yml needs one test group named {HEALTHY!r}"
    silent = {t["alertname"] for t in healthy[0]["alert_rule_test"] if t["exp_alerts"] == []}
    for rule in rules:
        name = rule["alert"]
        assert rule.get("labels", {}).get("severity") in {"critical", "warning"}, name
        assert {"summary", "description"} <= set(rule.get("annotations", {})), name
        assert name in fired, f"no promtool test makes {name} fire"
        assert name in silent, f"the healthy series does not check that {name} stays silent"


def test_the_operations_doc_names_the_file_and_scrapes_the_jobs_the_rules_watch() -> None:
    doc = OPERATIONS_DOC.read_text()
    assert "deploy/prometheus/alerts.yml" in doc
    jobs = set(re.findall(r'up\{job="([^"]+)"\}', RULES.read_text()))
    assert jobs == {"logcount-stage", "logcount-sink"}
    for job in jobs:
        assert f"job_name: {job}" in doc, f"docs/operations.md's scrape config lacks job {job}"


def test_the_documented_promql_per_service_computes_the_rate_and_the_error_ratio(tmp_path) -> None:
    """docs/operations.md's per-series PromQL, as recording rules over synthetic per-level,
    per-service counters: ERROR lines a minute per service, and ERROR over all lines."""
    doc = OPERATIONS_DOC.read_text()
    block = re.findall(r"```promql\n(.*?)\n```", doc, flags=re.S)
    assert len(block) == 1, "docs/operations.md shows one promql block"
    per_minute, ratio = (e.strip() for e in block[0].split("\n\n"))
    (tmp_path / "readme.yml").write_text(yaml.safe_dump({"groups": [{"name": "readme", "rules": [
        {"record": "readme:errors_per_minute", "expr": per_minute},
        {"record": "readme:error_ratio", "expr": ratio}]}]}))
    stage = 'job="logcount-stage", instance="s:9108"'
    series = [(f'logcount_counted_lines_total{{{stage}, level="{lv}", service="{sv}"}}',
               f"0+{n}x20") for sv, lv, n in (("orders", "ERROR", 30), ("orders", "INFO", 270),
                                              ("auth", "ERROR", 1), ("auth", "WARN", 3))]
    (tmp_path / "readme_test.yml").write_text(yaml.safe_dump({
        "rule_files": ["readme.yml"], "evaluation_interval": "1m", "tests": [{
            "interval": "1m", "input_series": [{"series": s, "values": v} for s, v in series],
            "promql_expr_test": [
                {"expr": "readme:errors_per_minute", "eval_time": "10m", "exp_samples": [
                    {"labels": 'readme:errors_per_minute{service="orders"}', "value": 30},
                    {"labels": 'readme:errors_per_minute{service="auth"}', "value": 1}]},
                {"expr": "readme:error_ratio", "eval_time": "10m", "exp_samples": [
                    {"labels": 'readme:error_ratio{service="orders"}', "value": 0.1},
                    {"labels": 'readme:error_ratio{service="auth"}', "value": 0.25}]}]}]}))
    proc = subprocess.run([_promtool(), "test", "rules", "readme_test.yml"], capture_output=True,
                          text=True, timeout=60, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
