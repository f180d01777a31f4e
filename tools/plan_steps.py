"""What building a batch's plan costs, step by step (docs/tuning.md#plan-steps): one local[1]
session, ten rows, the stage's batch frame built N times for a format ungrouped and grouped by
the record key; medians in ms (the first third left out: the JIT's warm-up) of line_frame (its
selects, each a DataFrame analysed whole, eagerly), the aggregation, the last step (the dimension
cut and rn), and optimising plus physical planning. Needs no broker.

    python -m tools.plan_steps [N]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

from logcount.formats import spark as sp
from logcount.formats.spec import LineFormat
from logcount.pipeline import job
from logcount.pipeline.spark import spark_session


def main(n: int) -> None:
    from pyspark import SparkContext

    spark = spark_session("local[1]", "plan-steps")
    df = spark.createDataFrame([(0, i, b"2017-07-30 14:09:08 ERROR x", b"k") for i in range(10)],
                               "partition int, offset long, value binary, key binary")
    context = SparkContext._active_spark_context
    for group_by in (None, "key"):
        fmt = LineFormat.from_flags(group_by=group_by)
        c = job._plan_columns(context, fmt, None, None)
        spent: dict[str, list[float]] = {"line_frame": [], "aggregate": [], "last step": [],
                                         "optimise + physical": []}
        for _ in range(n):
            t = [time.perf_counter()]
            lf = sp.line_frame(df, fmt, cut=False)
            t.append(time.perf_counter())
            agg = lf.groupBy(*c.keys).agg(c.n)
            t.append(time.perf_counter())
            frame = sp.cut_dims(agg, len(fmt.group_by), rn=c.keep)
            t.append(time.perf_counter())
            qe = frame._jdf.queryExecution()
            qe.optimizedPlan()
            qe.executedPlan()
            t.append(time.perf_counter())
            for v, a, b in zip(spent.values(), t, t[1:], strict=False):
                v.append(b - a)
        rule = sp._stages(context, fmt)
        steps = len(rule.stages) if rule.lateral is None else 2
        print(json.dumps({"group_by": group_by, "selects": steps, "median_ms": {
            k: round(statistics.median(v[n // 3:]) * 1000, 2) for k, v in spent.items()}}))
    spark.stop()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("n", nargs="?", type=int, default=300, help="frames built per format")
    main(parser.parse_args().n)
