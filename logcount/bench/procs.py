"""Child processes for the benchmark (timestamped output lines, CPU seconds and peak RSS) and
the /proc readers the bench samples processes with.

A contender runs as its own process tree (a Python driver and, for Spark, its JVM child), so its
CPU and memory are its own. A sampler walks /proc every SAMPLE_S: the CPU seconds of a process
are its last sample (a process that exits between samples loses at most one interval), its
peak RSS is the kernel's own high-water mark (VmHWM), which no sampling can miss.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from logcount.core.proc_table import descendants, parse_stat, processes, read_proc, stat_fields

__all__ = ["Child", "ProcStats", "cpu_seconds", "descendants", "parse_stat", "parse_status",
           "proc_sample", "processes", "read_proc"]

SAMPLE_S = 0.2
_TICKS = os.sysconf("SC_CLK_TCK")


@dataclass
class ProcStats:
    cpu_s: dict[int, float] = field(default_factory=dict)   # pid -> user+system seconds
    hwm_kb: dict[int, int] = field(default_factory=dict)    # pid -> VmHWM
    names: dict[int, str] = field(default_factory=dict)     # pid -> comm

    root: int = 0

    @property
    def root_peak_rss_mb(self) -> float:
        """The peak RSS of the process we started (for the stage: the Python driver)."""
        return self.hwm_kb.get(self.root, 0) / 1024

    @property
    def cpu_seconds(self) -> float:
        return sum(self.cpu_s.values())

    def peak_rss_mb(self, name: str | None = None) -> float:
        """Peak RSS of the processes whose comm is `name` (all when None), summed."""
        return sum(kb for pid, kb in self.hwm_kb.items()
                   if name is None or self.names.get(pid) == name) / 1024


_STATUS = {"VmRSS": "rss_kb", "Threads": "threads"}


def parse_status(text: str, keys: dict[str, str] = _STATUS) -> dict[str, int]:
    """/proc/PID/status -> {name: number} for `keys` (status key -> name; default: rss_kb and
    threads), what it has of them."""
    out = {}
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key in keys:
            out[keys[key]] = int(value.split()[0])
    return out


def cpu_seconds(pid: int | str | None) -> float:
    """User + system CPU seconds of one process (or "PID/task/TID": a thread) so far; 0 when it
    is gone (or None)."""
    stat = read_proc(f"/proc/{pid}/stat") if pid else None
    if stat is None:
        return 0.0
    fields = stat_fields(stat)[1]
    return (int(fields[11]) + int(fields[12])) / _TICKS


def proc_sample(pid: int) -> dict[str, float] | None:
    """RSS (MB), threads and open fds of one process; None when it is gone."""
    status = read_proc(f"/proc/{pid}/status")
    if status is None:
        return None
    got = parse_status(status)
    try:
        fds = len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return None
    return {"rss_mb": round(got.get("rss_kb", 0) / 1024, 1), "threads": got.get("threads", 0),
            "fds": fds}


def _sample(root: int, stats: ProcStats) -> None:
    parents = {pid: ppid for pid, (_, ppid) in processes().items()}
    for pid in [root, *descendants(root, parents)]:
        stat, status = read_proc(f"/proc/{pid}/stat"), read_proc(f"/proc/{pid}/status")
        if stat is None or status is None:
            continue
        name, fields = stat_fields(stat)
        stats.cpu_s[pid] = (int(fields[11]) + int(fields[12])) / _TICKS
        stats.names[pid] = name
        if (hwm := parse_status(status, {"VmHWM": "hwm_kb"}).get("hwm_kb")) is not None:
            stats.hwm_kb[pid] = max(stats.hwm_kb.get(pid, 0), hwm)


class Child:
    """A contender's process: its output lines (with arrival times) and its resource use."""

    def __init__(self, argv: Sequence[str], env: dict[str, str] | None = None,
                 log_path: str | None = None, sample: bool = True) -> None:
        """`sample=False`: no /proc walk every SAMPLE_S (a long run samples on its own)."""
        self.argv = list(argv)
        self.lines: list[tuple[float, str]] = []
        self.stats = ProcStats()
        self.started = time.monotonic()
        self.started_epoch = time.time()  # to place a child's own wall-clock stamps
        self._log = open(log_path, "a") if log_path else None  # noqa: SIM115 - closed in wait
        self.proc = subprocess.Popen(
            self.argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            env={**os.environ, **(env or {})}, start_new_session=True)
        self.stats.root = self.proc.pid
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        self._done = threading.Event()
        self._sampler = threading.Thread(target=self._samples, daemon=True)
        if sample:
            self._sampler.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            text = raw.decode("utf-8", "replace").rstrip("\n")
            self.lines.append((time.monotonic(), text))
            if self._log:
                self._log.write(text + "\n")

    def _samples(self) -> None:
        while not self._done.is_set():
            _sample(self.proc.pid, self.stats)
            self._done.wait(SAMPLE_S)

    def sample_now(self) -> ProcStats:
        """Walk the tree at once, not at the sampler's next tick: the stats as of this moment
        (to take the CPU of a window between two calls)."""
        _sample(self.proc.pid, self.stats)
        return self.stats

    def first_line(self, needle: str, after: float = 0.0) -> tuple[float, str] | None:
        return next(((t, s) for t, s in list(self.lines) if needle in s and t >= after), None)

    def wait_for_line(self, needle: str, timeout: float, after: float = 0.0) -> tuple[float, str]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            hit = self.first_line(needle, after)
            if hit:
                return hit
            if self.proc.poll() is not None:
                break
            time.sleep(0.02)
        hit = self.first_line(needle, after)
        if hit:
            return hit
        raise RuntimeError(f"{self.argv[0]}: no line with {needle!r} within {timeout:.0f}s; "
                           f"last output: {self.tail()}")

    def timeline(self) -> list[tuple[float, str]]:
        """The output lines with their arrival in seconds since the process was spawned."""
        return [(t - self.started, s) for t, s in list(self.lines)]

    def tail(self, n: int = 5) -> str:
        return " | ".join(s for _, s in self.lines[-n:])

    def signal(self, sig: int) -> float:
        """Signal the whole tree (its own session); returns when it was sent."""
        t = time.monotonic()
        os.killpg(self.proc.pid, sig)
        return t

    def _exited(self, timeout: float) -> None:
        """Returns once the process has exited, not yet reaped: a zombie's /proc/PID/stat holds
        its final CPU. Raises subprocess.TimeoutExpired past `timeout`."""
        deadline = time.monotonic() + timeout
        try:
            while os.waitid(os.P_PID, self.proc.pid,
                            os.WEXITED | os.WNOWAIT | os.WNOHANG) is None:
                if time.monotonic() > deadline:
                    raise subprocess.TimeoutExpired(self.argv, timeout)
                time.sleep(0.02)
        except ChildProcessError:  # already reaped (a poll() saw it end): its last sample stands
            pass

    def wait(self, timeout: float) -> int:
        try:
            self._exited(timeout)
            # The last sample, of the exited process itself: the sampler's last one may be up to
            # SAMPLE_S older (a short contender's CPU read 0.0 on a busy machine).
            _sample(self.proc.pid, self.stats)
            rc = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.signal(signal.SIGKILL)
            self.proc.wait(30)
            raise RuntimeError(f"{self.argv[0]} still running after {timeout:.0f}s; killed; "
                               f"last output: {self.tail()}") from None
        finally:
            self._done.set()
            if self._sampler.is_alive():
                self._sampler.join(5)
            self._reader.join(5)
            if self._log:
                self._log.close()
                self._log = None
        return rc

    @property
    def elapsed(self) -> float:
        return time.monotonic() - self.started
