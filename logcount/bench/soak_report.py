"""The soak's report: soak.md (its tables), soak.png (each series over time) and soak.json."""

from __future__ import annotations

import json
from pathlib import Path

from logcount.bench.soak_analysis import SERIES


def write(r: dict, out: Path) -> None:
    """DIR/soak.json (every sample and figure), DIR/soak.md and DIR/soak.png."""
    (out / "soak.json").write_text(json.dumps(r, indent=1) + "\n")
    (out / "soak.md").write_text(markdown(r))
    plot(r, out / "soak.png")


def _n(x) -> str:
    if x is None:
        return "-"
    return f"{x:,}" if isinstance(x, int | float) and not isinstance(x, bool) else str(x)


def markdown(r: dict) -> str:
    lat = r["latency_ms"]
    lines = [f"### Soak: {r['minutes']:g} minutes at {r['rate_lines_per_s']:,} lines/s, "
             f"{r['cores']} cores (trigger {r['trigger_interval_s']:g} s, "
             f"{_pacing(r.get('min_batch_interval_s', 0.0))}, a sample every "
             f"{r['sample_seconds']:g} s after {r['warmup_seconds']:g} s of warm-up)", "",
             f"{r['batches']:,} batches in the measured window ({r['batches_per_s']} a second), "
             f"{r['lines_produced']:,} lines produced ({r['achieved_rate']:,} lines/s), "
             f"{r['probes']:,} probes (p50 {_n(lat['p50'])} ms, p99 {_n(lat['p99'])} ms, "
             f"{lat['probes_seen']:,} seen). Totals: {r['totals']['verdict']}. Samples cost "
             f"{_n(r['jcmd_seconds_mean'])} s of jcmd each (mean).", "",
             "| series | unit | slope per hour | slope per hour, second half | first third mean "
             "| last third mean | first third max | last third max |",
             "|---|---|---:|---:|---:|---:|---:|---:|"]
    for name, s in r["series"].items():
        label, unit, _, _ = SERIES[name]
        lines.append(f"| {label} | {unit} | {_n(s['slope_per_hour'])} | "
                     f"{_n(s.get('second_half_slope_per_hour'))} | "
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


def _pacing(interval: float) -> str:
    return (f"at most a batch every {interval:g} s" if interval > 0
            else "unpaced (--min-batch-interval 0)")


def plot(r: dict, path: Path) -> None:
    """soak.png: every series over the measured window, one panel per kind."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels: dict[str, list[str]] = {}
    for name, (_, _, panel, _) in SERIES.items():
        panels.setdefault(panel, []).append(name)
    rows = (len(panels) + 1) // 2
    fig, axes = plt.subplots(rows, 2, figsize=(13, 3.25 * rows))
    ts = [s["t"] / 60 for s in r["samples"]]
    colors = iter(plt.rcParams["axes.prop_cycle"].by_key()["color"] * 4)
    for left, names in zip(axes.flat, panels.values(), strict=False):
        right = left.twinx() if any(SERIES[n][3] == "r" for n in names) else None
        handles = []
        for name in names:
            label, unit, _, side = SERIES[name]
            ax = right if side == "r" and right is not None else left
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
