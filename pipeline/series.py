"""Per-series totals of a stage with --group-by, and their records in the state topic (pure).

A series is a tuple of dimension values. The stage names at most `--max-series` of them, each
with an id (1, 2, ...) fixed for the life of the state; series 0 is the overflow series, every
dimension `__other__`, where the lines of tuples not named go (and a tuple that is itself all
`__other__`). A named tuple stays named: its totals never move, through any restart. A lateness
horizon evicts cells (a series' minutes), never names: the named set is bounded by --max-series.

State topic records, beside the progress record (pipeline/state.py):
    key b"series/<id>"                  the tuple, a compact JSON array (written once)
    key b"totals/YYYY-MM-DD HH/<id>"    that series' minutes of the hour (totals.encode_hour)
In memory, one `Totals` for all series (SeriesTotals).
"""

from __future__ import annotations

import heapq
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from logcount.formats.spec import OVERFLOW
from logcount.pipeline.totals import HOUR_END, MINUTE_END, Totals, hour_key, parse_hour_key

__all__ = ["OVERFLOW_ID", "SERIES_PREFIX", "SeriesTotals", "Assigned", "cell_key",
           "parse_cell_key", "name_key", "parse_name_key", "encode_name", "decode_name"]

OVERFLOW_ID = 0
SERIES_PREFIX = b"series/"


def cell_key(sid: int, hour: int) -> bytes:
    return hour_key(hour) + b"/%d" % sid


def parse_cell_key(key: bytes) -> tuple[int, int] | None:
    """Inverse of cell_key: (series id, hour), or None for any other key."""
    head, slash, tail = key.rpartition(b"/")
    if not slash or not tail.isdigit() or not tail.isascii() or (len(tail) > 1 and tail[0] == 48):
        return None
    hour = parse_hour_key(head)
    return None if hour is None else (int(tail), hour)


def name_key(sid: int) -> bytes:
    return SERIES_PREFIX + b"%d" % sid


def parse_name_key(key: bytes) -> int | None:
    tail = key[len(SERIES_PREFIX):]
    if not key.startswith(SERIES_PREFIX) or not tail.isdigit() or not tail.isascii():
        return None
    return int(tail)


def encode_name(values: tuple[str, ...]) -> bytes:
    return json.dumps(list(values), ensure_ascii=False, separators=(",", ":")).encode()


def decode_name(value: bytes, width: int) -> tuple[str, ...]:
    v = json.loads(value)
    if not isinstance(v, list) or len(v) != width or not all(isinstance(x, str) for x in v):
        raise ValueError(f"a series name record that is not {width} values")
    return tuple(v)


@dataclass(frozen=True)
class Assigned:
    """A batch's counts by series id, the tuples it names, and what went to the overflow."""

    counts: dict[int, dict[int, int]]  # series id -> {minute: lines}
    new_names: dict[int, tuple[str, ...]]
    overflow_lines: int  # lines of tuples not named, counted under the overflow series
    widest: str | None  # with overflow: the dimension with the most distinct values


