"""Per-series totals of a stage with --group-by, and their records in the state topic (pure).

A series is a tuple of dimension values. The stage names at most `--max-series` of them, each
with an id (1, 2, ...) fixed for the life of the state; series 0 is the overflow series, every
dimension `__other__`, where the lines of tuples not named go (and a tuple that is itself all
`__other__`). A named tuple stays named: its totals never move, through any restart. A lateness
horizon evicts cells (a series' minutes), never names: the named set is bounded by --max-series.

State topic records, beside the progress record (pipeline/state.py):
    key b"series/<id>"                  the tuple, a compact JSON array (written once)
    key b"totals/YYYY-MM-DD HH/c<k>"    the hour's cells of series k*CHUNK_SERIES.. (encode_chunk)
    key b"totals/YYYY-MM-DD HH/<id>"    one series' hour (encode_hour): the first layout, still
                                        restored, and rewritten as chunks by the next start
In memory, one `Totals` for all series (SeriesTotals).
"""

from __future__ import annotations

import heapq
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import numpy as np

from logcount.formats.spec import OVERFLOW
from logcount.pipeline.hour_records import HOUR_END, MINUTE_END, hour_key, parse_hour_key
from logcount.pipeline.totals import Totals

__all__ = ["OVERFLOW_ID", "SERIES_PREFIX", "CHUNK_SERIES", "CHUNK_MAGIC", "CHUNK_CELL_BYTES",
           "SeriesTotals", "Assigned", "cell_key", "parse_cell_key", "chunk_key", "parse_chunk_key",
           "encode_chunk", "decode_chunk", "name_key", "parse_name_key", "encode_name",
           "decode_name"]

OVERFLOW_ID = 0
SERIES_PREFIX = b"series/"
# Series per chunk record: a uint8 names one, and a full record is 256 x 60 cells of 10 bytes,
# 150 KB, well under Kafka's 1 MB default message.max.bytes; 10,000 live series write 40 records
# an hour touched, not 10,000. Figures: docs/tuning.md#chunked-series-records
CHUNK_SERIES = 256
CHUNK_MAGIC = b"LCS1"
# A batch's new cells go straight into the arrays (one vectorised insert, ~6 ms at a million
# cells), not through the per-key overlay: a batch adds 10,000 at 10,000 live series.
# Figures: docs/tuning.md#chunked-series-records
SERIES_MERGE_AT = 0
CHUNK_CELL_BYTES = 1 + 1 + 8  # uint8 series in the chunk, uint8 minute of the hour, '<i8' total


def cell_key(sid: int, hour: int) -> bytes:
    return hour_key(hour) + b"/%d" % sid


def parse_cell_key(key: bytes) -> tuple[int, int] | None:
    """Inverse of cell_key: (series id, hour), or None for any other key."""
    head, slash, tail = key.rpartition(b"/")
    if not slash or not tail.isdigit() or not tail.isascii() or (len(tail) > 1 and tail[0] == 48):
        return None
    hour = parse_hour_key(head)
    return None if hour is None else (int(tail), hour)


def chunk_key(chunk: int, hour: int) -> bytes:
    return hour_key(hour) + b"/c%d" % chunk


def parse_chunk_key(key: bytes) -> tuple[int, int] | None:
    """Inverse of chunk_key: (chunk, hour), or None for any other key."""
    head, slash, tail = key.rpartition(b"/")
    digits = tail[1:]
    if (not slash or tail[:1] != b"c" or not digits.isdigit() or not digits.isascii()
            or (len(digits) > 1 and digits[0] == 48)):
        return None
    hour = parse_hour_key(head)
    return None if hour is None else (int(digits), hour)


