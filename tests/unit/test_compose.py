"""docker/compose.yaml cannot rot silently: every command and variable must fit the CLI.

The docker tier (tests/docker) runs the demo itself; these checks are the fast ones that keep the
file in step with the CLI, the image and the CI override without a Docker engine.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import stat
import subprocess
import tempfile
import tomllib
from pathlib import Path

import pytest
import yaml

from logcount.cli import build_parser
from logcount.core import settings as st
from tests.support.ports import free_port

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = yaml.safe_load((ROOT / "docker" / "compose.yaml").read_text())
SERVICES = COMPOSE["services"]
CI = yaml.safe_load((ROOT / "docker" / "compose.ci.yaml").read_text())["services"]
CLASSES = {"run": st.RunSettings, "sink": st.SinkSettings, "produce": st.ProduceSettings}
SCRIPT = ROOT / "scripts" / "docker-demo.sh"
# A published port: on 127.0.0.1, at the host port the user's variable chooses, else (empty) one
# Docker finds free.
PORT_SPEC = re.compile(r"127\.0\.0\.1:\$\{(LOGCOUNT_DEMO_[A-Z_]+_PORT):-\}:(\d+)")


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
    assert {name for name, _ in _logcount_services()} == {
        "stage", "sink", "generator", "stage-final", "sink-final", "generator-final"}


@pytest.mark.parametrize("name", ["stage", "sink", "generator", "stage-final", "sink-final",
                                  "generator-final"])
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
    published = _published()
    assert published["stage"][1] == stage.metrics_port
    assert published["sink"][1] == sink.metrics_port
    assert published["spark-master"][1] == int(master[master.index("--webui-port") + 1])


def test_the_final_minutes_services_agree_with_each_other_and_the_first_stage():
    """The final stage has its own topics, group, transactional id and driver host on the same
    Spark master; its sink reads its final topic into its own table and group; the master lets
    the two stages share the worker's cores."""
    _, stage, stage_env = _settings(SERVICES["stage"])
    _, final, final_env = _settings(SERVICES["stage-final"])
    _, sink, _ = _settings(SERVICES["sink"])
    _, final_sink, _ = _settings(SERVICES["sink-final"])
    _, gen, _ = _settings(SERVICES["generator-final"])
    assert gen.topic == final.input_topic and gen.recent == 5
    assert final.grace_seconds == 60 and final.master == stage.master
    assert final_sink.topic == final.final_topic_name == f"{final.output_topic}-final"
    assert final_sink.table == "error_log_final" and final_sink.mysql == sink.mysql
    for field in ("input_topic", "output_topic", "dlq_topic", "group_id", "transactional_id"):
        assert getattr(final, field) != getattr(stage, field), field
    assert final_sink.group_id != sink.group_id
    assert final_env["LOGCOUNT_SPARK_DRIVER_HOST"] == SERVICES["stage-final"]["hostname"]
    assert stage_env["LOGCOUNT_SPARK_DRIVER_HOST"] != final_env["LOGCOUNT_SPARK_DRIVER_HOST"]
    cores = SERVICES["spark-worker"]["command"]
    per_app = SERVICES["spark-master"]["environment"]["SPARK_MASTER_OPTS"]
    assert per_app == "-Dspark.deploy.defaultCores=2"
    assert int(cores[cores.index("--cores") + 1]) >= 2 * 2  # both stages at once
    check = SERVICES["check-final"]
    gen_command = SERVICES["generator-final"]["command"]
    expect = gen_command[gen_command.index("--expect") + 1]
    assert check["entrypoint"][check["entrypoint"].index("--expect") + 1] == expect
    assert check["entrypoint"][check["entrypoint"].index("--final") + 1] == final_sink.table
    assert check["profiles"] == ["check"]


def _published() -> dict[str, tuple[str, int]]:
    """service: (the variable that chooses its host port, the container port)."""
    out = {}
    for name, svc in SERVICES.items():
        for spec in svc.get("ports", []):
            m = PORT_SPEC.fullmatch(str(spec))
            assert m, (f"{name} publishes {spec!r}: a fixed host port fails the demo on a machine "
                       "where anything listens there; publish 127.0.0.1:${LOGCOUNT_DEMO_..._PORT:-}"
                       ":PORT (empty: Docker picks a free one)")
            assert name not in out, f"{name}: one published port per service"
            out[name] = (m.group(1), int(m.group(2)))
    return out


