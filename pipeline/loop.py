"""The stage's loop: batch after batch until a stop (or, with --once, until nothing is left).

Each turn makes new Kafka clients if the last ones were let go of, then runs one batch
(pipeline/batch.py). A step that failed before anything was published (`StepFailed`) is backed off
and planned again, giving up after GIVE_UP_AFTER_S of failures without a break; a hung call or a
fenced producer has the clients replaced (pipeline/clients.py). Between batches a caught-up stage
is paced (--min-batch-interval or --target-latency, pipeline/pacing.py), an idle one sleeps
--trigger-interval (less under a target), and a backlog runs back to back. SIGTERM is checked
between steps: a running Spark job is cancelled, an open transaction finished or aborted first.
"""

from __future__ import annotations

import contextlib
import logging
import signal
import threading
from collections.abc import Callable

from logcount.core.backoff import Backoff
from logcount.core.errors import (
    AbortableKafkaError,
    DependencyError,
    FencedError,
    HungClientError,
    RetriableKafkaError,
    TakenOverError,
)
from logcount.core.retry import Retry, retry
from logcount.core.settings import RunSettings
from logcount.pipeline.batch import Batch, JobFailed, PlanFailed, StepFailed
from logcount.pipeline.batch_report import Report
from logcount.pipeline.clients import Clients
from logcount.pipeline.pacing import Cadence

log = logging.getLogger("logcount.stage")

# A batch that fails before its transaction opens is re-planned (nothing was published): 0.5 s,
# then every second, so a heal is followed within a second; a plan is 3 small admin requests.
# Figures: docs/tuning.md#where-a-broker-restarts-9-115-s-went-and-what-was-cut
RETRY_FIRST_S = 0.5
RETRY_MAX_S = 1.0
# Failing without a break for 5 minutes means the cause is not passing: exit with the last
# error rather than spin, and let the supervisor decide.
GIVE_UP_AFTER_S = 300.0


class ClientsFailed(StepFailed):
    doing = "replacing the Kafka clients"


