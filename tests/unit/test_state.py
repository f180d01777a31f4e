"""pipeline/state.py: the start check's every branch, and how a batch changes the state."""

from __future__ import annotations

import pytest

from logcount.core.errors import StateRefused
from logcount.formats.spec import LineFormat
from logcount.pipeline.hour_records import decode_hour, encode_hour, hour_key, minute_index
from logcount.pipeline.offsets import OffsetRange
from logcount.pipeline.state import (
    CLAIM_KEY,
    FUTURE_SLACK_MINUTES,
    PROGRESS_KEY,
    Identity,
    ProgressRecord,
    StageState,
    StartFacts,
    Wanted,
    check_start,
    claim_value,
    claimant,
    counting_settings,
    decode_records,
    late_before,
)
from logcount.pipeline.totals import Totals

IDENT = Identity("in", "IN-ID", "out", "OUT-ID", "ERROR")
WANT = Wanted("in", "out", "ERROR")
M0 = minute_index("2017-07-30 14:09")


def facts(**kw) -> StartFacts:
    base = dict(input_topic_id="IN-ID", output_topic_id="OUT-ID", earliest={0: 0, 1: 0},
                latest={0: 100, 1: 50}, group={0: 40, 1: 10})
    return StartFacts(**{**base, **kw})


def stored(offsets=None, **ident) -> tuple[ProgressRecord, dict[int, bytes]]:
    i = Identity(**{**IDENT.__dict__, **ident})
    hours = {M0 // 60: encode_hour({M0 % 60: 7})}
    return ProgressRecord(i, offsets or {0: 40, 1: 10}, M0), hours


def test_a_matching_state_starts_from_its_own_offsets_and_totals_without_a_word():
    start = check_start(*stored(), facts(), WANT)
    assert start.state.offsets == {0: 40, 1: 10}
    assert start.state.totals.get(M0) == 7
    assert start.state.watermark == M0
    assert not start.warnings and not start.must_commit and not start.tombstones


@pytest.mark.parametrize("starting, offsets", [("earliest", {0: 3, 1: 0}),
                                               ("latest", {0: 100, 1: 50})])
def test_a_first_start_takes_starting_offsets_and_commits_them(starting, offsets):
    start = check_start(None, {}, facts(group={}, earliest={0: 3, 1: 0}),
                        Wanted("in", "out", "ERROR", starting_offsets=starting))
    assert start.state.offsets == offsets and start.must_commit and not start.warnings
    assert len(start.state.totals) == 0


@pytest.mark.parametrize("group", [{}, {0: 40}], ids=["group-gone", "one-expired"])
def test_missing_group_offsets_are_repaired_from_the_state(group):
    start = check_start(*stored(), facts(group=group), WANT)
    assert start.state.offsets == {0: 40, 1: 10}, "the state's offsets, not --starting-offsets"
    assert start.must_commit
    assert len(start.warnings) == 1 and "no committed offsets for" in start.warnings[0]
    assert "p1" in start.warnings[0]


def test_reset_group_offsets_are_refused_naming_partition_and_both_offsets():
    with pytest.raises(StateRefused, match=r"p0 group 0 state 40") as err:
        check_start(*stored(), facts(group={0: 0, 1: 10}), WANT)
    assert "p1" not in str(err.value) and "--reset-offsets" in str(err.value)


def test_at_least_once_follows_the_group_offsets():
    start = check_start(*stored(), facts(group={0: 30, 1: 10}),
                        Wanted("in", "out", "ERROR", exactly_once=False))
    assert start.state.offsets == {0: 30, 1: 10}


@pytest.mark.parametrize("field, value, words", [
    ("level", "WARN", "counts level WARN, not ERROR"),
    ("input_topic", "other", "holds totals of input topic other"),
    ("input_topic_id", "OLD-ID", "was recreated"),
])
def test_a_changed_identity_is_refused(field, value, words):
    with pytest.raises(StateRefused, match=words):
        check_start(*stored(**{field: value}), facts(), WANT)


@pytest.mark.parametrize("latest", [{0: 20, 1: 50}, {0: 100}], ids=["behind", "fewer-parts"])
def test_an_input_behind_the_state_is_refused(latest):
    with pytest.raises(StateRefused, match="recreated or truncated"):
        check_start(*stored(), facts(latest=latest), WANT)


def test_a_recreated_output_topic_recounts_when_the_input_holds_everything():
    progress, hours = stored(output_topic_id="OLD-OUT")
    start = check_start(progress, hours, facts(), WANT)
    assert start.state.offsets == {0: 0, 1: 0} and len(start.state.totals) == 0
    assert start.tombstones == [hour_key(h) for h in hours]
    assert start.must_commit and "was recreated" in start.warnings[0]
    assert start.state.identity.output_topic_id == "OUT-ID"


def test_a_recreated_output_topic_is_refused_when_the_input_lost_its_beginning():
    with pytest.raises(StateRefused, match=r"p1 starts at 5"):
        check_start(*stored(output_topic_id="OLD-OUT"), facts(earliest={0: 0, 1: 5}), WANT)


def test_no_state_but_group_offsets_recounts_or_refuses():
    start = check_start(None, {}, facts(), WANT)
    assert start.state.offsets == {0: 0, 1: 0} and "recounting" in start.warnings[0]
    with pytest.raises(StateRefused, match="no state"):
        check_start(None, {}, facts(earliest={0: 9, 1: 0}), WANT)


def test_offsets_deleted_by_retention_move_to_the_log_start_without_a_refusal():
    start = check_start(*stored(), facts(earliest={0: 60, 1: 0}), WANT)
    assert start.state.offsets == {0: 60, 1: 10}
    assert start.must_commit and "retention deleted" in start.warnings[0]


def test_a_partition_added_to_the_input_starts_at_its_log_start():
    start = check_start(*stored(), facts(latest={0: 100, 1: 50, 2: 9}, earliest={0: 0, 1: 0,
                                                                                2: 4}), WANT)
    assert start.state.offsets == {0: 40, 1: 10, 2: 4} and start.must_commit


def test_progress_record_round_trip_and_foreign_records_are_refused():
    progress, hours = stored()
    assert ProgressRecord.decode(progress.encode()) == progress
    table = {PROGRESS_KEY: progress.encode(), **{hour_key(h): v for h, v in hours.items()}}
    assert decode_records(table, "out-state") == (progress, hours)
    with pytest.raises(StateRefused, match="format 2"):
        decode_records({PROGRESS_KEY: b'{"format": 2}'}, "out-state")
    with pytest.raises(StateRefused, match="did not write"):
        decode_records({b"something": b"x"}, "out-state")


def _value(records: list[tuple[bytes, bytes | None]], key: bytes) -> bytes:
    """The record a change writes under `key` (a value, no tombstone)."""
    value = dict(records)[key]
    assert value is not None, key
    return value


def _state(horizon=None, watermark=M0) -> StageState:
    return StageState(IDENT, {0: 40, 1: 10},
                      Totals.from_hours([(M0 // 60, encode_hour({M0 % 60: 7}))]),
                      watermark, horizon)


def test_a_change_is_pure_until_advanced_and_carries_totals_offsets_and_state():
    state = _state()
    counts = {minute_index("2017-07-30 14:09"): 3, minute_index("2017-07-30 15:00"): 2}
    change = state.change([OffsetRange(0, 40, 90)], counts, M0 + 1000)
    assert change.updates == {M0: 10, M0 + 51: 2}
    assert change.offsets == {0: 90, 1: 10}
    assert state.totals.get(M0) == 7 and state.offsets == {0: 40, 1: 10}, "pure until advance"
    keys = [k for k, _ in change.state_records]
    assert keys[-1] == PROGRESS_KEY and set(keys[:-1]) == {hour_key(M0 // 60),
                                                           hour_key(M0 // 60 + 1)}
    minutes, totals = decode_hour(_value(change.state_records, hour_key(M0 // 60)))
    assert dict(zip(minutes.tolist(), totals.tolist(), strict=True)) == {9: 10}
    assert ProgressRecord.decode(_value(change.state_records, PROGRESS_KEY)).offsets == {
        0: 90, 1: 10}
    state.advance(change)
    assert state.totals.get(M0) == 10 and state.offsets == {0: 90, 1: 10}
    assert state.watermark == M0 + 51


def test_a_future_minute_never_moves_the_watermark_past_the_wall_clock():
    state = _state(horizon=60)
    change = state.change([], {minute_index("2099-01-01 00:00"): 1}, M0)
    assert change.watermark == M0, "far beyond the slack: ignored"
    near = state.change([], {minute_index("2017-07-31 14:00"): 1}, M0 + 30)
    assert minute_index("2017-07-31 14:00") <= M0 + 30 + FUTURE_SLACK_MINUTES
    assert near.watermark == M0 + 30, "within the slack: counted, but the watermark stops at now"


def test_evicted_minutes_stay_closed_under_a_wider_or_removed_horizon():
    state = _state(horizon=60)
    change = state.change([], {minute_index("2017-07-30 16:30"): 1}, M0 + 1000)
    state.advance(change)
    closed = ProgressRecord.decode(_value(change.state_records, PROGRESS_KEY)).closed_before
    assert closed == minute_index("2017-07-30 15:00"), "hour 14 was evicted whole"
    progress = ProgressRecord.decode(_value(change.state_records, PROGRESS_KEY))
    for horizon in (None, 10_000):
        start = check_start(progress, {}, facts(group={0: 40, 1: 10}),
                            Wanted("in", "out", "ERROR", horizon_minutes=horizon))
        late = start.state.late_before()
        assert late is not None and late >= minute_index("2017-07-30 15:00"), horizon


def test_hour_records_without_progress_are_deleted_not_loaded():
    _, hours = stored()
    start = check_start(None, hours, facts(group={}), WANT)
    assert start.tombstones == [hour_key(h) for h in hours] and len(start.state.totals) == 0


def test_a_damaged_hour_record_is_refused_in_one_line():
    progress, _ = stored()
    with pytest.raises(StateRefused, match="damaged totals record"):
        check_start(progress, {M0 // 60: b"LCH1\x05"}, facts(), WANT)


def test_a_new_partition_is_not_reported_as_expired():
    start = check_start(*stored(), facts(latest={0: 100, 1: 50, 2: 9},
                                         earliest={0: 0, 1: 0, 2: 0}), WANT)
    assert not start.warnings and start.must_commit


def test_late_before_is_off_without_horizon_or_watermark():
    assert late_before(None, 60) is None and late_before(M0, None) is None
    assert late_before(M0, 60) == M0 - 60


def test_hours_behind_the_horizon_are_tombstoned_and_leave_memory():
    state = _state(horizon=60)  # holds 14:09 = M0
    # A batch at 16:30 moves the watermark: the horizon is 15:30, so hour 14 is gone whole,
    # and so is a minute of hour 14 this same batch counted (before it learned of 16:30).
    counts = {minute_index("2017-07-30 16:30"): 1, minute_index("2017-07-30 14:50"): 1}
    change = state.change([], counts, M0 + 200)
    tomb = [k for k, v in change.state_records if v is None]
    assert tomb == [hour_key(M0 // 60)]
    assert hour_key(M0 // 60) not in [k for k, v in change.state_records if v is not None]
    state.advance(change)
    assert state.totals.get(M0) == 0 and state.totals.get(minute_index("2017-07-30 16:30")) == 1
    assert state.late_before() == minute_index("2017-07-30 15:30")


# --- the counting settings are the state's identity ------------------------------------------


def test_a_progress_record_keeps_the_counting_settings_and_reads_an_older_one_as_defaults():
    fmt = LineFormat.from_flags("error,FATAL", "Europe/Paris", r"(?<time>\S+ \S+) (?<level>\w+)")
    ident = Identity("in", "IN-ID", "out", "OUT-ID", fmt.level_label, counting_settings(fmt))
    back = ProgressRecord.decode(ProgressRecord(ident, {0: 1}).encode())
    assert back.identity == ident and ident.level == "ERROR,FATAL"
    assert dict(ident.counting) == {"timezone": "Europe/Paris",
                                    "line_regex": r"(?<time>\S+ \S+) (?<level>\w+)"}
    older = ProgressRecord(IDENT, {0: 1}).encode().replace(b',"counting":{}', b"")
    assert b"counting" not in older and ProgressRecord.decode(older).identity == IDENT
    assert counting_settings(LineFormat()) == ()


@pytest.mark.parametrize("flags, named", [
    (dict(timezone="+05:30"), "--timezone"),
    (dict(line_regex=r"(?<time>\S+) (?<level>\w+)"), "--line-regex"),
    (dict(json_line_field="message"), "--json-line-field"),
    (dict(json_time_field="ts", json_level_field="level"), "--json-level-field"),
    (dict(continuation_lines="skip"), "--continuation-lines"),
])
def test_a_start_with_another_counting_setting_is_refused_naming_it(flags, named):
    fmt = LineFormat.from_flags(**flags)
    want = Wanted("in", "out", "ERROR", counting=counting_settings(fmt))
    with pytest.raises(StateRefused, match=named) as refused:
        check_start(*stored(), facts(), want)
    assert "use a new --output-topic" in str(refused.value)
    # ...and the other way round: a state counted with it, a start without it.
    with pytest.raises(StateRefused, match=named):
        check_start(*stored(counting=counting_settings(fmt)), facts(), WANT)
    same = check_start(*stored(counting=counting_settings(fmt)), facts(), want)
    assert not same.warnings


def test_a_refusal_names_a_default_by_its_value_and_the_default_keeps_the_identity():
    skip = counting_settings(LineFormat.from_flags(continuation_lines="skip"))
    assert skip == (("continuation_lines", "skip"),)
    with pytest.raises(StateRefused, match="with --continuation-lines 'skip', this start has "
                                           "'dlq'"):
        check_start(*stored(counting=skip), facts(), WANT)
    # dlq, the default, is no counting setting: a state stored before the flag restores as is
    assert counting_settings(LineFormat.from_flags(continuation_lines="dlq")) == ()
    assert ProgressRecord(IDENT, {0: 1}).encode().count(b'"counting":{}') == 1


def test_a_time_pattern_change_is_refused_and_levels_compare_as_a_set():
    regex = r"(?<time>\S+ \S+) (?<level>\w+)"
    a = counting_settings(LineFormat.from_flags(line_regex=regex, time_pattern="yy/MM/dd HH:mm:ss"))
    b = counting_settings(LineFormat.from_flags(line_regex=regex,
                                                time_pattern="yyyy/MM/dd HH:mm:ss"))
    with pytest.raises(StateRefused, match="--time-pattern"):
        check_start(*stored(counting=a), facts(), Wanted("in", "out", "ERROR", counting=b))
    both = LineFormat.from_flags("fatal, ERROR").level_label
    assert both == LineFormat.from_flags("ERROR,FATAL").level_label == "ERROR,FATAL"
    with pytest.raises(StateRefused, match="counts level ERROR, not ERROR,FATAL"):
        check_start(*stored(), facts(), Wanted("in", "out", both))


def test_the_claim_names_the_instance_that_last_took_the_id_and_is_not_a_count():
    table = {CLAIM_KEY: claim_value("abc123", "host-1", 42, "2026-11-25T00:00:00+00:00")}
    assert claimant(table) == "abc123"
    assert claimant({}) is None, "a state written before claims: nobody is known to hold it"
    assert claimant({CLAIM_KEY: b"not json"}) is None
    assert claimant({CLAIM_KEY: b'{"instance": 7}'}) is None
    assert decode_records(table, "out-state") == (None, {}), "a claim holds no totals"
