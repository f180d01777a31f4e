"""logcount/bench/soak_report.py: the markdown report has every series and goal; the files it
writes."""

import json
import math

from logcount.bench import soak_report
from logcount.bench.soak_analysis import SERIES, goals, summarize


def _report() -> dict:
    samples = [{"t": 15.0 * i, **{name: 1.0 for name in SERIES}} for i in range(1, 7)]
    series = {name: summarize([s["t"] for s in samples], [s[name] for s in samples])
              for name in SERIES}
    r = {"minutes": 1.5, "rate_lines_per_s": 2000, "cores": 2, "trigger_interval_s": 0.05,
         "sample_seconds": 15.0, "warmup_seconds": 9.0, "batches": 600, "batches_per_s": 6.67,
         "lines_produced": 180_000, "achieved_rate": 2000, "probes": 1800,
         "latency_ms": {"p50": 150.0, "p99": 300.0, "probes_seen": 1800},
         "totals": {"verdict": "exact"}, "jcmd_seconds_mean": 0.5, "series": series,
         "samples": samples, "goals": goals(series, (150.0, 150.0), 600, 1.5, True)}
    return r


def test_markdown_has_every_series_and_goal():
    r = _report()
    series = r["series"]
    md = soak_report.markdown(r)
    assert all(f"| {label} |" in md for label, *_ in SERIES.values())
    assert "| goal | value | met |" in md and "not judged" in md and "**no**" not in md
    assert not math.isnan(series["jvm_rss_mb"]["slope_per_hour"])


def test_write_puts_the_json_the_markdown_and_the_plot_in_the_folder(tmp_path):
    r = _report()
    soak_report.write(r, tmp_path)
    assert json.loads((tmp_path / "soak.json").read_text()) == r
    assert (tmp_path / "soak.md").read_text() == soak_report.markdown(r)
    assert (tmp_path / "soak.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