class StopFlag:
    """Set by SIGTERM/SIGINT. The loop checks it between batches; a running Spark job is
    cancelled so the stop is prompt; an open transaction is always finished or aborted first."""

    def __init__(self) -> None:
        self.event = threading.Event()
        self.on_stop: list[Callable[[], object]] = []

    def install(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return  # signals reach only the main thread; embedded callers use .event

        def handler(signum, frame):
            if not self.event.is_set():
                log.info("signal %s: stopping after the current step", signal.Signals(signum).name)
                self.event.set()
                # From a helper thread: the handler runs on the main thread, which may be inside a
                # py4j call; calling py4j again from here would re-enter that same socket.
                for cb in self.on_stop:
                    threading.Thread(target=_best_effort, args=(cb,), daemon=True).start()

        signal.signal(signal.SIGTERM, handler)
        signal.signal(signal.SIGINT, handler)

    @property
    def set(self) -> bool:
        return self.event.is_set()


def _best_effort(fn: Callable[[], object]) -> None:
    with contextlib.suppress(Exception):
        fn()


class Loop:
    def __init__(self, s: RunSettings, batch: Batch, clients: Clients, report: Report,
                 clock: Callable[[], float], sleep: Callable[[float], bool],
                 stop: StopFlag) -> None:
        self.s, self.batch, self.clients, self.report = s, batch, clients, report
        self.clock, self.sleep, self.stop = clock, sleep, stop
        self.cadence = Cadence(s.min_batch_interval, s.target_latency_seconds)
        self.backoff = Backoff(RETRY_FIRST_S, RETRY_MAX_S, give_up_s=GIVE_UP_AFTER_S,
                               clock=clock)
        batch.on_commit = self.committed

    def run(self) -> None:
        s = self.s
        while True:
            try:
                busy = retry(self.attempt, self.backoff, self.verdict, sleep=self.sleep,
                             stop=lambda: self.stop.set, on_retry=self.retrying)
            except _Stopped:
                return
            if busy is None:  # a hang or a fencing was handled: plan again at once
                continue
            if not busy:
                if s.once:
                    return
                self.sleep(self.cadence.idle(s.trigger_interval))
                continue
            now = self.clock()
            if not (s.once or self.batch.backlogged):
                self.cadence.took(now - self.batch.started)  # a caught-up batch's length
                # Pacing: a caught-up stage waits out the rest of the interval, so what
                # arrives meanwhile joins the next batch instead of making its own.
                if wait := self.cadence.wait(self.batch.started, now):
                    self.sleep(wait)

    def attempt(self) -> bool | None:
        """The stop is checked before every turn (after a back-off's sleep too)."""
        if self.stop.set:
            raise _Stopped
        return self.turn()

    def turn(self) -> bool | None:
        """One pass of the loop: new clients if the last ones were let go of, then one batch.
        True/False: a batch was done / nothing to do; None: a hang or a fencing, handled here.
        A step that failed (StepFailed) is the retry's (verdict)."""
        clients = self.clients
        try:
            if clients.sink is None or clients.group is None:  # the last ones were let go of
                try:
                    clients.recover()
                except (DependencyError, RetriableKafkaError, AbortableKafkaError) as exc:
                    # The links are still down: try again after the usual backoff, as a failed
                    # plan would.
                    raise ClientsFailed(exc) from exc
            assert clients.sink is not None and clients.group is not None
            return self.batch.run(clients.sink, clients.group)
        except HungClientError as hung:
            clients.hung(hung)
        except FencedError as exc:
            if isinstance(exc, TakenOverError) or self.s.delivery != "exactly-once":
                raise
            clients.fenced(exc)
        return None

    def verdict(self, exc: Exception) -> Retry | BaseException:
        """A failed step is planned again after the backoff, until GIVE_UP_AFTER_S of failures
        without a break; anything else is not the retry's."""
        if not isinstance(exc, StepFailed):
            return exc
        if self.stop.set:  # a Spark job cancelled by the signal: nothing open
            return Retry(exc, stopped=_Stopped())
        clients = self.clients
        if (clients.sink is not None and self.s.delivery == "exactly-once"
                and isinstance(exc, PlanFailed | JobFailed)
                and clients.made_at <= (self.backoff.since or self.clock())):
            # After a broker restart the old producer's send_offsets hung for its whole
            # watchdog (7 s, librdkafka #5456). Nothing is open now: new clients (claim
            # check first), once per run of failures.
            clients.retire()
        self.report.aborted()
        # The give-up line counts this failure too (the backoff is told of it next).
        n, over = self.backoff.failures + 1, self.backoff.elapsed()
        return Retry(exc, give_up=DependencyError(
            f"{exc.doing} failed {n} times in a row over {over:.0f}s; last: "
            f"{_first_line(exc.cause)[:500]}"))

    def retrying(self, verdict: Retry, delay: float) -> None:
        """One WARN line an outage (retries go on every second), one INFO line when it is over
        (committed)."""
        failed = verdict.error
        assert isinstance(failed, StepFailed)
        n = self.backoff.failures
        log.log(logging.WARNING if n == 1 else logging.DEBUG,
                "%s failed (%s); re-planning in %.1fs (%d in a row)", failed.doing,
                _first_line(failed.cause)[:300], delay, n)

    def committed(self) -> None:
        """A batch committed: the run of failures, and of recoveries, is over."""
        if self.backoff.failures:
            log.info("committing again after %d failed attempts over %.1fs",
                     self.backoff.failures, self.backoff.elapsed())
        self.backoff.reset()
        self.clients.recovery.committed()


class _Stopped(Exception):
    """A stop, seen before a turn or at a failed step: the loop ends."""


def _first_line(exc: BaseException) -> str:
    return str(exc).strip().splitlines()[0] if str(exc).strip() else repr(exc)
