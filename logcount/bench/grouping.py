"""`logcount bench --grouping`: what --group-by costs, in one run on the embedded stack.

    shapes    the seed format and every bench shape, ungrouped: this code (A) against --ab-base
              (B), interleaved (A B, then B A, ...): the steady state of each, each side's median
    filebeat  Filebeat envelopes with the generator's fleet (--dimensions), ungrouped against
              --group-by host.name,kubernetes.namespace, interleaved
    latency   10,000 live series (the record key, 10,000 values in turn) at --latency-rate,
              ungrouped against --group-by key, interleaved: p99 of the probes, at the default
              cadence and unpaced (--min-batch-interval 0)
--grouping-parts runs only some, in this order. Writes grouping.json and grouping.md in --out; the
goals are docs/benchmarks.md's (Per-series counting).
"""

from __future__ import annotations

import logging
import os
import statistics
from collections.abc import Callable
from pathlib import Path

from logcount.bench import data
from logcount.bench.checkout import ab_env
from logcount.bench.latency import percentile
from logcount.bench.runner import BENCH_SHAPES, Bench, commit_seconds, run_steps
from logcount.connectors import stack
from logcount.core.errors import ConfigError
from logcount.core.paths import home
from logcount.core.settings import BenchSettings
from logcount.core.settings.commands import GROUPING_PARTS
from logcount.formats.catalogue import RUN_FLAGS
from logcount.formats.shapes import synthetic_lines, synthetic_records

log = logging.getLogger("logcount.bench")

AB_GOAL = 0.95  # ungrouped, this code's steady state / the code before grouping's, at least
FILEBEAT_GOAL = 0.8  # grouped / ungrouped steady state, at least
LATENCY_GOAL = 1.25  # grouped p99 / ungrouped p99, at most
FILEBEAT_GROUP_BY = "host.name,kubernetes.namespace"
LIVE_SERIES = 10_000
# The live series' lines fall in 5 minutes (a live stream's present), not the bench's day:
# 10,000 series over a day would be 14 million cells, a backlog, not live series.
LIVE_SPAN_MINUTES = 5


def _median(runs: list[dict], key: str) -> float | None:
    got = [r[key] for r in runs if r.get(key) is not None]
    return round(statistics.median(got), 1) if got else None  # two floats' mean: 334.79999...


def _ratio(a: float | None, b: float | None) -> float | None:
    return round(a / b, 3) if a is not None and b else None


def shapes_ab(b: Bench, s: BenchSettings, base: str) -> dict:
    out = {}
    for shape in ("seed", *BENCH_SHAPES):
        topic = b.name(f"ab-{shape}-in")
        data.write_topic(b.bootstrap, topic,
                         [r.value for r in synthetic_records(shape, s.lines, s.seed)], 4)
        runs: dict[str, list[dict]] = {"A": [], "B": []}
        for i in range(s.ab_repeats):
            for side in ("AB" if i % 2 == 0 else "BA"):
                env = ab_env(base, b.out) if side == "B" else None
                runs[side].append(b.logcount(f"ab_{shape}_{side}{i}", topic, *RUN_FLAGS[shape],
                                             env=env))
        a, bb = (_median(runs[k], "steady_lines_per_s") for k in "AB")
        out[shape] = {"A_steady": [r["steady_lines_per_s"] for r in runs["A"]],
                      "B_steady": [r["steady_lines_per_s"] for r in runs["B"]],
                      "A_median": a, "B_median": bb, "ratio": _ratio(a, bb),
                      "goal": AB_GOAL, "met": (_ratio(a, bb) or 0) >= AB_GOAL}
        log.info("A/B %s: %s", shape, out[shape])
    return out


