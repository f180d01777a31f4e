"""The stage on a real Spark standalone cluster (master + two workers from the pyspark wheel)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from logcount.connectors import stack
from logcount.core.paths import jars_dir
from tests.support.exact import assert_exact
from tests.support.inputs import build_input
from tests.support.run import ROOT, cli, sink_args, stage_args


@pytest.fixture(scope="module")
def spark_cluster():
    spark = [s for s in stack.services(spark_cluster=True) if s.name.startswith("spark")]
    was_up = all(s.pid() is not None for s in spark)
    for s in spark:
        s.up(log=lambda line: None)
    yield stack.SPARK_MASTER_URL
    if not was_up:
        for s in reversed(spark):
            s.down(log=lambda line: None)
        # Nothing may outlive the test: a leaked master would hold port 7077 for the next run.
        assert not any(s.pid() for s in spark)
        assert not stack.port_open(stack.SPARK_MASTER_PORT)


def _master_state() -> dict:
    with urllib.request.urlopen(f"http://{stack.HOST}:8080/json/", timeout=5) as resp:
        return json.load(resp)


def test_stage_on_a_standalone_cluster_is_exact(endpoints, names, mysql_db, spark_cluster):
    state = _master_state()
    assert len([w for w in state["workers"] if w["state"] == "ALIVE"]) == 2
    apps_before = {a["id"] for a in state.get("completedapps", [])}
    inp = build_input(endpoints.bootstrap, names.topic("in"), names.txn_id + "-producer")
    # The last --master wins: this run's executors are the cluster's workers.
    proc = cli(*stage_args(endpoints, names, "--once", "--max-records-per-batch", "700",
                           "--master", spark_cluster))
    assert "batch 2 committed" in proc.stderr
    cli(*sink_args(endpoints, names, mysql_db, "--once"))
    assert_exact(endpoints.bootstrap, names, inp.expected, url=mysql_db,
                 malformed=inp.malformed, sink_at_end=True)
    done = [a for a in _master_state().get("completedapps", []) if a["id"] not in apps_before]
    assert len(done) == 1 and done[0]["name"] == "logcount", "the job must have run on the cluster"
    assert done[0]["cores"] == 2, "both workers' cores must have served the job"


def spark_submit(master: str, *args: str, jars: bool = True) -> subprocess.CompletedProcess:
    """The stage as a Spark application: `spark-submit ... logcount/__main__.py run ...`, as
    docs/deploy.md shows it."""
    connector = ",".join(str(p) for p in sorted((jars_dir() / "spark-kafka").glob("*.jar")))
    python = sys.executable
    cmd = [str(Path(python).parent / "spark-submit"), "--master", master,
           "--conf", "spark.driver.host=127.0.0.1",
           *(["--jars", connector] if jars else []),
           str(ROOT / "logcount" / "__main__.py"), *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=ROOT,
                          env={**os.environ, "PYSPARK_PYTHON": python,
                               "PYSPARK_DRIVER_PYTHON": python})


def test_spark_submit_runs_the_stage_on_the_cluster_exactly(endpoints, names, mysql_db,
                                                           spark_cluster):
    apps_before = {a["id"] for a in _master_state().get("completedapps", [])}
    inp = build_input(endpoints.bootstrap, names.topic("in"), names.txn_id + "-producer")
    # spark-submit's master and jars win: --master local[2] from stage_args is ignored.
    proc = spark_submit(spark_cluster, *stage_args(endpoints, names, "--once",
                                                   "--max-records-per-batch", "900"))
    out = proc.stdout + proc.stderr  # spark-submit passes the Python driver's stderr on stdout
    assert proc.returncode == 0, out[-4000:]
    assert "(from spark-submit)" in out and "batch 2 committed" in out
    cli(*sink_args(endpoints, names, mysql_db, "--once"))
    assert_exact(endpoints.bootstrap, names, inp.expected, url=mysql_db,
                 malformed=inp.malformed, sink_at_end=True)
    done = [a for a in _master_state().get("completedapps", []) if a["id"] not in apps_before]
    assert len(done) == 1 and done[0]["name"] == "logcount"


def test_spark_submit_without_the_connector_is_one_line(endpoints, names, spark_cluster):
    proc = spark_submit(spark_cluster, *stage_args(endpoints, names, "--once"), jars=False)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out[-3000:]
    errors = [ln for ln in out.splitlines() if ln.startswith("logcount: error:")]
    assert len(errors) == 1 and "--packages org.apache.spark:spark-sql-kafka" in errors[0], out
    assert "Traceback" not in out
