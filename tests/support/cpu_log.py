"""Each test's machine CPU, for scripts/run_tests.py's list of the costliest tests.

The suite's time on two cores is bounded by its CPU, not by its waits: the tests to make
cheaper are those that burn the most, which the slowest list does not tell. Machine-wide busy
time (/proc/stat) counts what a test starts (stage JVMs, the broker's work for it) wherever it
runs; with lanes side by side a test's figure also holds its neighbours' share.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator

import pytest

LOG = "LOGCOUNT_TEST_CPU_LOG"  # set by run_tests.py: a JSON-lines file per pytest run


def busy_seconds(stat: str = "/proc/stat") -> float:
    """CPU seconds the machine spent busy since boot: user, nice, system, irq, softirq, steal."""
    with open(stat) as f:
        fields = f.readline().split()[1:9]
    user, nice, system, _idle, _iowait, irq, softirq, steal = (int(x) for x in fields)
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    path = os.environ.get(LOG)
    if not path:
        yield
        return
    cpu, wall = busy_seconds(), time.monotonic()
    yield
    row = {"nodeid": item.nodeid, "cpu_s": round(busy_seconds() - cpu, 2),
           "wall_s": round(time.monotonic() - wall, 2)}
    with open(path, "a") as f:
        f.write(json.dumps(row) + "\n")