def test_no_service_publishes_a_fixed_host_port():
    """Nothing in the demo needs a host port (the services talk over its own network): each
    one published is for the user, on 127.0.0.1, free unless the user's variable chooses it, and
    is the one the script prints and checks, and docs/user-guide.md names."""
    published = _published()
    assert set(published) == {"spark-master", "stage", "sink"}
    for name, svc in SERVICES.items():
        assert svc.get("network_mode") != "host", name
    script = {(svc, int(port), var) for svc, port, var in re.findall(
        r'^\s+"([\w-]+):(\d+):(LOGCOUNT_DEMO_\w+):', SCRIPT.read_text(), re.M)}
    assert script == {(name, port, var) for name, (var, port) in published.items()}
    guide = (ROOT / "docs" / "user-guide.md").read_text()
    for var, _ in published.values():
        assert var in guide, var
    # No override adds one back (compose files merge `ports` lists).
    assert not any("ports" in svc for svc in CI.values())


def test_the_image_bakes_the_connector_at_the_pyspark_it_installs():
    """constraints.txt names the one pyspark setup.sh and the image install; the image fetches
    its connector at that version and checks the pair once built."""
    dockerfile = (ROOT / "docker" / "Dockerfile").read_text()
    pyproject = (ROOT / "pyproject.toml").read_text()
    pins = re.findall(r"^pyspark==([0-9.]+)$", (ROOT / "constraints.txt").read_text(), re.M)
    assert len(pins) == 1
    assert "s/^pyspark==\\([0-9.]*\\)$/\\1/p' constraints.txt" in dockerfile
    assert "pip install --no-cache-dir -c constraints.txt -r" in dockerfile
    assert "-c constraints.txt -e" in (ROOT / "scripts" / "setup.sh").read_text()
    assert "jvm/fetch.sh jvm/spark-kafka" in dockerfile and "LOGCOUNT_JARS_DIR" in dockerfile
    assert "spark-sql-kafka-0-10_2.13-$(python3 -c" in dockerfile
    # The pin lies inside the range a cluster's Python may keep.
    from packaging.requirements import Requirement

    wanted = [Requirement(d) for d in tomllib.loads(pyproject)["project"]["dependencies"]]
    (spark,) = [r for r in wanted if r.name == "pyspark"]
    assert pins[0] in spark.specifier
    # Every package pyproject.toml installs is in the image.
    # Every folder pyproject.toml installs from is in the image (the one name's, and the mapped).
    setup = tomllib.loads(pyproject)["tool"]["setuptools"]
    folders = {"logcount", *setup["package-dir"].values()}
    for folder in folders:
        assert f"COPY {folder} /tmp/src/{folder}" in dockerfile, folder


def test_the_ci_override_changes_images_only():
    """The file users run is the one CI runs: the override may name other images (never the
    public names) and build them, and nothing else."""
    script = (ROOT / "scripts" / "docker-demo.sh").read_text()
    bases = dict(re.findall(r"^((?:MYSQL_)?BASE_CI)=(\S+)$", script, re.M))
    assert set(bases) == {"BASE_CI", "MYSQL_BASE_CI"}, bases
    for name, svc in CI.items():
        assert name in SERVICES, name
        assert set(svc) <= {"image", "build"}, (name, set(svc))
        if "image" in svc:
            assert svc["image"].startswith("logcount-ci/"), svc["image"]
        if "build" in svc and "args" in svc["build"]:
            # A base scripts/docker-demo.sh builds with mmdebstrap: MySQL's for mysql only.
            want = bases["MYSQL_BASE_CI" if name == "mysql" else "BASE_CI"]
            assert svc["build"]["args"]["BASE"] == want, (name, svc["build"])
    for name, svc in SERVICES.items():
        if "build" in svc:
            assert name in CI and "build" in CI[name], f"{name} would build on Docker Hub's base"
        elif svc["image"] in (SERVICES["kafka"]["image"], SERVICES["mysql"]["image"]):
            assert CI[name]["image"].startswith("logcount-ci/"), name


def test_the_kafka_stand_in_is_the_release_the_project_tests_against():
    pom = (ROOT / "jvm" / "kafka-broker" / "pom.xml").read_text()
    found = (re.search(r"<kafka.version>([^<]+)</kafka.version>", pom) or re.search(
        r"<artifactId>kafka_2\.13</artifactId>\s*<version>([^<]+)</version>", pom))
    assert found, "no kafka version in jvm/kafka-broker/pom.xml"
    version = found.group(1)
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


# --- scripts/docker-demo.sh's port checks, without Docker ------------------------------------
# The script runs from a copy (its state directory is then the copy's, never the real demo's),
# with stand-ins for every tool that would install or start something: if a check let it
# through, it stops at a stand-in, not at a real dockerd.
STUB = """#!/bin/sh
case "$*" in
  info*|"image inspect"*|"compose version"*) exit 0 ;;
  compose*" up "*) echo "$UP_ERROR" >&2; exit 1 ;;
  ps*) echo "${PS_PORTS:-}"; exit 0 ;;
  compose*) exit 0 ;;
esac
exit 97
"""


