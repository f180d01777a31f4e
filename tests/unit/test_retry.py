"""logcount/core/retry.py: the one retry and poll loop, on a fake clock and a fake sleep."""

from __future__ import annotations

import pytest

from logcount.core.backoff import Backoff
from logcount.core.errors import (
    AbortableKafkaError,
    DependencyError,
    FatalKafkaError,
    RetriableKafkaError,
)
from logcount.core.retry import Retry, kafka_retriable, poll, retry


class Clock:
    """A clock that only sleeping advances; a loop that never ends fails instead of hanging."""

    def __init__(self, max_sleeps: int = 100) -> None:
        self.now = 0.0
        self.sleeps: list[float] = []
        self.max_sleeps = max_sleeps

    def __call__(self) -> float:
        return self.now

    def sleep(self, s: float) -> None:
        assert len(self.sleeps) < self.max_sleeps, "the loop never gave up"
        self.sleeps.append(s)
        self.now += s


class Calls:
    """A call that raises each of `failures` in turn, then answers "done"."""

    def __init__(self, *failures: Exception) -> None:
        self.failures = list(failures)
        self.times: list[float] = []
        self.clock: Clock | None = None

    def __call__(self) -> str:
        self.times.append(self.clock.now if self.clock else 0.0)
        if self.failures:
            raise self.failures.pop(0)
        return "done"


def _failing(clock: Clock, n: int = 1000, exc: type[Exception] = OSError) -> Calls:
    calls = Calls(*(exc(f"try {i}") for i in range(n)))
    calls.clock = clock
    return calls


def transient(exc: Exception) -> Retry | BaseException:
    return Retry(DependencyError(f"unreachable: {exc}"))


# -- the sleep schedule ----------------------------------------------------------------------------


def test_sleeps_the_backoff_schedule_first_then_growing_up_to_the_cap():
    clock = Clock()
    calls = _failing(clock, 6)
    assert retry(calls, Backoff(0.5, 4.0, clock=clock), transient, sleep=clock.sleep) == "done"
    assert clock.sleeps == [0.5, 1.0, 2.0, 4.0, 4.0, 4.0]
    assert calls.times == [0.0, 0.5, 1.5, 3.5, 7.5, 11.5, 15.5]


def test_a_success_returns_at_once_without_sleeping():
    clock = Clock()
    assert retry(lambda: 7, Backoff(0.5, clock=clock), transient, sleep=clock.sleep) == 7
    assert clock.sleeps == []


# -- giving up ---------------------------------------------------------------------------------


def test_gives_up_when_the_budget_is_spent_raising_the_verdicts_error():
    clock = Clock()
    calls = _failing(clock)
    with pytest.raises(DependencyError, match="unreachable: try 4") as got:
        retry(calls, Backoff(0.5, 1.0, give_up_s=3.0, clock=clock).begin(), transient,
              sleep=clock.sleep)
    assert calls.times == [0.0, 0.5, 1.5, 2.5, 3.5]  # at 3.5 s the 3 s budget is spent
    assert clock.sleeps == [0.5, 1.0, 1.0, 1.0]
    assert isinstance(got.value.__cause__, OSError)  # raised from what failed last


def test_give_up_raises_the_verdicts_give_up_error_not_the_one_it_logs():
    clock = Clock()
    logged: list[tuple[str, float]] = []

    def verdict(exc: Exception) -> Retry:
        return Retry(RetriableKafkaError(f"{exc}"),
                     give_up=AbortableKafkaError(f"{exc} (still failing)"))

    with pytest.raises(AbortableKafkaError, match=r"try 2 \(still failing\)"):
        retry(_failing(clock), Backoff(1.0, retries=2, clock=clock), verdict, sleep=clock.sleep,
              on_retry=lambda v, d: logged.append((str(v.error), d)))
    assert logged == [("try 0", 1.0), ("try 1", 1.0)]


def test_a_deadline_ends_the_tries_before_a_pause_that_would_end_past_it():
    clock = Clock()
    calls = _failing(clock)
    with pytest.raises(DependencyError):
        retry(calls, Backoff(1.0, 4.0, clock=clock), transient, sleep=clock.sleep, deadline=3.0)
    assert calls.times == [0.0, 1.0, 3.0]  # the next pause (4 s) would end at 7 s > 3 s
    assert clock.sleeps == [1.0, 2.0]


def test_a_backoff_that_never_gives_up_retries_until_the_call_answers():
    clock = Clock(max_sleeps=1000)
    calls = _failing(clock, 500)
    assert retry(calls, Backoff(0.1, clock=clock), transient, sleep=clock.sleep) == "done"
    assert len(calls.times) == 501


# -- retriable vs fatal ------------------------------------------------------------------------


def test_a_fatal_verdict_is_raised_at_once_from_the_failure():
    clock = Clock()
    calls = _failing(clock)
    with pytest.raises(FatalKafkaError, match="dead") as got:
        retry(calls, Backoff(0.5, clock=clock), lambda exc: FatalKafkaError("dead"),
              sleep=clock.sleep)
    assert calls.times == [0.0] and clock.sleeps == []
    assert isinstance(got.value.__cause__, OSError)


