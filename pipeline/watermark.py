"""The event-time watermark's rules (pure), shared by the state (pipeline/stage_state.py) and the
closing of minutes (pipeline/closing.py)."""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["CLOSING_SLACK_MINUTES", "FUTURE_SLACK_MINUTES", "honest_newest", "late_before"]

# Timestamps carry no zone, so a line may honestly be up to a day ahead of the UTC wall clock. A
# minute beyond now + this never advances the watermark, nor does any minute move it past the wall
# clock: one bogus future timestamp (year 2099, or tomorrow) cannot make every other line late.
FUTURE_SLACK_MINUTES = 24 * 60
# Closing (--emit-final) is stricter: a partition's newest minute moves only by lines at most
# this far ahead of the wall clock. A line 2 h ahead in a partition still reading its backlog
# would close that backlog's minutes early and make the rest of it late.
CLOSING_SLACK_MINUTES = 1


def honest_newest(minutes: Iterable[int], now_minute: int) -> int | None:
    """The newest of `minutes` that may move a watermark, capped at the wall clock's minute;
    None when none may (empty, or every one beyond now + FUTURE_SLACK_MINUTES)."""
    honest = [m for m in minutes if m <= now_minute + FUTURE_SLACK_MINUTES]
    return min(max(honest), now_minute) if honest else None


def late_before(watermark: int | None, horizon_minutes: int | None) -> int | None:
    """The first minute that is not late, or None when nothing is (no horizon, no watermark)."""
    if horizon_minutes is None or watermark is None:
        return None
    return watermark - horizon_minutes
