"""logcount/bench/target.py's pure parts: the target it sets, its goals and its report."""

from __future__ import annotations

import pytest

from logcount.bench import target
from logcount.core.errors import ConfigError
from logcount.core.settings import BenchSettings


def _run(p50: float, p99: float, cpu: float, batches: int | None = None) -> dict:
    row = {"p50": p50, "p99": p99, "cpu_s_per_m_lines": cpu, "window_cpu_seconds": cpu * 0.12}
    return row | ({"batches": batches} if batches is not None else {})


def test_the_target_is_kafka_streams_p99_in_whole_milliseconds_never_above_it():
    assert target.target_ms(262.9) == 262
    assert target.target_ms(250.0) == 250
    assert target.target_ms(0.4) == 1


def test_each_rate_is_judged_on_p99_cpu_per_line_and_batches():
    streams, unpaced = _run(120.0, 262.0, 74.0), _run(90.0, 195.0, 474.8, 3000)
    met = target.goals(2000, streams, _run(150.0, 255.0, 180.0, 700), unpaced)
    assert [g["met"] for g in met] == [True, True, True]
    assert met[1]["value"] == pytest.approx(2.43)
    missed = target.goals(2000, streams, _run(150.0, 263.0, 186.0, 3001), unpaced)
    assert [g["met"] for g in missed] == [False, False, False]
    assert target.goals(2000, {**streams, "cpu_s_per_m_lines": None},
                        _run(1, 2, 3.0, 1), unpaced)[1] == {
        "goal": "2000 lines/s: CPU per line <= 2.5 x Kafka Streams'", "value": None,
        "peer": None, "met": False}


def test_the_report_has_a_row_per_run_and_a_verdict_per_goal():
    streams, tgt, unpaced = _run(120.0, 262.0, 74.0), _run(150.0, 255.0, 180.0, 700), _run(
        90.0, 195.0, 474.8, 3000)
    r = {"started": "2026-11-29T21:00:00+00:00", "warmup_seconds": 15.0, "window_seconds": 60.0,
         "rates": [{"rate": 2000, "target_ms": 262, "streams": streams, "target": tgt,
                    "unpaced": unpaced, "goals": target.goals(2000, streams, tgt, unpaced)}]}
    md = target.markdown(r)
    assert "| 2,000 | logcount, --target-latency 262ms | 150.0 | 255.0 | 180.0 |" in md
    assert "| 2,000 | kafka_streams_eos |" in md and "--min-batch-interval 0 |" in md
    assert md.count("| yes |") == 3


def test_target_rates_are_whole_lines_per_second():
    assert BenchSettings(target=True).target_rate_list == (2000, 20000)
    assert BenchSettings(target_rates="500").target_rate_list == (500,)
    with pytest.raises(ConfigError, match="--target-rates"):
        BenchSettings(target_rates="fast")


class _Bench:
    def __init__(self, out) -> None:
        self.out, self.dropped = out, 0

    def drop_topics(self) -> None:
        self.dropped += 1


def test_a_mode_s_steps_keep_their_figures_as_they_come_and_the_topics_go_either_way(
        tmp_path, capsys):
    import json

    from logcount.bench.runner import run_steps

    b = _Bench(tmp_path)
    seen: list[dict] = []

    def step(r: dict) -> None:
        r["rates"].append(len(r["rates"]))
        seen.append(json.loads((tmp_path / "t.json").read_text()) if r["rates"][1:] else {})

    assert run_steps(b, "t", {"rates": []}, [step, step], lambda r: f"# {r['rates']}\n") == 0  # type: ignore[arg-type]
    assert seen[1]["rates"] == [0]  # the first step's figures were on disk before the second
    assert json.loads((tmp_path / "t.json").read_text())["rates"] == [0, 1]
    assert (tmp_path / "t.md").read_text() == "# [0, 1]\n" and b.dropped == 1
    assert "# [0, 1]" in capsys.readouterr().out

    def boom(r: dict) -> None:
        raise RuntimeError("a contender failed")

    (tmp_path / "t.md").unlink()
    with pytest.raises(RuntimeError):
        run_steps(b, "t", {"rates": []}, [step, boom], lambda r: "")  # type: ignore[arg-type]
    assert json.loads((tmp_path / "t.json").read_text())["rates"] == [0]  # kept
    assert b.dropped == 2 and not (tmp_path / "t.md").exists()
