"""pipeline/totals.py: minute and hour-key codecs, hour records, and Totals against a dict."""

from __future__ import annotations

from datetime import datetime, timedelta

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from logcount.pipeline import totals as tm
from logcount.pipeline.hour_records import (
    MINUTE_END,
    decode_hour,
    encode_hour,
    hour_key,
    minute_index,
    minute_text,
    parse_hour_key,
)
from logcount.pipeline.totals import Totals

EDGE_TEXTS = [
    "0001-01-01 00:00:00", "0001-01-01 00:01:00", "0001-12-31 23:59:00",
    "1900-02-28 23:59:00", "1900-03-01 00:00:00", "2000-02-29 12:34:00", "2000-03-01 00:00:00",
    "2016-12-31 23:59:00", "2017-01-01 00:00:00", "2017-04-30 23:59:00", "2017-05-01 00:00:00",
    "9999-12-31 23:59:00",
]


def _by_datetime(text: str) -> int:
    """The independent definition: whole minutes since 0001-01-01 00:00."""
    return (datetime.fromisoformat(text) - datetime(1, 1, 1)) // timedelta(minutes=1)


# --- minute_index / minute_text ---------------------------------------------------------------

@pytest.mark.parametrize("text", EDGE_TEXTS)
def test_minute_index_round_trip_over_edge_dates(text):
    idx = minute_index(text)
    assert idx == _by_datetime(text)
    assert minute_text(idx) == text
    assert minute_index(text[:16]) == idx
    assert minute_index(text.encode("ascii")) == idx
    assert minute_index(text[:16].encode("ascii")) == idx


def test_minute_index_ends_of_the_range():
    assert minute_index("0001-01-01 00:00") == 0
    assert minute_index("9999-12-31 23:59") == MINUTE_END - 1
    assert minute_index("0001-01-02 00:00") == 1440


@pytest.mark.parametrize("bad", [
    "", "2017-07-30", "2017-07-30 14:09:08", "2017-07-30 14:09:0", "2017-07-30 14:09:000",
    "2017-07-30T14:09", "2017/07/30 14:09", "2017-07-30 14-09", "2017-07-30 24:00",
    "2017-07-30 23:60", "2017-02-29 00:00", "1900-02-29 00:00", "2017-04-31 00:00",
    "2017-13-01 00:00", "2017-00-01 00:00", "2017-01-00 00:00", "0000-01-01 00:00",
    "2017-07-3  14:09", "2017-07-+3 14:09", "2017-0_-30 14:09", "２017-07-30 14:09",
    b"2017-07-30 14:\xff9", b"garbage!garbage!",
])
def test_minute_index_rejects_garbage(bad):
    with pytest.raises(ValueError):
        minute_index(bad)


@pytest.mark.parametrize("bad", [-1, MINUTE_END])
def test_minute_text_rejects_out_of_range(bad):
    with pytest.raises(ValueError):
        minute_text(bad)


@given(st.integers(0, MINUTE_END - 1))
@settings(max_examples=300)
def test_minute_text_inverts_minute_index(idx):
    text = minute_text(idx)
    assert minute_index(text) == idx == _by_datetime(text)


# --- hour keys --------------------------------------------------------------------------------

@pytest.mark.parametrize("text", EDGE_TEXTS)
def test_hour_key_round_trip(text):
    hour = minute_index(text) // 60
    key = hour_key(hour)
    assert key == b"totals/" + text[:13].encode()
    assert parse_hour_key(key) == hour


