"""`logcount demo`: the whole road on the embedded stack, then the table and the verdict."""

from __future__ import annotations

import logging
import uuid

import pymysql

from logcount.connectors import stack
from logcount.connectors.mysql_sink import run_sink
from logcount.connectors.produce import keyed_values, produce_lines, synthetic_values
from logcount.connectors.sink_store import read_series, read_table
from logcount.core.settings import DemoSettings, MySQLUrl, RunSettings, SinkSettings
from logcount.core.settings.commands import DEMO_SHAPE
from logcount.formats.rule import minute_label
from logcount.formats.shapes import SeriesCounts, synthetic_records
from logcount.formats.spec import ALL_LEVELS
from logcount.pipeline.demo_check import report, report_series
from logcount.pipeline.wiring import run_stage

log = logging.getLogger("logcount.demo")

# The demo's own database, recreated on every run, so the table it shows holds this run only.
DEMO_DATABASE = "logcount_demo"


def run_demo(s: DemoSettings) -> int:
    stack.up(spark_cluster=s.master.startswith("spark://"), log=log.info)
    run_id = uuid.uuid4().hex[:8]
    topics = {k: f"demo-{run_id}-{k}" for k in ("logs", "counts", "dlq")}
    url = MySQLUrl("root", "", stack.HOST, stack.MYSQL_PORT, DEMO_DATABASE)
    conn = pymysql.connect(host=url.host, port=url.port, user=url.user, autocommit=True)
    with conn.cursor() as cur:
        cur.execute(f"DROP DATABASE IF EXISTS {DEMO_DATABASE}")
        cur.execute(f"CREATE DATABASE {DEMO_DATABASE}")
    conn.close()

    if s.group_by:
        return _grouped(s, topics, url, run_id)
    if s.emit_final:
        from logcount.pipeline.demo_final import run_final_demo
        return run_final_demo(s, topics, run_id, url)
    print(f"demo: producing {s.lines} synthetic lines (seed {s.seed}) to {topics['logs']}")
    expected: dict[str, int] = {}
    values = synthetic_values(synthetic_records("seed", s.lines, s.seed), ("ERROR",), expected)
    n = produce_lines(stack.BOOTSTRAP, topics["logs"], values)
    print(f"demo: running the stage once ({s.master}): {topics['logs']} -> {topics['counts']}")
    run_stage(RunSettings(once=True, input_topic=topics["logs"], output_topic=topics["counts"],
                          dlq_topic=topics["dlq"], group_id=f"demo-{run_id}",
                          transactional_id=f"demo-{run_id}", master=s.master))
    print(f"demo: running the sink once: {topics['counts']} -> MySQL {url!r} error_log")
    run_sink(SinkSettings(once=True, topic=topics["counts"], group_id=f"demo-sink-{run_id}",
                          mysql_url=repr(url)))
    table = read_table(url)

    return 0 if report(table, expected, f"known from how the {n} lines were generated") else 1



def _grouped(s: DemoSettings, topics: dict[str, str], url: MySQLUrl, run_id: str) -> int:
    """The demo with --group-by: a fleet's Filebeat records, counted per series into their own
    table, checked against what the generator wrote (with level among the dimensions: every
    level; else ERROR)."""
    dims = s.group_by_dims
    levels = (ALL_LEVELS,) if any(src == "level" for _, src in dims) else ("ERROR",)
    group_by = ",".join(f"{n}={src}" for n, src in dims)
    print(f"demo: producing {s.lines} synthetic Filebeat records of a fleet of services (seed "
          f"{s.seed}) to {topics['logs']}")
    series = SeriesCounts(dims, levels)
    records = synthetic_records(DEMO_SHAPE, s.lines, s.seed, dimensions=True)
    n = produce_lines(stack.BOOTSTRAP, topics["logs"], keyed_values(records, levels, {}, series))
    print(f"demo: running the stage once ({s.master}), --group-by {group_by} --level "
          f"{','.join(levels)}: {topics['logs']} -> {topics['counts']}")
    run_stage(RunSettings(once=True, input_topic=topics["logs"], output_topic=topics["counts"],
                          dlq_topic=topics["dlq"], group_id=f"demo-{run_id}",
                          transactional_id=f"demo-{run_id}", master=s.master,
                          json_line_field="message", level=",".join(levels),
                          group_by=group_by).validate())
    print(f"demo: running the sink once: {topics['counts']} -> MySQL {url!r} {s.table}")
    run_sink(SinkSettings(once=True, topic=topics["counts"], group_id=f"demo-sink-{run_id}",
                          mysql_url=repr(url), table=s.table))
    names = [name for name, _ in dims]
    expected = {(minute_label(m), *values): c for (m, values), c in series.counts.items()}
    ok = report_series(read_series(url, s.table, names), expected, s.table, names,
                       f"known from how the {n} records were generated")
    return 0 if ok else 1