@pytest.fixture
def demo_copy(tmp_path):
    for rel in ("scripts/docker-demo.sh", "docker/compose.yaml", "docker/compose.ci.yaml"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / rel, tmp_path / rel)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("docker", "dockerd", "sudo", "apt-get", "go", "mmdebstrap"):
        (bin_dir / tool).write_text(STUB if tool == "docker" else "#!/bin/sh\nexit 97\n")
        (bin_dir / tool).chmod(stat.S_IRWXU)

    def run(*args, engine: bool = False, **env) -> subprocess.CompletedProcess:
        clean = {k: v for k, v in os.environ.items() if not k.startswith("LOGCOUNT_DEMO_")}
        path = f"{bin_dir}:{os.environ['PATH']}"
        if not engine:  # no engine answers: `docker info` fails as on a machine without one
            (bin_dir / "docker").write_text("#!/bin/sh\nexit 97\n")
        return subprocess.run([str(tmp_path / "scripts" / "docker-demo.sh"), *args],
                              env={**clean, "PATH": path, "LOGCOUNT_DOCKER_STANDINS": "0", **env},
                              capture_output=True, text=True, timeout=60)

    return run


@pytest.fixture
def held_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        yield s.getsockname()[1]


def test_a_chosen_port_that_is_taken_is_one_line_before_anything_starts(demo_copy, held_port):
    proc = demo_copy("up", LOGCOUNT_DEMO_SPARK_UI_PORT=str(held_port))
    assert proc.returncode == 1, proc.stderr
    assert proc.stdout == ""  # nothing installed, started or built first
    line = proc.stderr.strip()
    assert "\n" not in line, line
    assert line.startswith(f"docker-demo: error: host port {held_port} "
                           "(LOGCOUNT_DEMO_SPARK_UI_PORT: the Spark UI) is taken by "), line
    assert f"(pid {os.getpid()})" in line  # what holds it: this test
    assert line.endswith("; choose another with LOGCOUNT_DEMO_SPARK_UI_PORT=PORT, or unset it "
                         "for a free one"), line


def test_a_chosen_port_that_is_free_goes_on_and_a_bad_one_is_usage(demo_copy, held_port):
    free = free_port()  # bound, never listening: free for the check
    proc = demo_copy("up", LOGCOUNT_DEMO_STAGE_METRICS_PORT=str(free))
    assert proc.returncode == 3, proc.stderr  # went on to the engine, which is a stand-in here
    assert "is taken" not in proc.stderr
    for bad in ("http", "0", "70000"):
        proc = demo_copy("up", LOGCOUNT_DEMO_SINK_METRICS_PORT=bad)
        assert proc.returncode == 2, proc.stderr
        assert proc.stderr.strip() == (f"docker-demo: error: LOGCOUNT_DEMO_SINK_METRICS_PORT={bad} "
                                       "is not a port (1-65535; unset: Docker picks a free one)")
    proc = demo_copy("up", LOGCOUNT_DEMO_SINK_METRICS_PORT=str(free),
                     LOGCOUNT_DEMO_STAGE_METRICS_PORT=str(free))
    assert proc.returncode == 1 and "chosen twice" in proc.stderr, proc.stderr


@pytest.mark.parametrize("daemon_error", [
    # Docker 20.10 (Debian 12's docker.io), with its userland proxy
    "Error response from daemon: driver failed programming external connectivity on endpoint "
    "logcount-spark-master-1 (0123abcd): Error starting userland proxy: listen tcp4 "
    "127.0.0.1:{port}: bind: address already in use",
    # Docker 25 and later
    "Error response from daemon: failed to set up container networking: driver failed "
    "programming external connectivity on endpoint logcount-spark-master-1 (0123abcd): failed "
    "to bind host port for 127.0.0.1:{port}:172.18.0.3:8080/tcp: address already in use",
])
def test_a_compose_up_that_fails_on_a_taken_port_names_it(demo_copy, held_port, daemon_error):
    error = daemon_error.format(port=held_port)
    # A port Docker chose, taken between its choice and its bind.
    proc = demo_copy("up", engine=True, UP_ERROR=error)
    assert proc.returncode == 1, proc.stderr
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith(f"docker-demo: error: compose up failed: host port {held_port} is "
                           "taken by "), last
    assert f"(pid {os.getpid()})" in last and "run up again" in last, last
    # A port the user chose, that the check let through (the engine said the previous demo had
    # it), taken when `compose up` binds it: the line names the variable.
    proc = demo_copy("up", engine=True, UP_ERROR=error, LOGCOUNT_DEMO_SPARK_UI_PORT=str(held_port),
                     PS_PORTS=f"127.0.0.1:{held_port}->8080/tcp")
    assert proc.returncode == 1, proc.stderr
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith(f"docker-demo: error: compose up failed: host port {held_port} "
                           "(LOGCOUNT_DEMO_SPARK_UI_PORT: the Spark UI) is taken by "), last
    assert "choose another with LOGCOUNT_DEMO_SPARK_UI_PORT=PORT" in last, last
