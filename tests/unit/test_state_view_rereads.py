"""`state show` re-reads a prediction other than a plain resume or first start (REREADS times,
on the backoff's pauses), and prints the last report it read."""

from __future__ import annotations

import time

import pytest

from logcount.core.backoff import Backoff
from logcount.core.settings import RunSettings
from logcount.pipeline import state_view


@pytest.mark.parametrize("actions, reads", [
    (["resume"], 1),
    (["fresh"], 1),
    (["repair", "resume"], 2),
    (["refuse", "refuse", "resume"], 3),
    (["repair"] * 5, 1 + state_view.REREADS),
])
def test_show_rereads_until_settled_or_the_rereads_run_out(monkeypatch, capsys, actions, reads):
    described: list[int] = []
    slept: list[float] = []

    class _Consumer:
        def __init__(self, conf: dict) -> None:
            pass

        def close(self) -> None:
            pass

    def describe(facts, s):
        n = len(described)
        described.append(n)
        return {"start": {"action": actions[n], "exit": 0, "lines": []}, "n": n}

    monkeypatch.setattr(state_view.kafka_io, "wait_for_broker", lambda *a: object())
    monkeypatch.setattr(state_view, "Consumer", _Consumer)
    monkeypatch.setattr(state_view, "gather", lambda *a, **kw: None)
    monkeypatch.setattr(state_view, "describe", describe)
    monkeypatch.setattr(time, "sleep", slept.append)
    assert state_view.show(RunSettings(), as_json=True) == 0
    assert len(described) == reads
    want = Backoff(state_view.REREAD_PAUSE_S, retries=state_view.REREADS)
    assert slept == [want.failed() for _ in range(reads - 1)]
    assert f'"n": {reads - 1}' in capsys.readouterr().out, "the last report is shown"
