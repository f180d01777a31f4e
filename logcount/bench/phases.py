"""Cold start and steady state, apart, from a contender's progress lines (pure).

Every contender's output is read line by line as it arrives (logcount/bench/procs.py stamps each
line
with the seconds since the process was spawned). A *checkpoint* is (seconds, cumulative
records) at a moment the contender has a result to show:
- the stage (`logcount run`): each `batch N committed: ... records R` line, a committed batch;
- Spark Structured Streaming: each finished micro-batch (`progress R`, from the query's progress);
- Kafka's ConsumerPerformance: each `--show-detailed-stats` row (cumulative nMsg);
- the Python consumer and Quix Streams: `progress R` at the first record and every 100,000.

Cold start = the first checkpoint's seconds. Steady state = the records after the first
checkpoint / the time between the first and the last, so the first batch (JIT, connections,
plans) drops out: cold start and steady state are judged apart.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from datetime import datetime

from logcount.core.batch_line import parse_batch_line

Checkpoint = tuple[float, int]

_PROGRESS = re.compile(r"^progress (\d+)$")
# ConsumerPerformance --show-detailed-stats row: time, threadId, data.consumed.in.MB, MB.sec,
# data.consumed.in.nMsg (cumulative), nMsg.sec, ...
_JVM_ROW = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d:\d{3}), *-?\d+, *[\d.]+, *[\d.]+, *(\d+),")


def stage_checkpoints(lines: Iterable[tuple[float, str]]) -> list[Checkpoint]:
    """`logcount run` lines -> one checkpoint per committed batch (records add up)."""
    out: list[Checkpoint] = []
    total = 0
    for t, s in lines:
        if b := parse_batch_line(s):
            total += b.records
            out.append((t, total))
    return out


def progress_checkpoints(lines: Iterable[tuple[float, str]]) -> list[Checkpoint]:
    """`progress R` lines (R cumulative) -> checkpoints."""
    return [(t, int(m[1])) for t, s in lines if (m := _PROGRESS.match(s.strip()))]


def jvm_checkpoints(lines: Iterable[tuple[float, str]], spawned_epoch: float) -> list[Checkpoint]:
    """ConsumerPerformance's detailed rows -> checkpoints, placed by the row's own millisecond
    clock (`spawned_epoch` = the wall clock when the process was spawned), not by when the JVM's
    output reached us."""
    return [(jvm_time(m[1]) - spawned_epoch, int(m[2]))
            for _, s in lines if (m := _JVM_ROW.match(s.strip()))]


def jvm_time(text: str) -> float:
    """ConsumerPerformance's 'YYYY-MM-DD HH:MM:SS:mmm' (local time) -> seconds since the epoch."""
    return datetime.strptime(text.strip(), "%Y-%m-%d %H:%M:%S:%f").timestamp()


def split(checkpoints: list[Checkpoint]) -> dict:
    """-> cold_start_s, and steady_lines_per_s over the checkpoints after the first (None when
    there is only one: everything fit in the first batch)."""
    if not checkpoints:
        return {"cold_start_s": None, "steady_lines_per_s": None, "steady_records": 0,
                "steady_seconds": 0.0, "checkpoints": 0}
    (t0, r0), (t1, r1) = checkpoints[0], checkpoints[-1]
    seconds = t1 - t0
    steady = round((r1 - r0) / seconds) if seconds > 0 and r1 > r0 else None
    return {"cold_start_s": round(t0, 2), "steady_lines_per_s": steady,
            "steady_records": r1 - r0, "steady_seconds": round(seconds, 3),
            "checkpoints": len(checkpoints)}
