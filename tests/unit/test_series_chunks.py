"""The --group-by state's chunk records (pipeline/series.py): many series of one hour in one
bounded record, only the chunks a batch touched written, their restore, and a state in the
first layout (one record per series and hour, as the first grouped release wrote it) restored
and rewritten as chunks by the start."""

from __future__ import annotations

import random

import numpy as np
import pytest

from logcount.core.errors import StateRefused
from logcount.formats.spec import LineFormat
from logcount.pipeline.hour_records import MINUTE_END, hour_key, minute_index
from logcount.pipeline.offsets import OffsetRange
from logcount.pipeline.series import (
    CHUNK_CELL_BYTES,
    CHUNK_MAGIC,
    CHUNK_SERIES,
    SeriesTotals,
    cell_key,
    chunk_key,
    decode_chunk,
    encode_chunk,
    parse_cell_key,
    parse_chunk_key,
)
from logcount.pipeline.state import (
    StartFacts,
    Wanted,
    check_start,
    counting_settings,
    decode_records,
    decode_series,
)

M0 = minute_index("2017-07-30 14:00")
H0 = M0 // 60
FMT = LineFormat.from_flags(json_line_field="message", group_by="host.name", max_series=1000)
WANT = Wanted("in", "out", "ERROR", counting=counting_settings(FMT))


def _facts(offset: int) -> StartFacts:
    return StartFacts("IN-ID", "OUT-ID", {0: 0}, {0: 10_000}, {0: offset} if offset else {})


def test_chunk_keys_round_trip_and_stay_apart_from_cell_and_hour_keys():
    key = chunk_key(3, H0)
    assert key == b"totals/2017-07-30 14/c3" and parse_chunk_key(key) == (3, H0)
    assert parse_cell_key(key) is None and parse_chunk_key(cell_key(3, H0)) is None
    for bad in (hour_key(H0), hour_key(H0) + b"/c", hour_key(H0) + b"/c01",
                hour_key(H0) + b"/cx", b"totals/2017-13-30 14/c1", b"progress"):
        assert parse_chunk_key(bad) is None, bad


def test_a_chunk_record_round_trips_and_refuses_damage():
    sids = np.array([256, 256, 300, 511])
    offs = np.array([0, 59, 7, 7])
    tots = np.array([1, 2**62, 3, 4])
    raw = encode_chunk(1, sids, offs, tots)
    assert raw.startswith(CHUNK_MAGIC) and len(raw) == 4 + 4 * CHUNK_CELL_BYTES
    got = decode_chunk(raw, 1)
    assert [a.tolist() for a in got] == [sids.tolist(), offs.tolist(), tots.tolist()]
    assert decode_chunk(raw, 2)[0].tolist() == (sids + CHUNK_SERIES).tolist()
    for bad in (raw[:-1], b"LCH1" + raw[4:], encode_chunk(1, sids[::-1], offs, tots),
                encode_chunk(1, sids, np.array([0, 60, 7, 7]), tots),
                encode_chunk(1, sids, offs, np.array([1, 0, 3, 4]))):
        with pytest.raises(ValueError):
            decode_chunk(bad, 1)
    for chunk in (0, 2):
        with pytest.raises(ValueError, match="outside"):
            encode_chunk(chunk, sids, offs, tots)


def _batch(st: SeriesTotals, counts: dict[int, dict[int, int]], evict=None):
    updates = st.merged(counts)
    records, last = st.chunk_records(updates, evict)
    st.apply(updates, {})
    if evict is not None and last is not None:
        st.evict_hours_before(evict)
    return records, last


def _chunk(key: bytes) -> tuple[int, int]:
    chunk = parse_chunk_key(key)
    assert chunk is not None, key  # the table holds chunk records only
    return chunk


def _named(n: int, max_series: int = 1000) -> SeriesTotals:
    st = SeriesTotals(("host",), max_series)
    st.apply({}, {i: (f"h{i}",) for i in range(1, n + 1)})
    return st


def test_a_batch_writes_one_bounded_record_per_chunk_and_hour_it_touched():
    st = _named(600)
    records, last = _batch(st, {i: {M0 + i % 60: i} for i in range(1, 601)})
    assert last is None
    assert [k for k, _ in records] == [chunk_key(c, H0) for c in range(3)]
    assert all(v is not None and len(v) <= 4 + CHUNK_SERIES * 60 * CHUNK_CELL_BYTES < 2**20
               for _, v in records)
    # one series counts again: only its chunk is rewritten, whole (the others' cells kept)
    records, _ = _batch(st, {300: {M0: 5}, 301: {M0 + 60: 1}})
    assert [k for k, _ in records] == [chunk_key(1, H0), chunk_key(1, H0 + 1)]
    raw = records[0][1]
    assert raw is not None
    sids, offs, tots = decode_chunk(raw, 1)
    assert sids.tolist() == list(range(256, 512)) and (offs == sids % 60).all()
    assert tots.tolist() == [305 if i == 300 else i for i in range(256, 512)]


def test_a_full_chunk_of_a_full_hour_stays_well_under_a_megabyte():
    st = _named(CHUNK_SERIES)
    records, _ = _batch(st, {i: {M0 + m: 1 for m in range(60)} for i in range(CHUNK_SERIES)})
    (key, raw), = records  # series 0 (the overflow) to 255: the whole first chunk
    assert key == chunk_key(0, H0) and raw is not None
    assert len(raw) == 4 + CHUNK_SERIES * 60 * CHUNK_CELL_BYTES == 153_604


