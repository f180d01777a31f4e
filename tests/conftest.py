"""Fixtures: where the real Kafka and MySQL are, and unique names per test.

Endpoints, in order: `LOGCOUNT_BOOTSTRAP_SERVERS` + `LOGCOUNT_MYSQL_URL` from the environment;
else testcontainers (Kafka and MySQL 8 containers) when a Docker engine answers; else the
embedded stack (`logcount stack up`), started here and stopped again if this session started it.
`LOGCOUNT_TEST_STACK=testcontainers|embedded` insists on one of the last two.

The secured tier and the network tier share one secured cluster per session (`secured_cluster`).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from logcount.core.settings import MySQLUrl
from tests.support.cpu_log import pytest_runtest_protocol  # noqa: F401 - each test's CPU, a hook
from tests.support.databases import fresh_database
from tests.support.names import Names
from tests.support.ports import free_port

if TYPE_CHECKING:
    from tests.support.cluster import SecuredCluster


TESTS = Path(__file__).parent

# The stages the tests start get a C1-only JIT (as the secured cluster's brokers do): a start costs
# 27 % less CPU, and CPU bounds the suite's time on two cores. LOGCOUNT_SPARK_JAVA_OPTIONS set (even
# empty) runs them as shipped. Figures: docs/tuning.md#test-stages-jit
os.environ.setdefault("LOGCOUNT_SPARK_JAVA_OPTIONS", "-XX:TieredStopAtLevel=1")


COMPAT = TESTS / "compat"


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """The compat tier (older Spark lines, a venv each) is opt-in: collected only when named
    on the command line (`pytest tests/compat`) or with LOGCOUNT_COMPAT=1. CI runs one Spark."""
    if not collection_path.is_relative_to(COMPAT) or os.environ.get("LOGCOUNT_COMPAT") == "1":
        return None
    here = config.invocation_params.dir
    named = (Path(here, arg.split("::")[0]).resolve() for arg in config.args)
    return True if not any(p.is_relative_to(COMPAT) for p in named) else None


@pytest.hookimpl(tryfirst=True)  # before -m deselects by marker
def pytest_collection_modifyitems(config, items) -> None:
    """A test's tier is its folder: tests/unit/ -> the `unit` marker, and so on for every marker
    pyproject registers; a test outside such a folder is an error, not a test of no tier.

    The docker tier runs last in a session: it starts (and stops) a Docker engine and fills both
    cores with containers, so no other test of the session should run beside it, and the fixtures'
    choice of path, made at the session's first use, is not changed by the engine it starts
    (scripts/run_tests.py runs it as a job of its own; the lanes' fixtures are pinned to their
    embedded stacks)."""
    tiers = {line.split(":")[0].strip() for line in config.getini("markers")}
    for item in items:
        if not item.path.is_relative_to(TESTS):
            continue
        tier = item.path.relative_to(TESTS).parts[0]
        if tier not in tiers:
            raise pytest.UsageError(f"{item.nodeid}: not in a tier's folder (tests/<marker>/)")
        item.add_marker(tier)
    items.sort(key=lambda item: item.get_closest_marker("docker") is not None)


@dataclass(frozen=True)
class Endpoints:
    bootstrap: str
    mysql: MySQLUrl
    kind: str  # "env" | "testcontainers" | "embedded"


def _docker_answers() -> bool:
    try:
        import docker

        docker.from_env(timeout=3).ping()
        return True
    except Exception:  # noqa: BLE001 - no engine, no socket, no permission: all mean "no"
        return False


# The images of the testcontainers path: the compose demo's, unless named otherwise (the docker
# tier names the logcount-ci/* stand-ins on machines that cannot pull from Docker Hub).
KAFKA_IMAGE = os.environ.get("LOGCOUNT_TEST_KAFKA_IMAGE", "apache/kafka:4.3.1")
MYSQL_IMAGE = os.environ.get("LOGCOUNT_TEST_MYSQL_IMAGE", "mysql:8.4")


def _kafka_container(host_port: int):
    """One KRaft node of the apache/kafka image (or its stand-in), configured by KAFKA_* variables.

    Clients on this host reach PLAINTEXT at host_port; the broker reaches itself (transaction
    markers, the controller) on listeners that exist inside the container."""
    from testcontainers.core.container import DockerContainer
    from testcontainers.core.wait_strategies import LogMessageWaitStrategy

    env = {
        "KAFKA_NODE_ID": "1",
        "KAFKA_PROCESS_ROLES": "broker,controller",
        "KAFKA_LISTENERS": "PLAINTEXT://:9092,BROKER://:9094,CONTROLLER://:9093",
        "KAFKA_ADVERTISED_LISTENERS": f"PLAINTEXT://127.0.0.1:{host_port},BROKER://localhost:9094",
        "KAFKA_INTER_BROKER_LISTENER_NAME": "BROKER",
        "KAFKA_CONTROLLER_LISTENER_NAMES": "CONTROLLER",
        "KAFKA_LISTENER_SECURITY_PROTOCOL_MAP":
            "CONTROLLER:PLAINTEXT,BROKER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
        "KAFKA_CONTROLLER_QUORUM_VOTERS": "1@localhost:9093",
        # One node: internal topics at RF 1 / min ISR 1, or transactions never initialise.
        "KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR": "1",
        "KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR": "1",
        "KAFKA_TRANSACTION_STATE_LOG_MIN_ISR": "1",
        "KAFKA_SHARE_COORDINATOR_STATE_TOPIC_REPLICATION_FACTOR": "1",
        "KAFKA_SHARE_COORDINATOR_STATE_TOPIC_MIN_ISR": "1",
        "KAFKA_GROUP_INITIAL_REBALANCE_DELAY_MS": "0",
        "KAFKA_AUTO_CREATE_TOPICS_ENABLE": "false",
    }
    # A cold JVM on a loaded 2-core machine: up to a minute to format its storage and start.
    started = LogMessageWaitStrategy("Kafka Server started").with_startup_timeout(120)
    container = DockerContainer(KAFKA_IMAGE).with_bind_ports(9092, host_port).waiting_for(started)
    for k, v in env.items():
        container.with_env(k, v)
    return container


def _testcontainers() -> Iterator[Endpoints]:
    from testcontainers.community.mysql import MySqlContainer

    from logcount.connectors.kafka_io import transactional_round_trip

    port = free_port()
    mysql = MySqlContainer(MYSQL_IMAGE, username="root", password="test", dbname="logcount")
    with _kafka_container(port), mysql:
        bootstrap = f"127.0.0.1:{port}"
        transactional_round_trip(bootstrap, timeout_s=60.0)
        url = MySQLUrl("root", "test", mysql.get_container_host_ip(),
                       int(mysql.get_exposed_port(3306)), "logcount")
        yield Endpoints(bootstrap, url, "testcontainers")


@pytest.fixture(scope="session")
def endpoints() -> Iterator[Endpoints]:
    env_kafka = os.environ.get("LOGCOUNT_BOOTSTRAP_SERVERS")
    env_mysql = os.environ.get("LOGCOUNT_MYSQL_URL")
    # LOGCOUNT_TEST_STACK=testcontainers|embedded insists on one path (the docker tier uses it
    # to prove the testcontainers path ran, rather than silently falling back).
    wanted = os.environ.get("LOGCOUNT_TEST_STACK")
    if env_kafka and env_mysql and not wanted:
        yield Endpoints(env_kafka, MySQLUrl.parse(env_mysql), "env")
        return
    if wanted == "testcontainers" or (wanted is None and _docker_answers()):
        if not _docker_answers():
            pytest.fail("LOGCOUNT_TEST_STACK=testcontainers, but no Docker engine answers")
        yield from _testcontainers()
        return
    from logcount.connectors import stack

    was_up = all(svc.pid() is not None for svc in stack.services())
    stack.up(log=lambda line: None)
    try:
        yield Endpoints(stack.BOOTSTRAP, MySQLUrl.parse("mysql://root@127.0.0.1:3306/logcount"),
                        "embedded")
    finally:
        if not was_up and not os.environ.get("LOGCOUNT_KEEP_STACK"):
            stack.down(log=lambda line: None)


@pytest.fixture
def names(request) -> Iterator[Names]:
    short = request.node.name.split("[")[0].removeprefix("test_")[:20].replace("_", "-")
    n = Names.unique(short)
    bootstrap = (request.getfixturevalue("endpoints").bootstrap
                 if "endpoints" in request.fixturenames else None)
    yield n
    if bootstrap and not os.environ.get("LOGCOUNT_TEST_KEEP_TOPICS"):
        _delete_topics(bootstrap, n.prefix)


# How long a test's teardown waits for its topics' deletion: the broker deletes in the
# background anyway; a slow answer only means the next test starts a moment later.
TOPIC_DELETE_WAIT_S = 10.0


def _delete_topics(bootstrap: str, prefix: str) -> None:
    """Delete the topics a test made (its names' prefix: inputs, outputs, DLQs, the stage's state
    and final topics). A lane's broker carried ~4,600 leftover partitions by the end of a run, and
    spent more CPU on each test for them: docs/tuning.md#test-suite-time.
    LOGCOUNT_TEST_KEEP_TOPICS=1 keeps them for a look after a run."""
    from logcount.connectors import kafka_io

    try:
        adm = kafka_io.admin(bootstrap)
        mine = [t for t in adm.list_topics(timeout=TOPIC_DELETE_WAIT_S).topics
                if t.startswith(prefix + "-")]
        if mine:
            for future in adm.delete_topics(mine, operation_timeout=TOPIC_DELETE_WAIT_S).values():
                future.result(TOPIC_DELETE_WAIT_S)
    except Exception:  # noqa: BLE001 - a test that stopped its broker: nothing to clean
        return


@pytest.fixture
def mysql_db(endpoints: Endpoints, names: Names) -> Iterator[MySQLUrl]:
    """A fresh, empty database for this test, dropped afterwards."""
    with fresh_database(endpoints.mysql, names.database) as url:
        yield url


_STARTUP = pytest.StashKey[str]()


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    if _STARTUP in config.stash:
        terminalreporter.write_line(config.stash[_STARTUP])


@pytest.fixture(scope="session")
def secured_cluster(tmp_path_factory: pytest.TempPathFactory,
                    pytestconfig: pytest.Config) -> Iterator[SecuredCluster]:
    """3 brokers + a KRaft controller, SASL_SSL/SCRAM-SHA-512, ACLs, RF 3 (~15-25 s to start on
    2 cores). Tests share it, so each uses its own names and leaves it healthy (a test that kills
    brokers restarts them and waits)."""
    from tests.support.cluster import SecuredCluster, missing_tools

    reason = missing_tools()
    if reason:
        pytest.skip(f"secured cluster unavailable: {reason}")
    cluster = SecuredCluster(tmp_path_factory.mktemp("secured-cluster"))
    try:
        cluster.start()  # stops what it started if it fails
        phases = ", ".join(f"{k} {v:.1f}s" for k, v in cluster.startup_phases.items())
        pytestconfig.stash[_STARTUP] = (
            f"secured cluster: healthy {cluster.startup_s:.1f}s after start ({phases}); "
            f"{cluster.workdir}")
        yield cluster
    finally:
        cluster.stop()
        # Nothing may outlive the session, whatever the tests did.
        assert not cluster.running_pids(), f"left running: {cluster.running_pids()}"
