"""docker/compose.yaml cannot rot silently: every command and variable must fit the CLI.

The docker tier (tests/docker) runs the demo itself; these checks are the fast ones that keep the
file in step with the CLI, the image and the CI override without a Docker engine.
"""

from __future__ import annotations

import re
import tempfile
from pathlib import Path

import pytest
import yaml

from core import settings as st
from logcount.cli import build_parser

pytestmark = pytest.mark.unit
ROOT = Path(__file__).resolve().parents[2]
COMPOSE = yaml.safe_load((ROOT / "docker" / "compose.yaml").read_text())
SERVICES = COMPOSE["services"]
CI = yaml.safe_load((ROOT / "docker" / "compose.ci.yaml").read_text())["services"]
CLASSES = {"run": st.RunSettings, "sink": st.SinkSettings, "produce": st.ProduceSettings}


def _logcount_services():
    for name, svc in SERVICES.items():
        if svc.get("image") == "logcount:dev" and "entrypoint" not in svc:
            yield name, svc


def _settings(svc):
    # Paths inside the container (the demo volume) are checked on this machine's temp folder.
    demo_dir = str(Path(SERVICES["generator"]["command"][-1]).parent)
    command = [c.replace(demo_dir, tempfile.gettempdir()) for c in svc["command"]]
    args = build_parser().parse_args(command)
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
    assert "jvm/fetch.sh jvm/spark-kafka" in dockerfile and "LOGCOUNT_JARS_DIR" in dockerfile
    # Every package pyproject.toml installs is in the image.
    include = re.search(r"include = \[(.*?)\]", pyproject).group(1)
    for package in re.findall(r'"(\w+)\*"', include):
        assert f"COPY {package} {package}" in dockerfile, package


def test_the_ci_override_changes_images_only():
    """The file users run is the one CI runs: the override may name other images (never the
    public names) and build them, and nothing else."""
    for name, svc in CI.items():
        assert name in SERVICES, name
        assert set(svc) <= {"image", "build"}, (name, set(svc))
        if "image" in svc:
            assert svc["image"].startswith("logcount-ci/"), svc["image"]
        if "build" in svc and "args" in svc["build"]:
            assert svc["build"]["args"]["BASE"].startswith("logcount-ci/debian:bookworm")
    for name, svc in SERVICES.items():
        if "build" in svc:
            assert name in CI and "build" in CI[name], f"{name} would build on Docker Hub's base"
        elif svc["image"] in (SERVICES["kafka"]["image"], SERVICES["mysql"]["image"]):
            assert CI[name]["image"].startswith("logcount-ci/"), name


def test_the_kafka_stand_in_is_the_release_the_project_tests_against():
    pom = (ROOT / "jvm" / "kafka-broker" / "pom.xml").read_text()
    version = re.search(r"<kafka.version>([^<]+)</kafka.version>", pom)
    version = version.group(1) if version else re.search(
        r"<artifactId>kafka_2\.13</artifactId>\s*<version>([^<]+)</version>", pom).group(1)
    assert SERVICES["kafka"]["image"] == f"apache/kafka:{version}"
    assert CI["kafka"]["image"] == f"logcount-ci/kafka:{version}"


def test_no_race_is_left_to_luck():
    """Every service others wait on has a healthcheck with a start period; the long-running
    logcount services restart on failure (a safety net: they wait for what they need)."""
    for name in ("kafka", "mysql", "stage", "sink"):
        hc = SERVICES[name]["healthcheck"]
        assert "start_period" in hc, name
    for name in ("stage", "sink", "spark-master", "spark-worker"):
        assert SERVICES[name]["restart"] == "on-failure", name
    assert SERVICES["sink"]["depends_on"]["mysql"] == {"condition": "service_healthy"}
    _, sink, _ = _settings(SERVICES["sink"])
    assert sink.startup_timeout >= 120  # long enough for the stage to create its topic


def test_the_check_reads_the_expectation_the_generator_writes():
    gen = SERVICES["generator"]
    expect = gen["command"][gen["command"].index("--expect") + 1]
    check = SERVICES["check"]
    assert check["entrypoint"][check["entrypoint"].index("--expect") + 1] == expect
    volume = lambda svc: {v.split(":")[0]: v.split(":")[1] for v in svc["volumes"]}  # noqa: E731
    assert volume(gen) == {"demo": str(Path(expect).parent)}
    assert volume(check) == {"demo": str(Path(expect).parent)}
    assert check["profiles"] == ["check"]  # not started by `up`
