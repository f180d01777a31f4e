"""Planning the offset ranges of one batch (pure)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

__all__ = ["FIRST_BATCH_RECORDS", "OffsetRange", "batch_cap", "plan_ranges", "resolve_starts"]

# The first batch of a process is small, and each next one 10x larger up to
# --max-records-per-batch (2k, 20k, 200k, 2M): a first Spark job pays ~4 s cold whatever its size,
# so a large first batch only delays the first commit after every start and restart.
# Figures: docs/tuning.md#first-batch
FIRST_BATCH_RECORDS = 2_000
BATCH_GROWTH = 10


@dataclass(frozen=True, slots=True)
class OffsetRange:
    partition: int
    start: int  # first offset to read
    end: int  # exclusive: the position a reader has after the range; what gets committed

    @property
    def size(self) -> int:
        return self.end - self.start


def resolve_starts(offsets: Mapping[int, int], earliest: Mapping[int, int],
                   latest: Mapping[int, int]) -> dict[int, int]:
    """Where each partition's next batch starts: the state's offset, moved up to the log start
    when retention deleted records not yet read (they are gone, and reading a deleted offset
    would fail the Spark job forever); a partition the state does not know yet (added to the
    topic while the stage runs) starts at its log start: every record in it is new."""
    return {p: max(offsets.get(p, 0), earliest.get(p, 0)) for p in latest}


def batch_cap(batches_done: int, max_records: int) -> int:
    """The record cap of the next batch after `batches_done` batches of this process."""
    return min(max_records, FIRST_BATCH_RECORDS * BATCH_GROWTH ** min(batches_done, 16))


def plan_ranges(starts: Mapping[int, int], ends: Mapping[int, int],
                max_records: int) -> list[OffsetRange]:
    """Ranges [start, end) per partition, at most `max_records` offsets in all.

    `ends` are last stable offsets (a read_committed reader's end), so a range never waits on an
    open transaction. The cap is shared fairly: every partition with a backlog gets an equal share,
    and what a small partition does not use goes to the others (water-filling), so one hot
    partition cannot starve the rest and the batch is as large as the cap allows.
    Offsets are counted, not records: markers and aborted records take offsets too, so a batch
    holds at most `max_records` records.
    """
    backlog = {p: max(0, ends[p] - starts[p]) for p in ends if p in starts}
    grant = dict.fromkeys(backlog, 0)
    budget = max_records
    hungry = sorted(p for p, n in backlog.items() if n > 0)
    while budget > 0 and hungry:
        share = max(1, budget // len(hungry))
        for p in list(hungry):
            take = min(share, backlog[p] - grant[p], budget)
            grant[p] += take
            budget -= take
            if grant[p] == backlog[p]:
                hungry.remove(p)
            if budget == 0:
                break
    return [OffsetRange(p, starts[p], starts[p] + grant[p]) for p in sorted(grant) if grant[p]]


def offsets_to_send(new: Mapping[int, int], old: Mapping[int, int],
                    everything: bool) -> dict[int, int]:
    """The group offsets one transaction sends: only those that moved, so a batch over a few of
    512 partitions writes a few offsets, not 512 (pure). `everything` (the first commit of a
    process, then hourly: pipeline/batch.py) sends them all, which keeps an idle partition's
    committed offset from expiring with the group's (offsets.retention.minutes, KIP-211)."""
    return dict(new) if everything else {p: o for p, o in new.items() if old.get(p) != o}
