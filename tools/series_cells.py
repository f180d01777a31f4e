"""What (minute, series) totals cost the stage with --group-by (docs/tuning.md#series-cells):
memory, state-topic bytes, the driver's time per batch and the restore, with no broker.

    python -m tools.series_cells [SERIES] [MINUTES]

Each minute is one batch in which every series counts; the state records every batch writes are
kept as the compacted state topic would keep them (last value per key)."""

from __future__ import annotations

import sys
import time

from logcount.pipeline.hour_records import minute_index
from logcount.pipeline.offsets import OffsetRange
from logcount.pipeline.series import SeriesTotals
from logcount.pipeline.state import Identity, StageState, decode_series
from logcount.pipeline.totals import Totals


def measure(series: int, minutes: int) -> dict:
    m0 = minute_index("2024-05-01 00:00")
    names = ("service", "host")
    st = SeriesTotals(names, series)
    ident = Identity("in", "x", "out", "y", "ERROR",
                     (("--group-by", "service=a,host=b"), ("--max-series", str(series))))
    state = StageState(ident, {0: 0}, Totals(), series=st)
    table: dict[bytes, bytes] = {}
    spent = cpu = 0.0
    written = 0
    for m in range(minutes):
        counts: dict[tuple[str, ...], dict[int, int]] = {
            (f"svc-{i % 50}", f"host-{i:05d}"): {m0 + m: 1 + i % 7} for i in range(series)}
        t, c = time.perf_counter(), time.process_time()
        change = state.change([OffsetRange(0, m, m + 1)],
                              {m0 + m: sum(c[m0 + m] for c in counts.values())},
                              m0 + minutes, series=counts)
        state.advance(change)
        spent += time.perf_counter() - t
        cpu += time.process_time() - c
        table.update({k: v for k, v in change.state_records if v is not None})
        written += sum(len(k) + len(v or b"") for k, v in change.state_records)
    t = time.perf_counter()
    rec = decode_series(table)
    again = SeriesTotals.restore(names, series, rec.names, rec.cells.items(), rec.chunks.items())
    restore_s = time.perf_counter() - t
    assert len(again) == series * minutes
    cells = {k: v for k, v in table.items() if k != b"progress"}
    return {"cells": len(again), "totals_mib": round(st.nbytes / 2**20, 1),
            "per_batch_ms": round(spent / minutes * 1000),
            "per_batch_cpu_ms": round(cpu / minutes * 1000),
            "written_mib_per_batch": round(written / minutes / 2**20, 2),
            "state_records": len(cells),
            "state_mib": round(sum(len(k) + len(v) for k, v in cells.items()) / 2**20, 1),
            "restore_s": round(restore_s, 2)}


if __name__ == "__main__":
    args = [int(a) for a in sys.argv[1:]]
    print(measure(*(args or [10_000, 100])))
