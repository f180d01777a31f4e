"""`logcount state show` against the real broker: a first start, a running stage, and a refused
stage that holds its metrics up. The drift cases (tests/integration/test_state_drift.py) check
each of its predictions against what the start then does."""

from __future__ import annotations

import json
import signal
import time
import urllib.error
import urllib.request

from tests.support.inputs import build_input
from tests.support.metrics import metric
from tests.support.ports import free_port
from tests.support.readers import end_offsets, group_offsets
from tests.support.run import cli, start_cli, wait_for
from tests.support.run import stage_args as _stage_args


def stage_args(endpoints, names, *extra: str) -> list[str]:
    return _stage_args(endpoints, names, "--metrics-port", "0", *extra)


def show(endpoints, names, *extra: str) -> dict:
    args = stage_args(endpoints, names, *extra)
    proc = cli("state", "show", *args[1:], "--json")
    return json.loads(proc.stdout)


def test_a_first_start_is_predicted_before_and_after_the_input_exists(endpoints, names):
    report = show(endpoints, names)
    assert report["identity"] is None and report["partitions"] == []
    assert report["start"]["action"] == "fresh"
    assert f"input topic {names.topic('in')} does not exist" in report["start"]["lines"][0]
    inp = build_input(endpoints.bootstrap, names.topic("in"), names.txn_id, 200, 40)
    ends = end_offsets(endpoints.bootstrap, names.topic("in"))
    latest = show(endpoints, names, "--starting-offsets", "latest")["start"]
    assert latest["lines"] == ["first start from " + " ".join(
        f"p{p}:{o}" for p, o in sorted(ends.items()))], latest
    report = show(endpoints, names)
    assert report["start"] == {"action": "fresh", "exit": 0,
                               "lines": ["first start from p0:0 p1:0 p2:0 p3:0"]}
    assert [(r["state"], r["group"], r["log_start"], r["end"], r["lag"])
            for r in report["partitions"]] == [(None, None, 0, ends[p], ends[p])
                                               for p in range(4)]
    text = cli("state", "show", *stage_args(endpoints, names)[1:]).stdout
    assert "a start now would: fresh (exit 0)" in text, text
    cli(*stage_args(endpoints, names, "--once"))
    after = show(endpoints, names)
    assert after["start"]["action"] == "resume"
    assert after["identity"]["input_topic"] == names.topic("in")
    assert after["identity"]["output_topic_id"] == after["now"]["output_topic_id"]
    assert [(r["state"], r["group"], r["lag"]) for r in after["partitions"]] == [
        (ends[p], ends[p], 0) for p in range(4)]
    assert after["minutes"] == len(inp.expected)
    assert after["claim"]["instance"] and after["state_topic_size"]["keys"] >= 2


def test_beside_a_running_stage_it_reads_a_consistent_state_and_fences_nobody(
        endpoints, names, tmp_path):
    build_input(endpoints.bootstrap, names.topic("in"), names.txn_id, 400, 80, seed=1)
    log = tmp_path / "stage.log"
    stage = start_cli(*stage_args(endpoints, names, "--trigger-interval", "0.1",
                                  "--max-records-per-batch", "50"), log_path=log)
    try:
        wait_for(lambda: "batch 3 committed" in log.read_text(), 180, what="a running stage")
        seen = []
        for i in range(6):  # while it commits a batch every ~0.2 s
            report = show(endpoints, names)
            assert report["start"]["action"] == "resume", report["start"]
            for r in report["partitions"]:
                assert r["state"] <= r["end"] and r["lag"] == r["end"] - r["state"], r
            seen.append(sum(r["state"] for r in report["partitions"]))
            if i == 2:  # more input under it
                build_input(endpoints.bootstrap, names.topic("in"), names.txn_id + "-2", 200,
                            40, seed=2)
        assert seen == sorted(seen), seen
        wait_for(lambda: group_offsets(endpoints.bootstrap, names.group, names.topic("in"))
                 == end_offsets(endpoints.bootstrap, names.topic("in")), 180, what="drained")
        assert stage.poll() is None, log.read_text()[-3000:]
        last = show(endpoints, names)
        assert all(r["lag"] == 0 and r["group"] == r["state"] for r in last["partitions"])
        stage.send_signal(signal.SIGTERM)
        assert stage.wait(120) == 0, log.read_text()[-3000:]
    finally:
        if stage.poll() is None:
            stage.kill()
    assert "fenced" not in log.read_text().lower()


def _get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def test_a_refused_stage_holds_its_metrics_up_then_exits_2(endpoints, names, tmp_path):
    build_input(endpoints.bootstrap, names.topic("in"), names.txn_id, 200, 40)
    cli(*stage_args(endpoints, names, "--once"))
    port, log = free_port(), tmp_path / "refused.log"
    stage = start_cli(*_stage_args(endpoints, names, "--once", "--level", "WARN",
                                   "--metrics-port", str(port), "--refusal-hold-seconds", "300"),
                      log_path=log)
    try:
        wait_for(lambda: metric(port, "logcount_stage_start_refused", down=0.0) == 1, 120,
                 what="logcount_stage_start_refused 1")
        code, body = _get(f"http://127.0.0.1:{port}/healthz")
        assert code == 503 and "counts level ERROR, not WARN" in json.loads(body)["refused"]
        t0 = time.monotonic()
        stage.send_signal(signal.SIGTERM)  # ends the hold at once
        assert stage.wait(60) == 2, log.read_text()[-3000:]
        assert time.monotonic() - t0 < 30
    finally:
        if stage.poll() is None:
            stage.kill()
    last = log.read_text().strip().splitlines()[-1]
    assert last.startswith("logcount: error: output topic") and "state show" in last, last
