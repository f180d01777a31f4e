"""Deterministic crash points for fault tests, enabled only by environment variables.

`LOGCOUNT_CRASH_AT=after_collect|after_produce|in_send_offsets|after_send_offsets|after_commit[:N]`
(several, comma-separated, each with its own N) makes the stage die with os._exit (no cleanup, no
flush: like a kill -9) at that point of batch N (1-based, counted from the process start;
default 1). `in_send_offsets` is inside the watched send_offsets_to_transaction call
(connectors/transactional_sink.py), before librdkafka is asked.
With `LOGCOUNT_CRASH_MODE=stop` the process stops itself with SIGSTOP there instead (a hung
process), and goes on when sent SIGCONT. With `LOGCOUNT_CRASH_MODE=hang` only the thread that
reaches the point blocks, for good: at `in_send_offsets`, a librdkafka call that never returns.
"""

from __future__ import annotations

import os
import signal
import sys
import threading

POINTS = ("after_collect", "after_produce", "in_send_offsets", "after_send_offsets", "after_commit")
CRASH_EXIT_CODE = 86


class CrashPoints:
    def __init__(self, spec: str | None = None, mode: str | None = None) -> None:
        spec = os.environ.get("LOGCOUNT_CRASH_AT", "") if spec is None else spec
        self.mode = mode or os.environ.get("LOGCOUNT_CRASH_MODE", "exit")
        if self.mode not in ("exit", "stop", "hang"):
            raise ValueError("LOGCOUNT_CRASH_MODE must be exit, stop or hang")
        self.points: set[tuple[str, int]] = set()
        for item in filter(None, (part.strip() for part in spec.split(","))):
            point, _, batch = item.partition(":")
            if point not in POINTS:
                raise ValueError(f"LOGCOUNT_CRASH_AT: unknown point {point!r}; one of {POINTS}")
            self.points.add((point, int(batch) if batch else 1))
        first: tuple[str | None, int] = min(self.points, key=lambda pb: pb[1], default=(None, 1))
        self.point, self.at_batch = first
        self.batch = 0

    def __call__(self, point: str) -> None:
        if (point, self.batch) not in self.points:
            return
        self.points.discard((point, self.batch))  # once: a retried call goes through
        doing = {"stop": "stopping (SIGSTOP)", "hang": "this thread hangs"}.get(self.mode,
                                                                                "exiting now")
        print(f"logcount: crash point {point} of batch {self.batch}: {doing}", file=sys.stderr,
              flush=True)
        if self.mode == "hang":
            threading.Event().wait()
        elif self.mode == "stop":
            os.kill(os.getpid(), signal.SIGSTOP)
        else:
            os._exit(CRASH_EXIT_CODE)