def test_a_failure_classified_as_itself_goes_through_unchanged():
    clock, bug = Clock(), KeyError("a bug, not an outage")
    calls = Calls(bug)
    with pytest.raises(KeyError) as got:
        retry(calls, Backoff(0.5, clock=clock), lambda exc: exc, sleep=clock.sleep)
    assert got.value is bug and got.value.__cause__ is None
    assert clock.sleeps == []


def test_the_hierarchys_rule_retries_retriable_kafka_errors_only():
    clock = Clock()
    calls = Calls(RetriableKafkaError("leader moving"), RetriableKafkaError("again"))
    assert retry(calls, Backoff(0.2, clock=clock), sleep=clock.sleep) == "done"
    assert clock.sleeps == [0.2, 0.2]
    for fatal in (AbortableKafkaError("abort"), FatalKafkaError("fatal"), DependencyError("x")):
        calls = Calls(fatal)
        with pytest.raises(type(fatal)) as got:
            retry(calls, Backoff(0.2, clock=clock), sleep=clock.sleep)
        assert got.value is fatal and len(calls.times) == 1
    assert clock.sleeps == [0.2, 0.2]


def test_kafka_retriable_verdicts():
    err = RetriableKafkaError("x")
    assert kafka_retriable(err) == Retry(err)
    fatal = FatalKafkaError("y")
    assert kafka_retriable(fatal) is fatal


# -- a stop ------------------------------------------------------------------------------------


class Stop:
    """An event a sleep sets after `after` sleeps (a signal arriving during an outage)."""

    def __init__(self, clock: Clock, after: int) -> None:
        self.clock, self.after, self.set = clock, after, False

    def is_set(self) -> bool:
        return self.set

    def sleep(self, s: float) -> bool:
        self.clock.sleep(s)
        self.set = len(self.clock.sleeps) >= self.after
        return self.set


def test_a_stop_ends_the_tries_after_one_more_try_raising_the_stopped_error():
    clock = Clock()
    stop = Stop(clock, after=2)
    calls = _failing(clock)

    def verdict(exc: Exception) -> Retry:
        return Retry(DependencyError("down"), stopped=DependencyError("stopping while down"))

    with pytest.raises(DependencyError, match="stopping while down"):
        retry(calls, Backoff(1.0, clock=clock), verdict, sleep=stop.sleep, stop=stop.is_set)
    assert clock.sleeps == [1.0, 1.0] and len(calls.times) == 3


def test_a_stop_raises_the_give_up_error_unless_told_otherwise():
    clock = Clock()
    stop = Stop(clock, after=0)
    with pytest.raises(DependencyError, match="gave up"):
        retry(_failing(clock), Backoff(1.0, clock=clock),
              lambda exc: Retry(DependencyError("down"), give_up=DependencyError("gave up")),
              sleep=stop.sleep, stop=lambda: True)
    assert clock.sleeps == []


def test_a_call_that_succeeds_after_the_stop_still_answers():
    clock = Clock()
    stop = Stop(clock, after=1)
    calls = _failing(clock, 1)
    assert retry(calls, Backoff(1.0, clock=clock), transient, sleep=stop.sleep,
                 stop=stop.is_set) == "done"


# -- poll --------------------------------------------------------------------------------------


def test_poll_returns_the_first_answer_or_none_when_given_up():
    clock = Clock()
    answers = iter([None, None, "ok"])
    assert poll(lambda: next(answers), Backoff(0.2, clock=clock), sleep=clock.sleep) == "ok"
    assert clock.now == 0.4
    clock, tries = Clock(), []
    assert poll(lambda: tries.append(clock.now), Backoff(0.25, give_up_s=1.0, clock=clock).begin(),
                sleep=clock.sleep) is None
    assert tries == [0.0, 0.25, 0.5, 0.75, 1.0]


def test_poll_sleeps_the_growing_schedule_and_tells_each_pause():
    clock = Clock()
    told: list[float] = []
    assert poll(lambda: None, Backoff(1.0, 3.0, retries=4, clock=clock), sleep=clock.sleep,
                on_retry=told.append) is None
    assert clock.sleeps == told == [1.0, 2.0, 3.0, 3.0]


def test_poll_ends_at_a_deadline_or_a_stop():
    clock, tries = Clock(), []
    assert poll(lambda: tries.append(clock.now), Backoff(2.0, clock=clock), sleep=clock.sleep,
                deadline=5.0) is None
    assert tries == [0.0, 2.0, 4.0]
    clock = Clock()
    stop = Stop(clock, after=3)
    tries = []
    assert poll(lambda: tries.append(clock.now), Backoff(1.0, clock=clock), sleep=stop.sleep,
                stop=stop.is_set) is None
    assert tries == [0.0, 1.0, 2.0, 3.0]  # the try after the stop, then no more


def test_retry_defaults_of_a_verdict():
    e, g, s = DependencyError("e"), DependencyError("g"), DependencyError("s")
    assert Retry(e).raised_on_give_up() is e and Retry(e).raised_on_stop() is e
    assert Retry(e, give_up=g).raised_on_stop() is g
    assert Retry(e, give_up=g, stopped=s).raised_on_stop() is s
