"""Telling a stopped process from a hung call.

A process stopped by SIGSTOP (a debugger, `docker pause`, a paused VM or host) does not run at
all, but the monotonic clock goes on: every timeout measured across the stop looks expired when
it resumes. `Heartbeat` is a daemon thread that ticks every TICK_S; a gap between two ticks much
longer than that is time during which nothing in this process ran. Watchdogs subtract that
time (`frozen_between`), so a freeze is never mistaken for a librdkafka call that hangs.

A late tick on a machine so loaded that this process waited for a CPU is no stop: the kernel's
count of the time its threads spent runnable but not running (`run_delay_s`) tells the two apart.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path

log = logging.getLogger("logcount.heartbeat")

# Why 0.5 s: a tick is a wake-up and a clock read, nothing to a CPU; a freeze is then measured
# to within half a second, far below any timeout it is compared with.
TICK_S = 0.5
# A gap is a stop only when a tick comes this much later than due: a loaded 2-core machine can
# delay a thread's wake-up by a second, and counting that as a freeze would only make a
# watchdog wait a little longer, never fire early.
GAP_S = 1.5
# How many stops are remembered: watchdogs ask about the last seconds to minutes.
KEEP = 64


def run_delay_s(tasks: Path = Path("/proc/self/task")) -> float | None:
    """Seconds this process's threads have spent runnable but waiting for a CPU (the second
    field of each thread's schedstat), or None where the kernel does not say."""
    total, read = 0, False
    try:
        for task in tasks.iterdir():
            with contextlib.suppress(OSError, IndexError, ValueError):  # a thread that ended
                total += int((task / "schedstat").read_text().split()[1])
                read = True
    except OSError:
        return None
    return total / 1e9 if read else None


def starved(late_s: float, waited_s: float | None) -> bool:
    """A tick `late_s` late was the machine's load, not a stop, when this process's threads
    waited for a CPU (`waited_s`, over the same ticks) for at least half that time: a stopped
    process is not runnable, so it waits for nothing."""
    return waited_s is not None and waited_s >= late_s / 2


class Heartbeat:
    def __init__(self, tick_s: float = TICK_S, gap_s: float = GAP_S,
                 clock=time.monotonic,
                 waited: Callable[[], float | None] = run_delay_s) -> None:
        self.tick_s, self.gap_s, self.clock, self.waited = tick_s, gap_s, clock, waited
        self._lock = threading.Lock()
        self._last = clock()
        self._waited = waited()
        self._gaps: deque[tuple[float, float]] = deque(maxlen=KEEP)  # (from, to) not running
        self._thread: threading.Thread | None = None

    def start(self) -> Heartbeat:
        with self._lock:
            if self._thread is None:
                self._last, self._waited = self.clock(), self.waited()
                self._thread = threading.Thread(target=self._run, name="heartbeat", daemon=True)
                self._thread.start()
        return self

    def _run(self) -> None:
        while True:
            time.sleep(self.tick_s)
            self.tick()

    def tick(self) -> None:
        now, waited = self.clock(), self.waited()
        with self._lock:
            late = now - self._last - self.tick_s
            stopped = late > self.gap_s and not starved(
                late, None if waited is None or self._waited is None else waited - self._waited)
            if stopped:
                self._gaps.append((self._last + self.tick_s, now))
            self._last, self._waited = now, waited
        if stopped:
            log.warning("this process did not run for %.1fs (stopped: SIGSTOP, a paused "
                        "container or VM); timeouts do not count that time", late)

    def frozen_between(self, t0: float, t1: float | None = None) -> float:
        """Seconds within [t0, t1] (default: now) during which this process did not run. A gap
        still open (the process has just resumed and the heartbeat has not ticked yet) counts
        too, so a watchdog that wakes first sees the freeze all the same."""
        now = self.clock()
        t1 = now if t1 is None else t1
        with self._lock:
            gaps = list(self._gaps)
            if self._thread is not None and now - self._last - self.tick_s > self.gap_s:
                gaps.append((self._last + self.tick_s, now))
        return sum(max(0.0, min(b, t1) - max(a, t0)) for a, b in gaps)


HEARTBEAT = Heartbeat()


def frozen_between(t0: float, t1: float | None = None) -> float:
    """The process-wide heartbeat's answer (started on first use)."""
    return HEARTBEAT.start().frozen_between(t0, t1)
