"""The stage on a real Spark standalone cluster (master + two workers from the pyspark wheel)."""

from __future__ import annotations

import json
import urllib.request

import pytest

from connectors import stack
from tests.helpers import cli, sink_args, stage_args
from tests.integration.input_builder import build_input
from tests.integration.test_stage import assert_exact

pytestmark = pytest.mark.integration


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
    assert_exact(endpoints, names, inp, mysql_db)
    done = [a for a in _master_state().get("completedapps", []) if a["id"] not in apps_before]
    assert len(done) == 1 and done[0]["name"] == "logcount", "the job must have run on the cluster"
    assert done[0]["cores"] == 2, "both workers' cores must have served the job"