def filebeat_grouped(b: Bench, s: BenchSettings) -> dict:
    records = list(synthetic_records("filebeat", s.lines, s.seed, dimensions=True))
    series = {((r.fields or {}).get("host.name", ""),
               (r.fields or {}).get("kubernetes.namespace", "")) for r in records}
    topic = b.name("fbg-in")
    data.write_topic(b.bootstrap, topic, [r.value for r in records], 4)
    runs: dict[str, list[dict]] = {"ungrouped": [], "grouped": []}
    for i in range(s.ab_repeats):
        for side in (("ungrouped", "grouped") if i % 2 == 0 else ("grouped", "ungrouped")):
            flags = [*RUN_FLAGS["filebeat"]]
            if side == "grouped":
                flags += ["--group-by", FILEBEAT_GROUP_BY]
            runs[side].append(b.logcount(f"fb_{side}{i}", topic, *flags))
    g, u = (_median(runs[k], "steady_lines_per_s") for k in ("grouped", "ungrouped"))
    out = {"group_by": FILEBEAT_GROUP_BY, "series": len(series),
           "ungrouped_steady": [r["steady_lines_per_s"] for r in runs["ungrouped"]],
           "grouped_steady": [r["steady_lines_per_s"] for r in runs["grouped"]],
           "ungrouped_median": u, "grouped_median": g, "ratio": _ratio(g, u),
           "goal": FILEBEAT_GOAL, "met": (_ratio(g, u) or 0) >= FILEBEAT_GOAL}
    log.info("filebeat grouped: %s", out)
    return out


# The live-series part's cadences: the default (a caught-up stage starts at most one batch a
# second) and the low-latency mode, where a grouped batch's extra work is not hidden by pacing.
LIVE_CADENCES = {"default": (), "unpaced": ("--min-batch-interval", "0")}


def live_latency(b: Bench, s: BenchSettings) -> dict:
    filler = list(synthetic_lines(200_000, s.seed, span_minutes=LIVE_SPAN_MINUTES))
    keys = [b"svc-%05d" % i for i in range(LIVE_SERIES)]
    cadences = {}
    for cadence, pace in LIVE_CADENCES.items():
        runs: dict[str, list[dict]] = {"ungrouped": [], "grouped": []}
        for i in range(s.latency_repeats):
            for side in (("ungrouped", "grouped") if i % 2 == 0 else ("grouped", "ungrouped")):
                tag = f"live-{cadence}-{side}-x{i}"
                topic = b.loaded_topic(tag, filler, 4)
                flags = ["--trigger-interval", "0.5", *pace]
                if side == "grouped":
                    flags += ["--group-by", "key"]
                c = b.child(f"live_{cadence}_{side}{i}", b.stage_argv(topic, tag, *flags))
                got = b.measure(c, "batch 1 committed", topic, tag, filler, s.latency_rate, 4,
                                keys=keys)
                commits = commit_seconds(c)[1:]
                got["commit_p99_ms"] = (round(percentile([x * 1000 for x in commits], 99), 1)
                                        if commits else None)
                got["batches"] = len(commits)
                runs[side].append(got)
                log.info("live series, %s cadence, %s %d: %s", cadence, side, i, got)
        g, u = (_median(runs[k], "p99") for k in ("grouped", "ungrouped"))
        ratio = _ratio(g, u)
        cadences[cadence] = {"flags": list(pace), "runs": runs, "ungrouped_p99_median": u,
                             "grouped_p99_median": g, "ratio": ratio,
                             "met": ratio is not None and ratio <= LATENCY_GOAL}
    return {"series": LIVE_SERIES, "rate": s.latency_rate, "cadences": cadences,
            "goal": LATENCY_GOAL, "met": all(c["met"] for c in cadences.values())}


def markdown(r: dict) -> str:
    """The report: each part run (a part left out by --grouping-parts is not shown; one that
    was to run but has no figures ends the report: the run stopped there)."""
    lines = [f"# logcount bench --grouping ({r['lines']:,} lines, seed {r['seed']})"]
    for name in r.get("parts", GROUPING_PARTS):
        if name not in r:
            return "\n".join([*lines, "", "(the run stopped here)", ""])
        lines += _SECTIONS[name](r)
    return "\n".join([*lines, ""])


