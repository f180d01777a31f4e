"""Per-minute ERROR totals held compactly (numpy) in memory.

`Totals` keeps two sorted int64 arrays (minute, total), ~16 bytes per minute, plus a small dict of
minutes new since the last merge. A minute exists only while its total is positive. A minute's
index and text and an hour's record in the state topic are pipeline/hour_records.py's.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Iterator, Mapping
from operator import index

import numpy as np

from logcount.pipeline.hour_records import HOUR_END, MINUTE_END, split_hour

# Minutes new since the last merge live in a Python dict (~100 bytes each against 16 in the
# arrays); at 65,536 that is ~6 MB, and the merge (an O(n) copy of the arrays, ~15 ms at 5
# years) runs at most once per 65,536 new minutes (~45 days of live minutes).
MERGE_AT = 65_536
# sys.getsizeof of a dict counts its slots but not the int objects of the totals (28-32 bytes
# each; the offsets 0..59 are cached small ints and cost nothing more).
_INT_OBJECT_BYTES = 32
# items() turns the arrays into Python ints this many at a time, not all 2.6M at once.
_ITEMS_CHUNK = 65_536


def _as_arrays(m: Mapping[int, int]) -> tuple[np.ndarray, np.ndarray]:
    keys = np.fromiter(m.keys(), np.int64, len(m))
    vals = np.fromiter(m.values(), np.int64, len(m))
    return keys, vals


def _check_minutes(keys: np.ndarray, end: int = MINUTE_END) -> None:
    if len(keys) and (keys.min() < 0 or keys.max() >= end):
        raise ValueError("minute index out of range")


def _held(a: np.ndarray) -> int:
    """Bytes of the allocation behind `a` (a slice keeps its whole base alive)."""
    return a.base.nbytes if isinstance(a.base, np.ndarray) else a.nbytes


def _chunked(m: np.ndarray, t: np.ndarray) -> Iterator[tuple[int, int]]:
    for s in range(0, len(m), _ITEMS_CHUNK):
        yield from zip(m[s:s + _ITEMS_CHUNK].tolist(), t[s:s + _ITEMS_CHUNK].tolist(), strict=True)


class Totals:
    """Per-minute totals: sorted int64 arrays (minute, total) plus an overlay of minutes new since
    the last merge, {hour: {minute-of-hour: total}}, disjoint from the arrays.

    Updates of minutes already in the arrays are written into them in place; new minutes go to
    the overlay, merged into the arrays once it holds more than `merge_at` minutes. So a batch's
    update copies no array, and memory is ~16 bytes per minute.
    """

    def __init__(self, *, merge_at: int | None = None, key_end: int = MINUTE_END) -> None:
        # key_end: one past the largest key; pipeline/series.py keys series * MINUTE_END + minute
        self.merge_at = MERGE_AT if merge_at is None else merge_at
        self.key_end = key_end
        self._m = np.empty(0, np.int64)
        self._t = np.empty(0, np.int64)
        self._over: dict[int, dict[int, int]] = {}
        self._n_over = 0

    @classmethod
    def from_hours(cls, hours: Iterable[tuple[int, bytes]], *,
                   merge_at: int | None = None, key_end: int = MINUTE_END) -> Totals:
        """Restore from (hour index, encode_hour bytes) pairs, in any order, each hour at most
        once. ValueError on a bad record or an hour given twice."""
        hs: list[int] = []
        offs: list[np.ndarray] = []
        tots: list[np.ndarray] = []
        for hour, value in hours:
            o, t = split_hour(value)
            if len(o):
                hs.append(hour)
                offs.append(o)
                tots.append(t)
        self = cls(merge_at=merge_at, key_end=key_end)
        if not hs:
            return self
        harr = np.array(hs, np.int64)
        if harr.min() < 0 or harr.max() >= key_end // 60:
            raise ValueError("hour index out of range")
        # Sorting the hours (not the minutes) is enough: with each hour once, the minutes are
        # sorted when each record's offsets ascend, which the check below confirms.
        order = np.argsort(harr, kind="stable")
        if (np.diff(order) != 1).any():
            offs = [offs[i] for i in order]
            tots = [tots[i] for i in order]
            harr = harr[order]
        if (harr[1:] == harr[:-1]).any():
            raise ValueError("totals hour records: an hour twice")
        sizes = np.fromiter((len(o) for o in offs), np.int64, len(offs))
        o_all = np.concatenate(offs)
        if o_all.max() >= 60:
            raise ValueError("totals hour record: minute offset beyond 59")
        minutes = np.repeat(harr * 60, sizes)
        minutes += o_all
        del o_all
        totals = np.concatenate(tots).astype(np.int64, copy=False)
        if (np.diff(minutes) <= 0).any():
            raise ValueError("totals hour record: offsets not ascending")
        if (totals <= 0).any():
            raise ValueError("totals hour record: a total <= 0")
        self._m, self._t = minutes, totals
        return self

    @classmethod
    def from_arrays(cls, keys: np.ndarray, totals: np.ndarray, *, merge_at: int | None = None,
                    key_end: int = MINUTE_END) -> Totals:
        """Restore from (key, total) arrays in any order. ValueError on a key twice or out of
        range, or a total <= 0."""
        order = np.argsort(keys, kind="stable")
        self = cls(merge_at=merge_at, key_end=key_end)
        m, t = np.asarray(keys, np.int64)[order], np.asarray(totals, np.int64)[order]
        _check_minutes(m, key_end)
        if (m[1:] == m[:-1]).any():
            raise ValueError("totals records: a cell twice")
        if (t <= 0).any():
            raise ValueError("totals records: a total <= 0")
        self._m, self._t = m, t
        return self

    def arrays(self) -> tuple[np.ndarray, np.ndarray]:
        """(keys, totals) ascending, overlay included, as new arrays."""
        keys, vals = self._overlay_arrays()
        pos = np.searchsorted(self._m, keys)
        return np.insert(self._m, pos, keys), np.insert(self._t, pos, vals)

    def hour_cells(self, key_hours: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """PURE: (keys, totals) of every key in the given key hours (ascending, distinct),
        ascending, overlay included: the arrays' spans gathered in one pass."""
        lo = np.asarray(key_hours, np.int64) * 60
        i = np.searchsorted(self._m, lo)
        n = np.searchsorted(self._m, lo + 60) - i
        idx = np.repeat(i - (np.cumsum(n) - n), n) + np.arange(int(n.sum()))
        keys, vals = self._m[idx], self._t[idx]
        if self._over:
            extra = [(h * 60 + o, t) for h in key_hours.tolist() if (d := self._over.get(h))
                     for o, t in d.items()]
            if extra:
                ek = np.fromiter((k for k, _ in extra), np.int64, len(extra))
                ev = np.fromiter((t for _, t in extra), np.int64, len(extra))
                order = np.argsort(ek)
                pos = np.searchsorted(keys, ek[order])
                keys, vals = np.insert(keys, pos, ek[order]), np.insert(vals, pos, ev[order])
        return keys, vals

    def __len__(self) -> int:
        return len(self._m) + self._n_over

    def _span(self, lo: int, hi: int) -> tuple[int, int]:
        """Array positions of the minutes lo <= m < hi."""
        i, j = np.searchsorted(self._m, [lo, hi])
        return int(i), int(j)

    def get(self, minute: int) -> int:
        """The minute's total; 0 when absent."""
        minute = index(minute)
        over = self._over.get(minute // 60)
        if over is not None and (v := over.get(minute % 60)) is not None:
            return v
        i = int(np.searchsorted(self._m, minute))
        return int(self._t[i]) if i < len(self._m) and self._m[i] == minute else 0

    def _find(self, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Array positions of `keys` (clipped) and whether each key is there."""
        pos = np.searchsorted(self._m, keys)
        if not len(self._m):
            return pos, np.zeros(len(keys), bool)
        np.minimum(pos, len(self._m) - 1, out=pos)
        return pos, self._m[pos] == keys

    def merged(self, counts: Mapping[int, int]) -> dict[int, int]:
        """PURE: {minute: current total + count} for every minute with a nonzero count.
        ValueError on a negative count or a minute out of range."""
        keys, n = _as_arrays(counts)
        if (n < 0).any():
            raise ValueError("a negative count")
        nz = n != 0
        keys, n = keys[nz], n[nz]
        _check_minutes(keys, self.key_end)
        pos, hit = self._find(keys)
        cur = np.where(hit, self._t[pos] if len(self._t) else 0, 0)
        if self._over:
            for i in np.flatnonzero(~hit).tolist():
                k = int(keys[i])
                cur[i] = self._over.get(k // 60, {}).get(k % 60, 0)
        return dict(zip(keys.tolist(), (cur + n).tolist(), strict=True))

    def _hour_now(self, hour: int) -> dict[int, int]:
        i, j = self._span(hour * 60, hour * 60 + 60)
        out = dict(zip((self._m[i:j] - hour * 60).tolist(), self._t[i:j].tolist(), strict=True))
        out.update(self._over.get(hour, {}))
        return out

    def hour_after(self, hour: int, updates: Mapping[int, int]) -> dict[int, int]:
        """PURE: {minute-of-hour: total} of `hour` once `updates` ({minute: absolute total})
        are applied; updates of other hours are ignored. Ascending by minute.

        Scans all of `updates`; for many hours at once, hours_after is one pass."""
        hour = index(hour)
        lo = hour * 60
        mine = {int(m) - lo: int(t) for m, t in updates.items() if lo <= m < lo + 60}
        return self._overlaid(hour, mine)

    def hours_after(self, updates: Mapping[int, int]) -> dict[int, dict[int, int]]:
        """PURE: hour_after for every hour `updates` touches, in one pass: {hour: contents}."""
        by_hour: dict[int, dict[int, int]] = {}
        for m, t in updates.items():
            h, o = divmod(int(m), 60)
            by_hour.setdefault(h, {})[o] = int(t)
        return {h: self._overlaid(h, by_hour[h]) for h in sorted(by_hour)}

    def _overlaid(self, hour: int, mine: dict[int, int]) -> dict[int, int]:
        if any(t <= 0 for t in mine.values()):
            raise ValueError("a total <= 0 in updates")
        out = self._hour_now(hour)
        out.update(mine)
        return dict(sorted(out.items()))

    def apply(self, updates: Mapping[int, int]) -> None:
        """Set absolute totals (call only once the transaction that published them committed).
        ValueError on a total <= 0 or a minute out of range, before anything changes."""
        keys, vals = _as_arrays(updates)
        if (vals <= 0).any():
            raise ValueError("a total <= 0 in updates")
        _check_minutes(keys, self.key_end)
        pos, hit = self._find(keys)
        self._t[pos[hit]] = vals[hit]
        miss = ~hit
        if not self._over and int(miss.sum()) > self.merge_at:
            # More new keys than the overlay may hold: into the arrays at once, as arrays.
            order = np.argsort(keys[miss])
            k, v = keys[miss][order], vals[miss][order]
            at = np.searchsorted(self._m, k)
            self._m, self._t = np.insert(self._m, at, k), np.insert(self._t, at, v)
            return
        for k, v in zip(keys[miss].tolist(), vals[miss].tolist(), strict=True):
            h, o = divmod(k, 60)
            hour = self._over.setdefault(h, {})
            self._n_over += o not in hour
            hour[o] = v
        if self._n_over > self.merge_at:
            self._merge()

    def _merge(self) -> None:
        """Move the overlay into the arrays: one O(n) insert of the sorted new minutes."""
        keys, vals = self._overlay_arrays()
        pos = np.searchsorted(self._m, keys)
        self._m = np.insert(self._m, pos, keys)
        self._t = np.insert(self._t, pos, vals)
        self._over.clear()
        self._n_over = 0

    def _overlay_arrays(self) -> tuple[np.ndarray, np.ndarray]:
        """The overlay as sorted (minute, total) arrays."""
        pairs = sorted((h * 60 + o, t) for h, d in self._over.items() for o, t in d.items())
        keys = np.fromiter((k for k, _ in pairs), np.int64, len(pairs))
        vals = np.fromiter((t for _, t in pairs), np.int64, len(pairs))
        return keys, vals

    def hours(self) -> list[int]:
        """Sorted distinct hours that hold minutes."""
        return self._hours_below(len(self._m), None)

    def _hours_below(self, j: int, hour_cut: int | None) -> list[int]:
        """Distinct hours of the array minutes [:j] and of the overlay hours < hour_cut."""
        h = self._m[:j] // 60
        arr = h[np.concatenate(([True], h[1:] != h[:-1]))] if len(h) else h
        over = [x for x in self._over if hour_cut is None or x < hour_cut]
        return sorted(set(arr.tolist()).union(over)) if over else arr.tolist()

    def hours_before(self, minute: int) -> list[int]:
        """Sorted hours holding minutes, all of whose minutes are < minute (hour*60+60 <= minute):
        the hours evict_hours_before(minute) removes whole."""
        cut = index(minute) // 60
        return self._hours_below(int(np.searchsorted(self._m, cut * 60)), cut)

    def evict_hours_before(self, minute: int) -> int:
        """Drop every minute of the hours hours_before(minute) returns; -> how many minutes."""
        cut = index(minute) // 60
        i = int(np.searchsorted(self._m, cut * 60))
        dropped = i
        if i:
            self._m, self._t = self._m[i:], self._t[i:]
            # A slice keeps its whole base alive: copy once the dead head outweighs the rest.
            if _held(self._m) > 2 * self._m.nbytes:
                self._m, self._t = self._m.copy(), self._t.copy()
        for h in [h for h in self._over if h < cut]:
            n = len(self._over.pop(h))
            self._n_over -= n
            dropped += n
        return dropped

    def periodic_hours_before(self, minute: int) -> list[int]:
        """Like hours_before, for keys `series * MINUTE_END + minute`: every key hour whose
        minute part lies in an hour wholly before `minute`, whatever its series."""
        cut = index(minute) // 60
        h = self._m // 60
        arr = np.unique(h[h % HOUR_END < cut]).tolist() if len(h) else []
        over = [x for x in self._over if x % HOUR_END < cut]
        return sorted(set(arr).union(over))

    def periodic_evict_before(self, minute: int) -> int:
        """Drop the minutes periodic_hours_before(minute) covers; -> how many."""
        cut = index(minute) // 60
        keep = (self._m // 60) % HOUR_END >= cut
        dropped = int(len(keep) - keep.sum())
        if dropped:
            self._m, self._t = self._m[keep], self._t[keep]
        for h in [h for h in self._over if h % HOUR_END < cut]:
            n = len(self._over.pop(h))
            self._n_over -= n
            dropped += n
        return dropped

    def items(self) -> Iterator[tuple[int, int]]:
        """(minute, total) ascending by minute, from a snapshot taken now (a copy of the arrays):
        later apply/evict calls do not change what the iterator yields."""
        return _chunked(*self.arrays())

    @property
    def nbytes(self) -> int:
        """Approximate bytes held: the arrays' allocations plus an overlay estimate."""
        over = sys.getsizeof(self._over) + sum(sys.getsizeof(d) for d in self._over.values())
        return _held(self._m) + _held(self._t) + over + self._n_over * _INT_OBJECT_BYTES
