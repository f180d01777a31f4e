"""The stage's state in memory (pure): what it holds, and how one batch changes it (`change()`,
computed before the batch's transaction; `advance()`, applied once it committed)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from logcount.pipeline.closing import ClosingState
from logcount.pipeline.hour_records import encode_hour, hour_key
from logcount.pipeline.offsets import OffsetRange
from logcount.pipeline.series import SeriesTotals, encode_name, name_key
from logcount.pipeline.state_identity import Identity
from logcount.pipeline.state_records import PROGRESS_KEY, ProgressRecord
from logcount.pipeline.totals import Totals
from logcount.pipeline.watermark import FUTURE_SLACK_MINUTES, honest_newest, late_before

__all__ = ["FUTURE_SLACK_MINUTES", "Change", "StageState", "honest_newest", "late_before"]


@dataclass(frozen=True)
class Change:
    """What one batch does to the state, computed before its transaction, applied after."""

    updates: dict[int, int]  # minute -> new absolute total (published to the output topic)
    offsets: dict[int, int]
    watermark: int | None
    evict_before: int | None  # hours wholly before this minute leave memory and the state topic
    state_records: list[tuple[bytes, bytes | None]]  # (key, value or None for a tombstone)
    closed_before: int | None = None
    # With --group-by (then `updates` is empty): (series id, minute) -> new absolute total, the
    # tuples this batch names, and its lines counted under the overflow series.
    series_updates: dict[tuple[int, int], int] = field(default_factory=dict)
    new_names: dict[int, tuple[str, ...]] = field(default_factory=dict)
    overflow_lines: int = 0
    widest: str | None = None  # the dimension with the most distinct values, on overflow
    series_lines: dict[int, int] = field(default_factory=dict)  # series id -> lines this batch
    closing: ClosingState | None = None  # --emit-final: the closing state once committed

    def outputs(self, tuples: Mapping[int, tuple[str, ...]]
                ) -> list[tuple[int, tuple[str, ...], int]]:
        """(minute, dimension values, total) of every output record, in order; `tuples`:
        the names already held (this change's new ones are added)."""
        if not self.series_updates:
            return [(m, (), n) for m, n in sorted(self.updates.items())]
        names = {**tuples, **self.new_names}
        return sorted((m, names[sid], n) for (sid, m), n in self.series_updates.items())


class StageState:
    """The state in memory. `change()` is pure; `advance()` applies a committed change."""

    def __init__(self, identity: Identity, offsets: Mapping[int, int], totals: Totals,
                 watermark: int | None = None, horizon_minutes: int | None = None,
                 closed_before: int | None = None, series: SeriesTotals | None = None,
                 closing: ClosingState | None = None) -> None:
        self.identity = identity
        self.series = series  # with --group-by: the per-series totals (then totals stays empty)
        self.offsets = dict(offsets)
        self.totals = totals
        self.watermark = watermark
        self.horizon_minutes = horizon_minutes
        self.closed_before = closed_before
        self.closing = closing  # --emit-final's (pipeline/closing.py)

    def late_before(self) -> int | None:
        """The first minute a line may count for: the horizon's, and never before the minutes
        an earlier eviction closed (a wider or removed horizon cannot reopen them) nor before
        those --emit-final closed (closed is closed)."""
        final = None if self.closing is None else self.closing.facts.closed_before
        bounds = [b for b in (late_before(self.watermark, self.horizon_minutes),
                              self.closed_before, final) if b is not None]
        return max(bounds) if bounds else None

    def change(self, ranges: Sequence[OffsetRange], counts: Mapping[int, int],
               now_minute: int, starts: Mapping[int, int] | None = None,
               extra_records: Sequence[tuple[bytes, bytes | None]] = (),
               series: Mapping[tuple[str, ...], Mapping[int, int]] | None = None,
               closing: ClosingState | None = None) -> Change:
        """The batch's effect: new totals of the minutes it touched, offsets at the ranges' ends
        (`starts`, where given, for partitions the batch did not read: moved or new ones),
        the watermark moved by the minutes it counted (never past the wall clock, and not at all
        by a minute beyond now + FUTURE_SLACK_MINUTES),
        hours that fell behind the horizon evicted, and the state records that say all this.
        With --group-by, `series` holds the counts per tuple (`counts` their sums).
        `closing`: --emit-final's state after this batch (pipeline/finals.py), kept as it was
        when None."""
        by_minute = {m: n for m, n in counts.items() if n}
        closing = closing or self.closing
        if self.series is not None:
            return self._series_change(ranges, by_minute, now_minute, starts, extra_records,
                                       series or {}, closing)
        updates = self.totals.merged(by_minute)
        offsets, watermark, evict = self._moved(ranges, by_minute, now_minute, starts, closing)
        gone: set[int] = set()
        if evict is not None:  # whole hours behind the horizon, held or touched by this batch
            gone = set(self.totals.hours_before(evict))
            gone |= {m // 60 for m in updates if m // 60 * 60 + 60 <= evict}
        contents = self.totals.hours_after(updates)  # {hour: its minutes once applied}
        records: list[tuple[bytes, bytes | None]] = list(extra_records)
        records += [(hour_key(h), encode_hour(contents[h]))
                    for h in sorted(contents) if h not in gone]
        records += [(hour_key(h), None) for h in sorted(gone)]
        closed = self.closed_before
        if gone:
            closed = max(closed or 0, max(gone) * 60 + 60)
        progress = ProgressRecord(self.identity, offsets, watermark, closed, closing)
        records.append((PROGRESS_KEY, progress.encode()))
        return Change(updates, offsets, watermark, evict if gone else None, records, closed,
                      closing=closing)

    def _moved(self, ranges, by_minute, now_minute, starts, closing):
        """Offsets and watermark after a batch, and the minute before which hours leave."""
        offsets = {**self.offsets, **(starts or {}), **{r.partition: r.end for r in ranges}}
        newest = honest_newest(by_minute, now_minute)
        watermark = self.watermark
        if newest is not None:  # never past the wall clock: a line hours ahead cannot close now
            watermark = newest if watermark is None else max(watermark, newest)
        evict = late_before(watermark, self.horizon_minutes)
        if evict is not None and closing is not None:
            # A minute leaves memory only once final (and its rollup windows closed): this
            # watermark is the newest partition's, the closing one the oldest's.
            evict = min(evict, closing.kept_from())
        return offsets, watermark, evict

    def _series_change(self, ranges, by_minute, now_minute, starts, extra_records,
                       counts, closing) -> Change:
        """change() with --group-by: per-series cells, and the names of new tuples."""
        assert self.series is not None
        st = self.series
        offsets, watermark, evict = self._moved(ranges, by_minute, now_minute, starts, closing)
        got = st.assign(counts)
        updates = st.merged(got.counts)
        cells, last_gone = st.chunk_records(updates, evict)
        records: list[tuple[bytes, bytes | None]] = list(extra_records)
        records += [(name_key(sid), encode_name(t)) for sid, t in sorted(got.new_names.items())]
        records += cells
        closed = self.closed_before
        gone = last_gone is not None
        if last_gone is not None:
            closed = max(closed or 0, last_gone * 60 + 60)
        progress = ProgressRecord(self.identity, offsets, watermark, closed, closing)
        records.append((PROGRESS_KEY, progress.encode()))
        return Change({}, offsets, watermark, evict if gone else None, records, closed,
                      updates, got.new_names, got.overflow_lines, got.widest,
                      {sid: sum(by_min.values()) for sid, by_min in got.counts.items()},
                      closing)

    def cells(self) -> int:
        """The (minute, series) totals held: minutes without --group-by."""
        return len(self.totals) if self.series is None else len(self.series)

    def advance(self, change: Change) -> None:
        """Apply a change whose transaction committed: only now do totals and offsets move."""
        if self.series is not None:
            self.series.apply(change.series_updates, change.new_names)
            if change.evict_before is not None:
                self.series.evict_hours_before(change.evict_before)
        self.totals.apply(change.updates)
        self.offsets = dict(change.offsets)
        self.watermark = change.watermark
        self.closed_before = change.closed_before
        self.closing = change.closing
        if change.evict_before is not None:
            self.totals.evict_hours_before(change.evict_before)
