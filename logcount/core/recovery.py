"""When the stage replaces its Kafka clients in-process, and when it stops trying.

A hung librdkafka call or a producer fenced by its own transaction timeout is recovered from by
new clients (pipeline/clients.py), a cluster outage likewise between two batches. `Recovery`
holds the count since the last commit and the cause, which labels
`logcount_producer_recoveries_total{cause}`.
"""

from __future__ import annotations

# Three: links healing one by one can catch a new producer; a fourth hang (or fencing) before any
# commit means replacing the clients does not help, so the stage exits for its supervisor.
MAX_HANGS_WITHOUT_COMMIT = 3
MAX_FENCES_WITHOUT_COMMIT = 3


class Recovery:
    def __init__(self, max_hangs: int = MAX_HANGS_WITHOUT_COMMIT,
                 max_fences: int = MAX_FENCES_WITHOUT_COMMIT) -> None:
        self.max_hangs, self.max_fences = max_hangs, max_fences
        self.hangs = 0  # hung Kafka calls since the last commit
        self.fences = 0  # fencings of our own producer since the last commit
        self.cause: str | None = None  # why the clients are being replaced (a metric label)

    def hung(self) -> bool:
        """One more hang: True when the clients are to be replaced, False when it is too many."""
        self.hangs += 1
        if self.hangs > self.max_hangs:
            return False
        self.cause = "hung_call"
        return True

    def fenced(self, cause: str) -> bool:
        """One more fencing of our own producer (`cause`: with or without a freeze to explain
        it): True to replace the clients, False when it is too many."""
        self.fences += 1
        if self.fences > self.max_fences:
            return False
        self.cause = cause
        return True

    def outage(self) -> None:
        """The clients saw the cluster fail: replaced between two batches, no limit."""
        self.cause = "after_outage"

    def recovered(self) -> str:
        """New clients are in place: the cause they were made for (then cleared)."""
        cause, self.cause = self.cause or "unknown", None
        return cause

    def committed(self) -> None:
        self.hangs = self.fences = 0