def _shapes_md(r: dict) -> list[str]:
    lines = ["", f"A: this code; B: {r['ab_base']} (ungrouped, steady lines/s, median of "
             f"{r['ab_repeats']})", "",
             "| shape | A runs | B runs | A median | B median | A/B | goal | met |",
             "|---|---|---|---|---|---|---|---|"]
    for shape, x in r["shapes"].items():
        lines.append(f"| {shape} | {x['A_steady']} | {x['B_steady']} | {x['A_median']} | "
                     f"{x['B_median']} | {x['ratio']} | >= {x['goal']} | {x['met']} |")
    return lines


def _filebeat_md(r: dict) -> list[str]:
    f = r["filebeat"]
    return ["", f"Filebeat grouped by {f['group_by']} ({f['series']} series) against "
            "ungrouped, steady lines/s:", "",
            "| ungrouped runs | grouped runs | ungrouped median | grouped median | ratio | "
            "goal | met |", "|---|---|---|---|---|---|---|",
            f"| {f['ungrouped_steady']} | {f['grouped_steady']} | {f['ungrouped_median']} | "
            f"{f['grouped_median']} | {f['ratio']} | >= {f['goal']} | {f['met']} |"]


def _latency_md(r: dict) -> list[str]:
    lat = r["latency"]
    lines: list[str] = []
    for cadence, c in lat["cadences"].items():
        pace = " ".join(c["flags"]) or "the default --min-batch-interval"
        lines += ["", f"{lat['series']:,} live series at {lat['rate']:,} lines/s (trigger 0.5 s, "
                  f"{cadence} cadence: {pace}), --group-by key against ungrouped:", "",
                  "| run | p50 ms | p99 ms | max ms | rate | commit p99 ms | batches | "
                  "CPU s/M lines |", "|---|---|---|---|---|---|---|---|"]
        for side, runs in c["runs"].items():
            for i, x in enumerate(runs):
                lines.append(f"| {side} {i} | {x['p50']} | {x['p99']} | {x['max']} | "
                             f"{x['rate_lines_per_s']} | {x['commit_p99_ms']} | "
                             f"{x['batches']} | {x['cpu_s_per_m_lines']} |")
        lines += ["", f"p99 median ({cadence}): grouped {c['grouped_p99_median']} ms, ungrouped "
                  f"{c['ungrouped_p99_median']} ms, ratio {c['ratio']} (goal <= {lat['goal']}): "
                  f"{'met' if c['met'] else 'missed'}"]
    return lines


_SECTIONS: dict[str, Callable[[dict], list[str]]] = {
    "shapes": _shapes_md, "filebeat": _filebeat_md, "latency": _latency_md}


def run_grouping(s: BenchSettings) -> int:
    names = s.grouping_part_names
    if "shapes" in names and not s.ab_base:
        raise ConfigError("--grouping needs --ab-base DIR: a checkout of the code before "
                          "grouping, run as the A/B's B side (or --grouping-parts without shapes)")
    base = str(Path(s.ab_base).resolve()) if s.ab_base else None
    if s.bootstrap_servers is None:
        stack.up(log=log.info)
    os.environ.setdefault("PYTHONPATH", str(home()))
    b = Bench(s)
    result: dict = {"lines": s.lines, "seed": s.seed, "ab_base": base,
                    "ab_repeats": s.ab_repeats, "latency_repeats": s.latency_repeats,
                    "parts": list(names)}
    steps = [lambda r, name=name, part=part: r.__setitem__(name, part())
             for name, part in selected_parts(b, s, base, names)]
    return run_steps(b, "grouping", result, steps, markdown)


def selected_parts(b: Bench, s: BenchSettings, base: str | None,
                   names: tuple[str, ...]) -> list[tuple[str, Callable[[], dict]]]:
    """The (name, run) of each part --grouping-parts names, in the bench's order."""
    every: dict[str, Callable[[], dict]] = {
        "shapes": lambda: shapes_ab(b, s, base or ""),
        "filebeat": lambda: filebeat_grouped(b, s), "latency": lambda: live_latency(b, s)}
    return [(n, every[n]) for n in GROUPING_PARTS if n in names]
