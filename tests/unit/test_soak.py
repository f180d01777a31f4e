"""logcount/bench/soak.py, the run: its default warm-up."""


from logcount.bench import soak


def test_warmup_is_a_tenth_of_a_short_run_and_a_minute_at_most():
    assert soak.warmup_seconds(1) == 6
    assert soak.warmup_seconds(20) == soak.DEFAULT_WARMUP_S
