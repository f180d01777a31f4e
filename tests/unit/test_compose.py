"""docker/compose.yaml cannot rot silently: every command and variable must fit the CLI.

No Docker engine runs on our machines, so the compose demo is not started here; this test is
what keeps it in step with the CLI and docs/contract.md.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from core import settings as st
from logcount.cli import build_parser

pytestmark = pytest.mark.unit
ROOT = Path(__file__).resolve().parents[2]
COMPOSE = yaml.safe_load((ROOT / "docker" / "compose.yaml").read_text())
SERVICES = COMPOSE["services"]
CLASSES = {"run": st.RunSettings, "sink": st.SinkSettings, "produce": st.ProduceSettings}


def _logcount_services():
    for name, svc in SERVICES.items():
        if svc.get("image") == "logcount:dev" and "entrypoint" not in svc:
            yield name, svc


def _settings(svc):
    args = build_parser().parse_args(svc["command"])
    env = {k: str(v) for k, v in (svc.get("environment") or {}).items()}
    return args.command, st.from_namespace(CLASSES[args.command], args, env), env


def test_the_services_the_demo_needs_are_there():
    assert SERVICES["kafka"]["image"].startswith("apache/kafka:4")
    assert SERVICES["mysql"]["image"].startswith("mysql:8")
    assert {"spark-master", "spark-worker", "stage", "sink", "generator", "reader"} <= set(SERVICES)
    assert {name for name, _ in _logcount_services()} == {"stage", "sink", "generator"}


@pytest.mark.parametrize("name", ["stage", "sink", "generator"])
def test_every_logcount_command_parses_and_every_variable_is_known(name):
    svc = SERVICES[name]
    command, s, env = _settings(svc)
    known = {st.ENV_PREFIX + f.upper() for f in s.__dataclass_fields__} | set(st.EXTRA_ENV)
    unknown = {k for k in env if k.startswith(st.ENV_PREFIX)} - known
    assert not unknown, f"{name}: variables the CLI does not read: {unknown}"
    advertised = SERVICES["kafka"]["environment"]["KAFKA_ADVERTISED_LISTENERS"]
    assert f"//{s.bootstrap_servers}" in advertised


def test_the_services_agree_with_each_other():
    _, stage, stage_env = _settings(SERVICES["stage"])
    _, sink, _ = _settings(SERVICES["sink"])
    _, gen, _ = _settings(SERVICES["generator"])
    assert gen.topic == stage.input_topic
    assert sink.topic == stage.output_topic
    mysql_env = SERVICES["mysql"]["environment"]
    url = sink.mysql
    assert (url.host, url.password, url.database) == (
        "mysql", mysql_env["MYSQL_ROOT_PASSWORD"], mysql_env["MYSQL_DATABASE"])
    master = SERVICES["spark-master"]["command"]
    port = master[master.index("--port") + 1]
    host = master[master.index("--host") + 1]
    assert stage.master == f"spark://{host}:{port}"
    assert SERVICES["spark-worker"]["command"][1] == stage.master
    assert stage_env["LOGCOUNT_SPARK_DRIVER_HOST"] == SERVICES["stage"]["hostname"]
    assert f"{stage.metrics_port}:{stage.metrics_port}" in SERVICES["stage"]["ports"]
    assert f"{sink.metrics_port}:{sink.metrics_port}" in SERVICES["sink"]["ports"]


def test_the_image_bakes_the_connector_at_the_pinned_pyspark_version():
    dockerfile = (ROOT / "docker" / "Dockerfile").read_text()
    pyproject = (ROOT / "pyproject.toml").read_text()
    assert re.search(r'"pyspark==[0-9.]+"', pyproject)
    assert 's/.*"pyspark==\\([0-9.]*\\)".*/\\1/p' in dockerfile
    assert "jvm/spark-kafka/pom.xml" in dockerfile and "LOGCOUNT_JARS_DIR" in dockerfile
    for package in ("logcount", "pipeline", "connectors"):
        assert f"COPY {package} {package}" in dockerfile
