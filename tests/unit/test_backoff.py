"""logcount/core/backoff.py: the one retry schedule of the stage and its connectors."""

from __future__ import annotations

from logcount.core.backoff import Backoff, poll


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


def test_poll_returns_the_first_answer_or_none_when_given_up():
    clock = Clock()
    answers = iter([None, None, "ok"])
    assert poll(lambda: next(answers), Backoff(0.2, clock=clock), clock.sleep) == "ok"
    assert clock.now == 0.4
    clock, tries = Clock(), []
    assert poll(lambda: tries.append(1), Backoff(0.25, give_up_s=1.0, clock=clock).begin(),
                clock.sleep) is None
    assert len(tries) == 5 and clock.now == 1.0  # at 0, 0.25, ... 1.0 s


def test_retries_bounds_the_number_of_delays():
    b = Backoff(0.5, retries=2, clock=Clock())
    assert [b.failed() for _ in range(3)] == [0.5, 0.5, None]  # three tries, two pauses
