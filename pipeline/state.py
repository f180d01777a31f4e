"""The stage's per-minute totals and how a batch's counts merge into them (pure)."""

from __future__ import annotations

from collections.abc import Mapping

__all__ = ["merge_counts"]


def merge_counts(totals: Mapping[str, int], batch: Mapping[str, int]) -> dict[str, int]:
    """The new absolute total of every minute the batch touched.

    `totals` is not changed: the caller applies the result only after the transaction that
    publishes it has committed, so an aborted batch leaves the in-memory state as it was.
    """
    return {minute: totals.get(minute, 0) + n for minute, n in batch.items() if n}
