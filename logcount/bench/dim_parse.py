"""What the grouped Filebeat job's Spark side costs (docs/tuning.md#dimension-parse): one local[2]
session, N generated Filebeat records with the fleet cached in memory, `batch_frame(...)` run 3
times per variant, two rounds interleaved: ungrouped, grouped by host.name,kubernetes.namespace
with this checkout's parse, with BASE's (`--base DIR`: another checkout's
logcount/formats/spark.py `_dims`), and both again run without collect (Spark's noop sink), which
leaves out the rows' trip to Python. Needs no broker.

    python -m logcount.bench.dim_parse [N] [--base DIR]
"""

from __future__ import annotations

import argparse
import importlib.util
import time
from pathlib import Path

from logcount.formats import spark as sp
from logcount.formats.shapes import synthetic_records
from logcount.formats.spec import LineFormat
from logcount.pipeline.job import MAX_MALFORMED_PER_BATCH, batch_frame
from logcount.pipeline.spark import spark_session

GROUP_BY = "host.name,kubernetes.namespace"


def _base_dims(base: str):
    spec = importlib.util.spec_from_file_location(
        "base_spark", Path(base) / "logcount" / "formats" / "spark.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod._dims


def main(n: int, base: str | None) -> None:
    spark = spark_session("local[2]", "dim-parse")
    values = [r.value for r in synthetic_records("filebeat", n, 1, dimensions=True)]
    df = spark.createDataFrame([(i % 4, i, v) for i, v in enumerate(values)],
                               "partition int, offset long, value binary").cache()
    df.count()
    plain = LineFormat.from_flags(json_line_field="message")
    grouped = LineFormat.from_flags(json_line_field="message", group_by=GROUP_BY)
    ours = sp._dims
    variants = {"ungrouped": (plain, ours, True), "grouped": (grouped, ours, True),
                "ungrouped, no collect": (plain, ours, False),
                "grouped, no collect": (grouped, ours, False)}
    if base:
        variants["grouped, base's parse"] = (grouped, _base_dims(base), True)
    for rnd in range(2):
        for name, (fmt, dims, collect) in variants.items():
            sp._dims = dims
            sp._stages.cache_clear()
            spent, rows = [], 0
            for _ in range(3):
                t = time.perf_counter()
                frame = batch_frame(df, fmt, MAX_MALFORMED_PER_BATCH)
                if collect:
                    rows = len(frame.collect())
                else:
                    frame.write.format("noop").mode("overwrite").save()
                spent.append(time.perf_counter() - t)
            print(f"round {rnd}: {name}: {sorted(round(x, 2) for x in spent)} s, {rows} rows",
                  flush=True)
    sp._dims = ours
    spark.stop()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("n", nargs="?", type=int, default=300_000, help="records generated")
    parser.add_argument("--base", help="another checkout whose _dims is timed beside ours")
    args = parser.parse_args()
    main(args.n, args.base)
