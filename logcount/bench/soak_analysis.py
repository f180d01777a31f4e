"""The soak's figures: the series it samples, each one's slope and thirds, the totals the output
must hold, and the goals a run is judged by."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from logcount.bench.latency import probe_minute

PROBE_MINUTES = 60  # probe k counts into minute k % 60 of 2031-01-01 00:xx

# The endurance goals.
RSS_SLOPE_GOAL_MB_H = 20.0
LATENCY_GOAL = 1.10  # last third's p50 <= 1.10 x the first third's
BATCH_GOAL = 10_000  # batches in the measured window, judged when MINUTES >= BATCH_GOAL_MINUTES
BATCH_GOAL_MINUTES = 20
# A paced stage (--min-batch-interval P > 0) starts at most one batch every P s, so its count is
# set by the cadence: the goal is that it kept it, >= CADENCE_SHARE of window / P (a batch that
# overran P, or a sample's jcmd pause, costs a few).
CADENCE_SHARE = 0.9
# Thread and fd counts move a little without growing (idle pool workers replaced, connections
# opened and closed); a leak of one per batch would add thousands in 20 minutes and one per
# minute 20: the tolerances admit the noise, not either leak.
# Figures: docs/tuning.md#soak-tolerances
THREAD_TOLERANCE = 4
FD_TOLERANCE = 8

# name -> (label, unit, plot panel, its axis: l or r, for a series of another scale)
SERIES: dict[str, tuple[str, str, str, str]] = {
    "python_rss_mb": ("Python driver RSS", "MB", "rss", "l"),
    "jvm_rss_mb": ("JVM RSS", "MB", "rss", "r"),
    "jvm_heap_committed_mb": ("JVM heap committed", "MB", "rss", "r"),
    # The JVM's RSS by region (soak_sampling.rss_by_region): which one a step in RSS is.
    "jvm_rss_heap_mb": ("JVM RSS: Java heap", "MB", "regions", "l"),
    "jvm_rss_code_mb": ("JVM RSS: JIT code cache", "MB", "regions", "l"),
    "jvm_rss_cds_mb": ("JVM RSS: class-data archive", "MB", "regions", "l"),
    "jvm_rss_files_mb": ("JVM RSS: other mapped files", "MB", "regions", "l"),
    "jvm_rss_other_mb": ("JVM RSS: the rest (malloc, metaspace, stacks)", "MB", "regions", "l"),
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


def slope_per_hour(ts: Sequence[float], ys: Sequence[float | None]) -> float | None:
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


def second_half(values: Sequence) -> list:
    """The samples after the window's middle (the later len // 2), where a goal on a slope is
    judged: the first half still holds the heap's and the JIT's settling."""
    return list(values[len(values) - len(values) // 2:])


def summarize(ts: Sequence[float], ys: Sequence[float | None]) -> dict:
    """A series' slope per hour (over the whole window and over its second half) and its first
    and last thirds' mean and max."""
    first, last = (list(filter(_present, part)) for part in thirds(ys))

    def r(x):
        return None if x is None else round(x, 2)

    return {"slope_per_hour": r(slope_per_hour(ts, ys)),
            "second_half_slope_per_hour": r(slope_per_hour(second_half(ts), second_half(ys))),
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
          batches: int, minutes: float, totals_exact: bool,
          min_batch_interval: float = 0.0) -> list[dict]:
    """Each goal with its value and verdict (met None: not judged on a run this short);
    `min_batch_interval`: the stage's pacing, which sets the batch goal."""
    out = []
    for name in ("python_rss_mb", "jvm_rss_mb"):
        slope = series.get(name, {}).get("second_half_slope_per_hour")
        out.append(_goal(f"{SERIES[name][0]} slope over the second half <= "
                         f"{RSS_SLOPE_GOAL_MB_H:g} MB/hour", slope,
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
    if min_batch_interval > 0:
        want = int(CADENCE_SHARE * minutes * 60 / min_batch_interval)
        goal = (f"batches >= {want:,}, {CADENCE_SHARE:.0%} of one per {min_batch_interval:g} s "
                f"(runs of {BATCH_GOAL_MINUTES}+ minutes)")
    else:
        want = BATCH_GOAL
        goal = f"batches >= {BATCH_GOAL:,} (runs of {BATCH_GOAL_MINUTES}+ minutes)"
    out.append(_goal(goal, batches, (batches >= want) if judged else None))
    out.append(_goal("output totals equal the produced counts exactly", totals_exact,
                     totals_exact))
    return out


def _goal(goal: str, value, met: bool | None) -> dict:
    return {"goal": goal, "value": value, "met": met}


def histogram_growth(first: dict[str, tuple[int, int]], last: dict[str, tuple[int, int]],
                     top: int = 15) -> list[dict]:
    """The `top` classes whose live bytes grew most from `first` to `last` (grown ones only)."""
    rows: list[dict[str, Any]] = []
    for name in set(first) | set(last):
        (n0, b0), (n1, b1) = first.get(name, (0, 0)), last.get(name, (0, 0))
        if b1 > b0:
            rows.append({"class": name, "instances": [n0, n1], "bytes": [b0, b1],
                         "grew_bytes": b1 - b0})
    return sorted(rows, key=lambda r: (-r["grew_bytes"], r["class"]))[:top]
