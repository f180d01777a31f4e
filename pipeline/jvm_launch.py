"""The driver JVM a start of ours launched (pyspark's `spark-submit ... pyspark-shell`, a child of
this process), found in /proc, so that a start that is refused can stop it at once."""

from __future__ import annotations

import os
import signal

from logcount.core.proc_table import descendants, processes

# What pyspark's gateway launch runs, in every phase of its exec chain (spark-submit, spark-class,
# java ... SparkSubmit): its last argument.
_SHELL = b"pyspark-shell"


def _parents() -> dict[int, int]:
    """pid -> parent pid of every process ({} without /proc)."""
    try:
        return {pid: ppid for pid, (_, ppid) in processes().items()}
    except (OSError, ValueError):  # no /proc, or a command name that is not text: stop nothing
        return {}


def _argv(pid: int) -> list[bytes]:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().split(b"\0")
    except OSError:  # gone meanwhile
        return []


def launched_jvms() -> set[int]:
    """This process's children that are a pyspark gateway launch."""
    me = os.getpid()
    return {pid for pid, ppid in _parents().items()
            if ppid == me and _SHELL in _argv(pid)}


def stop_trees(roots: set[int]) -> None:
    """SIGKILL each root and every process under it (the launcher's own JVM, a child of the
    script that spark-submit is until it execs)."""
    parents = _parents()
    for pid in {*roots, *(d for r in roots for d in descendants(r, parents))}:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:  # gone already, or not ours to signal
            continue
