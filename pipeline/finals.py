"""`--emit-final GRACE` in the batch (pipeline/batch.py): what the plan saw, the closing decision
(pipeline/closing.py's `decide`, pure) and the final records of the minutes it closed, published
in the batch's own transaction beside the totals and the state that remembers the close.

  plan     each input partition: whether its range held offsets; the clock second, once
  compute  the job returns each partition's newest event minute (pipeline/job.py)
  decide   the new closing state: per-partition facts and the first minute not yet final
  records  for every minute closed, one record per series that counted a line (without
           --group-by: the total, zero included) and then the minute's closed record

A quiet input runs no job: the plan asks `due` whether the facts would change (a partition
turned caught up, a minute closed by the clock) and, if so, commits a batch with no ranges.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime

import numpy as np

from logcount.connectors.transactional_sink import OutRecord
from logcount.core.records import FinalRecord, encode_final
from logcount.core.settings import RunSettings
from logcount.pipeline.closing import (
    BatchSeen,
    ClosingFacts,
    ClosingState,
    PartitionFacts,
    clock_second,
    decide,
    grace_text,
)
from logcount.pipeline.hour_records import MINUTE_END, minute_text
from logcount.pipeline.stage_state import Change, StageState

__all__ = ["MAX_CLOSE_MINUTES", "Finals", "Seen"]

# At most this many minutes close in one transaction (a week: ~10,000 records of an ungrouped
# stage, ~1 MB); more (a replay of old logs closed by the clock) close over the next batches,
# run back to back, so no transaction outgrows the broker's limits.
MAX_CLOSE_MINUTES = 7 * 24 * 60
# With --group-by a minute is a record per series: a close is also cut at this many (minute,
# series) records (~20 MB), so a week of 200 live series is not 2 million in one transaction.
MAX_CLOSE_RECORDS = 100_000


@dataclass(frozen=True)
class Seen:
    """What the batch's plan saw, for closing."""

    now: int  # the clock second of the plan (closing.clock_second)
    had_input: Mapping[int, bool]  # every input partition -> whether its range held offsets


