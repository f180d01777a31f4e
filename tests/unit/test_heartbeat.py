import threading
import time

import pytest

from logcount.connectors import transactional_sink
from logcount.core.errors import HungClientError
from logcount.core.heartbeat import Heartbeat, run_delay_s, starved

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


def test_a_late_tick_while_the_process_waited_for_a_cpu_is_load_not_a_stop(caplog):
    # Seen on a loaded 2-core machine: a niced stage's tick came 1.6 s late and it warned of a
    # SIGSTOP that never happened. Its threads had waited, runnable, for a CPU all that time.
    clock, waited = Clock(), [5.0]
    hb = Heartbeat(tick_s=0.5, gap_s=1.5, clock=clock, waited=lambda: waited[0])
    clock.now += 2.5
    waited[0] += 1.2  # of the 2 s late, 1.2 s runnable and waiting
    hb.tick()
    assert hb.frozen_between(0) == 0.0 and not caplog.records
    start = clock.now
    clock.now += 10.5  # stopped: not runnable, so no waiting counted
    waited[0] += 0.1
    hb.tick()
    assert hb.frozen_between(start) == pytest.approx(10.0)
    assert "did not run for 10.0s" in caplog.text


def test_where_the_kernel_does_not_say_a_late_tick_is_a_stop():
    clock = Clock()
    hb = Heartbeat(tick_s=0.5, gap_s=1.5, clock=clock, waited=lambda: None)
    clock.now += 4.5
    hb.tick()
    assert hb.frozen_between(0) == pytest.approx(4.0)


def test_starved_needs_half_the_lateness_spent_waiting():
    assert starved(2.0, 1.0) and starved(2.0, 1.9)
    assert not starved(2.0, 0.9) and not starved(2.0, None) and not starved(2.0, -3.0)


def test_run_delay_sums_the_threads_schedstat(tmp_path):
    for name, line in (("1", "100 2000000000 7"), ("2", "5 500000000 1"), ("3", "garbage")):
        (tmp_path / name).mkdir()
        (tmp_path / name / "schedstat").write_text(line + "\n")
    (tmp_path / "4").mkdir()  # a thread that ended between the listing and the read
    assert run_delay_s(tmp_path) == pytest.approx(2.5)
    assert run_delay_s(tmp_path / "none") is None
    mine = run_delay_s()
    assert mine is None or mine >= 0.0  # this kernel's own answer, where it gives one


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
