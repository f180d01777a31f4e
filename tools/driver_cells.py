"""What the driver does per collected row of a grouped batch (docs/tuning.md#collected-rows): the
collected aggregate rows to BatchResult, the state change, the batch's records and the advance,
at 10,000 live series with ~990 (series, minute) cells a batch, as in `bench --grouping`'s
latency run; with `filebeat`, one backlog batch of its Filebeat part instead (100 series, a
day of minutes, ~70,000 cells); with `ungrouped`, `logcount bench`'s latency run at the default
cadence (20,000 lines a batch of a day's replay: ~1,250 minutes). No broker, no Spark (the rows
are built as collect() builds them).

    python -m tools.driver_cells [BATCHES]
    python -m tools.driver_cells filebeat [BATCHES]
    python -m tools.driver_cells ungrouped [BATCHES]
"""

from __future__ import annotations

import random
import statistics
import sys
import time
from types import SimpleNamespace
from typing import Any

from pyspark.sql.types import _create_row

from logcount.formats.rule import minute_label
from logcount.formats.spec import LineFormat
from logcount.pipeline.batch import BatchRecords
from logcount.pipeline.hour_records import minute_index
from logcount.pipeline.job import batch_result
from logcount.pipeline.offsets import OffsetRange
from logcount.pipeline.series import SeriesTotals
from logcount.pipeline.state import Identity, StageState
from logcount.pipeline.totals import Totals

SERIES = 10_000
CELLS = 990
FIELDS = ["p", "minute", "mi", "bad_offset", "reason", "raw", "len", "d0", "n", "rn"]


def _stage(state: StageState, fmt: LineFormat) -> BatchRecords:
    """What turns a batch into its records (pipeline/batch.py), with only its inputs."""
    settings: Any = SimpleNamespace(output_topic="out", dlq_topic="dlq", input_topic="in",
                                    line_format=fmt)
    return BatchRecords(settings)


def _steps(state: StageState, stage: BatchRecords, rows: list[Any], span: OffsetRange, width: int,
           now: int) -> tuple[float, float, float, float]:
    """Milliseconds of the driver's four steps on one batch's collected rows."""
    t0 = time.perf_counter()
    res = batch_result(rows, [span], width)
    t1 = time.perf_counter()
    change = state.change(res.ranges, res.counts, now, None, [], res.series)
    t2 = time.perf_counter()
    stage(state, res, change)
    t3 = time.perf_counter()
    state.advance(change)
    t4 = time.perf_counter()
    return (t1 - t0) * 1000, (t2 - t1) * 1000, (t3 - t2) * 1000, (t4 - t3) * 1000


def _spent() -> dict[str, list[float]]:
    return {"rows": [], "change": [], "records": [], "advance": []}


def _keep(spent: dict[str, list[float]], ms: tuple[float, ...]) -> None:
    for k, dt in zip(spent, ms, strict=True):
        spent[k].append(dt)


def _medians(spent: dict[str, list[float]], digits: int) -> dict[str, float]:
    out = {f"{k}_ms": round(statistics.median(v), digits) for k, v in spent.items()}
    out["total_ms"] = round(sum(out.values()), digits)
    return out


def measure(batches: int = 300, warm: int = 50) -> dict[str, float]:
    m0 = minute_index("2031-01-01 00:00")
    ident = Identity("in", "x", "out", "y", "ERROR",
                     (("--group-by", "key"), ("--max-series", str(SERIES))))
    state = StageState(ident, {0: 0}, Totals(), series=SeriesTotals(("key",), SERIES))
    stage = _stage(state, LineFormat.from_flags(group_by="key"))
    rng = random.Random(1)
    spent = _spent()
    for b in range(batches):
        minute = minute_label(m0 + b // 24)[:16].encode()  # 24 batches a minute (0.5 s trigger)
        keys = rng.sample(range(SERIES), CELLS)
        rows: list[Any] = [_create_row(FIELDS, [None, minute, *[None] * 5, f"svc-{k:05d}",
                                                rng.randrange(1, 4), None]) for k in keys]
        rows.append(_create_row(FIELDS, [None] * 8 + [4000, None]))  # lines of other levels
        ms = _steps(state, stage, rows, OffsetRange(0, b * 5000, b * 5000 + 5000), 1, m0 + 100)
        if b >= warm:
            _keep(spent, ms)
    return _medians(spent, 2)


FLEET = [(f"node-{h:02d}", f"ns-{n}") for h in range(20) for n in range(5)]
FLEET_FIELDS = ["p", "minute", "mi", "bad_offset", "reason", "raw", "len", "d0", "d1", "n", "rn"]


def measure_backlog(batches: int = 5) -> dict[str, float]:
    """The same steps for backlog batches of 49 of the 100 series in each of 1,440 minutes."""
    m0 = minute_index("2031-01-01 00:00")
    dims = "host.name,kubernetes.namespace"
    ident = Identity("in", "x", "out", "y", "ERROR", (("--group-by", dims),
                                                      ("--max-series", str(SERIES))))
    state = StageState(ident, {0: 0}, Totals(),
                       series=SeriesTotals(("name", "namespace"), SERIES))
    stage = _stage(state, LineFormat.from_flags(json_line_field="message", group_by=dims))
    rng = random.Random(1)
    spent = _spent()
    for b in range(batches):
        rows: list[Any] = [_create_row(FLEET_FIELDS, [None, None, m0 + m, *[None] * 4, *s,
                                                      rng.randrange(1, 20), None])
                           for m in range(1440) for s in rng.sample(FLEET, 49)]
        ms = _steps(state, stage, rows, OffsetRange(0, b * 10**6, (b + 1) * 10**6), 2, m0 + 2000)
        _keep(spent, ms)
    out = _medians(spent, 1)
    out["cells"] = len(rows)
    return out


PLAIN_FIELDS = ["p", "minute", "mi", "bad_offset", "reason", "raw", "len", "n", "rn"]
REPLAY_MINUTES = 1_250  # distinct ERROR minutes in 20,000 lines of data.generate's day


def measure_ungrouped(batches: int = 120, warm: int = 20) -> dict[str, float]:
    """The same steps for ungrouped batches of REPLAY_MINUTES of a day's minutes each."""
    ident = Identity("in", "x", "out", "y", "ERROR", ())
    state = StageState(ident, {0: 0}, Totals())
    stage = _stage(state, LineFormat.from_flags())
    day = [minute_label(minute_index("2017-07-30 00:00") + m)[:16].encode() for m in range(1440)]
    rng = random.Random(1)
    spent = _spent()
    for b in range(batches):
        rows: list[Any] = [_create_row(PLAIN_FIELDS, [None, bytearray(m), *[None] * 5,
                                                      rng.randrange(1, 6), None])
                           for m in rng.sample(day, REPLAY_MINUTES)]
        rows.append(_create_row(PLAIN_FIELDS, [None] * 7 + [16_900, None]))  # other levels
        ms = _steps(state, stage, rows, OffsetRange(0, b * 20_000, (b + 1) * 20_000), 0,
                    minute_index("2017-07-31 00:00"))
        if b >= warm:
            _keep(spent, ms)
    return _medians(spent, 2)


if __name__ == "__main__":
    if sys.argv[1:2] == ["filebeat"]:
        print(measure_backlog(*[int(a) for a in sys.argv[2:]]))
    elif sys.argv[1:2] == ["ungrouped"]:
        print(measure_ungrouped(*[int(a) for a in sys.argv[2:]]))
    else:
        print(measure(*[int(a) for a in sys.argv[1:]]))
