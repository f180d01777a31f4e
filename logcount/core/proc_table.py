"""What /proc says of the processes on this machine: each one's parent, and who is below whom.
The stage reads it to stop a driver JVM its refused start launched (pipeline/jvm_launch.py),
the bench to sample its contenders' process trees (logcount/bench/procs.py)."""

from __future__ import annotations

import os


def read_proc(path: str) -> str | None:
    """A /proc file's text; None when it is gone (its process or thread ended)."""
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return None


def stat_fields(stat: str) -> tuple[str, list[str]]:
    """/proc/PID/stat -> (comm, the fields after it); comm may hold spaces and parentheses."""
    return stat[stat.index("(") + 1:stat.rindex(")")], stat[stat.rindex(")") + 2:].split()


def parse_stat(text: str) -> tuple[str, int]:
    """/proc/PID/stat -> (comm, ppid)."""
    comm, fields = stat_fields(text)
    return comm, int(fields[1])


def descendants(root: int, parents: dict[int, int]) -> list[int]:
    """Every pid below `root`, given pid -> ppid, nearest first."""
    kids: dict[int, list[int]] = {}
    for pid, ppid in sorted(parents.items()):
        kids.setdefault(ppid, []).append(pid)
    out, todo = [], list(kids.get(root, []))
    while todo:
        pid = todo.pop(0)
        out.append(pid)
        todo += kids.get(pid, [])
    return out


def processes() -> dict[int, tuple[str, int]]:
    """Every process now: pid -> (comm, ppid)."""
    out = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit() and (stat := read_proc(f"/proc/{entry}/stat")):
            out[int(entry)] = parse_stat(stat)
    return out
