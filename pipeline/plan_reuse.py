"""A batch's analysed Spark plan, kept and run again with only its Kafka offsets replaced.

Building a batch's DataFrame makes Spark analyse every step of it, eagerly, through py4j: about a
quarter of a caught-up batch's cost, the same for every batch of a run. What changes from one batch
to the next is only spark-sql-kafka's three offset options (which partitions, from where, to
where). So the first batch of each plan shape keeps its analysed plan; a later one copies the
plan's Kafka relation with its own offsets, swaps it in (Spark's own `transformDown`, the rest of
the tree shared) and runs that: Spark optimises and plans it as a new query, and spark-sql-kafka
reads the options when it plans the scan, as for a plan built anew.

The plan's other inputs are its key: the format, bound, horizon and task count (the caller's), the
reader's other options, the session and its Kafka source kind (V1 or V2). Any other session
setting that changes analysis must not change within a run; the stage sets its own once, at
start (pipeline/spark.py). Figures: docs/tuning.md#plan-reuse
"""

from __future__ import annotations

import functools
import logging
from collections import OrderedDict
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass
from typing import Any

from logcount.pipeline.spark import V1_SOURCES_DEFAULT, V1_SOURCES_KEY

log = logging.getLogger(__name__)

# What differs between two batches of one plan shape: spark-sql-kafka reads them when it plans
# the scan, from the relation's options.
OFFSET_OPTIONS = ("assign", "startingOffsets", "endingOffsets")
# A shape's plan is kept per (format, bound, horizon, tasks): a new horizon every minute makes the
# old one's plan useless; a few more cover a first batch's and a backlog's shapes.
KEPT_PLANS = 16
_V2_RELATION = "org.apache.spark.sql.execution.datasources.v2.DataSourceV2Relation"
_OPTIONS_CLASS = "org.apache.spark.sql.util.CaseInsensitiveStringMap"

# Off: every batch builds its plan anew (python -m tools.cycle --fresh-plans, tests).
enabled = True


@dataclass(frozen=True)
class _Kept:
    """One shape's analysed plan and what replacing its relation takes (JVM objects)."""
    plan: Any  # the analysed plan, its nodes marked analysed
    relation: Any  # its one Kafka relation (DataSourceV2Relation)
    args: Any  # the relation's constructor arguments, an Object[]
    slot: int  # the options' index in args
    options: Any  # the relation's options as they were given (a java.util.Map)
    swap: Any  # a java.util.HashMap {relation: its copy}, seen by Spark as a PartialFunction
    rule: Any  # swap as a Scala Map: transformDown's rule
    frame_type: type  # the DataFrame class pyspark made the first frame with
    # The JVM classes a replay uses, looked up once: py4j resolves a name like
    # jvm.org.apache.spark... with a round trip per dot.
    hash_map: Any
    arrays: Any
    options_class: Any
    dataset: Any


_kept: OrderedDict[Hashable, _Kept | None] = OrderedDict()


def frame(spark, shape: Hashable, options: Mapping[str, str], build: Callable[[], object]):
    """The batch's DataFrame: what `build()` returns for the reader `options`, built anew the
    first time for `shape` and from the kept plan after that (see the module's doc)."""
    from py4j.protocol import Py4JError

    if not enabled:
        return build()
    fixed = tuple(sorted((k, v) for k, v in options.items() if k not in OFFSET_OPTIONS))
    key = (spark.sparkContext, shape, fixed, spark.conf.get(V1_SOURCES_KEY, V1_SOURCES_DEFAULT))
    if key in _kept:
        _kept.move_to_end(key)
        kept = _kept[key]
        if kept is None:
            return build()
        try:
            return _replayed(spark, kept, options)
        except Py4JError as exc:  # this Spark's plan classes differ: build as before, say so once
            log.warning("this shape's batch plans are built anew from here on (its kept plan "
                        "is not reusable: %s)", str(exc).splitlines()[0][:200])
            _kept[key] = None
            return build()
    built = build()
    try:
        _kept[key] = _keep(spark, built)
    except Py4JError as exc:
        log.warning("batch plans of this shape are built anew (%s)", str(exc).splitlines()[0][:200])
        _kept[key] = None
    while len(_kept) > KEPT_PLANS:
        _kept.popitem(last=False)
    return built


def _keep(spark, built) -> _Kept | None:
    """What reusing `built`'s analysed plan takes, or None when it has no single V2 Kafka
    relation (the V1 source keeps its offsets elsewhere)."""
    jvm = spark.sparkContext._jvm
    plan = built._jdf.queryExecution().analyzed()
    leaves = plan.collectLeaves()
    if leaves.size() != 1 or leaves.apply(0).getClass().getName() != _V2_RELATION:
        return None
    relation = leaves.apply(0)
    values = []
    it = relation.productIterator()
    while it.hasNext():
        values.append(it.next())
    slots = [i for i, v in enumerate(values)  # py4j gives the JVM's strings and numbers as Python's
             if hasattr(v, "getClass") and v.getClass().getName() == _OPTIONS_CLASS]
    if len(slots) != 1:
        return None
    args = spark.sparkContext._gateway.new_array(jvm.java.lang.Object, len(values))
    for i, v in enumerate(values):
        args[i] = v
    hash_map = jvm.java.util.HashMap
    swap = hash_map()
    return _Kept(plan, relation, args, slots[0], values[slots[0]].asCaseSensitiveMap(), swap,
                 jvm.scala.jdk.javaapi.CollectionConverters.asScala(swap), type(built),
                 hash_map, jvm.java.util.Arrays, _class(jvm, _OPTIONS_CLASS),
                 _class(jvm, "org.apache.spark.sql.classic.Dataset"))


def _class(jvm, name: str):
    return functools.reduce(getattr, name.split("."), jvm)


def _replayed(spark, kept: _Kept, options: Mapping[str, str]):
    given = kept.hash_map(kept.options)
    for name in OFFSET_OPTIONS:
        given.put(name, options[name])
    args = kept.arrays.copyOf(kept.args, len(kept.args))
    args[kept.slot] = kept.options_class(given)
    kept.swap.put(kept.relation, kept.relation.makeCopy(args))
    plan = kept.plan.transformDown(kept.rule)
    # Only the relation's options differ from a plan Spark analysed and checked: skip doing it
    # again (a new query's Analyzer returns a plan marked analysed as it is).
    plan.setAnalyzed()
    jdf = kept.dataset.ofRows(spark._jsparkSession, plan)
    return kept.frame_type(jdf, spark)
