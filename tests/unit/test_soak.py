"""logcount/bench/soak.py, the run: its default warm-up."""


import pytest

from logcount.bench import soak


def test_warmup_is_a_tenth_of_a_short_run_and_a_minute_at_most():
    assert soak.warmup_seconds(1) == 6
    assert soak.warmup_seconds(20) == soak.DEFAULT_WARMUP_S


def test_bench_soak_runs_each_cadence_in_a_folder_of_its_own():
    from logcount.bench.soak import plans_from_settings
    from logcount.core.errors import ConfigError
    from logcount.core.settings import BenchSettings, RunSettings

    both = plans_from_settings(BenchSettings(soak=60, out="/o", soak_rate=2000))
    assert [(p.out, p.min_batch_interval, p.minutes, p.rate) for p in both] == [
        ("/o/defaults", RunSettings.min_batch_interval, 60, 2000), ("/o/unpaced", 0.0, 60, 2000)]
    one = plans_from_settings(BenchSettings(soak=5, out="/o", soak_modes="unpaced"))
    assert [(p.out, p.min_batch_interval) for p in one] == [("/o", 0.0)]
    with pytest.raises(ConfigError, match="--soak-modes"):
        BenchSettings(soak=5, soak_modes="fast")