@pytest.mark.parametrize("merge_at", [0, 7, 1_000_000])
def test_records_of_random_batches_restore_what_memory_holds(merge_at):
    rnd = random.Random(merge_at)
    st = _named(700)
    st.totals.merge_at = merge_at
    table: dict[bytes, bytes] = {}
    for b in range(40):
        counts = {rnd.randrange(0, 701): {M0 + rnd.randrange(0, 300): rnd.randrange(1, 9)
                                          for _ in range(rnd.randrange(1, 4))}
                  for _ in range(rnd.randrange(1, 60))}
        evict = M0 + 60 * (b // 10) if b % 10 == 9 else None
        records, _ = _batch(st, counts, evict)
        for k, v in records:
            if v is None:
                table.pop(k, None)
            else:
                table[k] = v
        chunks = {_chunk(k): v for k, v in table.items()}
        again = SeriesTotals.restore(("host",), 1000, {i: b'["h%d"]' % i for i in range(1, 701)},
                                     (), chunks.items())
        assert list(again.totals.items()) == list(st.totals.items())


def test_restore_refuses_a_cell_twice_and_a_series_without_a_name():
    st = _named(2)
    records, _ = _batch(st, {1: {M0: 1}, 2: {M0: 2}})
    (key, raw), = records
    assert raw is not None
    names = {1: b'["h1"]', 2: b'["h2"]'}
    first = {(1, H0): b"LCH1\x00" + (1).to_bytes(8, "little")}
    with pytest.raises(ValueError, match="twice"):
        SeriesTotals.restore(("host",), 1000, names, first.items(), [((0, H0), raw)])
    with pytest.raises(ValueError, match="no name"):
        SeriesTotals.restore(("host",), 1000, {1: names[1]}, (), [((0, H0), raw)])


# The state topic of the first grouped layout (one record per series and hour), as its encoder
# wrote it (main before chunks): --group-by host.name --max-series 1000, offsets at 40.
FIRST_LAYOUT = {
    b"progress": b'{"format":1,"input_topic":"in","input_topic_id":"IN-ID","output_topic":"out",'
                 b'"output_topic_id":"OUT-ID","level":"ERROR","counting":{"--group-by":"name=host.name",'
                 b'"--json-line-field":"message","--max-series":"1000"},"offsets":{"0":40},'
                 b'"watermark":"2017-07-30 15:02:00","closed_before":null}',
    b"series/1": b'["web-1"]',
    b"series/2": b'["web|2 \\"x\\""]',
    b"totals/2017-07-30 14/1": b"LCH1\x00\x3b" + (3).to_bytes(8, "little")
                               + (4).to_bytes(8, "little"),
    b"totals/2017-07-30 15/1": b"LCH1\x02" + (5).to_bytes(8, "little"),
    b"totals/2017-07-30 14/2": b"LCH1\x09" + (7).to_bytes(8, "little"),
}


def test_a_state_of_the_first_layout_restores_and_the_start_rewrites_it_as_chunks():
    assert dict(counting_settings(FMT)) == {"group_by": "name=host.name",
                                            "json_line_field": "message",
                                            "max_series": "1000"}
    progress, hours = decode_records(FIRST_LAYOUT, "out-state")
    assert hours == {}
    start = check_start(progress, hours, _facts(40), WANT, decode_series(FIRST_LAYOUT))
    st = start.state.series
    assert st is not None and not start.warnings and start.must_commit
    held = [(1, M0), (1, M0 + 59), (1, M0 + 62), (2, M0 + 9)]
    assert st.merged({s: {m: 0} for s, m in held}) == {}
    assert st.merged({1: {M0: 1, M0 + 62: 1}, 2: {M0 + 9: 1}}) == {
        (1, M0): 4, (2, M0 + 9): 8, (1, M0 + 62): 6}
    assert start.tombstones == sorted(k for k in FIRST_LAYOUT if parse_cell_key(k))
    assert [k for k, _ in start.records] == [chunk_key(0, H0), chunk_key(0, H0 + 1)]
    # the first transaction writes both; the table then restores the same cells, chunks only
    table = dict(FIRST_LAYOUT)
    for k in start.tombstones:
        del table[k]
    table.update({k: v for k, v in start.records if v is not None})
    change = start.state.change([OffsetRange(0, 40, 41)], {M0 + 62: 1}, M0 + 70,
                                series={("web-1",): {M0 + 62: 1}})
    start.state.advance(change)
    table.update({k: v for k, v in change.state_records if v is not None})
    progress, hours = decode_records(table, "out-state")
    again = check_start(progress, hours, _facts(41), WANT, decode_series(table))
    assert again.records == [] and again.tombstones == [] and not again.must_commit
    assert again.state.series is not None
    assert list(again.state.series.totals.items()) == list(st.totals.items())
    assert st.totals.get(MINUTE_END + M0 + 62) == 6


def test_a_damaged_chunk_record_refuses_the_start_in_one_line():
    table = dict(FIRST_LAYOUT)
    table[b"totals/2017-07-30 16/c0"] = b"LCS1\x01"
    progress, hours = decode_records(table, "out-state")
    with pytest.raises(StateRefused, match="damaged"):
        check_start(progress, hours, _facts(40), WANT, decode_series(table))
