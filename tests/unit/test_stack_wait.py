"""connectors/stack's wait for a starting service: probed until it answers, an exit at once."""

from __future__ import annotations

import itertools

import pytest

from logcount.connectors import stack
from logcount.core.errors import StackError


class _Starting(stack.Service):
    """A service whose probe fails `failures` times, then answers."""

    def __init__(self, failures: int) -> None:
        super().__init__("fake", (1,))
        self.failures, self.probes = failures, 0

    def probe(self) -> None:
        self.probes += 1
        if self.probes <= self.failures:
            raise ConnectionRefusedError(f"refused {self.probes}")


def test_a_starting_service_is_probed_until_it_answers(sleeps):
    svc = _Starting(3)
    svc._wait_ready(lambda: None)
    assert svc.probes == 4 and sleeps == [stack.READY_POLL_S] * 3


def test_a_process_that_exits_during_start_is_one_line_at_once(sleeps):
    svc = _Starting(99)
    exits = itertools.chain([None, None], itertools.repeat(1))
    with pytest.raises(StackError, match=r"^fake: exited during start; see .*out\.log$") as got:
        svc._wait_ready(lambda: next(exits))
    assert svc.probes == 2 and len(sleeps) == 2 and got.value.__cause__ is None


def test_a_service_that_never_answers_is_given_up_after_the_start_timeout(sleeps, monkeypatch):
    monkeypatch.setattr(stack, "START_TIMEOUT_S", 0.0)  # the budget is spent at the first probe
    with pytest.raises(StackError, match=r"^fake: not answering after 0s \(refused 1\); see "):
        _Starting(99)._wait_ready(lambda: None)
    assert sleeps == []
