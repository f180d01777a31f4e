"""The secured cluster: 3 brokers + a KRaft controller, SASL_SSL/SCRAM-SHA-512, ACLs, RF 3.

One cluster per test session (starting it takes ~15-25 s on 2 cores). Tests share it, so each
uses its own names and leaves it healthy (a test that kills brokers restarts them and waits).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.cluster import SecuredCluster, missing_tools

_STARTUP = pytest.StashKey[str]()


def pytest_configure(config: pytest.Config) -> None:
    # pyproject runs with --strict-markers; registered here so this directory stands alone.
    config.addinivalue_line(
        "markers", "secured: against a 3-broker SASL_SSL/SCRAM/ACL KRaft cluster (tests/secured)")


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    if _STARTUP in config.stash:
        terminalreporter.write_line(config.stash[_STARTUP])


@pytest.fixture(scope="session")
def secured_cluster(tmp_path_factory: pytest.TempPathFactory,
                    pytestconfig: pytest.Config) -> Iterator[SecuredCluster]:
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
