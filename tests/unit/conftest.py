"""Fixtures the unit tests share."""

from __future__ import annotations

import time

import pytest

# More pauses than any tested wait takes: past it, the wait under test never ends.
MAX_SLEEPS = 200


@pytest.fixture
def sleeps(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """time.sleep recorded, not slept: the pauses a wait asked for, in order."""
    slept: list[float] = []

    def sleep(s: float) -> None:
        assert len(slept) < MAX_SLEEPS, "the wait never ended"
        slept.append(s)

    monkeypatch.setattr(time, "sleep", sleep)
    return slept
