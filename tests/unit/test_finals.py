"""--emit-final wired into the batch (pipeline/finals.py), the start's rules for it
(pipeline/state_start.py closing_at_start), the job's newest minute per partition
(pipeline/job.py batch_result) and the settings: pure, in milliseconds."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from logcount.core.errors import ConfigError, StateRefused
from logcount.core.records import decode_final
from logcount.core.settings import RunSettings
from logcount.pipeline.closing import (
    ClosingFacts,
    ClosingState,
    PartitionFacts,
    clock_second,
    grace_text,
)
from logcount.pipeline.finals import MAX_CLOSE_MINUTES, MAX_CLOSE_RECORDS, Finals, Seen
from logcount.pipeline.hour_records import minute_index, minute_text
from logcount.pipeline.job import batch_result
from logcount.pipeline.offsets import OffsetRange
from logcount.pipeline.series import SeriesTotals
from logcount.pipeline.state import (
    Identity,
    ProgressRecord,
    StageState,
    StartFacts,
    Wanted,
    check_start,
)
from logcount.pipeline.totals import Totals

M0 = minute_index("2026-11-29 10:00")
IDENT = Identity("in", "IN-ID", "out", "OUT-ID", "ERROR")
NOW = datetime(2026, 11, 29, 12, 0, 30, tzinfo=UTC)


def settings(**kw) -> RunSettings:
    return RunSettings(**{"emit_final": "1m", "metrics_port": 0, **kw})


def closing(closed_before=None, parts=None) -> ClosingState:
    return ClosingState("out-final", 60, ClosingFacts(parts or {}, closed_before))


def state(totals=None, closed_before=None, parts=None, series=None) -> StageState:
    t = Totals()
    t.apply(totals or {})
    return StageState(IDENT, {0: 10}, t, None, None, None, series,
                      closing(closed_before, parts))


def finals(**kw) -> Finals:
    return Finals(settings(**kw), wall=lambda: NOW)


def facts_of(c: ClosingState | None) -> ClosingFacts:
    assert c is not None
    return c.facts


def progress_of(change) -> bytes:
    raw = change.state_records[-1][1]
    assert raw is not None
    return raw


def decoded(records):
    return [(r.key.decode(), decode_final(r.value)) for r in records]


def test_grace_is_written_in_its_largest_whole_unit():
    assert [grace_text(s) for s in (30, 60, 90, 3600, 86400)] == ["30s", "1m", "90s", "1h",
                                                                  "1d"]


def test_each_closed_minute_gets_its_total_zero_included_then_its_closed_record():
    st = state({M0: 4, M0 + 2: 1}, closed_before=M0)
    change = st.change([OffsetRange(0, 10, 12)], {M0 + 2: 2}, M0 + 100,
                       closing=closing(M0 + 3))
    got = decoded(finals().records(st, change))
    assert [(k, r.count, r.closed, r.series) for k, r in got] == [
        (minute_text(M0), 4, False, 0), (minute_text(M0), 4, True, 1),
        (minute_text(M0 + 1), 0, False, 0), (minute_text(M0 + 1), 0, True, 1),
        # this batch's own lines of a minute it closes are in its final total
        (minute_text(M0 + 2), 3, False, 0), (minute_text(M0 + 2), 3, True, 1)]
    r = got[0][1]
    assert (r.window_start, r.window_end, r.grace, r.level) == (
        minute_text(M0), minute_text(M0 + 1), "1m", "ERROR")
    assert all(r.topic == "out-final" for r in finals().records(st, change))


def test_the_first_close_begins_at_the_first_minute_held_and_publishes_nothing_before():
    st = state({M0 + 5: 1})
    change = st.change([], {}, M0 + 100, closing=closing(M0 + 7))
    assert [k for k, r in decoded(finals().records(st, change)) if r.closed] == [
        minute_text(M0 + 5), minute_text(M0 + 6)]


def test_nothing_held_and_nothing_counted_closes_without_a_record():
    st = state()
    change = st.change([], {}, M0 + 100, closing=closing(M0 + 7))
    assert finals().records(st, change) == []


def test_without_a_close_there_is_no_final_record():
    st = state({M0: 1}, closed_before=M0 + 1)
    change = st.change([OffsetRange(0, 10, 11)], {M0 + 1: 1}, M0 + 100,
                       closing=closing(M0 + 1))
    assert finals().records(st, change) == []


def test_grouped_a_record_per_series_that_counted_a_line_and_the_closed_record_counts_them():
    series = SeriesTotals(("service",), 10)
    st = state(closed_before=M0, series=series)
    first = st.change([OffsetRange(0, 10, 20)], {M0: 3, M0 + 1: 1}, M0 + 100,
                      series={("api",): {M0: 2}, ("web",): {M0: 1, M0 + 1: 1}})
    st.advance(first)
    change = st.change([OffsetRange(0, 20, 21)], {M0: 1}, M0 + 100,
                       series={("db",): {M0: 1}}, closing=closing(M0 + 3))
    f = finals()
    f.names = ("service",)  # the --group-by names, as a grouped stage's settings give them
    got = decoded(f.records(st, change))
    assert [(k[11:16], r.dims, r.count, r.closed, r.series) for k, r in got] == [
        ("10:00", (("service", "api"),), 2, False, 0),
        ("10:00", (("service", "db"),), 1, False, 0),
        ("10:00", (("service", "web"),), 1, False, 0),
        ("10:00", (), 4, True, 3),
        ("10:01", (("service", "web"),), 1, False, 0),
        ("10:01", (), 1, True, 1),
        ("10:02", (), 0, True, 0)]


def test_a_caught_up_partition_is_remembered_and_the_clock_closes_a_minute_after_grace():
    parts = {0: PartitionFacts(M0, None)}
    st = state({M0: 1}, closed_before=M0, parts=parts)
    f = finals()
    now = clock_second(NOW)
    # Caught up is not worth a transaction of its own (a trickle would double them): it is
    # remembered from the first plan that saw it, and committed with the close it leads to.
    assert not f.due(st, Seen(now, {0: False}))
    assert not f.due(st, Seen(now + 59, {0: False}))  # not idle yet: the watermark holds
    assert f.due(st, Seen(now + 60, {0: False}))  # idle since `now`: the clock closes
    got = f.decide(st, Seen(now + 60, {0: False}), {})
    assert facts_of(got).closed_before == (now + 60 - 60) // 60
    assert facts_of(got).partitions[0].caught_up_since == now
    # Input again forgets it: idle only GRACE after the next plan that finds it caught up.
    f.decide(st, Seen(now + 61, {0: True}), {0: M0})
    assert not f.due(st, Seen(now + 62, {0: False}))
    assert not f.due(st, Seen(now + 121, {0: False}))
    assert f.due(st, Seen(now + 122, {0: False}))


def test_a_start_s_first_commit_moves_the_facts_but_closes_nothing():
    st = state({M0: 1}, closed_before=M0, parts={0: PartitionFacts(M0, None)})
    got = finals().decide(st, Seen(clock_second(NOW), {0: True}), {0: M0 + 30}, allowed=False)
    assert facts_of(got).closed_before == M0
    assert facts_of(got).partitions[0].newest_minute == M0 + 30


def test_more_than_a_week_to_close_is_cut_and_the_next_batch_runs_at_once():
    st = state({M0: 1}, closed_before=M0, parts={0: PartitionFacts(M0, 0)})
    f = finals()
    now = clock_second(NOW) + 30 * 86400  # a month later, every partition idle
    got = f.decide(st, Seen(now, {0: False}), {})
    assert facts_of(got).closed_before == M0 + MAX_CLOSE_MINUTES and f.more
    st.closing = got
    f.decide(st, Seen(now, {0: False}), {})
    assert f.more  # still more


def test_closed_minutes_are_late_for_the_job_and_the_progress_record_keeps_the_close():
    st = state({M0: 1}, closed_before=M0 + 5)
    assert st.late_before() == M0 + 5
    change = st.change([OffsetRange(0, 10, 11)], {M0 + 6: 1}, M0 + 100)
    record = ProgressRecord.decode(progress_of(change))
    assert record.closing == st.closing  # carried as it was
    st.advance(change)
    assert facts_of(st.closing).closed_before == M0 + 5


def test_without_emit_final_the_progress_record_has_no_closing_field():
    st = StageState(IDENT, {0: 10}, Totals())
    change = st.change([OffsetRange(0, 10, 11)], {M0: 1}, M0 + 100)
    raw = json.loads(progress_of(change))
    assert "closing" not in raw and list(raw) == [
        "format", "input_topic", "input_topic_id", "output_topic", "output_topic_id", "level",
        "counting", "offsets", "watermark", "closed_before"]
    assert ProgressRecord.decode(progress_of(change)).closing is None


def test_the_closing_state_survives_the_progress_record():
    c = closing(M0 + 3, {0: PartitionFacts(M0 + 2, clock_second(NOW)), 3: PartitionFacts()})
    record = ProgressRecord(IDENT, {0: 1}, M0, None, c)
    assert ProgressRecord.decode(record.encode()).closing == c


# the start ---------------------------------------------------------------------------------

WANT = Wanted("in", "out", "ERROR", final_topic="out-final", grace_seconds=60, emit_final="1m")


def facts(**kw) -> StartFacts:
    return StartFacts(**{**dict(input_topic_id="IN-ID", output_topic_id="OUT-ID",
                                earliest={0: 0}, latest={0: 100}, group={0: 40}), **kw})


def stored(c: ClosingState | None) -> ProgressRecord:
    return ProgressRecord(IDENT, {0: 40}, M0, None, c)


def test_turning_it_on_begins_an_empty_closing_state_committed_before_any_close():
    start = check_start(stored(None), {}, facts(), WANT)
    assert start.state.closing == ClosingState("out-final", 60, ClosingFacts({}))
    assert start.must_commit
    fresh = check_start(None, {}, facts(group={}), WANT)
    assert fresh.state.closing == ClosingState("out-final", 60, ClosingFacts({}))


def test_a_final_topic_holding_records_the_state_never_closed_into_is_refused():
    for progress in (stored(None), None):
        with pytest.raises(StateRefused, match="already holds 12 offsets.*new --final-topic"):
            check_start(progress, {}, facts(final_records=12, group={} if progress is None
                                            else {0: 40}), WANT)


def test_turning_it_off_is_refused_naming_the_final_topic_and_grace():
    with pytest.raises(StateRefused, match="out-final \\(--emit-final 1m\\).*no --emit-final"):
        check_start(stored(closing(M0)), {}, facts(), Wanted("in", "out", "ERROR"))


def test_another_final_topic_is_refused_naming_both():
    other = Wanted("in", "out", "ERROR", final_topic="elsewhere", grace_seconds=60)
    with pytest.raises(StateRefused, match="out-final, this start has --final-topic elsewhere"):
        check_start(stored(closing(M0)), {}, facts(), other)


def test_another_grace_is_allowed_with_a_warning_and_the_closes_kept():
    longer = Wanted("in", "out", "ERROR", final_topic="out-final", grace_seconds=300,
                    emit_final="5m")
    start = check_start(stored(closing(M0 + 9)), {}, facts(), longer)
    assert start.state.closing == ClosingState("out-final", 300, ClosingFacts({}, M0 + 9))
    assert any("from 1m to 5m" in w for w in start.warnings)
    assert start.state.late_before() == M0 + 9


# the job's newest minute per partition ------------------------------------------------------

def test_the_partition_masks_give_each_partition_its_newest_minute_and_other_levels_do_not_count():
    text = minute_text(M0)[:16].encode()
    rows: list[dict[str, object]] = [
        {"n": 3, "minute": text, "pm0": 0b101, "pm1": None},  # counted, p0 and p2
        {"n": 2, "mi": M0 + 4, "other": True, "pm0": 0b10, "pm1": None},  # INFO of p1
        {"n": 1, "mi": M0 + 1, "pm0": None, "pm1": -(1 << 63)},  # counted, p127 (bit 63)
        {"n": 1, "bad_offset": 7, "p": 0, "reason": "bad timestamp", "raw": b"x", "len": 1},
    ]
    r = batch_result(rows, [OffsetRange(0, 0, 10)], 0, 2)
    assert r.counts == {M0: 3, M0 + 1: 1}
    assert r.newest == {0: M0, 2: M0, 1: M0 + 4, 127: M0 + 1}
    assert r.records == 7 and len(r.malformed) == 1
    assert batch_result(rows[:1], [OffsetRange(0, 0, 10)]).newest == {}  # without: nothing


# the settings --------------------------------------------------------------------------------

def test_the_final_topic_defaults_to_the_output_topic_s_name_plus_final():
    assert settings(output_topic="counts").final_topic_name == "counts-final"
    assert settings(final_topic="finals").final_topic_name == "finals"
    assert RunSettings(metrics_port=0).final_topic_name is None
    assert settings(emit_final="90s").grace_seconds == 90


@pytest.mark.parametrize("kw, match", [
    ({"emit_final": None, "final_topic": "x"}, "--final-topic needs --emit-final"),
    ({"emit_final": "0s"}, "--emit-final takes"),
    ({"emit_final": "8d"}, "up to 7d"),
    ({"emit_final": "1 minute"}, "--emit-final takes"),
    ({"final_topic": "logs"}, "a topic of its own"),
    ({"final_topic": "error-counts-state"}, "a topic of its own"),
    ({"emit_final": "2h", "lateness_horizon": "90m"}, "shorter than --lateness-horizon"),
])
def test_a_bad_emit_final_is_one_config_error(kw, match):
    with pytest.raises(ConfigError, match=match):
        settings(**kw)


def test_a_lagging_partition_s_open_minutes_stay_in_memory_past_the_horizon_until_final():
    t = Totals()
    t.apply({M0: 7, M0 + 600: 1})
    st = StageState(IDENT, {0: 10}, t, M0 + 600, 60, None, None, closing(M0))
    change = st.change([OffsetRange(0, 10, 11)], {M0 + 601: 1}, M0 + 1000)
    assert change.evict_before is None  # the horizon would evict 10:00's hour; it is open
    closes = st.change([OffsetRange(0, 10, 11)], {M0 + 601: 1}, M0 + 1000,
                       closing=closing(M0 + 60))
    assert closes.evict_before == M0 + 60  # final now: its hour may leave with this commit
    assert [r.count for _, r in decoded(finals().records(st, closes))][:2] == [7, 7]


def test_at_least_once_delivery_cannot_publish_finals_once():
    with pytest.raises(ConfigError, match="needs --delivery exactly-once"):
        settings(delivery="at-least-once")


def test_a_rollup_window_is_published_once_every_minute_of_it_is_final_as_their_sum():
    st = state({M0 - 2: 5, M0 + 10: 2, M0 + 59: 1}, closed_before=M0 - 1)
    st.closing = ClosingState("out-final", 60, ClosingFacts({}, M0 - 1), (60, 1440))
    change = st.change([OffsetRange(0, 10, 11)], {M0 + 59: 3}, M0 + 100,
                       closing=ClosingState("out-final", 60, ClosingFacts({}, M0 + 61),
                                            (60, 1440)))
    got = decoded(finals().records(st, change))
    windows = [(r.window_start, r.window_end, r.count, r.closed) for _, r in got
               if r.window_end != minute_text(minute_index(r.window_start[:16]) + 1)]
    hour = minute_text(M0 - 60), minute_text(M0)  # 09:00-10:00: its minute 09:58 held 5
    assert windows == [(*hour, 5, False), (*hour, 5, True),
                       (minute_text(M0), minute_text(M0 + 60), 6, False),
                       (minute_text(M0), minute_text(M0 + 60), 6, True)]
    assert got[-1][0] == minute_text(M0)  # keyed by the window's start, last after its minutes
    # Minutes stay in memory until their largest rollup window (the day) is closed.
    assert change.closing is not None and change.closing.kept_from() == M0 - M0 % 1440


def test_another_rollup_is_refused_and_the_flag_needs_emit_final():
    with pytest.raises(StateRefused, match="--rollup 1h, this start has --rollup 1h,1d"):
        check_start(stored(ClosingState("out-final", 60, ClosingFacts({}), (60,))), {},
                    facts(), Wanted("in", "out", "ERROR", final_topic="out-final",
                                    grace_seconds=60, rollups=(60, 1440)))
    assert settings(rollup="1d,1h").rollup_minutes == (60, 1440)
    for bad in ("2h", "1h,1h", "1w"):
        with pytest.raises(ConfigError, match="--rollup takes 1h, 1d or 1h,1d"):
            settings(rollup=bad)
    with pytest.raises(ConfigError, match="--rollup needs --emit-final"):
        settings(emit_final=None, rollup="1h")


def test_a_first_close_with_nothing_counted_before_it_waits_and_nothing_is_late():
    st = state({M0 + 10: 1}, parts={0: PartitionFacts(M0 + 10, None)})
    f = finals()
    got = f.decide(st, Seen(clock_second(NOW), {0: True}), {0: M0 + 5})
    assert facts_of(got).closed_before is None and not f.more  # 10:08 closable, none held
    got = f.decide(st, Seen(clock_second(NOW), {0: True}), {0: M0 + 12})
    assert facts_of(got).closed_before == M0 + 11  # 10:10 counted: the finals begin there


# from the review of 2026-11-29 --------------------------------------------------------------

def test_a_partition_s_newest_minute_ignores_lines_ahead_of_the_clock_but_counts_them():
    text = minute_text(M0)[:16].encode()
    rows: list[dict[str, object]] = [
        {"n": 2, "minute": text, "pm0": 0b1},
        {"n": 1, "mi": M0 + 120, "pm0": 0b1},  # two hours ahead of "now" (M0 + 1)
    ]
    r = batch_result(rows, [OffsetRange(0, 0, 3)], 0, 1, newest_before=M0 + 2)
    assert r.newest == {0: M0} and r.counts == {M0: 2, M0 + 120: 1}


def test_input_without_a_usable_time_holds_nothing_back_after_grace():
    # p1 reads only garbage (no newest minute): it counts as caught up, and after GRACE p0's
    # newest minute alone closes
    parts = {0: PartitionFacts(M0 + 10, None), 1: PartitionFacts(None, None)}
    st = state({M0: 1}, closed_before=M0, parts=parts)
    f = finals()
    now = clock_second(NOW)
    got = f.decide(st, Seen(now, {0: True, 1: True}), {0: M0 + 10})
    assert facts_of(got).closed_before == M0  # p1 still holds (for GRACE)
    assert facts_of(got).partitions[1].caught_up_since == now
    got = f.decide(st, Seen(now + 60, {0: True, 1: True}), {0: M0 + 10})
    assert facts_of(got).closed_before == M0 + 9


def test_the_first_close_reaches_back_a_week_at_most_whatever_line_is_held():
    ancient = minute_index("0026-11-29 10:00")
    st = state({ancient: 1, M0: 2}, parts={0: PartitionFacts(M0 + 10, None)})
    f = finals()
    got = f.decide(st, Seen(clock_second(NOW), {0: True}), {0: M0 + 10})
    assert facts_of(got).closed_before == M0 + 9 and not f.more
    change = st.change([], {}, M0 + 100, closing=got)
    records = decoded(f.records(st, change))
    assert records[0][0] == minute_text(M0 + 9 - MAX_CLOSE_MINUTES)  # not year 26
    assert len(records) == 2 * MAX_CLOSE_MINUTES


def test_a_grouped_close_is_cut_at_a_number_of_records_not_only_minutes():
    series = SeriesTotals(("service",), 1000)
    st = state(closed_before=M0, series=series, parts={0: PartitionFacts(M0 + 400, None)})
    st.advance(st.change([OffsetRange(0, 10, 20)], {}, M0 + 500, series={
        (f"s{i}",): {M0 + m: 1 for m in range(300)} for i in range(500)}))
    f = finals()
    got = f.decide(st, Seen(clock_second(NOW), {0: True}), {0: M0 + 400})
    cut = facts_of(got).closed_before
    assert cut is not None and f.more and M0 < cut < M0 + 399
    assert (cut - M0) * 501 <= MAX_CLOSE_RECORDS < (cut - M0 + 1) * 501


def test_a_rollup_window_whose_minutes_the_horizon_evicted_before_is_not_published():
    st = state({M0 + 10: 2}, closed_before=M0 + 5)
    st.closed_before = M0 + 3  # the horizon evicted minutes before 10:03 earlier
    st.closing = ClosingState("out-final", 60, ClosingFacts({}, M0 + 5), (60,))
    change = st.change([], {}, M0 + 100, closing=ClosingState(
        "out-final", 60, ClosingFacts({}, M0 + 61), (60,)))
    got = decoded(finals().records(st, change))
    assert all(r.window_end == minute_text(minute_index(r.window_start[:16]) + 1)
               for _, r in got)  # the 10:00 hour is missing minutes: no rollup of it


def test_once_cannot_wait_for_a_partition_that_never_had_a_line():
    parts = {0: PartitionFacts(M0 + 10, None), 1: PartitionFacts(None, None)}
    st = state({M0: 1}, closed_before=M0, parts=parts)
    f = Finals(settings(once=True), wall=lambda: NOW)
    got = f.decide(st, Seen(clock_second(NOW), {0: False, 1: False}), {})
    assert facts_of(got).closed_before == M0 + 9  # p1 idle at once, p0's minute closes
    assert not finals().due(st, Seen(clock_second(NOW), {0: False, 1: False}))


def test_a_recreated_final_topic_is_refused_and_the_first_start_keeps_its_id():
    start = check_start(stored(None), {}, facts(final_topic_id="F1"), WANT)
    assert start.state.closing is not None and start.state.closing.final_topic_id == "F1"
    kept = ClosingState("out-final", 60, ClosingFacts({}, M0), (), "F1")
    assert ClosingState.from_json(kept.to_json()) == kept
    again = check_start(stored(kept), {}, facts(final_topic_id="F1"), WANT)
    assert again.state.closing == kept
    with pytest.raises(StateRefused, match="final topic out-final was recreated \\(id F1 in the "
                                           "state, F2 now\\)"):
        check_start(stored(kept), {}, facts(final_topic_id="F2"), WANT)


def test_recent_synthetic_lines_are_the_last_minutes_in_time_order():
    from logcount.connectors.produce import recent_records

    before = minute_index(datetime.now(UTC).strftime("%Y-%m-%d %H:%M"))
    records = recent_records("seed", 2000, 3, 5)
    after = minute_index(datetime.now(UTC).strftime("%Y-%m-%d %H:%M"))
    minutes = [r.minute for r in records if r.minute is not None]
    assert minutes == sorted(minutes) and len(minutes) > 1900
    assert before - 5 <= minutes[0] and minutes[-1] < after  # the 5 minutes before now
    assert all(r.minute is None for r in records[:len(records) - len(minutes)])  # bad first
