"""What the stage tells of its batches: the /metrics registry and /healthz, the batch line of
every commit, the --once progress, and the closing line (logcount/core/batch_line.py writes the
lines, logcount/core/metrics.py defines the metrics)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from logcount.core.batch_line import BatchLine, ClosingLine
from logcount.core.metrics import Health, StageMetrics
from logcount.core.progress import Progress
from logcount.core.settings import RunSettings
from logcount.formats.rule import REASON_LATE
from logcount.formats.spec import EPOCH_MINUTE
from logcount.pipeline.job import BatchResult
from logcount.pipeline.state import Change, StageState

log = logging.getLogger("logcount.stage")

# The overflow WARN (--max-series reached) comes once an hour, however many batches overflow.
OVERFLOW_WARN_EVERY_S = 3600


@dataclass
class Tally:
    """What the stage has done, for its closing line."""

    records: int = 0
    first_plan: float | None = None
    last_commit: float = 0.0


class Report:
    def __init__(self, s: RunSettings, clock: Callable[[], float]) -> None:
        self.fmt, self.clock = s.line_format, clock
        self.metrics = StageMetrics(tuple(d.name for d in self.fmt.group_by), s.grace_seconds)
        self.health = Health(s.health_stall_seconds)
        self.tally = Tally()
        self.progress: Progress | None = None  # --once: from the first plan's lag
        self.overflow_warned_at: float | None = None

    def planned(self, lag: dict[int, int], once: bool) -> int:
        """A plan's lag per partition -> the whole lag."""
        for p, n in lag.items():
            self.metrics.lag.labels(partition=str(p)).set(n)
        self.health.lag = sum(lag.values())
        if once and self.progress is None:  # the first plan's lag is the whole backlog
            self.progress = Progress(self.health.lag, "run")
        return self.health.lag

    def first_plan(self, now: float) -> None:
        if self.tally.first_plan is None:
            self.tally.first_plan = now

    def committed(self, number: int, state: StageState, result: BatchResult, change: Change,
                  spark_s: float, commit_s: float) -> None:
        """Batch `number` committed (and `state` advanced): its metrics and its line."""
        t = self.tally
        t.last_commit = self.clock()
        t.records += result.records
        self.health.progressed()
        m = self.metrics
        late = sum(1 for ref in result.malformed if ref.reason == REASON_LATE)
        m.batches_committed.inc()
        m.records_read.inc(result.records)
        m.malformed.inc(len(result.malformed) - late)
        m.late.inc(late)
        m.continuation.inc(result.continuation)
        if state.series is None:
            m.counted_lines.inc(sum(result.counts.values()))
        else:  # after advance(): this batch's new names are held
            tuples = state.series.tuples
            for sid, lines in change.series_lines.items():
                m.count_series(tuples[sid], lines)
        m.state_minutes.set(state.cells())
        self.closed(state)
        if change.overflow_lines:
            m.overflow_lines.inc(change.overflow_lines)
            now = self.clock()
            if (self.overflow_warned_at is None
                    or now - self.overflow_warned_at >= OVERFLOW_WARN_EVERY_S):
                self.overflow_warned_at = now
                log.warning("--max-series %d reached: %d lines of new series counted under the "
                            "overflow series (every dimension __other__); the dimension with "
                            "the most distinct values is %s (this warning: once an hour)",
                            self.fmt.max_series, change.overflow_lines, change.widest)
        m.spark_seconds.observe(spark_s)
        m.commit_seconds.observe(commit_s)
        if self.progress is not None:
            self.progress.advance(sum(r.size for r in result.ranges))
        log.info("%s", BatchLine(
            number, tuple((r.partition, r.start, r.end) for r in result.ranges),
            result.records, len(result.malformed) - late, late,
            len(change.updates) + len(change.series_updates), spark_s, commit_s,
            result.continuation if self.fmt.continuation == "skip" else None).text())

    def closed(self, state: StageState) -> None:
        """--emit-final: the end of the state's last closed minute on /metrics (the first
        minute not final, as a Unix time); nothing while no minute has closed."""
        before = None if state.closing is None else state.closing.facts.closed_before
        if before is not None:
            self.metrics.closed_until((before - EPOCH_MINUTE) * 60)

    def aborted(self) -> None:
        self.metrics.batches_aborted.inc()

    def refused(self, exc: Exception) -> None:
        """A refused stage says so on /metrics and /healthz."""
        self.metrics.start_refused.set(1)
        self.health.refused = str(exc)

    def closing_line(self, batches: int) -> None:
        t = self.tally
        busy = t.last_commit - t.first_plan if t.first_plan is not None and t.last_commit else 0.0
        log.info("%s", ClosingLine(batches, t.records, busy).text())

    def close(self) -> None:
        if self.progress is not None:
            self.progress.close()