def encode_chunk(chunk: int, sids: np.ndarray, offsets: np.ndarray, totals: np.ndarray
                 ) -> bytes:
    """A chunk's hour: b'LCS1', then n uint8 series (id - chunk * CHUNK_SERIES), n uint8
    minutes of the hour and n '<i8' totals, ascending by (series, minute)."""
    at = sids - chunk * CHUNK_SERIES
    if len(at) and (at.min() < 0 or at.max() >= CHUNK_SERIES):
        raise ValueError(f"a series outside chunk {chunk}")
    return b"".join((CHUNK_MAGIC, at.astype(np.uint8).tobytes(),
                     offsets.astype(np.uint8).tobytes(), totals.astype("<i8").tobytes()))


def decode_chunk(value: bytes, chunk: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """-> (series ids, minutes of the hour, totals) as int64 arrays. ValueError on a bad magic
    or length, cells not ascending, a minute beyond 59 or a total <= 0."""
    body = len(value) - len(CHUNK_MAGIC)
    if not value.startswith(CHUNK_MAGIC) or body % CHUNK_CELL_BYTES:
        raise ValueError(f"not a series chunk record (magic {bytes(value[:4])!r}, "
                         f"{len(value)} bytes)")
    n, at = body // CHUNK_CELL_BYTES, len(CHUNK_MAGIC)
    sids = np.frombuffer(value, np.uint8, n, at).astype(np.int64)
    offs = np.frombuffer(value, np.uint8, n, at + n).astype(np.int64)
    tots = np.frombuffer(value, "<i8", n, at + 2 * n).astype(np.int64)
    cell = sids * 60 + offs
    if (offs >= 60).any() or (cell[1:] <= cell[:-1]).any() or (tots <= 0).any():
        raise ValueError(f"series chunk record {chunk}: cells not ascending, a minute beyond "
                         f"59 or a total <= 0")
    return sids + chunk * CHUNK_SERIES, offs, tots


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


def _pairs(keys: np.ndarray) -> np.ndarray:
    """The (chunk, hour) pair id, chunk * HOUR_END + hour, of each key series * MINUTE_END + m."""
    return keys // MINUTE_END // CHUNK_SERIES * HOUR_END + keys % MINUTE_END // 60


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
        self.totals = Totals(key_end=(max_series + 1) * MINUTE_END, merge_at=SERIES_MERGE_AT)

    @classmethod
    def restore(cls, names: tuple[str, ...], max_series: int,
                tuples: Mapping[int, bytes], cells: Iterable[tuple[tuple[int, int], bytes]],
                chunks: Iterable[tuple[tuple[int, int], bytes]] = ()) -> SeriesTotals:
        """From the state topic's name records, and its cells: chunk records {(chunk, hour)}
        and the first layout's {(series id, hour)}. ValueError on a damaged one, a cell held
        twice, or a cell of a series that has no name."""
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
        first = Totals.from_hours(hours, key_end=self.totals.key_end)
        keys, vals = [first.arrays()[0]], [first.arrays()[1]]
        for (chunk, hour), raw in chunks:
            sids, offs, tots = decode_chunk(raw, chunk)
            keys.append(sids * MINUTE_END + hour * 60 + offs)
            vals.append(tots)
        k = np.concatenate(keys)
        unnamed = np.setdiff1d(np.unique(k // MINUTE_END), np.fromiter(self.tuples, np.int64))
        if len(unnamed):
            raise ValueError(f"totals of series {int(unnamed[0])}, which has no name record")
        self.totals = Totals.from_arrays(k, np.concatenate(vals), merge_at=SERIES_MERGE_AT,
                                         key_end=self.totals.key_end)
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
        new_names = {next_id + i: t for i, t in enumerate(new)}
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

    def chunk_records(self, updates: Mapping[tuple[int, int], int], evict_before: int | None,
                      ) -> tuple[list[tuple[bytes, bytes | None]], int | None]:
        """PURE: a batch's state records: each (chunk, hour) that `updates` touch, whole once
        they are applied, and a tombstone for each held or touched one wholly before
        `evict_before`; and the last hour evicted (None: none). Figures:
        docs/tuning.md#chunked-series-records"""
        flat = {sid * MINUTE_END + m: n for (sid, m), n in updates.items()}
        uk = np.fromiter(flat, np.int64, len(flat))
        uv = np.fromiter(flat.values(), np.int64, len(flat))
        if (uv <= 0).any():
            raise ValueError("a total <= 0 in updates")
        uh = uk % MINUTE_END // 60
        gone: set[tuple[int, int]] = set()
        if evict_before is not None:
            cut = evict_before // 60  # an hour h is wholly before the cut when h < cut
            held = np.asarray(self.totals.periodic_hours_before(evict_before), np.int64)
            late = uh < cut  # a batch's minutes of an hour evicted now: tombstoned too
            gone = set(zip((held // HOUR_END // CHUNK_SERIES).tolist(),
                           (held % HOUR_END).tolist(), strict=True))
            gone |= set(zip((uk[late] // MINUTE_END // CHUNK_SERIES).tolist(),
                            uh[late].tolist(), strict=True))
            uk, uv, uh = uk[~late], uv[~late], uh[~late]
        records = self._encode_pairs(uk, uv)
        records += [(chunk_key(c, h), None) for c, h in sorted(gone, key=lambda x: (x[1], x[0]))]
        return records, max((h for _, h in gone), default=None)

    def all_chunk_records(self) -> list[tuple[bytes, bytes | None]]:
        """PURE: every (chunk, hour) record of the cells held (a rewrite of the state)."""
        keys, _ = self.totals.arrays()
        return self._encode_pairs(np.empty(0, np.int64), np.empty(0, np.int64), _pairs(keys))

    def _encode_pairs(self, uk: np.ndarray, uv: np.ndarray, more: np.ndarray | None = None
                      ) -> list[tuple[bytes, bytes | None]]:
        """The records of the (chunk, hour) pairs the keys uk touch (and the pair ids `more`):
        their cells held, with the keys uk set to the totals uv. An hour's chunks are gathered
        and updated as one set of arrays (within an hour, key order is chunk order), not a
        chunk at a time. Figures: docs/tuning.md#chunked-series-records"""
        upair = _pairs(uk)
        pairs = np.unique(upair if more is None else np.concatenate((upair, more)))
        order = np.argsort(uk)
        uk, uv = uk[order], uv[order]
        uhour = uk % MINUTE_END // 60
        pair_chunks, pair_hours = np.divmod(pairs, HOUR_END)
        span = np.arange(CHUNK_SERIES, dtype=np.int64)
        out: list[tuple[int, bytes, bytes]] = []
        for hour in np.unique(pair_hours).tolist():
            chunks = pair_chunks[pair_hours == hour]
            sids = (chunks[:, None] * CHUNK_SERIES + span).ravel()
            keys, vals = self.totals.hour_cells(sids[sids <= self.max_series] * HOUR_END + hour)
            mine = uhour == hour
            k, v = uk[mine], uv[mine]
            pos = np.searchsorted(keys, k)
            hit = pos < len(keys)
            hit[hit] = keys[pos[hit]] == k[hit]
            vals[pos[hit]] = v[hit]
            keys = np.insert(keys, pos[~hit], k[~hit])
            vals = np.insert(vals, pos[~hit], v[~hit])
            sid, minute = np.divmod(keys, MINUTE_END)
            bounds = np.searchsorted(sid, chunks * CHUNK_SERIES).tolist() + [len(sid)]
            for i, chunk in enumerate(chunks.tolist()):
                a, b = bounds[i], bounds[i + 1]
                out.append((chunk * HOUR_END + hour, chunk_key(chunk, hour),
                            encode_chunk(chunk, sid[a:b], minute[a:b] - hour * 60, vals[a:b])))
        out.sort(key=lambda r: r[0])  # the pairs' order, as before
        return [(key, value) for _, key, value in out]

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
