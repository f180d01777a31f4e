"""A process and its descendants (a stage and its Spark JVM), to freeze and resume as one."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from pathlib import Path

from tests.support.run import wait_for


def tree(pid: int) -> list[int]:
    """pid and all its descendants (the stage and its Spark JVM)."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        tasks = Path(f"/proc/{p}/task")
        for task in tasks.iterdir() if tasks.exists() else ():
            with contextlib.suppress(OSError):
                todo += [int(c) for c in (task / "children").read_text().split()]
    return out


def signal_tree(pid: int, sig: int) -> None:
    for p in tree(pid):
        with contextlib.suppress(ProcessLookupError):
            os.kill(p, sig)


def proc_state(pid: int) -> str:
    """The process's state letter (R, S, T: stopped, Z)."""
    return open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0]


def stop_at_crash_point(stage: subprocess.Popen) -> None:
    """The stage stops itself at its crash point (LOGCOUNT_CRASH_MODE=stop); then its whole
    tree is stopped too."""
    wait_for(lambda: stage.poll() is not None or proc_state(stage.pid) == "T", timeout_s=240,
             what="the stage to stop at its crash point")
    assert stage.poll() is None, "the stage exited instead of stopping"
    signal_tree(stage.pid, signal.SIGSTOP)