class Finals:
    """The closing step of a stage with --emit-final."""

    def __init__(self, s: RunSettings, wall: Callable[[], datetime] | None = None) -> None:
        assert s.grace_seconds is not None and s.final_topic_name is not None
        self.grace = s.grace_seconds
        self.once = s.once
        self.grace_label = grace_text(s.grace_seconds)
        self.level = s.line_format.level_label
        self.names = tuple(d.name for d in s.line_format.group_by)
        self.wall = wall or (lambda: datetime.now(UTC))
        self.more = False  # the last decision was cut at MAX_CLOSE_MINUTES: close again at once
        # Partitions seen caught up by a plan since the last commit, and since when: kept here
        # rather than committed on their own (a trickle input would double the transactions);
        # lost in a restart they are seen again later, which closes later, never earlier.
        self.since: dict[int, int] = {}

    def seen(self, starts: Mapping[int, int], stable: Mapping[int, int]) -> Seen:
        return Seen(clock_second(self.wall()),
                    {p: stable[p] > starts.get(p, stable[p]) for p in stable})

    def decide(self, state: StageState, seen: Seen, newest: Mapping[int, int],
               allowed: bool = True, touched: Iterable[int] = ()) -> ClosingState | None:
        """The closing state after this batch (None: the state has none). Not `allowed` (the
        start's first commit: the closing state is committed before it closes anything), the
        facts move but nothing closes. `touched`: the minutes the batch counted (where a first
        close begins when the state holds none yet)."""
        old = state.closing
        if old is None:
            return None
        # Input without a line of a usable time (all malformed, late or far ahead) holds nothing
        # back: as for a partition with no input, it stops holding the watermark after GRACE.
        timed = {p: had and p in newest for p, had in seen.had_input.items()}
        seen = Seen(seen.now, timed)
        got = decide(self._observed(old.facts, seen), BatchSeen(seen.now, timed, newest),
                     self.grace)
        new = got.new
        self.more = False
        if not allowed:
            new = old.facts.closed_before
        elif new is not None:
            lo = self._first(state, old.facts.closed_before, new, list(touched))
            cut = min(new, lo + MAX_CLOSE_MINUTES, _records_cut(state, lo, new))
            self.more, new = cut < new, cut
            if old.facts.closed_before is None and lo >= new:
                # Nothing counted before it: the first close waits for a minute to publish, so
                # the finals begin at the first counted minute, and nothing before is late.
                new = None
        return replace(old, grace_seconds=self.grace,
                       facts=replace(got.facts, closed_before=new))

    def due(self, state: StageState, seen: Seen) -> bool:
        """A batch with nothing to read: whether committing one would close a minute (the
        clock's, or the watermark's once a partition stopped holding it)."""
        more = self.more
        got = self.decide(state, seen, {})
        self.more = more  # only the decision a batch commits says whether more is to close
        return (got is not None and state.closing is not None
                and got.facts.closed_before != state.closing.facts.closed_before)

    def _observed(self, facts: ClosingFacts, seen: Seen) -> ClosingFacts:
        """The committed facts with the caught-up times seen since the last commit."""
        parts = dict(facts.partitions)
        for p, had_input in seen.had_input.items():
            if had_input:
                self.since.pop(p, None)
                continue
            f = parts.get(p, PartitionFacts())
            if f.caught_up_since is None:
                # --once cannot wait GRACE: a partition that never had a line holds nothing.
                at = seen.now - self.grace if self.once and f.newest_minute is None else seen.now
                parts[p] = replace(f, caught_up_since=self.since.setdefault(p, at))
        return replace(facts, partitions=parts)

    def records(self, state: StageState, change: Change) -> list[OutRecord]:
        """The final records of the minutes `change` closes: [before, after) of closed_before."""
        if change.closing is None or state.closing is None:
            return []
        new = change.closing.facts.closed_before
        if new is None:
            return []
        touched = ([m for _, m in change.series_updates] if state.series is not None
                   else list(change.updates))
        lo = self._first(state, state.closing.facts.closed_before, new, touched)
        topic = change.closing.final_topic  # the state's: the start checked it is ours
        out: list[OutRecord] = []
        if state.series is None:
            for m in range(lo, new):
                n = change.updates.get(m) or state.totals.get(m)
                out += self._window(topic, m, [((), n)])
        else:
            cells = self._series_cells(state, change, lo, new)
            names = {**state.series.tuples, **change.new_names}
            for m in range(lo, new):
                out += self._window(topic, m, self._named(names, cells.get(m, {})))
        for start, end in _rollup_windows(change.closing.rollups, lo, new):
            if state.closed_before is not None and start < state.closed_before:
                continue  # its first minutes left memory (the horizon) before it could close
            out += self._rollup(topic, state, change, start, end)
        return out

    def _rollup(self, topic: str, state: StageState, change: Change, start: int, end: int
                ) -> list[OutRecord]:
        """A rollup window's final totals: the sums of its minutes' (no second pass)."""
        if state.series is None:
            keys, vals = state.totals.arrays()
            i, j = np.searchsorted(keys, [start, end])
            held = dict(zip(keys[i:j].tolist(), vals[i:j].tolist(), strict=True))
            held.update({m: n for m, n in change.updates.items() if start <= m < end})
            return self._window(topic, start, [((), sum(held.values()))], end)
        sums: dict[int, int] = {}
        for cells in self._series_cells(state, change, start, end).values():
            for sid, n in cells.items():
                sums[sid] = sums.get(sid, 0) + n
        names = {**state.series.tuples, **change.new_names}
        return self._window(topic, start, self._named(names, sums), end)

    def _named(self, names: Mapping[int, tuple[str, ...]], totals: Mapping[int, int]
               ) -> list[tuple[tuple[tuple[str, str], ...], int]]:
        """Series totals {id: n} as ((name, value), ...) pairs, in the values' order."""
        mine = sorted((names[sid], n) for sid, n in totals.items())
        return [(tuple(zip(self.names, t, strict=True)), n) for t, n in mine]

    def _window(self, topic: str, minute: int,
                series: list[tuple[tuple[tuple[str, str], ...], int]],
                end_minute: int | None = None) -> list[OutRecord]:
        start = minute_text(minute)
        end = minute_text(minute + 1 if end_minute is None else end_minute)
        recs = [FinalRecord(start, end, self.grace_label, self.level, n, dims)
                for dims, n in series]
        recs.append(FinalRecord(start, end, self.grace_label, self.level,
                                sum(n for _, n in series), closed=True, series=len(series)))
        return [OutRecord(topic, *encode_final(r)) for r in recs]

    @staticmethod
    def _first(state: StageState, closed_before: int | None, new: int,
               touched: list[int] | None = None) -> int:
        """Where the minutes to close begin: the last close's end, or at the first close the
        first minute held or `touched` by the batch (none: nothing to publish), at most
        MAX_CLOSE_MINUTES back: one line of a typo'd year (0026) before the first close would
        otherwise make every minute since a zero record; those before close without one."""
        if closed_before is not None:
            return min(closed_before, new)
        held = [m for m in (_first_held(state), *(touched or ())) if m is not None]
        return max(min(min(held), new), new - MAX_CLOSE_MINUTES) if held else new

    @staticmethod
    def _series_cells(state: StageState, change: Change, lo: int, hi: int
                      ) -> dict[int, dict[int, int]]:
        """{minute: {series id: total}} of the minutes lo <= m < hi, this change applied."""
        assert state.series is not None
        keys, vals = state.series.totals.arrays()
        minutes = keys % MINUTE_END
        inside = (minutes >= lo) & (minutes < hi)
        out: dict[int, dict[int, int]] = {}
        for k, v in zip(keys[inside].tolist(), vals[inside].tolist(), strict=True):
            sid, m = divmod(k, MINUTE_END)
            out.setdefault(m, {})[sid] = v
        for (sid, m), n in change.series_updates.items():
            if lo <= m < hi:
                out.setdefault(m, {})[sid] = n
        return out


