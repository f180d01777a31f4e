"""The chaos run's fault schedule (tests/support/harness.py): two independent lanes."""

import random
from collections import Counter

import pytest

from tests.support.harness import SINK_LANE, STAGE_LANE, ChaosConfig, fault_schedule

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("seed", range(20))
def test_every_fault_is_scheduled_once_inside_the_run_in_time_order(seed):
    cfg = ChaosConfig(seed=seed)
    schedule = fault_schedule(cfg, random.Random(seed))
    assert [t for t, _ in schedule] == sorted(t for t, _ in schedule)
    assert all(0 < t < cfg.duration_s for t, _ in schedule)
    assert Counter(f for _, f in schedule) == Counter(
        stage_sigkill=cfg.stage_sigkills - cfg.stage_crash_points,
        stage_crash_point=cfg.stage_crash_points, stage_sigterm=cfg.stage_sigterms,
        sink_sigkill=cfg.sink_sigkills, broker_bounce=cfg.broker_bounces,
        mysql_restart=cfg.mysql_restarts)


@pytest.mark.parametrize("seed", range(20))
def test_a_stage_gets_a_third_of_its_lanes_step_at_least_between_two_of_its_faults(seed):
    """The stage's faults keep their spacing whatever the sink's lane does (jitter is a third
    of a step either way, so two neighbours are at least a third of a step apart)."""
    cfg = ChaosConfig(seed=seed)
    stage = [t for t, f in fault_schedule(cfg, random.Random(seed)) if f in STAGE_LANE]
    step = cfg.duration_s / (len(stage) + 1)
    assert all(b - a >= step / 3 - 1e-9 for a, b in zip(stage, stage[1:], strict=False))
    sink = [f for _, f in fault_schedule(cfg, random.Random(seed)) if f in SINK_LANE]
    assert len(sink) == cfg.sink_sigkills + cfg.mysql_restarts


def test_the_same_seed_gives_the_same_schedule():
    cfg = ChaosConfig()
    assert fault_schedule(cfg, random.Random(3)) == fault_schedule(cfg, random.Random(3))
    assert fault_schedule(cfg, random.Random(3)) != fault_schedule(cfg, random.Random(4))
