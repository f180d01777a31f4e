"""The driver JVM a start of ours launched (pyspark's `spark-submit ... pyspark-shell`, a child of
this process), found in /proc, so that a start that is refused can stop it at once."""

from __future__ import annotations

import os
import signal
from pathlib import Path

# What pyspark's gateway launch runs, in every phase of its exec chain (spark-submit, spark-class,
# java ... SparkSubmit): its last argument.
_SHELL = b"pyspark-shell"


def parent_of(stat: str) -> int | None:
    """The parent pid in a /proc/PID/stat line (pure; the command name may hold spaces and
    parentheses, so the fields are read after its last ')')."""
    fields = stat[stat.rfind(")") + 1:].split()
    return int(fields[1]) if len(fields) > 1 and fields[1].isdigit() else None


def _processes(proc: Path) -> dict[int, int]:
    """pid -> parent pid of every process /proc shows ({} without /proc)."""
    parents = {}
    try:
        entries = [e for e in os.listdir(proc) if e.isdigit()]
    except OSError:
        return {}
    for e in entries:
        try:
            parent = parent_of((proc / e / "stat").read_text())
        except OSError:  # gone meanwhile
            continue
        if parent is not None:
            parents[int(e)] = parent
    return parents


def launched_jvms(proc: Path = Path("/proc")) -> set[int]:
    """This process's children that are a pyspark gateway launch."""
    me = os.getpid()
    found = set()
    for pid, parent in _processes(proc).items():
        if parent != me:
            continue
        try:
            if _SHELL in (proc / str(pid) / "cmdline").read_bytes().split(b"\0"):
                found.add(pid)
        except OSError:
            continue
    return found


def stop_trees(roots: set[int], proc: Path = Path("/proc")) -> None:
    """SIGKILL each root and every process under it (the launcher's own JVM, a child of the
    script that spark-submit is until it execs)."""
    parents = _processes(proc)
    doomed, frontier = set(), set(roots)
    while frontier:
        doomed |= frontier
        frontier = {pid for pid, parent in parents.items() if parent in frontier} - doomed
    for pid in doomed:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:  # gone already, or not ours to signal
            continue
