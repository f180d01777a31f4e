"""The soak's samples: a row per interval from /proc (through `procs`), from the JVM's jcmd
(heap after a full collection, metaspace, native memory, class histograms), the JVM's RSS by
region (/proc/PID/smaps against the heap's and code cache's ranges) and from the stage's own
/metrics (batches, their mean times, the input lag)."""

from __future__ import annotations

import logging
import os
import re
import shutil
import subprocess
import time
import urllib.request
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from logcount.bench.procs import descendants, proc_sample, processes, read_proc
from logcount.core.errors import DependencyError
from logcount.pipeline.jdk import java_home

log = logging.getLogger("logcount.bench.soak")


class Sampler:
    """Takes the rows of one soak, and keeps what the report says of the sampling itself: the
    seconds each jcmd call took and the class histograms."""

    def __init__(self, out: Path, nmt: bool) -> None:
        self.nmt = nmt
        self.jcmd = jcmd_path()
        self.jcmd_s: list[float] = []
        self.script = out / "soak-jcmd.txt"
        self.script.write_text("GC.run\nGC.heap_info\nCompiler.codecache\n"
                               + ("VM.native_memory summary\n" if nmt else ""))
        self.histograms: list[dict[str, tuple[int, int]]] = []

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
            if self.nmt:
                row["nmt"] = parse_nmt(text)
            ranges = jvm_ranges(text)
            smaps = read_proc(f"/proc/{jvm}/smaps") if ranges["heap"] else None
            if smaps:
                row.update({f"jvm_rss_{k}_mb": v for k, v in rss_by_region(smaps, ranges).items()})
        try:
            cur = scrape(port)
        except (OSError, ValueError) as exc:  # ValueError: not the Prometheus text format
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


_HEAP_SPAN = re.compile(r"total \d+K, used \d+K \[(0x[0-9a-f]+), (?:0x[0-9a-f]+, )?(0x[0-9a-f]+)\)")
_CODE_SPAN = re.compile(r"^\s*bounds \[(0x[0-9a-f]+), 0x[0-9a-f]+, (0x[0-9a-f]+)\]", re.M)


def jvm_ranges(text: str) -> dict[str, list[tuple[int, int]]]:
    """The heap's generations and the code cache's heaps as reserved address ranges, from
    `GC.heap_info` (`[low, high)` or `[low, committed, high)`) and `Compiler.codecache`."""
    return {name: [(int(lo, 16), int(hi, 16)) for lo, hi in pattern.findall(text)]
            for name, pattern in (("heap", _HEAP_SPAN), ("code", _CODE_SPAN))}


_MAPPING = re.compile(r"^([0-9a-f]+)-[0-9a-f]+ \S+ \S+ \S+ \d+ *(.*)$")
# The JVM's RSS by where it lives; "other" is anonymous memory outside the heap and the code
# cache: malloc (the JIT's and the collector's own), metaspace, thread stacks.
REGIONS = ("heap", "code", "cds", "files", "other")


def rss_by_region(smaps: str, ranges: dict[str, list[tuple[int, int]]]) -> dict[str, float]:
    """/proc/PID/smaps -> resident MB per region (REGIONS): a mapping that starts inside the
    heap's or the code cache's range is theirs; else the class-data archive (a .jsa file),
    another file (jars, libraries) or other (anonymous)."""
    kb = dict.fromkeys(REGIONS, 0)
    region = None
    for line in smaps.splitlines():
        if line.startswith("Rss:"):
            if region:
                kb[region] += int(line.split()[1])
            continue
        m = _MAPPING.match(line)
        if not m:
            continue
        start, path = int(m[1], 16), m[2].strip()
        region = next((name for name in ("heap", "code")
                       if any(lo <= start < hi for lo, hi in ranges.get(name, ()))),
                      None) or ("cds" if path.endswith(".jsa")
                                else "files" if path.startswith("/") else "other")
    return {name: round(v / 1024, 1) for name, v in kb.items()}


_HISTO = re.compile(r"^\s*\d+:\s+(\d+)\s+(\d+)\s+(\S+)", re.M)


def parse_histogram(text: str) -> dict[str, tuple[int, int]]:
    """`jcmd PID GC.class_histogram` -> class -> (instances, bytes); the module is left out."""
    return {name: (int(n), int(b)) for n, b, name in _HISTO.findall(text)}


def parse_metrics(text: str) -> dict[str, float]:
    """Prometheus text -> {sample name: value}, the label sets of one name summed (the lag gauge
    has one per partition)."""
    out: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out[sample.name] = out.get(sample.name, 0.0) + sample.value
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


def find_jvm(root: int) -> int | None:
    """The first `java` process below `root` (the stage's Spark driver JVM)."""
    procs = processes()
    parents = {pid: ppid for pid, (_, ppid) in procs.items()}
    return next((p for p in descendants(root, parents) if procs[p][0] == "java"), None)


def jcmd_path() -> str | None:
    """The jcmd of the JDK the stage's java comes from (JAVA_HOME first, as pyspark)."""
    home = java_home()
    if home and os.access(home / "bin" / "jcmd", os.X_OK):
        return str(home / "bin" / "jcmd")
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


def scrape(port: int) -> dict[str, float]:
    # 10 s: the stage answers a scrape in ms from its own thread; a slow answer is a missing one.
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as resp:
        return parse_metrics(resp.read().decode())
