"""logcount/core/backoff.py: the one retry schedule of the stage and its connectors."""

from __future__ import annotations

from logcount.core.backoff import Backoff


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, s: float) -> None:
        self.now += s


def test_delays_double_up_to_the_cap():
    b = Backoff(0.5, 4.0, clock=Clock())
    assert [b.failed() for _ in range(6)] == [0.5, 1.0, 2.0, 4.0, 4.0, 4.0]
    assert b.failures == 6


def test_a_run_of_failures_without_a_budget_stays_at_the_cap_for_ever():
    # The sink's MySQL backoff has no budget: 0.5 s doubling to 2 s overflowed a float
    # (2.0 ** 1024) after 34 minutes of outage.
    b = Backoff(0.5, 2.0, clock=Clock())
    assert {b.failed() for _ in range(5000)} == {0.5, 1.0, 2.0}
    assert b.failed() == 2.0


def test_a_fixed_interval_without_a_cap():
    b = Backoff(0.2, clock=Clock())
    assert [b.failed() for _ in range(3)] == [0.2, 0.2, 0.2]


def test_gives_up_once_the_budget_since_the_first_failure_is_spent():
    clock = Clock()
    b = Backoff(0.5, 1.0, give_up_s=3.0, clock=clock)
    delays = []
    while (d := b.failed()) is not None:
        delays.append(d)
        clock.sleep(d)
    assert delays == [0.5, 1.0, 1.0, 1.0]  # failures at 0, 0.5, 1.5, 2.5 s; at 3.5 s: give up
    assert b.elapsed() == 3.5 and b.failures == 5


def test_reset_starts_a_new_run():
    clock = Clock()
    b = Backoff(0.5, 1.0, give_up_s=1.0, clock=clock)
    b.failed()
    clock.sleep(5)
    b.reset()
    assert b.elapsed() == 0.0
    assert b.failed() == 0.5  # 5 s after the first run, but a new run


def test_begin_counts_the_first_try_into_the_budget():
    clock = Clock()
    b = Backoff(0.5, give_up_s=2.0, clock=clock).begin()
    clock.sleep(2.0)  # the first try took the whole budget
    assert b.failed() is None


def test_retries_bounds_the_number_of_delays():
    b = Backoff(0.5, retries=2, clock=Clock())
    assert [b.failed() for _ in range(3)] == [0.5, 0.5, None]  # three tries, two pauses
