"""The one loop of every retry and poll of the stage and its connectors (the schedule is
`Backoff`'s, in backoff.py; what a failure means is the caller's).

`retry(call, backoff, classify)` calls until `call` returns; at each exception:

    1. classify(exc): the exception to raise at once (fatal: waiting does not help; `exc`
       itself to let it through unchanged), or a `Retry` (worth another try): step 2.
       The default, `kafka_retriable`, is errors.py's rule: only a RetriableKafkaError is retried
    2. a stop asked (`stop()` true, e.g. `event.is_set`)  -> raise the Retry's `stopped`
    3. delay = backoff.failed(); None (the backoff's budget is spent), or the pause would end
       past `deadline` (a value of the backoff's clock)  -> raise the Retry's `give_up`
    4. on_retry(verdict, delay), sleep(delay), call again

Errors are raised `from` the exception that was classified. `poll(attempt, backoff)` is the same
loop for a condition awaited rather than an error retried: it calls until `attempt` answers
something other than None, and answers None when it gives up (the caller says what did not
happen). `sleep` is the caller's (a stage sleeps on its stop event, a tool on `time.sleep`, the
default; a test advances a fake clock); what it returns is ignored: after a sleep cut short by a
stop, the call is tried once more (what was under way may still succeed), then step 2 ends it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from logcount.core.backoff import Backoff
from logcount.core.errors import RetriableKafkaError

__all__ = ["Retry", "kafka_retriable", "poll", "retry"]

T = TypeVar("T")


@dataclass(frozen=True)
class Retry:
    """`classify`'s verdict on a failure worth another try. `error`: the failure as the project
    names it (what `on_retry` logs); `give_up`: raised when the tries run out (default: `error`);
    `stopped`: raised when a stop ends them (default: `give_up`)."""

    error: BaseException
    give_up: BaseException | None = None
    stopped: BaseException | None = None

    def raised_on_give_up(self) -> BaseException:
        return self.error if self.give_up is None else self.give_up

    def raised_on_stop(self) -> BaseException:
        return self.raised_on_give_up() if self.stopped is None else self.stopped


def kafka_retriable(exc: Exception) -> Retry | BaseException:
    """errors.py's rule: a RetriableKafkaError is tried again; anything else is raised at once
    (abortable, fatal, fenced, denied: the same call cannot succeed)."""
    return Retry(exc) if isinstance(exc, RetriableKafkaError) else exc


def _next_delay(backoff: Backoff, deadline: float | None) -> float | None:
    """Step 3: the delay before the next try, or None when the tries run out here."""
    delay = backoff.failed()
    if delay is None or (deadline is not None and backoff.clock() + delay > deadline):
        return None
    return delay


def retry(call: Callable[[], T], backoff: Backoff,
          classify: Callable[[Exception], Retry | BaseException] = kafka_retriable, *,
          sleep: Callable[[float], object] | None = None, stop: Callable[[], bool] | None = None,
          deadline: float | None = None,
          on_retry: Callable[[Retry, float], object] | None = None) -> T:
    """`call()`'s value, once it returns; see the module's doc for the steps at each failure."""
    pause = sleep or time.sleep  # looked up now, so that a test's stand-in for time.sleep holds
    while True:
        try:
            return call()
        except Exception as exc:
            verdict = classify(exc)
            if not isinstance(verdict, Retry):
                if verdict is exc:
                    raise
                raise verdict from exc
            if stop is not None and stop():
                raise verdict.raised_on_stop() from exc
            delay = _next_delay(backoff, deadline)
            if delay is None:
                raise verdict.raised_on_give_up() from exc
            if on_retry is not None:
                on_retry(verdict, delay)
        pause(delay)


def poll(attempt: Callable[[], T | None], backoff: Backoff, *,
         sleep: Callable[[float], object] | None = None, stop: Callable[[], bool] | None = None,
         deadline: float | None = None,
         on_retry: Callable[[float], object] | None = None) -> T | None:
    """Call `attempt` until it answers something other than None, sleeping the backoff's delays
    in between; None once it gives up: the backoff's budget, `deadline` or a stop (steps 2-4)."""
    pause = sleep or time.sleep
    while True:
        got = attempt()
        if got is not None:
            return got
        if stop is not None and stop():
            return None
        delay = _next_delay(backoff, deadline)
        if delay is None:
            return None
        if on_retry is not None:
            on_retry(delay)
        pause(delay)
