"""What the grouped Filebeat job's Spark side costs (docs/tuning.md#dimension-parse): one local[2]
session, N generated Filebeat records with the fleet cached in memory, `batch_frame(...)` run 3
times per variant, two rounds interleaved: ungrouped, grouped by host.name,kubernetes.namespace
with this checkout's parse, with BASE's (`--base DIR`: another checkout's
logcount/formats/spark.py `_dims`), and both again run without collect (Spark's noop sink), which
leaves out the rows' trip to Python. Needs no broker. With `--forms`, cheaper forms of the
dimensions' columns that do NOT keep the contract's rules, timed without collect to show what the
rules cost (docs/tuning.md#dimension-parse): `two` (the literal key's text, else the dotted path's:
no type check, no cut), `two+case` (the same and one trivial CASE on each value) and `text` (the
text of both lookups, typed only where it starts with `{` or `[`, cut to 255 bytes) and
`no-check` (today's values, without the object-or-array check).

    python -m tools.dim_parse [N] [--base DIR] [--forms]
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


def _texts(plan, fmt, j) -> dict:
    from pyspark.sql import functions as F

    return plan.let(**{f"ds{i}": F.coalesce(*(F.try_variant_get(j, p, "string")
                                               for p in sp.field_paths(d.source)))
                       for i, d in enumerate(fmt.group_by)})


def _two(plan, fmt, reason, level, groups, j=None):
    from pyspark.sql import functions as F

    c = _texts(plan, fmt, j)
    return reason, [F.coalesce(c[f"ds{i}"], F.lit("")) for i in range(len(fmt.group_by))]


def _two_case(plan, fmt, reason, level, groups, j=None):
    from pyspark.sql import functions as F

    c = _texts(plan, fmt, j)
    v = [F.coalesce(c[f"ds{i}"], F.lit("")) for i in range(len(fmt.group_by))]
    n = sp.DIM_MAX_BYTES
    c = plan.let(**{f"dc{i}": F.when(F.octet_length(x) <= n, x).otherwise(F.lit("LONG"))
                    for i, x in enumerate(v)})
    return reason, [c[f"dc{i}"] for i in range(len(v))]


def _text(plan, fmt, reason, level, groups, j=None):
    from pyspark.sql import functions as F

    c = _texts(plan, fmt, j)
    invalid = F.lit(False)
    for i, d in enumerate(fmt.group_by):
        s = c[f"ds{i}"]
        t = F.schema_of_variant(sp._field(j, d.source))
        bad = (s.startswith("{") | s.startswith("[")) & (t.startswith("OBJECT")
                                                         | t.startswith("ARRAY"))
        invalid = invalid | F.coalesce(bad, F.lit(False))
    c = plan.let(**{f"dc{i}": sp._cut(F.coalesce(c[f"ds{i}"], F.lit("")))
                    for i in range(len(fmt.group_by))})
    r = plan.let(r0=reason)["r0"]
    reason = F.when(r.isNull() & invalid, F.lit(sp.REASON_DIMENSION)).otherwise(r)
    return reason, [c[f"dc{i}"] for i in range(len(fmt.group_by))]


def _no_check(plan, fmt, reason, level, groups, j=None):
    """Today's values without the object-or-array check: what the check costs."""
    from pyspark.sql import functions as F

    return reason, [F.left(F.coalesce(*(F.try_variant_get(j, p, "string")
                                         for p in sp.field_paths(d.source)), F.lit("")),
                           F.lit(sp.DIM_MAX_BYTES + 1)) for d in fmt.group_by]


FORMS = {"two": _two, "two+case": _two_case, "text": _text, "no-check": _no_check}


def main(n: int, base: str | None, forms: bool = False) -> None:
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
    if forms:
        variants.update({f"grouped, {k}, no collect": (grouped, f, False)
                         for k, f in FORMS.items()})
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
    parser.add_argument("--forms", action="store_true",
                        help="also time the cheaper forms that break the rules (docstring)")
    args = parser.parse_args()
    main(args.n, args.base, args.forms)
