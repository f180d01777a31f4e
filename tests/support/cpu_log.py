"""Each test's machine CPU, for scripts/run_tests.py's list of the costliest tests.

The suite's time on two cores is bounded by its CPU, not by its waits: the tests to make
cheaper are those that burn the most, which the slowest list does not tell. Machine-wide busy
time (/proc/stat) counts what a test starts (stage JVMs, the broker's work for it) wherever it
runs; with lanes side by side a test's figure also holds its neighbours' share. Where run_tests
gave the job a cgroup of its own (cgroup v1's cpuacct or v2), a test's own CPU is logged too: its
pytest's process tree, stages and brokers it started included, its neighbours not. The job reads
its cgroup's counter through a file descriptor run_tests hands it (LOGCOUNT_TEST_CPU_FD): in a
lane's network namespace `ip netns exec` mounts a /sys without the cgroup hierarchies.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

LOG = "LOGCOUNT_TEST_CPU_LOG"  # set by run_tests.py: a JSON-lines file per pytest run
CPU_FD = "LOGCOUNT_TEST_CPU_FD"  # set by run_tests.py: its job's cgroup's CPU counter, open
CGROUPS = Path("/sys/fs/cgroup")


def busy_seconds(stat: str = "/proc/stat") -> float:
    """CPU seconds the machine spent busy since boot: user, nice, system, irq, softirq, steal."""
    with open(stat) as f:
        fields = f.readline().split()[1:9]
    user, nice, system, _idle, _iowait, irq, softirq, steal = (int(x) for x in fields)
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


def hierarchy(root: Path = CGROUPS) -> Path | None:
    """The cgroup hierarchy that counts CPU: v1's cpuacct, else v2's (at the root or unified/)."""
    for path in (root / "cpuacct", root / "cpu,cpuacct", root, root / "unified"):
        if (path / "cpuacct.usage").exists() or (path / "cgroup.controllers").exists():
            return path
    return None


def own_cgroup(proc_cgroup: str = "/proc/self/cgroup", root: Path = CGROUPS) -> Path | None:
    """This process's cgroup in `hierarchy()`, or None where it has none."""
    base = hierarchy(root)
    if base is None:
        return None
    v1 = (base / "cpuacct.usage").exists()
    for line in Path(proc_cgroup).read_text().splitlines():
        _, controllers, rel = line.split(":", 2)
        if (v1 and "cpuacct" in controllers.split(",")) or (not v1 and controllers == ""):
            return base / rel.lstrip("/")
    return None


def counter(group: Path) -> Path:
    """The file that counts `group`'s CPU: v1's cpuacct.usage, else v2's cpu.stat."""
    v1 = group / "cpuacct.usage"
    return v1 if v1.exists() else group / "cpu.stat"


def usage_seconds(text: str) -> float:
    """CPU seconds of a counter's text: v1's nanoseconds, or v2's `usage_usec N` line."""
    if text.strip().isdigit():
        return int(text) / 1e9
    stat = dict(line.split() for line in text.splitlines() if line.strip())
    return int(stat["usage_usec"]) / 1e6


def cgroup_seconds(group: Path) -> float | None:
    """CPU seconds every process of `group` (and of its children) has used, or None."""
    try:
        return usage_seconds(counter(group).read_text())
    except (OSError, KeyError, ValueError):
        return None


def handed(fd: int) -> str:
    """CPU_FD's value for the open counter `fd`: the number and the file's inode, so a process
    that has another file at that number (a pytest a test started) reads nothing."""
    return f"{fd}:{os.fstat(fd).st_ino}"


def job_seconds() -> float | None:
    """This job's cgroup's CPU seconds, through the descriptor run_tests handed it, or None."""
    try:
        fd, ino = (int(x) for x in os.environ.get(CPU_FD, "").split(":"))
        if os.fstat(fd).st_ino != ino:
            return None
        return usage_seconds(os.pread(fd, 4096, 0).decode())
    except (OSError, KeyError, ValueError):
        return None


def new_cgroup(name: str) -> Path | None:
    """A cgroup `name` under this process's own (made if missing), or None where none can be."""
    mine = own_cgroup()
    if mine is None:
        return None
    try:
        (mine / name).mkdir(parents=True, exist_ok=True)
    except OSError:
        return None
    return mine / name


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    path = os.environ.get(LOG)
    if not path:
        yield
        return
    own = job_seconds()
    if own is None and os.environ.get(CPU_FD):
        # A pytest a test started (the docker tier's testcontainers run): the descriptor is its
        # parent's, closed here, and its CPU is its parent test's own.
        yield
        return
    cpu, wall = busy_seconds(), time.monotonic()
    yield
    row = {"nodeid": item.nodeid, "cpu_s": round(busy_seconds() - cpu, 2),
           "wall_s": round(time.monotonic() - wall, 2)}
    after = job_seconds()
    if own is not None and after is not None:
        row["own_cpu_s"] = round(after - own, 2)
    with open(path, "a") as f:
        f.write(json.dumps(row) + "\n")
