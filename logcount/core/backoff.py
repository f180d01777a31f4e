"""The retry schedule of every retry and poll loop of the stage and its connectors (the loop
itself is logcount/core/retry.py's).

`Backoff` is pure: it is told of each failure and answers with the delay before the next try,
or None once it has been failing for longer than its budget. Sleeping is the caller's (a stage
sleeps on its stop flag, a tool on `time.sleep`), and so is the clock, which tests replace.
"""

from __future__ import annotations

import time
from collections.abc import Callable


class Backoff:
    """Delays `first_s`, then times `factor` after each failure, at most `max_s` (default:
    `first_s`, a fixed interval). `give_up_s`: the budget, counted from the first failure, or
    from `begin()` for a loop whose first try belongs to the budget too; `retries`: at most
    that many delays. Neither: it never gives up."""

    def __init__(self, first_s: float, max_s: float | None = None, *, factor: float = 2.0,
                 give_up_s: float | None = None, retries: int | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.first_s, self.max_s, self.factor = first_s, first_s if max_s is None else max_s, factor
        self.give_up_s, self.retries, self.clock = give_up_s, retries, clock
        self.failures = 0
        self.since: float | None = None  # the first failure of this run (or begin())

    def begin(self) -> Backoff:
        """Start the budget now, before the first try."""
        self.since = self.clock()
        return self

    def failed(self) -> float | None:
        """Count a failure: the delay before the next try, or None when the budget is spent."""
        self.failures += 1
        now = self.clock()
        if self.since is None:
            self.since = now
        if self.give_up_s is not None and now - self.since >= self.give_up_s:
            return None
        if self.retries is not None and self.failures > self.retries:
            return None
        try:
            grown = self.first_s * self.factor ** (self.failures - 1)
        except OverflowError:  # a backoff without a budget (the sink's) may fail for hours:
            grown = self.max_s  # factor ** 1024 overflows, long after the cap was reached
        return min(grown, self.max_s)

    def elapsed(self) -> float:
        """Seconds since the run of failures began (0 when none)."""
        return 0.0 if self.since is None else self.clock() - self.since

    def reset(self) -> None:
        """A success: the next failure starts a new run."""
        self.failures, self.since = 0, None

