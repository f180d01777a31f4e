"""The stage on the older Spark lines it supports (docs/deploy.md, Support matrix): pyspark
4.0.0 and 4.1.1, each in a venv of its own, with that version's connector jars. Opt-in: run with
`pytest tests/compat` or LOGCOUNT_COMPAT=1 (tests/conftest.py); CI's run has one Spark."""

from __future__ import annotations

import subprocess

import pytest

from tests.support.compat import CompatEnv, compat_env
from tests.support.exact import assert_exact
from tests.support.inputs import build_input
from tests.support.run import stage_args

VERSIONS = ("4.0.0", "4.1.1")


@pytest.fixture(scope="module", params=VERSIONS)
def spark_line(request, tmp_path_factory) -> CompatEnv:
    env = compat_env(request.param, tmp_path_factory.mktemp(f"compat-{request.param}"))
    # Installing logcount kept the venv's pyspark: the requirement is a range, not a pin.
    assert env.installed_pyspark() == request.param
    return env


def _exact_once(cmd: list[str], spark_line: CompatEnv, endpoints, names, tmp_path) -> str:
    inp = build_input(endpoints.bootstrap, names.topic("in"), names.txn_id + "-producer")
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=tmp_path,
                          env=spark_line.env(tmp_path))
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    assert "batch 2 committed" in out, out[-4000:]
    assert f"Spark {spark_line.version} session on" in out, out[-4000:]
    assert_exact(endpoints.bootstrap, names, inp.expected, malformed=inp.malformed)
    return out


def test_run_once_is_exact(spark_line, endpoints, names, tmp_path):
    """`logcount run --once` with the stage's own session, on this pyspark's JVM."""
    _exact_once([spark_line.bin("logcount"), *stage_args(
        endpoints, names, "--once", "--max-records-per-batch", "700")],
        spark_line, endpoints, names, tmp_path)


def test_spark_submit_once_is_exact(spark_line, endpoints, names, tmp_path):
    """Under this version's spark-submit with its connector jars, as a cluster runs it."""
    jars = ",".join(str(p) for p in sorted((spark_line.jars / "spark-kafka").glob("*.jar")))
    out = _exact_once([spark_line.bin("spark-submit"), "--master", "local[2]",
                       "--conf", "spark.driver.host=127.0.0.1", "--jars", jars,
                       spark_line.main_script(), *stage_args(
                           endpoints, names, "--once", "--max-records-per-batch", "900")],
                      spark_line, endpoints, names, tmp_path)
    assert "(from spark-submit)" in out
