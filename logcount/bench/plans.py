"""Every bench shape's ungrouped batch plan, for comparing two checkouts: one local[1] session,
50 generated records a shape, `batch_frame`'s optimised logical plan (expression ids blanked) and
a digest of its collected rows, written to OUT. Run it in each checkout and diff the files: equal
files mean the change left every ungrouped plan, and its result, as it was. Needs no broker.

    PYTHONPATH=CHECKOUT python -P -m logcount.bench.plans OUT
"""

from __future__ import annotations

import argparse
import hashlib
import re

from logcount.formats.catalogue import SHAPES, run_format
from logcount.formats.shapes import synthetic_records
from logcount.pipeline.job import MAX_MALFORMED_PER_BATCH, batch_frame
from logcount.pipeline.spark import spark_session


def main(out: str) -> None:
    spark = spark_session("local[1]", "plans")
    text = []
    for shape in SHAPES:
        fmt = run_format(shape)
        values = [r.value for r in synthetic_records(shape, 50, 1)]
        df = spark.createDataFrame([(i % 4, i, v, None) for i, v in enumerate(values)],
                                   "partition int, offset long, value binary, key binary")
        frame = batch_frame(df, fmt, MAX_MALFORMED_PER_BATCH)
        plan = re.sub(r"#\d+L?", "#", frame._jdf.queryExecution().optimizedPlan().toString())
        rows = sorted(map(str, frame.collect()))
        digest = hashlib.sha1("\n".join(rows).encode()).hexdigest()[:12]
        text.append(f"== {shape} ==\n{plan}\n-- {len(rows)} rows, digest {digest}")
    with open(out, "w") as f:
        f.write("\n".join(text) + "\n")
    spark.stop()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", help="the file to write")
    main(parser.parse_args().out)
