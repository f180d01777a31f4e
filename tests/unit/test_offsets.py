
from logcount.pipeline.job import (
    INTERPRETED_MAX_RECORDS,
    INTERPRETED_MAX_RECORDS_PER_RANGE,
    TASKS_PER_CORE,
    BatchShape,
    batch_shape,
)
from logcount.pipeline.offsets import (
    FIRST_BATCH_RECORDS,
    OffsetRange,
    batch_cap,
    offsets_to_send,
    plan_ranges,
    resolve_starts,
)


def test_plan_takes_everything_under_the_cap():
    assert plan_ranges({0: 5, 1: 0}, {0: 10, 1: 3}, 100) == [
        OffsetRange(0, 5, 10), OffsetRange(1, 0, 3)
    ]


def test_plan_skips_partitions_without_backlog():
    assert plan_ranges({0: 10, 1: 2}, {0: 10, 1: 4}, 100) == [OffsetRange(1, 2, 4)]


def test_plan_shares_the_cap_fairly_and_redistributes_leftovers():
    ranges = plan_ranges({0: 0, 1: 0, 2: 0}, {0: 2, 1: 1000, 2: 1000}, 100)
    sizes = {r.partition: r.size for r in ranges}
    assert sum(sizes.values()) == 100
    assert sizes[0] == 2
    assert abs(sizes[1] - sizes[2]) <= 1


def test_plan_cap_smaller_than_partition_count_still_progresses():
    ranges = plan_ranges({0: 0, 1: 0, 2: 0}, {0: 5, 1: 5, 2: 5}, 2)
    assert sum(r.size for r in ranges) == 2


def test_plan_never_exceeds_ends_or_goes_backwards():
    for cap in (1, 7, 50, 10_000):
        ranges = plan_ranges({0: 3, 1: 9}, {0: 40, 1: 9}, cap)
        for r in ranges:
            assert 0 < r.size <= cap and r.start in (3, 9) and r.end <= {0: 40, 1: 9}[r.partition]


def test_resolve_starts_takes_the_state_then_the_log_start_for_new_partitions():
    earliest, latest = {0: 0, 1: 0, 2: 10}, {0: 50, 1: 60, 2: 70}
    assert resolve_starts({0: 20}, earliest, latest) == {0: 20, 1: 0, 2: 10}


def test_resolve_starts_moves_an_offset_deleted_by_retention_to_the_log_start():
    assert resolve_starts({0: 5, 1: 40}, {0: 30, 1: 30}, {0: 50, 1: 50}) == {0: 30, 1: 40}


def test_the_first_batch_is_small_and_the_cap_grows_to_the_configured_one():
    caps = [batch_cap(n, 2_000_000) for n in range(6)]
    assert caps[0] == FIRST_BATCH_RECORDS
    assert caps == sorted(caps) and caps[-1] == 2_000_000
    assert caps.index(2_000_000) <= 3  # full size by the fourth batch
    assert batch_cap(10_000, 2_000_000) == 2_000_000  # no overflow on a long run


def test_a_configured_cap_below_the_first_batch_is_kept_from_the_start():
    assert [batch_cap(n, 700) for n in range(3)] == [700, 700, 700]


def test_only_moved_group_offsets_are_sent_unless_all_are_due():
    old = {p: 100 for p in range(512)}
    new = {**old, 7: 150, 300: 101, 512: 0}  # two moved, one new partition
    assert offsets_to_send(new, old, everything=False) == {7: 150, 300: 101, 512: 0}
    assert offsets_to_send(new, old, everything=True) == new
    assert offsets_to_send(old, old, everything=False) == {}


def test_many_ranges_become_a_few_tasks_and_small_batches_one():
    many = [OffsetRange(p, 0, 1000) for p in range(256)]  # 256k offsets
    assert batch_shape(many, parallelism=2) == BatchShape(2 * TASKS_PER_CORE, False)
    four = [OffsetRange(p, 0, 500_000) for p in range(4)]
    assert batch_shape(four, parallelism=2).tasks is None, "4 ranges on 2 cores keep 4 tasks"
    assert batch_shape(four, parallelism=1).tasks == TASKS_PER_CORE
    caught_up = [OffsetRange(p, 0, 750) for p in range(4)]  # 4 partitions at 20,000 lines/s
    assert batch_shape(caught_up, parallelism=2) == BatchShape(1, False)


def test_a_small_batch_over_many_ranges_takes_a_task_per_core_and_interpreted_projections():
    sparse = [OffsetRange(p, 0, 20) for p in range(256)]  # 256 partitions at 20,000 lines/s
    assert batch_shape(sparse, parallelism=2) == BatchShape(2, True)
    assert batch_shape(sparse, parallelism=1) == BatchShape(1, True)
    assert batch_shape(sparse[:16], parallelism=2).tasks == 1, "a few ranges stay one task"
    assert batch_shape(sparse[:17], parallelism=2).tasks == 2
    wide = [OffsetRange(p, 0, 100) for p in range(512)]  # 51,200: above the one-task bound
    assert batch_shape(wide, parallelism=2) == BatchShape(2 * TASKS_PER_CORE, True)
    at_bound = [OffsetRange(p, 0, INTERPRETED_MAX_RECORDS_PER_RANGE) for p in range(64)]
    assert batch_shape(at_bound, parallelism=2).interpreted
    above = [*at_bound[:-1], OffsetRange(63, 0, INTERPRETED_MAX_RECORDS_PER_RANGE + 1)]
    assert not batch_shape(above, parallelism=2).interpreted, "judged on the batch's average"
    assert batch_shape([], parallelism=2) == BatchShape(1, False)


def test_a_small_batch_over_a_few_ranges_runs_interpreted_up_to_its_bound():
    """A caught-up batch of a few thousand records pays more for generating its code than its
    rows save: up to INTERPRETED_MAX_RECORDS in all it runs interpreted, above it generated."""
    per = INTERPRETED_MAX_RECORDS // 4
    paced_2k = [OffsetRange(p, 0, per) for p in range(4)]  # 2,000 lines/s, one batch a second
    assert batch_shape(paced_2k, parallelism=2) == BatchShape(1, True)
    above = [*paced_2k[:-1], OffsetRange(3, 0, per + INTERPRETED_MAX_RECORDS % 4 + 1)]
    assert sum(r.size for r in above) == INTERPRETED_MAX_RECORDS + 1
    assert batch_shape(above, parallelism=2) == BatchShape(1, False)
    one = [OffsetRange(0, 0, INTERPRETED_MAX_RECORDS)]
    assert batch_shape(one, parallelism=2).interpreted
