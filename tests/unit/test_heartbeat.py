import threading
import time

import pytest

from logcount.connectors import transactional_sink
from logcount.core.errors import HungClientError
from logcount.core.heartbeat import Heartbeat

pytestmark = pytest.mark.unit


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_late_tick_is_a_stop_and_on_time_ticks_are_not():
    clock = Clock()
    hb = Heartbeat(tick_s=0.5, gap_s=1.5, clock=clock)
    for _ in range(4):  # on time, or a little late under load: nothing
        clock.now += 0.5
        hb.tick()
    clock.now += 1.9
    hb.tick()
    assert hb.frozen_between(0) == 0.0
    start = clock.now
    clock.now += 12.5  # stopped for 12 s
    hb.tick()
    assert hb.frozen_between(start) == pytest.approx(12.0)
    assert hb.frozen_between(start + 2, start + 5) == pytest.approx(3.0), "only the overlap"
    assert hb.frozen_between(clock.now) == 0.0


def test_a_gap_still_open_counts_before_the_heartbeat_ticks():
    clock = Clock()
    hb = Heartbeat(tick_s=0.5, gap_s=1.5, clock=clock)
    hb._thread = threading.current_thread()  # "started", without a thread of its own
    start = clock.now
    clock.now += 20.5  # resumed; the watchdog wakes before the heartbeat
    assert hb.frozen_between(start) == pytest.approx(20.0)


def test_the_watchdog_does_not_count_time_the_process_was_stopped(monkeypatch):
    monkeypatch.setattr(transactional_sink, "HANG_GRACE_S", 0.1)
    started = time.monotonic()
    # As if the process had been stopped for all but 0.1 s of the call so far.
    monkeypatch.setattr(transactional_sink, "frozen_between",
                        lambda t0, t1=None: max(0.0, time.monotonic() - started - 0.1))

    def slow() -> str:
        time.sleep(0.6)
        return "done"

    assert transactional_sink._watched("call", slow, 0.1) == "done"


def test_a_call_that_runs_past_its_limit_is_hung(monkeypatch):
    monkeypatch.setattr(transactional_sink, "HANG_GRACE_S", 0.1)
    monkeypatch.setattr(transactional_sink, "frozen_between", lambda t0, t1=None: 0.0)
    with pytest.raises(HungClientError, match="did not return within .* of running time"):
        transactional_sink._watched("call", lambda: time.sleep(1), 0.1)
