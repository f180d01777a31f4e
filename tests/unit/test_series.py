"""pipeline/series.py and the state with --group-by: naming, the overflow series, the records in
the state topic and their restore; and a state written without --group-by (today's bytes)
restoring without a recount."""

from __future__ import annotations

import json

import pytest

from logcount.core.errors import StateRefused
from logcount.formats.spec import LineFormat
from logcount.pipeline.hour_records import hour_key, minute_index
from logcount.pipeline.offsets import OffsetRange
from logcount.pipeline.series import (
    OVERFLOW_ID,
    SeriesTotals,
    cell_key,
    chunk_key,
    decode_name,
    parse_cell_key,
    parse_name_key,
)
from logcount.pipeline.state import (
    PROGRESS_KEY,
    StartFacts,
    Wanted,
    check_start,
    counting_settings,
    decode_records,
    decode_series,
)

M0 = minute_index("2017-07-30 14:09")
FMT = LineFormat.from_flags(json_line_field="message", group_by="host.name,level", max_series=2)
WANT = Wanted("in", "out", "ERROR", counting=counting_settings(FMT))
FACTS = StartFacts("IN-ID", "OUT-ID", {0: 0}, {0: 100}, {})


def test_cell_and_name_keys_round_trip_and_stay_apart_from_hour_keys():
    assert parse_cell_key(cell_key(12, M0 // 60)) == (12, M0 // 60)
    assert parse_cell_key(hour_key(M0 // 60)) is None
    assert parse_cell_key(hour_key(M0 // 60) + b"/01") is None
    assert parse_cell_key(b"progress") is None
    assert parse_name_key(b"series/7") == 7 and parse_name_key(b"series/x") is None


def test_new_tuples_are_named_busiest_first_and_the_rest_overflow():
    st = SeriesTotals(("name", "level"), max_series=2)
    got = st.assign({("a", "E"): {M0: 1}, ("b", "E"): {M0: 5}, ("c", "E"): {M0: 3},
                     ("d", "E"): {M0: 2}})
    assert got.new_names == {1: ("b", "E"), 2: ("c", "E")}
    assert got.counts == {1: {M0: 5}, 2: {M0: 3}, OVERFLOW_ID: {M0: 3}}
    assert got.overflow_lines == 3 and got.widest == "name"
    st.apply(st.merged(got.counts), got.new_names)
    # a named tuple stays named, a full set sends every new one to the overflow
    got = st.assign({("a", "E"): {M0: 10}, ("b", "E"): {M0: 1}})
    assert got.new_names == {} and got.counts == {1: {M0: 1}, OVERFLOW_ID: {M0: 10}}
    assert st.merged(got.counts) == {(1, M0): 6, (OVERFLOW_ID, M0): 13}
    # a tuple that is itself the overflow tuple counts there, without overflowing
    got = st.assign({("__other__", "__other__"): {M0: 1}})
    assert got.counts == {OVERFLOW_ID: {M0: 1}} and got.overflow_lines == 0


def test_equal_counts_are_named_in_value_order_so_a_replay_names_the_same():
    counts: dict[tuple[str, ...], dict[int, int]] = {(v, "E"): {M0: 4} for v in "zyxw"}
    counts[("q", "E")] = {M0: 1}
    first = SeriesTotals(("name", "level"), max_series=2).assign(counts)
    again = SeriesTotals(("name", "level"), max_series=2).assign(dict(reversed(counts.items())))
    assert first.new_names == again.new_names == {1: ("w", "E"), 2: ("x", "E")}
    assert first.counts[OVERFLOW_ID] == {M0: 9}

def _run(state, series, minute=M0, end=10):
    change = state.change([OffsetRange(0, 0, end)],
                          {m: n for cells in series.values() for m, n in cells.items()},
                          minute + 60, series=series)
    state.advance(change)
    return change


def test_a_grouped_state_publishes_per_series_and_restores_from_its_records():
    start = check_start(None, {}, FACTS, WANT)
    state = start.state
    assert state.series is not None
    change = _run(state, {("web-1", "ERROR"): {M0: 2, M0 + 1: 1}, ("web-2", "ERROR"): {M0: 1},
                          ("web-3", "ERROR"): {M0: 4}})
    assert change.updates == {}
    outs = change.outputs(state.series.tuples)
    assert (M0, ("web-1", "ERROR"), 2) in outs and (M0, ("__other__", "__other__"), 1) in outs
    table: dict[bytes, bytes] = {}
    for k, v in change.state_records:
        assert v is not None
        table[k] = v
    assert json.loads(table[b"series/1"]) == ["web-3", "ERROR"]
    change = _run(state, {("web-1", "ERROR"): {M0: 3}, ("web-9", "ERROR"): {M0: 1}}, end=20)
    assert sorted(change.outputs(state.series.tuples)) == [
        (M0, ("__other__", "__other__"), 2), (M0, ("web-1", "ERROR"), 5)]
    table.update({k: v for k, v in change.state_records if v is not None})
    progress, hours = decode_records(table, "out-state")
    assert hours == {}
    again = check_start(progress, hours, FACTS, WANT, decode_series(table)).state
    assert again.series is not None and again.offsets == {0: 20}
    assert again.series.tuples == state.series.tuples
    assert again.series.merged({2: {M0: 0}}) == {} and again.cells() == state.cells() == 4
    assert again.series.merged({2: {M0 + 1: 1}}) == {(2, M0 + 1): 2}


def test_a_horizon_evicts_cells_but_never_names():
    want = Wanted("in", "out", "ERROR", horizon_minutes=60, counting=counting_settings(FMT))
    state = check_start(None, {}, FACTS, want).state
    _run(state, {("a", "E"): {M0: 1}})
    change = _run(state, {("b", "E"): {M0 + 600: 1}}, minute=M0 + 600, end=20)
    assert (chunk_key(0, M0 // 60), None) in change.state_records
    assert state.series is not None and state.series.tuples[1] == ("a", "E")
    assert state.cells() == 1


def test_damaged_series_records_are_refused():
    start = check_start(None, {}, FACTS, WANT)
    change = _run(start.state, {("a", "E"): {M0: 1}})
    table = {k: v for k, v in change.state_records if v is not None}
    progress, hours = decode_records(table, "out-state")
    del table[b"series/1"]
    with pytest.raises(StateRefused, match="damaged"):
        check_start(progress, hours, FACTS, WANT, decode_series(table))
    with pytest.raises(ValueError):
        decode_name(b'["only one"]', 2)


# The state topic of today's main (no --group-by), as its encoder wrote it: progress and hour.
TODAYS_STATE = {
    PROGRESS_KEY: b'{"format":1,"input_topic":"in","input_topic_id":"IN-ID","output_topic":"out",'
                  b'"output_topic_id":"OUT-ID","level":"ERROR","counting":{},"offsets":{"0":40},'
                  b'"watermark":"2017-07-30 14:09:00","closed_before":null}',
    b"totals/2017-07-30 14": b"LCH1\x09" + (7).to_bytes(8, "little"),
}


def test_a_state_written_without_group_by_restores_without_a_recount():
    progress, hours = decode_records(TODAYS_STATE, "out-state")
    want = Wanted("in", "out", "ERROR", counting=counting_settings(LineFormat()))
    start = check_start(progress, hours, StartFacts("IN-ID", "OUT-ID", {0: 0}, {0: 100},
                                                    {0: 40}),
                        want, decode_series(TODAYS_STATE))
    assert not start.warnings and not start.tombstones and not start.must_commit
    assert start.state.series is None and start.state.totals.get(M0) == 7
    change = start.state.change([OffsetRange(0, 40, 41)], {M0: 1}, M0 + 1)
    assert change.outputs({}) == [(M0, (), 8)]
    assert dict(change.state_records)[PROGRESS_KEY] == TODAYS_STATE[PROGRESS_KEY].replace(
        b'"0":40', b'"0":41')


def test_a_changed_group_by_or_max_series_is_refused():
    start = check_start(None, {}, FACTS, WANT)
    change = _run(start.state, {("a", "E"): {M0: 1}})
    table = {k: v for k, v in change.state_records if v is not None}
    progress, hours = decode_records(table, "out-state")
    facts = StartFacts("IN-ID", "OUT-ID", {0: 0}, {0: 100}, {0: 10})
    for fmt in (LineFormat.from_flags(json_line_field="message", group_by="host.name"),
                LineFormat.from_flags(json_line_field="message", group_by="host.name,level",
                                      max_series=3),
                LineFormat.from_flags(json_line_field="message")):
        with pytest.raises(StateRefused, match="--group-by|--max-series"):
            check_start(progress, hours, facts, Wanted("in", "out", "ERROR",
                                                       counting=counting_settings(fmt)))


@pytest.mark.parametrize("merge_at", [0, 1_000_000])
def test_periodic_eviction_drops_every_series_hours_before_the_cut(merge_at):
    from logcount.pipeline.hour_records import HOUR_END, MINUTE_END
    from logcount.pipeline.totals import Totals

    t = Totals(merge_at=merge_at, key_end=4 * MINUTE_END)
    t.apply({sid * MINUTE_END + m: 1 for sid in range(3) for m in (M0, M0 + 60, M0 + 120)})
    cut = (M0 // 60 + 2) * 60  # the third hour stays
    assert t.periodic_hours_before(cut) == sorted(
        sid * HOUR_END + M0 // 60 + k for sid in range(3) for k in (0, 1))
    assert t.periodic_evict_before(cut) == 6
    assert sorted(t.items()) == [(sid * MINUTE_END + M0 + 120, 1) for sid in range(3)]
    with pytest.raises(ValueError):
        t.apply({4 * MINUTE_END: 1})


def test_batch_result_counts_per_series_and_sums_per_minute():
    from logcount.pipeline.job import batch_result

    def row(minute=None, mi=None, n=1, d=(None, None), bad=None):
        return {"p": 0 if bad is not None else None, "minute": minute, "mi": mi,
                "bad_offset": bad, "reason": "x" if bad is not None else None,
                "raw": b"r", "len": 1, "n": n, "rn": None, "d0": d[0], "d1": d[1]}

    rows = [row(minute=b"2017-07-30 14:09", n=2, d=("a", "E")),
            row(mi=M0, n=3, d=("a", "E")), row(mi=M0 + 1, n=1, d=("b", "")),
            row(bad=7), row(n=5)]  # a malformed line, and lines of another level
    res = batch_result(rows, [OffsetRange(0, 0, 12)], 2)
    assert res.series == {("a", "E"): {M0: 5}, ("b", ""): {M0 + 1: 1}}
    assert res.counts == {M0: 5, M0 + 1: 1} and res.records == 12
    assert [m.offset for m in res.malformed] == [7]
    assert batch_result(rows, [OffsetRange(0, 0, 12)]).series == {}
    # collected Rows (read by position), their fields in another order, are read alike
    from pyspark.sql.types import _create_row

    fields = sorted(rows[0], reverse=True)
    spark_rows = [_create_row(list(fields), [r[f] for f in fields]) for r in rows]
    # Rows are tuples read by position, as collect() gives them; the signature says Mapping.
    got = batch_result(spark_rows, [OffsetRange(0, 0, 12)], 2)  # type: ignore[arg-type]
    assert (got.series, got.counts, got.records, got.malformed) == (
        res.series, res.counts, res.records, res.malformed)