class SeriesTotals:
    """The named tuples and the totals of every series, in ONE Totals keyed
    `series id * MINUTE_END + minute` (so a batch's cells are merged and applied as arrays, not
    series by series: ~16 bytes a cell). Figures: docs/tuning.md#series-cells"""

    def __init__(self, names: tuple[str, ...], max_series: int) -> None:
        self.dim_names = names
        self.max_series = max_series
        self.overflow = (OVERFLOW,) * len(names)
        self.ids: dict[tuple[str, ...], int] = {self.overflow: OVERFLOW_ID}
        self.tuples: dict[int, tuple[str, ...]] = {OVERFLOW_ID: self.overflow}
        self.totals = Totals(key_end=(max_series + 1) * MINUTE_END)

    @classmethod
    def restore(cls, names: tuple[str, ...], max_series: int,
                tuples: Mapping[int, bytes], cells: Iterable[tuple[tuple[int, int], bytes]]
                ) -> SeriesTotals:
        """From the state topic's name and cell records. ValueError on a damaged one, or a
        cell of a series that has no name."""
        self = cls(names, max_series)
        for sid, raw in sorted(tuples.items()):
            values = decode_name(raw, len(names))
            if sid == OVERFLOW_ID or values in self.ids or sid > max_series:
                raise ValueError(f"series {sid} named twice, as the overflow series or beyond "
                                 f"--max-series")
            self.ids[values] = sid
            self.tuples[sid] = values
        hours = []
        for (sid, hour), raw in cells:
            if sid not in self.tuples:
                raise ValueError(f"totals of series {sid}, which has no name record")
            hours.append((sid * HOUR_END + hour, raw))
        self.totals = Totals.from_hours(hours, key_end=self.totals.key_end)
        return self

    @property
    def named(self) -> int:
        return len(self.tuples) - 1

    def __len__(self) -> int:
        """The (minute, series) cells held."""
        return len(self.totals)

    def assign(self, counts: Mapping[tuple[str, ...], Mapping[int, int]]) -> Assigned:
        """PURE: a batch's counts per tuple -> per series id. New tuples are named while there is
        room, the busiest first (then by value, so a replay names the same); the rest count under
        the overflow series."""
        out: dict[int, dict[int, int]] = {}
        room = max(0, self.max_series - self.named)
        # nsmallest is sorted()[:room] without sorting a flood of new tuples when room is small.
        new = heapq.nsmallest(room, (t for t in counts if t not in self.ids),
                              key=lambda t: (-sum(counts[t].values()), t))
        next_id = max(self.tuples) + 1
        new_names = {next_id + i: t for i, t in enumerate(new[:room])}
        ids = {**self.ids, **{t: i for i, t in new_names.items()}}
        overflow_lines = 0
        for t, cells in counts.items():
            sid = ids.get(t, OVERFLOW_ID)
            if t not in ids:
                overflow_lines += sum(cells.values())
            mine = out.setdefault(sid, {})
            for m, n in cells.items():
                mine[m] = mine.get(m, 0) + n
        widest = None
        if overflow_lines:
            seen: list[set[str]] = [set() for _ in self.dim_names]
            for t in [*self.tuples.values(), *counts]:
                for i, v in enumerate(t):
                    seen[i].add(v)
            widest = max(zip(self.dim_names, map(len, seen), strict=True), key=lambda x: x[1])[0]
        return Assigned(out, new_names, overflow_lines, widest)

    def merged(self, counts: Mapping[int, Mapping[int, int]]) -> dict[tuple[int, int], int]:
        """PURE: {(series id, minute): current total + count}."""
        flat = {sid * MINUTE_END + m: n for sid, cells in counts.items() for m, n in cells.items()}
        return {divmod(k, MINUTE_END): n for k, n in self.totals.merged(flat).items()}

    def hours_after(self, updates: Mapping[tuple[int, int], int]
                    ) -> dict[tuple[int, int], dict[int, int]]:
        """PURE: {(series id, hour): its minutes once `updates` are applied}."""
        flat = {sid * MINUTE_END + m: n for (sid, m), n in updates.items()}
        return {divmod(h, HOUR_END): c for h, c in self.totals.hours_after(flat).items()}

    def hours_before(self, minute: int) -> list[tuple[int, int]]:
        return [divmod(h, HOUR_END) for h in self.totals.periodic_hours_before(minute)]

    def apply(self, updates: Mapping[tuple[int, int], int],
              new_names: Mapping[int, tuple[str, ...]]) -> None:
        """Name the new tuples and set absolute totals (only after the commit)."""
        for sid, t in new_names.items():
            self.ids[t] = sid
            self.tuples[sid] = t
        self.totals.apply({sid * MINUTE_END + m: n for (sid, m), n in updates.items()})

    def evict_hours_before(self, minute: int) -> int:
        return self.totals.periodic_evict_before(minute)

    @property
    def nbytes(self) -> int:
        return self.totals.nbytes
