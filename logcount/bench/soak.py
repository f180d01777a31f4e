"""Endurance: `logcount bench --soak MINUTES` or `python -m logcount.bench.soak --minutes MINUTES`.

Runs the real stage (`logcount run`, its own process tree) on the embedded stack for MINUTES at a
fixed input rate with a short trigger, and every `--sample-seconds` samples:
- RSS, threads and open file descriptors of the stage's Python process and of its JVM child
  (/proc/PID/status and /proc/PID/fd);
- the JVM's heap after a full collection and its metaspace (`jcmd PID GC.run` then
  `GC.heap_info`: why, in `jcmd_run`);
- batches committed, their mean Spark and commit time and the cycle (interval / batches) from
  the stage's own /metrics;
- the p50 of the probe latency (produced -> seen by a read_committed reader) of the interval.

Probe lines cycle over PROBE_MINUTES minutes of their own (in 2031) and the filler over the
synthetic day's 1,440 minutes of 2017, so the set of minutes the stage holds stops growing once
each has been seen: any growth the soak shows is the stage's own, not its input's. (A production
stage holds one more minute per minute, bounded by --lateness-horizon.)

At the end the producer stops, the stage drains and gets SIGTERM, and the output topic's totals
must equal what was produced, exactly. Per series the report gives the least-squares slope per
hour and the first third's mean and max against the last third's, and judges the goals of
issue 28 (`goals`). A class histogram before the first sample and after the last names what grew
in the heap; `--nmt` samples the JVM's native memory by category. It writes DIR/soak.json,
DIR/soak.md and DIR/soak.png; the stage's own output is kept in DIR/logs/.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from confluent_kafka import Producer

from logcount.bench.latency import TICK_S, ProbeReader, percentile, probe_minute
from logcount.bench.procs import Child
from logcount.bench.runner import Bench, committed_totals
from logcount.connectors import kafka_io, stack
from logcount.core.errors import DependencyError
from logcount.core.paths import home
from logcount.core.settings import BenchSettings
from logcount.formats.shapes import expected_from_records, synthetic_records

log = logging.getLogger("logcount.bench.soak")

DEFAULT_RATE = 2_000
DEFAULT_SAMPLE_S = 15.0
# The stage sleeps --trigger-interval only when a plan finds nothing new; at a fixed rate a
# batch (~100-300 ms here) always finds the lines that arrived meanwhile, so the trigger only
# decides how soon an idle stage looks again. 50 ms keeps it from adding to the cycle.
DEFAULT_TRIGGER_S = 0.05
# Run before the first sample: JIT compilation, the heap sizing itself and the first ramp-up
# batches are not the steady state. A tenth of a shorter run, so a smoke run stays short.
DEFAULT_WARMUP_S = 60.0
PROBE_MINUTES = 60  # probe k counts into minute k % 60 of 2031-01-01 00:xx
FILLER_RECORDS = 100_000  # synthetic seed lines, sent in a cycle
PARTITIONS = 4

# Goals (issue 28).
RSS_SLOPE_GOAL_MB_H = 20.0
LATENCY_GOAL = 1.10  # last third's p50 <= 1.10 x the first third's
BATCH_GOAL = 10_000  # batches in the measured window, judged when MINUTES >= BATCH_GOAL_MINUTES
BATCH_GOAL_MINUTES = 20
# Thread and fd counts move a little without growing: Spark's thread pools let idle workers go
# after 60 s and start new ones, its Kafka reads open and close connections, py4j opens a
# callback socket when it needs one. In 1-2.5 minute runs a process's count stayed within a
# range of 3 threads and 4 fds after the first sample. A leak of one per batch would add
# thousands in 20 minutes and one per minute 20: the tolerances admit the noise, not either leak.
THREAD_TOLERANCE = 4
FD_TOLERANCE = 8

# name -> (label, unit, plot panel, its axis: l or r, for a series of another scale)
SERIES: dict[str, tuple[str, str, str, str]] = {
    "python_rss_mb": ("Python driver RSS", "MB", "rss", "l"),
    "jvm_rss_mb": ("JVM RSS", "MB", "rss", "r"),
    "jvm_heap_committed_mb": ("JVM heap committed", "MB", "rss", "r"),
    "jvm_heap_after_gc_mb": ("JVM heap after full GC", "MB", "heap", "l"),
    "jvm_metaspace_mb": ("JVM metaspace used", "MB", "heap", "l"),
    "python_threads": ("Python threads", "", "threads", "l"),
    "jvm_threads": ("JVM threads", "", "threads", "r"),
    "python_fds": ("Python open fds", "", "fds", "l"),
    "jvm_fds": ("JVM open fds", "", "fds", "r"),
    "batches": ("batches per interval", "", "batches", "l"),
    "batch_cycle_ms": ("batch cycle (interval / batches)", "ms", "batch", "l"),
    "batch_spark_ms": ("batch Spark time (mean)", "ms", "batch", "l"),
    "batch_commit_ms": ("batch commit time (mean)", "ms", "batch", "l"),
    "latency_p50_ms": ("probe latency p50", "ms", "latency", "l"),
    "input_lag_records": ("input lag (records)", "", "lag", "l"),
    "state_minutes": ("minutes held", "", "lag", "r"),
}


# -- pure: parsing --------------------------------------------------------------------------

def parse_status(text: str) -> dict[str, int]:
    """/proc/PID/status -> {"rss_kb", "threads"} (what it has of them)."""
    out = {}
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key == "VmRSS":
            out["rss_kb"] = int(value.split()[0])
        elif key == "Threads":
            out["threads"] = int(value.split()[0])
    return out


def parse_stat(text: str) -> tuple[str, int]:
    """/proc/PID/stat -> (comm, ppid); comm may hold spaces and parentheses."""
    comm = text[text.index("(") + 1:text.rindex(")")]
    return comm, int(text[text.rindex(")") + 2:].split()[1])


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


_HEAP = re.compile(r"^ ?(\S[\w\- ]*?)\s+total (\d+)K, used (\d+)K", re.M)
_META = re.compile(r"^\s*Metaspace\s+used (\d+)K, committed (\d+)K", re.M)
_CLASS = re.compile(r"^\s*class space\s+used (\d+)K, committed (\d+)K", re.M)


def parse_heap_info(text: str) -> dict[str, float]:
    """`jcmd PID GC.heap_info` -> heap used and committed, metaspace used and committed, in MB.

    The heap is the sum of the collector's top-level areas (Parallel: PSYoungGen + ParOldGen;
    G1: one 'garbage-first heap'; Serial: def new + tenured generation); their sub-spaces (eden,
    from, to, object space) say '% used' and are not matched."""
    areas = [(int(total), int(used)) for name, total, used in _HEAP.findall(text)
             if "Metaspace" not in name and "class space" not in name]
    out: dict[str, float] = {}
    if areas:
        out["heap_used_mb"] = round(sum(u for _, u in areas) / 1024, 1)
        out["heap_committed_mb"] = round(sum(t for t, _ in areas) / 1024, 1)
    if m := _META.search(text):
        out["metaspace_used_mb"] = round(int(m[1]) / 1024, 1)
        out["metaspace_committed_mb"] = round(int(m[2]) / 1024, 1)
    if m := _CLASS.search(text):
        out["class_space_used_mb"] = round(int(m[1]) / 1024, 1)
    return out


_NMT = re.compile(r"^-\s+(.+?) \(reserved=\d+KB, committed=(\d+)KB\)", re.M)
_NMT_TOTAL = re.compile(r"^Total: reserved=\d+KB, committed=(\d+)KB", re.M)


def parse_nmt(text: str) -> dict[str, float]:
    """`jcmd PID VM.native_memory summary` -> committed MB per category, and "Total"."""
    out = {name.strip(): round(int(kb) / 1024, 1) for name, kb in _NMT.findall(text)}
    if m := _NMT_TOTAL.search(text):
        out["Total"] = round(int(m[1]) / 1024, 1)
    return out


_HISTO = re.compile(r"^\s*\d+:\s+(\d+)\s+(\d+)\s+(\S+)", re.M)


def parse_histogram(text: str) -> dict[str, tuple[int, int]]:
    """`jcmd PID GC.class_histogram` -> class -> (instances, bytes); the module is left out."""
    return {name: (int(n), int(b)) for n, b, name in _HISTO.findall(text)}


def histogram_growth(first: dict[str, tuple[int, int]], last: dict[str, tuple[int, int]],
                     top: int = 15) -> list[dict]:
    """The `top` classes whose live bytes grew most from `first` to `last` (grown ones only)."""
    rows = []
    for name in set(first) | set(last):
        (n0, b0), (n1, b1) = first.get(name, (0, 0)), last.get(name, (0, 0))
        if b1 > b0:
            rows.append({"class": name, "instances": [n0, n1], "bytes": [b0, b1],
                         "grew_bytes": b1 - b0})
    return sorted(rows, key=lambda r: (-r["grew_bytes"], r["class"]))[:top]


_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+(\S+)")


def parse_metrics(text: str) -> dict[str, float]:
    """Prometheus text -> {name: value}, the label sets of one name summed (the lag gauge has
    one per partition)."""
    out: dict[str, float] = {}
    for line in text.splitlines():
        if line.startswith("#") or not (m := _SAMPLE.match(line)):
            continue
        try:
            value = float(m[3])
        except ValueError:
            continue
        out[m[1]] = out.get(m[1], 0.0) + value
    return out


def interval_figures(prev: dict[str, float], cur: dict[str, float],
                     seconds: float) -> dict[str, float | None]:
    """Batches committed between two scrapes, their mean Spark and commit times, and the cycle
    (the interval's seconds per batch), in ms."""
    def delta(name: str) -> float:
        return cur.get(name, 0.0) - prev.get(name, 0.0)

    batches = int(delta("logcount_batches_committed_total"))

    def mean_ms(hist: str) -> float | None:
        n = delta(f"{hist}_count")
        return round(delta(f"{hist}_sum") / n * 1000, 1) if n > 0 else None

    return {"batches": batches,
            "batch_spark_ms": mean_ms("logcount_batch_spark_seconds"),
            "batch_commit_ms": mean_ms("logcount_batch_commit_seconds"),
            "batch_cycle_ms": round(seconds / batches * 1000, 1) if batches else None}


# -- pure: the figures ------------------------------------------------------------------------

def slope_per_hour(ts: Sequence[float], ys: Sequence[float]) -> float | None:
    """Least-squares slope of ys over ts (seconds), per hour; None under 2 distinct times."""
    pts = [(t, y) for t, y in zip(ts, ys, strict=True) if y is not None]
    if len(pts) < 2:
        return None
    mt = sum(t for t, _ in pts) / len(pts)
    my = sum(y for _, y in pts) / len(pts)
    var = sum((t - mt) ** 2 for t, _ in pts)
    if var == 0:
        return None
    return sum((t - mt) * (y - my) for t, y in pts) / var * 3600


def thirds(values: Sequence) -> tuple[list, list]:
    """The first and the last third of equally spaced samples (n // 3 each; empty under 3)."""
    k = len(values) // 3
    return (list(values[:k]), list(values[-k:])) if k else ([], [])


def summarize(ts: Sequence[float], ys: Sequence[float | None]) -> dict:
    """A series' slope per hour and its first and last thirds' mean and max."""
    first, last = (list(filter(_present, part)) for part in thirds(ys))

    def r(x):
        return None if x is None else round(x, 2)

    return {"slope_per_hour": r(slope_per_hour(ts, ys)),
            "first_third_mean": r(sum(first) / len(first)) if first else None,
            "last_third_mean": r(sum(last) / len(last)) if last else None,
            "first_third_max": max(first) if first else None,
            "last_third_max": max(last) if last else None,
            "samples": sum(1 for y in ys if y is not None)}


def _present(y) -> bool:
    return y is not None and not (isinstance(y, float) and math.isnan(y))


def expected_totals(per_cycle: dict[str, int], partial: dict[str, int], cycles: int,
                    probes: int, probe_minutes: int = PROBE_MINUTES) -> dict[str, int]:
    """What the output topic must hold: the filler's whole cycles (`per_cycle` each), the part
    of the last cycle that was sent (`partial`), and the probes, probe k in minute k % M."""
    out = {m: n * cycles for m, n in per_cycle.items() if n * cycles}
    for m, n in partial.items():
        out[m] = out.get(m, 0) + n
    for j in range(min(probes, probe_minutes)):
        out[probe_minute(j)] = probes // probe_minutes + (1 if j < probes % probe_minutes else 0)
    return out


def nmt_series(ts: Sequence[float], samples: Sequence[dict]) -> dict[str, dict]:
    """Each Native Memory Tracking category's summary (slope, thirds), largest last-third
    mean first."""
    cats = {c for row in samples for c in row.get("nmt", {})}
    out = {c: summarize(ts, [row.get("nmt", {}).get(c) for row in samples]) for c in cats}
    return dict(sorted(out.items(), key=lambda kv: -(kv[1]["last_third_mean"] or 0)))


def diff_totals(got: dict[str, int], want: dict[str, int]) -> list[str]:
    """The minutes whose totals differ, as 'minute: got X, want Y' (sorted)."""
    return [f"{k}: got {got.get(k)}, want {want.get(k)}"
            for k in sorted(set(got) | set(want)) if got.get(k) != want.get(k)]


def goals(series: dict[str, dict], latency_thirds: tuple[float | None, float | None],
          batches: int, minutes: float, totals_exact: bool) -> list[dict]:
    """Each goal with its value and verdict (met None: not judged on a run this short)."""
    out = []
    for name in ("python_rss_mb", "jvm_rss_mb"):
        slope = series.get(name, {}).get("slope_per_hour")
        out.append(_goal(f"{SERIES[name][0]} slope <= {RSS_SLOPE_GOAL_MB_H:g} MB/hour", slope,
                         slope is not None and slope <= RSS_SLOPE_GOAL_MB_H))
    for name, tol in (("python_threads", THREAD_TOLERANCE), ("jvm_threads", THREAD_TOLERANCE),
                      ("python_fds", FD_TOLERANCE), ("jvm_fds", FD_TOLERANCE)):
        s = series.get(name, {})
        first, last = s.get("first_third_max"), s.get("last_third_max")
        out.append(_goal(f"{SERIES[name][0]}: last third's max <= first third's max + {tol}",
                         None if first is None or last is None else f"{first} -> {last}",
                         first is not None and last is not None and last <= first + tol))
    first, last = latency_thirds
    ratio = last / first if first and last is not None else None
    out.append(_goal(f"probe latency p50, last third <= {LATENCY_GOAL:g} x the first third's",
                     None if ratio is None else f"{first:g} -> {last:g} ms ({ratio:.2f} x)",
                     ratio is not None and ratio <= LATENCY_GOAL))
    judged = minutes >= BATCH_GOAL_MINUTES
    out.append(_goal(f"batches >= {BATCH_GOAL:,} (runs of {BATCH_GOAL_MINUTES}+ minutes)",
                     batches, (batches >= BATCH_GOAL) if judged else None))
    out.append(_goal("output totals equal the produced counts exactly", totals_exact,
                     totals_exact))
    return out


def _goal(goal: str, value, met: bool | None) -> dict:
    return {"goal": goal, "value": value, "met": met}


def _n(x) -> str:
    if x is None:
        return "-"
    return f"{x:,}" if isinstance(x, int | float) and not isinstance(x, bool) else str(x)


def markdown(r: dict) -> str:
    lat = r["latency_ms"]
    lines = [f"### Soak: {r['minutes']:g} minutes at {r['rate_lines_per_s']:,} lines/s, "
             f"{r['cores']} cores (trigger {r['trigger_interval_s']:g} s, a sample every "
             f"{r['sample_seconds']:g} s after {r['warmup_seconds']:g} s of warm-up)", "",
             f"{r['batches']:,} batches in the measured window ({r['batches_per_s']} a second), "
             f"{r['lines_produced']:,} lines produced ({r['achieved_rate']:,} lines/s), "
             f"{r['probes']:,} probes (p50 {_n(lat['p50'])} ms, p99 {_n(lat['p99'])} ms, "
             f"{lat['probes_seen']:,} seen). Totals: {r['totals']['verdict']}. Samples cost "
             f"{_n(r['jcmd_seconds_mean'])} s of jcmd each (mean).", "",
             "| series | unit | slope per hour | first third mean | last third mean | "
             "first third max | last third max |", "|---|---|---:|---:|---:|---:|---:|"]
    for name, s in r["series"].items():
        label, unit, _, _ = SERIES[name]
        lines.append(f"| {label} | {unit} | {_n(s['slope_per_hour'])} | "
                     f"{_n(s['first_third_mean'])} | {_n(s['last_third_mean'])} | "
                     f"{_n(s['first_third_max'])} | {_n(s['last_third_max'])} |")
    lines += ["", "| goal | value | met |", "|---|---:|---|"]
    verdict = {True: "yes", False: "**no**", None: "not judged"}
    lines += [f"| {g['goal']} | {_n(g['value'])} | {verdict[g['met']]} |" for g in r["goals"]]
    if r.get("nmt"):
        lines += ["", "| JVM native memory (NMT), committed MB | slope per hour | first third "
                  "mean | last third mean |", "|---|---:|---:|---:|"]
        lines += [f"| {c} | {_n(x['slope_per_hour'])} | {_n(x['first_third_mean'])} | "
                  f"{_n(x['last_third_mean'])} |" for c, x in r["nmt"].items()]
    if r.get("heap_histogram_growth"):
        lines += ["", "| live objects that grew most, first -> last sample (class histogram "
                  "after a full GC) | instances | KB |", "|---|---:|---:|"]
        lines += [f"| `{x['class']}` | {x['instances'][0]:,} -> {x['instances'][1]:,} | "
                  f"{x['bytes'][0] // 1024:,} -> {x['bytes'][1] // 1024:,} |"
                  for x in r["heap_histogram_growth"]]
    return "\n".join(lines) + "\n"


def plot(r: dict, path: Path) -> None:
    """soak.png: every series over the measured window, one panel per kind."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels: dict[str, list[str]] = {}
    for name, (_, _, panel, _) in SERIES.items():
        panels.setdefault(panel, []).append(name)
    fig, axes = plt.subplots(4, 2, figsize=(13, 13))
    ts = [s["t"] / 60 for s in r["samples"]]
    colors = iter(plt.rcParams["axes.prop_cycle"].by_key()["color"] * 4)
    for left, names in zip(axes.flat, panels.values(), strict=False):
        right = left.twinx() if any(SERIES[n][3] == "r" for n in names) else None
        handles = []
        for name in names:
            label, unit, _, side = SERIES[name]
            ax = right if side == "r" else left
            ys = [s.get(name) for s in r["samples"]]
            slope = r["series"][name]["slope_per_hour"]
            shown = f"{label}{f' ({unit})' if unit else ''}" + (
                "" if slope is None else f", {slope:+.1f}/h")
            handles += ax.plot(ts, [float("nan") if y is None else y for y in ys], marker=".",
                               lw=1, color=next(colors), label=shown)
        for ax in (left, right):
            if ax is not None:
                _min_span(ax)
        left.set_xlabel("minutes after the warm-up")
        left.legend(handles=handles, fontsize=7, loc="best")
        left.grid(alpha=0.3)
    for ax in list(axes.flat)[len(panels):]:
        ax.axis("off")
    fig.suptitle(f"logcount soak: {r['minutes']:g} min at {r['rate_lines_per_s']:,} lines/s, "
                 f"{r['batches']:,} batches", fontsize=11)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def _min_span(ax, share: float = 0.1) -> None:
    """At least `share` of the level on the y axis: 0.2 MB of noise on 64 MB stays flat."""
    lo, hi = ax.get_ylim()
    level = max(abs(lo), abs(hi))
    if level and hi - lo < share * level:
        mid = (lo + hi) / 2
        ax.set_ylim(mid - share * level / 2, mid + share * level / 2)


# -- the probe traffic ------------------------------------------------------------------------

class SoakProducer(threading.Thread):
    """`rate` lines/s until stopped: one probe per tick (probe k into minute k % M), the rest
    filler lines taken in a cycle, so what was sent is known from two counts."""

    def __init__(self, bootstrap: str, topic: str, filler: Sequence[bytes], rate: int,
                 partitions: int, probe_minutes: int = PROBE_MINUTES) -> None:
        super().__init__(daemon=True)
        self.args = (topic, filler, rate, partitions, probe_minutes)
        self.sent: list[float] = []  # probe k's send time (monotonic)
        self.filler_sent = 0
        self.failed = 0
        self.stop = threading.Event()
        self.seconds = 0.0
        # linger 5 ms: a record waits at most that long in the client; the latency is the stage's.
        self.p = Producer(kafka_io.client_config(bootstrap, None, **{
            "linger.ms": 5, "enable.idempotence": True, "compression.type": "lz4"}))

    def _send(self, topic: str, value: bytes, partition: int) -> None:
        while True:
            try:
                self.p.produce(topic, value, partition=partition, on_delivery=self._delivered)
                return
            except BufferError:  # the client's queue is full (a broker away): let it drain
                self.p.poll(0.1)

    def _delivered(self, err, _msg) -> None:
        if err is not None:
            self.failed += 1

    def run(self) -> None:
        topic, filler, rate, partitions, m = self.args
        per_tick = max(1, int(rate * TICK_S))
        start = time.monotonic()
        i = tick = 0
        while not self.stop.is_set():
            k = len(self.sent)
            minute = probe_minute(k % m)
            self._send(topic, f"{minute[:17]}07 ERROR probe {k}".encode(), k % partitions)
            self.sent.append(time.monotonic())
            for _ in range(per_tick - 1):
                self._send(topic, filler[i % len(filler)], (i // 100) % partitions)
                i += 1
            self.filler_sent = i
            self.p.poll(0)
            tick += 1
            delay = start + tick * TICK_S - time.monotonic()
            if delay > 0:
                time.sleep(delay)
        self.seconds = time.monotonic() - start
        # 60 s: the idempotent producer retries through a broker blip; past that, what was
        # not delivered counts as failed and the totals check says so.
        left = self.p.flush(60)
        self.failed += left

    @property
    def lines(self) -> int:
        return len(self.sent) + self.filler_sent


class CyclingProbeReader(ProbeReader):
    """The latency reader, for probes that cycle over `probe_minutes` minutes. A probe minute's
    total T means probes j, j + M, ..., j + (T-1)M are in: each is marked seen when its total
    first shows."""

    def __init__(self, bootstrap: str, topic: str, group: str,
                 probe_minutes: int = PROBE_MINUTES) -> None:
        super().__init__(bootstrap, topic, group)
        self.m = probe_minutes
        self.index = {probe_minute(j).encode(): j for j in range(probe_minutes)}
        self.counted = [0] * probe_minutes
        self.seen: dict[int, float] = {}  # type: ignore[assignment] - probe number -> seen

    def record(self, m, now: float) -> None:
        j = self.index.get(m.key())
        if j is None:
            return
        total = json.loads(m.value())["log_count"]
        for n in range(self.counted[j], total):
            self.seen.setdefault(j + n * self.m, now)
        self.counted[j] = max(self.counted[j], total)


# -- the process side -------------------------------------------------------------------------

def _read(path: str) -> str | None:
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return None


def proc_sample(pid: int) -> dict[str, float] | None:
    """RSS (MB), threads and open fds of one process; None when it is gone."""
    status = _read(f"/proc/{pid}/status")
    if status is None:
        return None
    got = parse_status(status)
    try:
        fds = len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return None
    return {"rss_mb": round(got.get("rss_kb", 0) / 1024, 1), "threads": got.get("threads", 0),
            "fds": fds}


def find_jvm(root: int) -> int | None:
    """The first `java` process below `root` (the stage's Spark driver JVM)."""
    parents, names = {}, {}
    for entry in os.listdir("/proc"):
        if entry.isdigit() and (stat := _read(f"/proc/{entry}/stat")):
            names[int(entry)], parents[int(entry)] = parse_stat(stat)
    return next((p for p in descendants(root, parents) if names.get(p) == "java"), None)


def jcmd_path() -> str | None:
    """The jcmd of the JDK the stage's java comes from (JAVA_HOME first, as pyspark)."""
    home = os.environ.get("JAVA_HOME")
    if home and os.access(Path(home) / "bin" / "jcmd", os.X_OK):
        return str(Path(home) / "bin" / "jcmd")
    java = shutil.which("java")
    if java:
        beside = Path(os.path.realpath(java)).parent / "jcmd"
        if os.access(beside, os.X_OK):
            return str(beside)
    return shutil.which("jcmd")


def jcmd_run(jcmd: str, pid: int, *command: str) -> str:
    """One jcmd call against the stage's JVM; its output.

    Why jcmd, and a forced collection before the heap is read (`GC.run` then `GC.heap_info`,
    from one file with `-f`: one tool JVM start per sample): the heap's occupancy at a random
    instant is a sawtooth of young garbage plus whatever Parallel GC promoted since its last
    full collection, so only the heap right after a full collection (which also unloads dead
    classes) is the live set a leak would grow. jstat reads the same counters without the
    attach but cannot collect first. The cost is a full pause per sample in the stage's JVM and
    the tool's start (both in the report: `jcmd_seconds_mean`); Spark's ContextCleaner forces a
    full collection every 30 minutes anyway (spark.cleaner.periodicGC.interval), so an
    unobserved stage differs in when its heap and classes are reclaimed, not in what it keeps."""
    # 120 s: the attach waits for a safepoint (a task in flight) and a histogram walks the whole
    # heap; a JVM that does not answer in two minutes is a missing sample, not a stalled soak.
    r = subprocess.run([jcmd, str(pid), *command], capture_output=True, text=True, timeout=120)
    if r.returncode != 0:
        raise DependencyError(f"jcmd {pid}: {(r.stdout + r.stderr).strip()[-300:]}")
    return r.stdout


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def scrape(port: int) -> dict[str, float]:
    # 10 s: the stage answers a scrape in ms from its own thread; a slow answer is a missing one.
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as resp:
        return parse_metrics(resp.read().decode())


def warmup_seconds(minutes: float) -> float:
    """The default warm-up: DEFAULT_WARMUP_S, or a tenth of a shorter measured window."""
    return min(DEFAULT_WARMUP_S, minutes * 60 / 10)


@dataclass(frozen=True)
class SoakPlan:
    minutes: float
    out: str
    rate: int = DEFAULT_RATE
    sample_s: float = DEFAULT_SAMPLE_S
    warmup_s: float | None = None  # None: warmup_seconds(minutes)
    trigger_s: float = DEFAULT_TRIGGER_S
    partitions: int = PARTITIONS
    seed: int = 1
    bootstrap: str | None = None
    nmt: bool = False  # the stage's JVM with Native Memory Tracking, sampled per category


class Soak:
    def __init__(self, plan: SoakPlan) -> None:
        self.plan = plan
        self.warmup_s = warmup_seconds(plan.minutes) if plan.warmup_s is None else plan.warmup_s
        self.bench = Bench(BenchSettings(out=plan.out, bootstrap_servers=plan.bootstrap))
        self.out = self.bench.out
        self.samples: list[dict] = []
        self.jcmd_s: list[float] = []
        self.jcmd = jcmd_path()
        self.script = self.out / "soak-jcmd.txt"
        self.script.write_text("GC.run\nGC.heap_info\n"
                               + ("VM.native_memory summary\n" if plan.nmt else ""))
        self.histograms: list[dict[str, tuple[int, int]]] = []
        self.started = time.strftime("%Y-%m-%d %H:%M:%S")

    def sample(self, t: float, stage: int, jvm: int | None, port: int, prev: dict[str, float],
               t_prev: float) -> dict:
        """One row: /proc first (our own scrape and jcmd open sockets and threads for a moment),
        then the JVM's heap, then the stage's counters. A failed scrape leaves the batch figures
        empty (`_metrics` None): the next row's interval then covers both."""
        row: dict = {"t": round(t, 1)}
        for who, pid in (("python", stage), ("jvm", jvm)):
            got = proc_sample(pid) if pid else None
            for key in ("rss_mb", "threads", "fds"):
                row[f"{who}_{key}"] = got[key] if got else None
        if self.jcmd and jvm:
            t0 = time.monotonic()
            try:
                text = jcmd_run(self.jcmd, jvm, "-f", str(self.script))
            except (DependencyError, subprocess.TimeoutExpired) as exc:
                log.warning("soak: no heap sample at %.0fs: %s", t, exc)
                text = ""
            self.jcmd_s.append(time.monotonic() - t0)
            heap = parse_heap_info(text)
            row["jvm_heap_after_gc_mb"] = heap.get("heap_used_mb")
            row["jvm_heap_committed_mb"] = heap.get("heap_committed_mb")
            row["jvm_metaspace_mb"] = heap.get("metaspace_used_mb")
            row["jvm_metaspace_committed_mb"] = heap.get("metaspace_committed_mb")
            if self.plan.nmt:
                row["nmt"] = parse_nmt(text)
        try:
            cur = scrape(port)
        except OSError as exc:
            log.warning("soak: no /metrics at %.0fs: %s", t, exc)
            row.update({"batches": None, "batch_spark_ms": None, "batch_commit_ms": None,
                        "batch_cycle_ms": None, "input_lag_records": None,
                        "state_minutes": None, "_metrics": None})
            return row
        row.update(interval_figures(prev, cur, t - t_prev))
        row["input_lag_records"] = cur.get("logcount_input_lag_records")
        row["state_minutes"] = cur.get("logcount_state_minutes")
        row["_metrics"] = cur
        return row

    def run(self) -> dict:
        p, b = self.plan, self.bench
        topic, out_topic = b.name("soak-in"), b.name("soak-out")
        kafka_io.ensure_topic(kafka_io.admin(b.bootstrap), topic, p.partitions)
        records = list(synthetic_records("seed", FILLER_RECORDS, p.seed))
        filler = [r.value for r in records]
        port = _free_port()
        env = None
        if p.nmt:  # the JVM reads it at start (the launcher's short-lived JVM too, harmlessly)
            env = {"JAVA_TOOL_OPTIONS": f"{os.environ.get('JAVA_TOOL_OPTIONS', '')} "
                                        f"-XX:NativeMemoryTracking=summary".strip()}
        stage = Child(b.stage_argv(topic, "soak", "--metrics-port", str(port),
                                   "--trigger-interval", str(p.trigger_s)), env=env,
                      log_path=str(b.logs / "soak_stage.log"), sample=False)
        producer = SoakProducer(b.bootstrap, topic, filler, p.rate, p.partitions)
        reader = None
        try:
            producer.start()
            # 180 s: the session starts in ~3-5 s, but the machine may be busy with others.
            stage.wait_for_line("batch 1 committed", 180)
            reader = CyclingProbeReader(b.bootstrap, out_topic, b.name("soak-rd"))
            reader.start()
            jvm = find_jvm(stage.proc.pid)
            if jvm is None:
                raise DependencyError("soak: no java process under the stage")
            log.info("soak: stage pid %d, JVM pid %d; warm-up %gs, then %g minutes, a sample "
                     "every %gs", stage.proc.pid, jvm, self.warmup_s, p.minutes, p.sample_s)
            self._alive_sleep(stage, self.warmup_s)
            self.histogram(jvm)  # before the first interval, so that it times none
            t0 = time.monotonic()
            base = self.sample(0.0, stage.proc.pid, jvm, port, {}, 0.0)
            prev, t_prev, probe0 = base["_metrics"], 0.0, len(producer.sent)
            boundaries = [probe0]
            n = max(1, round(p.minutes * 60 / p.sample_s))
            for i in range(1, n + 1):
                self._alive_sleep(stage, t0 + i * p.sample_s - time.monotonic())
                if not producer.is_alive():
                    raise DependencyError("soak: the producer stopped; its log lines say why")
                t = time.monotonic() - t0
                row = self.sample(t, stage.proc.pid, jvm, port, prev, t_prev)
                if (cur := row.pop("_metrics")) is not None:
                    prev, t_prev = cur, t
                boundaries.append(len(producer.sent))
                self.samples.append(row)
                log.info("soak %d/%d: %s", i, n, {k: v for k, v in row.items() if k != "t"})
            self.histogram(jvm)
            producer.stop.set()
            # 90 s: flushing is seconds; a producer thread still busy after that is a bug here.
            producer.join(90)
            drained = self._drain(stage, reader, producer, port)
        finally:
            producer.stop.set()
            if stage.proc.poll() is None:
                stage.signal(signal.SIGTERM)
            # 120 s: a stop finishes the batch in flight and closes Spark, seconds normally.
            rc = stage.wait(120)
            if reader is not None:
                reader.stop.set()
                reader.join(10)  # the reader's poll returns within 50 ms
        cycles, rest = divmod(producer.filler_sent, len(records))
        want = expected_totals(expected_from_records(records, ["ERROR"]),
                               expected_from_records(records[:rest], ["ERROR"]), cycles,
                               len(producer.sent))
        got = committed_totals(b.bootstrap, out_topic)
        wrong = diff_totals(got, want)
        return self.results(producer, reader, boundaries, wrong, want, drained, rc, base)

    def histogram(self, jvm: int) -> None:
        """The live objects per class (the histogram collects first), kept to compare."""
        if not self.jcmd:
            return
        try:
            text = jcmd_run(self.jcmd, jvm, "GC.class_histogram")
        except (DependencyError, subprocess.TimeoutExpired) as exc:
            log.warning("soak: no class histogram: %s", exc)
            return
        self.histograms.append(parse_histogram(text))

    def _alive_sleep(self, stage: Child, seconds: float) -> None:
        end = time.monotonic() + max(0.0, seconds)
        while time.monotonic() < end:
            if stage.proc.poll() is not None:
                raise DependencyError(f"soak: the stage exited {stage.proc.returncode}: "
                                      f"{stage.tail()}")
            time.sleep(min(0.5, max(0.0, end - time.monotonic())))

    def _drain(self, stage: Child, reader: CyclingProbeReader, producer: SoakProducer,
               port: int) -> bool:
        """Wait until the stage has read every line produced and the reader has seen every
        probe; False if that did not happen within DRAIN_S."""
        deadline = time.monotonic() + DRAIN_S
        while time.monotonic() < deadline:
            try:
                read = scrape(port).get("logcount_records_read_total", 0)
            except OSError:
                read = 0  # asked again in half a second
            if read >= producer.lines and len(reader.seen) >= len(producer.sent):
                return True
            self._alive_sleep(stage, 0.5)
        log.warning("soak: not drained after %ds", DRAIN_S)
        return False

    def results(self, producer: SoakProducer, reader: CyclingProbeReader | None,
                boundaries: list[int], wrong: list[str], want: dict[str, int], drained: bool,
                rc: int, base: dict) -> dict:
        p = self.plan
        seen = reader.seen if reader else {}

        def lat(lo: int, hi: int) -> list[float]:
            return [(seen[k] - producer.sent[k]) * 1000 for k in range(lo, hi) if k in seen]

        for i, row in enumerate(self.samples):
            got = lat(boundaries[i], boundaries[i + 1])
            row["latency_p50_ms"] = round(percentile(got, 50), 1) if got else None
        k = len(self.samples) // 3
        first = lat(boundaries[0], boundaries[k]) if k else []
        last = lat(boundaries[-1 - k], boundaries[-1]) if k else []
        measured = lat(boundaries[0], boundaries[-1])
        ts = [row["t"] for row in self.samples]
        series = {name: summarize(ts, [row.get(name) for row in self.samples])
                  for name in SERIES}
        batches = sum(row["batches"] or 0 for row in self.samples)
        window = self.samples[-1]["t"] if self.samples else 0.0
        exact = not wrong and producer.failed == 0 and drained and rc == 0
        lat_thirds = (round(percentile(first, 50), 1) if first else None,
                      round(percentile(last, 50), 1) if last else None)
        verdict = ("exact" if exact else
                   f"**differ** ({len(wrong)} minutes; {producer.failed} lines not delivered; "
                   f"drained {drained}; stage exit {rc})")
        r = {"minutes": p.minutes, "rate_lines_per_s": p.rate, "sample_seconds": p.sample_s,
             "warmup_seconds": self.warmup_s, "trigger_interval_s": p.trigger_s,
             "input_partitions": p.partitions, "cores": os.cpu_count() or 0,
             "started": self.started, "plan": asdict(p),
             "batches": batches, "batches_per_s": round(batches / window, 2) if window else None,
             "lines_produced": producer.lines,
             "achieved_rate": round(producer.lines / producer.seconds) if producer.seconds else 0,
             "probes": len(producer.sent),
             "latency_ms": {"p50": round(percentile(measured, 50), 1) if measured else None,
                            "p99": round(percentile(measured, 99), 1) if measured else None,
                            "probes_seen": len(seen), "first_third_p50": lat_thirds[0],
                            "last_third_p50": lat_thirds[1]},
             "jcmd_seconds_mean": round(sum(self.jcmd_s) / len(self.jcmd_s), 2)
             if self.jcmd_s else None,
             "baseline": {key: v for key, v in base.items() if not key.startswith("_")},
             "totals": {"exact": exact, "verdict": verdict, "minutes": len(want),
                        "differing": wrong[:10], "undelivered": producer.failed,
                        "drained": drained, "stage_exit": rc},
             "series": series,
             "heap_histogram_growth": histogram_growth(self.histograms[0], self.histograms[-1])
             if len(self.histograms) > 1 else [],
             "nmt": nmt_series(ts, self.samples) if p.nmt else {},
             "samples": self.samples}
        r["goals"] = goals(series, lat_thirds, batches, p.minutes, exact)
        return r

    def write(self, r: dict) -> None:
        (self.out / "soak.json").write_text(json.dumps(r, indent=1) + "\n")
        (self.out / "soak.md").write_text(markdown(r))
        plot(r, self.out / "soak.png")


# 120 s: at 2,000 lines/s the stage is seconds behind at most; a stage that cannot catch up in
# two minutes has fallen behind, which the report must show rather than wait for.
DRAIN_S = 120


def run_soak(plan: SoakPlan, say: Callable[[str], None] = print) -> int:
    """Run the soak, write its files; 0 when the totals are exact (goals are reported), else 1."""
    if plan.bootstrap is None:
        stack.up(log=log.info)
    os.environ.setdefault("PYTHONPATH", str(home()))
    soak = Soak(plan)
    r = soak.run()
    soak.write(r)
    say(markdown(r))
    say(f"soak: wrote {soak.out / 'soak.json'}, soak.md, soak.png")
    return 0 if r["totals"]["exact"] else 1


def plan_from_settings(s: BenchSettings) -> SoakPlan:
    """`logcount bench --soak MINUTES ...` (core.settings.BenchSettings) -> a SoakPlan."""
    return SoakPlan(minutes=s.soak, out=s.out, rate=s.soak_rate, sample_s=s.sample_seconds,
                    seed=s.seed, bootstrap=s.bootstrap_servers)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--minutes", type=float, required=True, help="measured minutes")
    ap.add_argument("--rate", type=int, default=DEFAULT_RATE, help="input lines/s")
    ap.add_argument("--sample-seconds", type=float, default=DEFAULT_SAMPLE_S)
    ap.add_argument("--warmup-seconds", type=float, default=None,
                    help=f"seconds run before the first sample (default: "
                         f"{DEFAULT_WARMUP_S:g}, or a tenth of a shorter run)")
    ap.add_argument("--trigger", type=float, default=DEFAULT_TRIGGER_S,
                    help="the stage's --trigger-interval")
    ap.add_argument("--partitions", type=int, default=PARTITIONS, help="input partitions")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", default=None, help="directory for soak.* (default: a temp dir)")
    ap.add_argument("--bootstrap-servers", default=None,
                    help="use this broker instead of the embedded stack")
    ap.add_argument("--nmt", action="store_true",
                    help="start the stage's JVM with Native Memory Tracking (a few %% slower) "
                         "and report each category's committed memory: where RSS grows")
    a = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: "
                        "%(message)s")
    plan = SoakPlan(minutes=a.minutes, out=a.out or tempfile.mkdtemp(prefix="logcount-soak-"),
                    rate=a.rate, sample_s=a.sample_seconds, warmup_s=a.warmup_seconds,
                    trigger_s=a.trigger, partitions=a.partitions, seed=a.seed,
                    bootstrap=a.bootstrap_servers, nmt=a.nmt)
    return run_soak(plan)


if __name__ == "__main__":
    sys.exit(main())
