"""pipeline/pacing.py: when a caught-up stage starts its next batch, in each mode."""

from __future__ import annotations

import pytest

from logcount.core.errors import ConfigError
from logcount.core.settings.values import parse_latency_seconds
from logcount.pipeline.pacing import IDLE_FLOOR_S, RECENT_BATCHES, Cadence


def test_an_interval_is_waited_out_from_the_batch_s_start_and_never_less_than_nothing():
    c = Cadence(0.5, None)
    assert c.wait(10.0, 10.1) == pytest.approx(0.4)
    assert c.wait(10.0, 10.5) == 0.0  # the batch took the whole interval
    assert c.wait(10.0, 12.0) == 0.0  # a slow batch: the next starts at once
    assert Cadence(0.0, None).wait(10.0, 10.1) == 0.0  # no pacing: back to back
    assert c.idle(1.0) == 1.0  # an idle stage sleeps --trigger-interval
    c.took(3.0)
    assert c.interval == 0.5  # without a target, batch lengths change nothing


def test_a_target_starts_the_next_batch_the_slowest_recent_batch_before_it():
    c = Cadence(1.0, 0.25)  # the target wins over --min-batch-interval
    assert c.interval == 0.25  # no batch yet
    for length in (0.06, 0.09, 0.07):
        c.took(length)
    # A line written just after this batch planned: read by the next, committed when it ends.
    assert c.interval == pytest.approx(0.25 - 0.09)
    assert c.wait(10.0, 10.07) == pytest.approx(0.16 - 0.07)
    assert c.wait(10.0, 10.2) == 0.0  # this batch overran the room: the next at once
    assert c.idle(1.0) == pytest.approx(0.16)  # idle: a line arriving now still meets it
    assert c.idle(0.1) == 0.1  # a shorter --trigger-interval is kept


def test_a_slow_batch_shortens_the_gap_until_it_ages_out():
    c = Cadence(1.0, 0.25)
    c.took(0.2)
    for _ in range(RECENT_BATCHES - 1):
        c.took(0.05)
    assert c.interval == pytest.approx(0.05)
    c.took(0.05)  # the slow one is the oldest of the window no more
    assert c.interval == pytest.approx(0.2)


def test_a_target_below_the_batches_runs_them_back_to_back_and_an_idle_stage_still_rests():
    c = Cadence(1.0, 0.1)
    c.took(0.3)
    assert c.interval == 0.0 and c.wait(10.0, 10.3) == 0.0
    assert c.idle(1.0) == IDLE_FLOOR_S
    c.took(-1.0)  # a clock step backwards counts as no time, not a negative length
    assert min(c.lengths) == 0.0


@pytest.mark.parametrize(("text", "seconds"), [
    ("250ms", 0.25), ("0.5s", 0.5), ("2s", 2.0), (" 75 MS ", 0.075), ("60s", 60.0),
    ("50ms", 0.05), (None, None), ("", None), ("off", None)])
def test_a_latency_target_is_read_in_milliseconds_or_seconds(text, seconds):
    assert parse_latency_seconds(text, "--target-latency") == seconds


@pytest.mark.parametrize("text", ["250", "10ms", "61s", "1m", "-1s", "fast", "0.0001s", "1e3ms"])
def test_a_latency_target_out_of_range_or_without_a_unit_is_one_line(text):
    with pytest.raises(ConfigError) as e:
        parse_latency_seconds(text, "--target-latency")
    assert str(e.value).startswith("--target-latency takes a time") and "\n" not in str(e.value)
