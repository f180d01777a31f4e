"""The stage's committed-batch and closing log lines: written by the driver, read by the bench
and the tests, with one format and one parser.

    batch N committed: offsets p0:S-E p1:S-E; records R, malformed M, late L, minutes touched T,
        spark 0.12s, commit 0.018s
    (with --continuation-lines skip, ", continuation C" after the late count: lines of R that
    continued the event before them)
    stage stopped after N batches: R records committed in 1.23s from the first plan to the last
        commit (R/s records/s)
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class BatchLine:
    batch: int
    ranges: tuple[tuple[int, int, int], ...]  # (partition, start, end) of each range read
    records: int
    malformed: int
    late: int
    minutes_touched: int
    spark_s: float
    commit_s: float
    continuation: int | None = None  # None: --continuation-lines dlq (not shown)

    def text(self) -> str:
        offsets = " ".join(f"p{p}:{s}-{e}" for p, s, e in self.ranges) or "-"
        cont = "" if self.continuation is None else f", continuation {self.continuation}"
        return (f"batch {self.batch} committed: offsets {offsets}; records {self.records}, "
                f"malformed {self.malformed}, late {self.late}{cont}, minutes touched "
                f"{self.minutes_touched}, spark {self.spark_s:.2f}s, commit {self.commit_s:.3f}s")


@dataclass(frozen=True)
class ClosingLine:
    batches: int
    records: int
    seconds: float

    def text(self) -> str:
        rate = self.records / self.seconds if self.seconds else 0.0
        return (f"stage stopped after {self.batches} batches: {self.records} records committed "
                f"in {self.seconds:.2f}s from the first plan to the last commit "
                f"({rate:.0f} records/s)")


_BATCH = re.compile(
    r"batch (\d+) committed: offsets (\S.*?); records (\d+), malformed (\d+), late (\d+), "
    r"(?:continuation (\d+), )?minutes touched (\d+), spark ([\d.]+)s, commit ([\d.]+)s")
_RANGE = re.compile(r"p(\d+):(\d+)-(\d+)")
_CLOSING = re.compile(r"stage stopped after (\d+) batches: (\d+) records committed in ([\d.]+)s")


def parse_batch_line(line: str) -> BatchLine | None:
    """The batch line anywhere in `line` (a log line with its time and level), else None."""
    m = _BATCH.search(line)
    if m is None:
        return None
    ranges = tuple((int(p), int(s), int(e)) for p, s, e in _RANGE.findall(m[2]))
    return BatchLine(int(m[1]), ranges, int(m[3]), int(m[4]), int(m[5]), int(m[7]),
                     float(m[8]), float(m[9]), None if m[6] is None else int(m[6]))


def parse_closing_line(line: str) -> ClosingLine | None:
    m = _CLOSING.search(line)
    return None if m is None else ClosingLine(int(m[1]), int(m[2]), float(m[3]))
