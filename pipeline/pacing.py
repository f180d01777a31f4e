"""When a caught-up stage starts its next batch (pure): the loop's cadence.

Three modes. `--min-batch-interval S` (the default, 1 s): batches start at most every S seconds.
`--min-batch-interval 0`: back to back. `--target-latency T`: a line written just after a
batch planned is read by the next batch and committed when that one ends, so its latency is the
gap between the two batches' starts plus the next one's length. The next batch starts T less
the slowest of the recent batches after this one's start: as late as the target allows, and no
earlier. A backlog runs back to back in every mode (the loop's), so a burst is not paced.
"""

from __future__ import annotations

from collections import deque

# The batches whose lengths predict the next one's: 32 batches are a few seconds at the rates a
# latency target is for, so one slow batch (a full collection, a broker's pause) shortens the
# gap for a few seconds, then ages out. Figures: docs/tuning.md#latency-target
RECENT_BATCHES = 32
# An idle stage (nothing to read) asks again at least this long apart, even when the recent
# batches leave the target no room: asking is three small admin requests, no Spark job.
IDLE_FLOOR_S = 0.01


class Cadence:
    """The gap between a caught-up stage's batches, from the mode and the batches' lengths."""

    def __init__(self, min_interval: float, target: float | None,
                 recent: int = RECENT_BATCHES) -> None:
        self.min_interval, self.target = min_interval, target
        self.lengths: deque[float] = deque(maxlen=recent)

    def took(self, seconds: float) -> None:
        """A batch that read something took `seconds` from its plan to its commit."""
        self.lengths.append(max(0.0, seconds))

    @property
    def interval(self) -> float:
        """Seconds from one batch's start to the next's while caught up (0: back to back)."""
        if self.target is None:
            return self.min_interval
        return max(0.0, self.target - max(self.lengths, default=0.0))

    def wait(self, started: float, now: float) -> float:
        """Seconds to sleep after a caught-up batch that started at `started` and ended at `now`
        (monotonic): 0 once the batch itself took the interval or longer."""
        return max(0.0, started + self.interval - now)

    def idle(self, trigger_interval: float) -> float:
        """Seconds to sleep when there was nothing to read: --trigger-interval, or with a target
        at most the interval, so a line that arrives meanwhile still meets it."""
        if self.target is None:
            return trigger_interval
        return min(trigger_interval, max(self.interval, IDLE_FLOOR_S))