def _rollup_windows(lengths: Iterable[int], lo: int, new: int) -> list[tuple[int, int]]:
    """The rollup windows [start, end) a close of [lo, new) completes: their ends in
    (lo, new], by end, the shorter first."""
    out = []
    for w in lengths:
        first_end = (lo // w + 1) * w
        out += [(end - w, end) for end in range(first_end, new + 1, w)]
    return sorted(out, key=lambda se: (se[1], se[1] - se[0]))


def _records_cut(state: StageState, lo: int, new: int) -> int:
    """With --group-by, the end of the longest close from `lo` that stays within
    MAX_CLOSE_RECORDS (its cells and a closed record a minute); at least one minute."""
    series = state.series
    if series is None or (new - lo) * (len(series.tuples) + 1) <= MAX_CLOSE_RECORDS:
        return new  # cannot exceed it: no need to count the cells
    keys, _ = series.totals.arrays()
    minutes = keys % MINUTE_END
    per = np.bincount(minutes[(minutes >= lo) & (minutes < new)] - lo, minlength=new - lo) + 1
    k = int(np.searchsorted(np.cumsum(per), MAX_CLOSE_RECORDS, side="right"))
    return lo + max(1, k)


def _first_held(state: StageState) -> int | None:
    """The first minute the state holds a total of (any series)."""
    if state.series is None:
        keys, _ = state.totals.arrays()
        return int(keys[0]) if len(keys) else None
    keys, _ = state.series.totals.arrays()
    return int((keys % MINUTE_END).min()) if len(keys) else None

