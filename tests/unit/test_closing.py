"""pipeline/closing.py: which minutes close after a batch (the "Final minutes" rules, not wired)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from logcount.pipeline.closing import (
    BatchSeen,
    Closing,
    ClosingFacts,
    PartitionFacts,
    clock_second,
    decide,
    second_text,
    watermark,
)
from logcount.pipeline.hour_records import minute_index
from logcount.pipeline.stage_state import FUTURE_SLACK_MINUTES

M0 = minute_index("2017-07-30 10:00")
S0 = M0 * 60  # the clock second at M0's start
GRACE = 60
EMPTY = ClosingFacts({})


def seen(now: int, busy: dict[int, int | None] | None = None, quiet: tuple[int, ...] = ()
         ) -> BatchSeen:
    """A batch at `now`: `busy` partitions had input (-> newest minute read, or None), `quiet`
    ones were planned empty."""
    busy = busy or {}
    return BatchSeen(now, {**{p: True for p in busy}, **{p: False for p in quiet}},
                     {p: m for p, m in busy.items() if m is not None})


def facts(closed_before: int | None = None, **parts: tuple[int | None, int | None]
          ) -> ClosingFacts:
    """facts(p0=(newest, caught_up_since), ...)."""
    return ClosingFacts({int(k[1:]): PartitionFacts(*v) for k, v in parts.items()}, closed_before)


# -- the clock's scale ------------------------------------------------------------------------

def test_clock_seconds_share_the_minute_index_scale():
    t = datetime(2017, 7, 30, 10, 0, 59, 999_999, tzinfo=UTC)
    assert clock_second(t) == S0 + 59  # floored: a partial second has not passed yet
    assert clock_second(t.astimezone(timezone(timedelta(hours=2)))) == S0 + 59
    assert second_text(S0 + 59) == "2017-07-30 10:00:59"
    with pytest.raises(ValueError):
        clock_second(datetime(2017, 7, 30, 10, 0))  # naive: no zone


# -- the watermark rule -----------------------------------------------------------------------

def test_a_minute_closes_once_the_watermark_is_at_its_end_plus_grace():
    # M0 ends at M0 + 1; with a minute's grace the watermark must reach M0 + 2.
    got = decide(EMPTY, seen(S0 + 600, {0: M0 + 1}), GRACE)
    assert (got.old, got.new, got.closed_any) == (None, M0, True)  # M0 still open
    got = decide(got.facts, seen(S0 + 601, {0: M0 + 2}), GRACE)
    assert (got.old, got.new) == (M0, M0 + 1)  # M0 closed: the range [M0, M0 + 1)
    assert got.facts.closed_before == M0 + 1


def test_a_grace_below_a_minute_waits_for_the_next_minute_start():
    # The watermark minute stands for its start: a line of M0 + 1 may be at M0 + 1 + 0 s, which
    # is not yet M0's end + 30 s.
    assert decide(EMPTY, seen(S0 + 600, {0: M0 + 1}), 30).new == M0
    assert decide(EMPTY, seen(S0 + 600, {0: M0 + 2}), 30).new == M0 + 1


def test_the_watermark_is_the_oldest_partitions_newest_minute():
    got = decide(EMPTY, seen(S0 + 3600, {0: M0 + 50, 1: M0 + 10, 2: M0 + 30}), GRACE)
    assert got.new == M0 + 9  # partition 1 holds it back: minutes up to M0 + 8 closed
    assert watermark(got.facts.partitions, S0 + 3600, GRACE) == M0 + 10


def test_a_partition_without_an_event_time_holds_everything_until_idle():
    f = decide(EMPTY, seen(S0 + 3600, {0: M0 + 50, 1: None}), GRACE)
    assert f.new is None and not f.closed_any
    # Planned empty from S0 + 3660 on; idle a grace later, and then only partition 0 counts.
    f = decide(f.facts, seen(S0 + 3660, {0: M0 + 51}, quiet=(1,)), GRACE)
    assert f.new is None
    f = decide(f.facts, seen(S0 + 3660 + GRACE, {0: M0 + 52}, quiet=(1,)), GRACE)
    assert f.new == M0 + 51


def test_no_partition_known_closes_nothing():
    got = decide(EMPTY, seen(S0 + 10**6), GRACE)
    assert got.new is None and not got.closed_any and got.facts == EMPTY


def test_grace_must_be_positive():
    with pytest.raises(ValueError):
        decide(EMPTY, seen(S0, {0: M0}), 0)


# -- idleness and the clock -------------------------------------------------------------------

def test_a_quiet_partition_stops_holding_the_watermark_after_grace():
    f = decide(EMPTY, seen(S0 + 600, {0: M0 + 5, 1: M0}), GRACE)
    assert f.new == M0 - 1
    t1 = S0 + 601  # partition 1 planned empty from here on
    f = decide(f.facts, seen(t1, {0: M0 + 6}, quiet=(1,)), GRACE)
    assert f.facts.partitions[1] == PartitionFacts(M0, t1)
    f = decide(f.facts, seen(t1 + GRACE - 1, {0: M0 + 7}, quiet=(1,)), GRACE)
    assert f.new == M0 - 1  # a second short of its grace: still holding
    assert f.facts.partitions[1].caught_up_since == t1  # since the first empty plan
    f = decide(f.facts, seen(t1 + GRACE, {0: M0 + 8}, quiet=(1,)), GRACE)
    assert (f.old, f.new) == (M0 - 1, M0 + 7)  # idle for exactly GRACE: partition 0 alone


def test_every_partition_idle_lets_the_wall_clock_close_the_last_minutes():
    f = decide(EMPTY, seen(S0 + 100, {0: M0, 1: M0 + 1}), GRACE)
    t1 = S0 + 130
    f = decide(f.facts, seen(t1, quiet=(0, 1)), GRACE)
    assert f.new == M0 - 1  # both caught up, neither idle yet: the watermark M0 rules
    now = S0 + 3600
    f = decide(f.facts, seen(now, quiet=(0, 1)), GRACE)
    assert watermark(f.facts.partitions, now, GRACE) is None  # nobody holds it
    assert (f.old, f.new) == (M0 - 1, M0 + 59)  # every minute that ended by now - grace


def test_the_clock_boundary_is_exact_to_the_second():
    idle = facts(p0=(M0, S0 - 10_000))
    grace = 90
    end = (M0 + 1) * 60  # M0's end
    assert decide(idle, seen(end + grace - 1, quiet=(0,)), grace).new == M0
    assert decide(idle, seen(end + grace, quiet=(0,)), grace).new == M0 + 1


def test_idleness_boundary_is_exact_to_the_second():
    p = PartitionFacts(M0, S0)
    assert not p.idle(S0 + GRACE - 1, GRACE) and p.idle(S0 + GRACE, GRACE)
    assert not PartitionFacts(M0, None).idle(S0 + 10**9, GRACE)


# -- a bogus future timestamp -----------------------------------------------------------------

def test_a_far_future_line_moves_nothing():
    now = S0 + 600
    f = decide(EMPTY, seen(now, {0: M0 + 5}), GRACE)
    f = decide(f.facts, seen(now + 1, {0: minute_index("2099-01-01 00:00")}), GRACE)
    assert f.facts.partitions[0].newest_minute == M0 + 5 and f.new == M0 + 4
    beyond = now // 60 + FUTURE_SLACK_MINUTES + 1
    assert decide(EMPTY, seen(now, {0: beyond}), GRACE).facts.partitions[0].newest_minute is None


def test_a_line_hours_ahead_cannot_close_a_minute_before_its_time():
    now = S0 + 600  # 10:10:00
    f = decide(EMPTY, seen(now, {0: M0 + 3 * 60}), GRACE)  # a host writing 13:00 local time
    assert f.facts.partitions[0].newest_minute == now // 60  # capped at the wall clock
    assert f.new is not None and f.new * 60 + GRACE <= now  # every closed minute's time is up
    # With another partition behind, it holds the watermark as if the line were honest.
    two = decide(EMPTY, seen(now, {0: M0 + 3 * 60, 1: M0 + 2}), GRACE)
    assert two.new == M0 + 1


# -- closed is closed -------------------------------------------------------------------------

def test_closes_are_monotone():
    f = decide(EMPTY, seen(S0 + 600, {0: M0 + 9}), GRACE)
    assert f.new == M0 + 8
    # A new partition with older lines lowers the watermark: nothing closed is undone.
    g = decide(f.facts, seen(S0 + 601, {0: M0 + 9, 1: M0}), GRACE)
    assert watermark(g.facts.partitions, S0 + 601, GRACE) == M0
    assert (g.old, g.new, g.closed_any) == (M0 + 8, M0 + 8, False)


def test_a_partition_that_wakes_up_holds_again_but_reopens_nothing():
    f = facts(p0=(M0 + 20, None), p1=(M0 + 2, S0 + 100))
    now = S0 + 3000
    got = decide(f, seen(now, {0: M0 + 21}, quiet=(1,)), GRACE)
    assert got.new == M0 + 20  # partition 1 idle: partition 0 alone
    # Partition 1 has input again, lines of M0 + 3: it holds the watermark back again.
    woke = decide(got.facts, seen(now + 1, {0: M0 + 22, 1: M0 + 3}), GRACE)
    assert woke.facts.partitions[1] == PartitionFacts(M0 + 3, None)
    assert watermark(woke.facts.partitions, now + 1, GRACE) == M0 + 3
    assert (woke.old, woke.new, woke.closed_any) == (M0 + 20, M0 + 20, False)
    # Once it catches up beyond the closed minutes, the watermark moves on from there.
    on = decide(woke.facts, seen(now + 2, {0: M0 + 30, 1: M0 + 25}), GRACE)
    assert (on.old, on.new) == (M0 + 20, M0 + 24)


# -- the facts as the state will hold them ----------------------------------------------------

def test_facts_round_trip_through_json():
    f = facts(M0 + 3, p0=(M0 + 9, None), p3=(None, S0 + 17), p1=(M0, S0 + 5))
    doc = json.loads(json.dumps(f.to_json()))
    assert doc == {"version": 1, "closed_before": "2017-07-30 10:03:00", "partitions": {
        "0": {"newest": "2017-07-30 10:09:00", "caught_up_since": None},
        "1": {"newest": "2017-07-30 10:00:00", "caught_up_since": "2017-07-30 10:00:05"},
        "3": {"newest": None, "caught_up_since": "2017-07-30 10:00:17"}}}
    assert ClosingFacts.from_json(doc) == f
    assert ClosingFacts.from_json(EMPTY.to_json()) == EMPTY


@pytest.mark.parametrize("doc", [
    None, [], {"version": 2, "partitions": {}}, {"partitions": {}}, {"version": 1},
    {"version": 1, "partitions": []},
    {"version": 1, "partitions": {"x": {}}},
    {"version": 1, "partitions": {"-1": {}}},
    {"version": 1, "partitions": {"0": []}},
    {"version": 1, "partitions": {"0": {"newest": 5}}},
    {"version": 1, "partitions": {"0": {"newest": "2017-07-30 10:00:30"}}},
    {"version": 1, "partitions": {"0": {"caught_up_since": "2017-07-30 10:00:60"}}},
    {"version": 1, "partitions": {"0": {"caught_up_since": "2017-07-30 10:00"}}},
    {"version": 1, "partitions": {"0": {"caught_up_since": "2017-07-30 10:00x05"}}},
    {"version": 1, "partitions": {}, "closed_before": "tomorrow"},
])
def test_facts_it_did_not_write_are_refused(doc):
    with pytest.raises(ValueError):
        ClosingFacts.from_json(doc)


# -- properties over batch sequences ----------------------------------------------------------

PARTS = (0, 1, 2)


@st.composite
def runs(draw):
    """A grace and a run of batches: the clock moves forward by up to 3 minutes a batch, each
    partition has input or not, and an input's newest minute is near the clock, behind it, hours
    ahead of it, or far in the future; often a few batches where nothing has input end it."""
    grace = draw(st.integers(1, 600))
    now = S0 + draw(st.integers(0, 59))
    batches = []
    for _ in range(draw(st.integers(1, 12))):
        now += draw(st.integers(0, 180))
        had = {p: draw(st.integers(0, 2)) == 0 for p in PARTS if draw(st.integers(0, 5))}
        newest = {}
        for p, h in had.items():
            if h and draw(st.integers(0, 4)):
                newest[p] = now // 60 + draw(st.one_of(
                    st.integers(-30, 2), st.integers(-2000, 2000),
                    st.just(FUTURE_SLACK_MINUTES + 1), st.just(10**6)))
        batches.append(BatchSeen(now, had, newest))
    for _ in range(draw(st.integers(0, 3))):  # then, often, the input goes quiet
        now += grace // 2 + draw(st.integers(0, 120))
        batches.append(BatchSeen(now, {p: False for p in PARTS}, {}))
    return grace, batches


def _replay(grace: int, batches: list[BatchSeen]) -> list[Closing]:
    out, f = [], EMPTY
    for b in batches:
        got = decide(f, b, grace)
        out.append(got)
        f = got.facts
    return out


@settings(max_examples=200, deadline=None)
@given(runs())
def test_closes_only_move_forward(run):
    grace, batches = run
    prev = None
    for got in _replay(grace, batches):
        assert got.old == prev  # each decision starts where the committed one ended
        if prev is not None:
            assert got.new is not None and got.new >= prev
        prev = got.new


@settings(max_examples=200, deadline=None)
@given(runs())
def test_a_replay_from_the_committed_facts_decides_the_same(run):
    grace, batches = run
    f = EMPTY
    for b in batches:
        stored = ClosingFacts.from_json(json.loads(json.dumps(f.to_json())))
        first, again = decide(f, b, grace), decide(stored, b, grace)
        assert again == first
        f = first.facts


@settings(max_examples=200, deadline=None)
@given(runs())
def test_a_busy_partition_never_sees_its_minutes_closed_early(run):
    grace, batches = run
    for b, got in zip(batches, _replay(grace, batches), strict=True):
        if not got.closed_any:
            continue
        assert got.new is not None
        # The newest minute closed ends at `got.new`; its time is up by the clock, too.
        assert got.new * 60 + grace <= b.now
        for p, f in got.facts.partitions.items():
            if b.had_input.get(p) or not f.idle(b.now, grace):  # input now: never idle
                assert f.newest_minute is not None
                assert f.newest_minute * 60 >= got.new * 60 + grace, (p, f)