def test_hour_key_rejects_out_of_range():
    for bad in (-1, MINUTE_END // 60):
        with pytest.raises(ValueError):
            hour_key(bad)


@pytest.mark.parametrize("key", [
    b"progress", b"", None, b"totals/", b"totals/2017-07-30", b"totals/2017-07-30 24",
    b"totals/2017-02-29 00", b"totals/2017-07-30 1x", b"totals/2017-07-30 14:00",
    b"Totals/2017-07-30 14", b"other/2017-07-30 14", b"totals/2017-07-30\xff14", b"\x00" * 20,
])
def test_parse_hour_key_rejects_other_keys(key):
    assert parse_hour_key(key) is None


# --- hour records -----------------------------------------------------------------------------

def test_encode_decode_round_trip_and_layout():
    value = encode_hour({59: 2**63 - 1, 0: 1, 7: 0, 30: 5})
    assert value == (b"LCH1" + bytes([0, 30, 59]) + (1).to_bytes(8, "little")
                     + (5).to_bytes(8, "little") + (2**63 - 1).to_bytes(8, "little"))
    offsets, totals = decode_hour(value)
    assert offsets.tolist() == [0, 30, 59]
    assert totals.tolist() == [1, 5, 2**63 - 1]
    assert totals.dtype == np.int64


def test_empty_hour_encodes_to_the_magic_alone():
    assert encode_hour({}) == encode_hour({3: 0}) == b"LCH1"
    offsets, totals = decode_hour(b"LCH1")
    assert len(offsets) == len(totals) == 0


@pytest.mark.parametrize("bad", [{60: 1}, {-1: 1}, {0: -1}, {0: 2**63}])
def test_encode_rejects_bad_entries(bad):
    with pytest.raises(ValueError):
        encode_hour(bad)


@pytest.mark.parametrize("value", [
    b"", b"LCH", b"LCH2" + bytes(9), b"XXXX", encode_hour({1: 1})[:-1], encode_hour({1: 1}) + b"\0",
    # well-sized but wrong contents: offset 60, offsets not ascending, a zero total
    b"LCH1" + bytes([60]) + (1).to_bytes(8, "little"),
    b"LCH1" + bytes([2, 1]) + (1).to_bytes(8, "little") * 2,
    b"LCH1" + bytes([1]) + (0).to_bytes(8, "little"),
])
def test_decode_rejects_bad_records(value):
    with pytest.raises(ValueError):
        decode_hour(value)


# --- Totals -----------------------------------------------------------------------------------

H = minute_index("2017-07-30 14:00") // 60  # an hour index; H * 60 is its first minute


def _filled(d: dict[int, int], merge_at: int | None = None) -> Totals:
    t = Totals(merge_at=merge_at)
    t.apply(d)
    return t


def test_empty_totals():
    t = Totals()
    assert len(t) == 0 and t.get(123) == 0 and t.hours() == [] and list(t.items()) == []
    assert t.hours_before(MINUTE_END) == [] and t.evict_hours_before(MINUTE_END) == 0
    assert t.merged({5: 2, 6: 0}) == {5: 2}
    assert t.hour_after(H, {H * 60 + 3: 4}) == {3: 4}


def test_merged_is_pure_and_skips_zero_counts():
    base = {H * 60: 3, H * 60 + 1: 5}
    t = _filled(base)
    out = t.merged({H * 60 + 1: 2, H * 60 + 2: 1, H * 60 + 3: 0})
    assert out == {H * 60 + 1: 7, H * 60 + 2: 1}
    assert dict(t.items()) == base and len(t) == 2, "merged must not change the totals"


def test_merged_sees_array_and_overlay_minutes():
    t = Totals.from_hours([(H, encode_hour({0: 10}))])
    t.apply({H * 60 + 1: 20})  # new minute: goes to the overlay
    assert t.merged({H * 60: 1, H * 60 + 1: 1, H * 60 + 2: 1}) == {
        H * 60: 11, H * 60 + 1: 21, H * 60 + 2: 1}


def test_merged_rejects_negative_counts_and_out_of_range_minutes():
    t = Totals()
    for bad in ({1: -1}, {-1: 1}, {MINUTE_END: 1}):
        with pytest.raises(ValueError):
            t.merged(bad)


def test_apply_then_get():
    t = Totals.from_hours([(H, encode_hour({0: 10, 5: 1}))])
    t.apply({H * 60: 12, H * 60 + 7: 3, (H + 5) * 60: 1})
    assert [t.get(H * 60 + i) for i in (0, 5, 7, 8)] == [12, 1, 3, 0]
    assert t.get((H + 5) * 60) == 1
    assert len(t) == 4


def test_apply_rejects_nonpositive_totals_without_changing_anything():
    t = _filled({10: 1})
    for bad in ({10: 5, 11: 0}, {12: -3}):
        with pytest.raises(ValueError):
            t.apply(bad)
    assert dict(t.items()) == {10: 1}


def test_hour_after_overlays_updates_of_that_hour_only():
    t = Totals.from_hours([(H, encode_hour({0: 10, 5: 1})), (H + 1, encode_hour({0: 9}))])
    t.apply({H * 60 + 6: 4})  # an overlay minute of H
    updates = {H * 60 + 5: 2, H * 60 + 59: 1, (H + 1) * 60: 10, H * 60 - 1: 3}
    before = dict(t.items())
    assert t.hour_after(H, updates) == {0: 10, 5: 2, 6: 4, 59: 1}
    assert list(t.hour_after(H, updates)) == [0, 5, 6, 59], "ascending by minute"
    assert t.hour_after(H + 1, updates) == {0: 10}
    assert t.hour_after(H - 1, updates) == {59: 3}
    assert t.hour_after(H + 2, updates) == {}
    assert t.hours_after(updates) == {H - 1: {59: 3}, H: {0: 10, 5: 2, 6: 4, 59: 1},
                                      H + 1: {0: 10}}
    assert dict(t.items()) == before, "hour_after must not change the totals"


def test_crossing_merge_at_keeps_everything(monkeypatch):
    monkeypatch.setattr(tm, "MERGE_AT", 4)
    t = Totals()
    assert t.merge_at == 4
    model: dict[int, int] = {}
    for step in range(12):
        upd = {H * 60 + (step * 7 + k) % 150: step + k + 1 for k in range(3)}
        assert t.merged({m: 1 for m in upd}) == {m: model.get(m, 0) + 1 for m in upd}
        t.apply(upd)
        model.update(upd)
        assert len(t) == len(model) and dict(t.items()) == model
        assert all(t.get(m) == v for m, v in model.items())
        assert t._n_over <= 4, "the overlay is merged once it passes merge_at"
    assert len(t._m) > 0, "some merges happened"


def test_evict_hours_before_boundaries():
    minute = (H + 2) * 60 + 30  # inside hour H+2
    t = Totals.from_hours([(H, encode_hour({0: 1})), (H + 1, encode_hour({59: 2})),
                           (H + 2, encode_hour({0: 3}))])
    t.apply({minute: 4, (H + 3) * 60: 5, (H + 1) * 60 + 58: 6})  # these three: the overlay
    assert t.hours() == [H, H + 1, H + 2, H + 3]
    assert t.hours_before(minute) == [H, H + 1]
    # Hour H+1 ends at minute (H+2)*60 - 1: evicted by an eviction at (H+2)*60, not before.
    assert t.hours_before((H + 2) * 60) == [H, H + 1]
    assert t.hours_before((H + 2) * 60 - 1) == [H]
    assert t.evict_hours_before(minute) == 3
    assert dict(t.items()) == {(H + 2) * 60: 3, minute: 4, (H + 3) * 60: 5}
    assert t.hours() == [H + 2, H + 3] and len(t) == 3
    assert t.evict_hours_before(minute) == 0
    assert t.evict_hours_before(MINUTE_END) == 3 and len(t) == 0 and t.hours() == []


def test_evict_releases_the_dropped_head():
    t = Totals.from_hours([(h, encode_hour({o: 1 for o in range(60)})) for h in range(100)])
    full = t.nbytes
    t.evict_hours_before(90 * 60)
    assert len(t) == 600 and t.nbytes < full / 4


def test_from_hours_equals_the_dict_it_was_built_from():
    rng = np.random.default_rng(7)
    model: dict[int, int] = {}
    records = []
    for h in rng.choice(5000, 300, replace=False).tolist():
        hour = {int(o): int(v) for o, v in zip(rng.choice(60, rng.integers(1, 61), replace=False),
                                                 rng.integers(1, 10**12, 60), strict=False)}
        model.update({h * 60 + o: v for o, v in hour.items()})
        records.append((h, encode_hour(hour)))
    records.append((6000, encode_hour({})))  # an empty hour holds nothing
    t = Totals.from_hours(records)  # in random hour order
    assert dict(t.items()) == model and len(t) == len(model)
    assert list(t.items()) == sorted(model.items())
    assert t.hours() == sorted({m // 60 for m in model})
    assert all(t.get(m) == v for m, v in model.items())
    assert t.nbytes >= 16 * len(model)


@pytest.mark.parametrize("records", [
    [(5, encode_hour({1: 1})), (5, encode_hour({2: 1}))],  # an hour twice
    [(5, b"LCH1" + bytes([2, 1]) + (1).to_bytes(8, "little") * 2)],  # offsets not ascending
    [(5, b"LCH1" + bytes([60]) + (1).to_bytes(8, "little"))],
    [(5, b"LCH1" + bytes([1]) + (0).to_bytes(8, "little"))],
    [(5, b"LCH2")], [(5, b"LCH1\0")], [(-1, encode_hour({1: 1}))],
])
def test_from_hours_rejects_bad_input(records):
    with pytest.raises(ValueError):
        Totals.from_hours(records)


def test_items_is_a_snapshot():
    t = _filled({1: 1, 2: 2})
    it = t.items()
    t.apply({1: 5, 3: 3})
    t.evict_hours_before(MINUTE_END)
    assert list(it) == [(1, 1), (2, 2)]


# --- Totals against a dict model (hypothesis) -------------------------------------------------

# A few hours, so minutes collide, hours fill up and evictions hit hours with minutes.
minutes = st.integers(0, 6 * 60 - 1).map(lambda m: H * 60 + m)
counts = st.dictionaries(minutes, st.integers(0, 5), max_size=25)


class TotalsMachine(RuleBasedStateMachine):
    @initialize(initial=st.dictionaries(minutes, st.integers(1, 100), max_size=40),
                merge_at=st.integers(0, 30))
    def start(self, initial, merge_at):
        by_hour: dict[int, dict[int, int]] = {}
        for m, v in initial.items():
            by_hour.setdefault(m // 60, {})[m % 60] = v
        self.t = Totals.from_hours([(h, encode_hour(d)) for h, d in by_hour.items()],
                                   merge_at=merge_at)
        self.model = dict(initial)

    @rule(c=counts, commit=st.booleans())
    def batch(self, c, commit):
        updates = self.t.merged(c)
        assert updates == {m: self.model.get(m, 0) + n for m, n in c.items() if n}
        for h in {m // 60 for m in updates}:
            want = {m % 60: v for m, v in {**self.model, **updates}.items() if m // 60 == h}
            assert self.t.hour_after(h, updates) == want
        if commit:
            self.t.apply(updates)
            self.model.update(updates)

    @rule(minute=st.integers(H * 60 - 60, H * 60 + 7 * 60))
    def evict(self, minute):
        gone = sorted({m // 60 for m in self.model if m // 60 * 60 + 60 <= minute})
        assert self.t.hours_before(minute) == gone
        n = self.t.evict_hours_before(minute)
        kept = {m: v for m, v in self.model.items() if m // 60 not in gone}
        assert n == len(self.model) - len(kept)
        self.model = kept

    @rule(m=minutes)
    def get(self, m):
        assert self.t.get(m) == self.model.get(m, 0)

    @invariant()
    def same_as_model(self):
        assert len(self.t) == len(self.model)
        assert list(self.t.items()) == sorted(self.model.items())
        assert self.t.hours() == sorted({m // 60 for m in self.model})


TotalsMachine.TestCase.settings = settings(max_examples=60, stateful_step_count=20,
                                           deadline=None)
test_totals_against_a_dict = TotalsMachine.TestCase


@given(st.dictionaries(st.integers(0, 59), st.integers(0, 2**63 - 1), max_size=60))
def test_encode_decode_property(hour):
    offsets, totals = decode_hour(encode_hour(hour))
    assert dict(zip(offsets.tolist(), totals.tolist(), strict=True)) == {
        o: v for o, v in hour.items() if v}
