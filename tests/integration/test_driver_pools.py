"""pipeline/driver_pools.py against the stage's own local session: Spark's block-manager pools
start threads for each removal up to 100 each; bounded, a stream of jobs is served by a few
threads that live on (none started and ended per batch)."""

import time

import pytest
from pyspark.sql import functions as F

from logcount.pipeline import driver_pools
from logcount.pipeline.driver_pools import (
    POOL_THREADS,
    block_manager_pools,
    bound_block_manager_pools,
)

pytestmark = pytest.mark.integration


def _pool_threads(spark) -> dict[int, str]:
    jvm = spark.sparkContext._jvm
    return {t.getId(): t.getName() for t in jvm.java.lang.Thread.getAllStackTraces().keySet()
            if t.getName().startswith("block-manager-")}


def _sizes(spark) -> list[tuple[int, int]]:
    return [(p.getCorePoolSize(), p.getMaximumPoolSize()) for p in block_manager_pools(spark)]


def _jobs_whose_broadcasts_and_shuffles_are_removed(spark, n: int) -> None:
    """Each job broadcasts its tasks and shuffles; a collection lets the ContextCleaner remove
    both, as a batch a second does in the stage."""
    for _ in range(n):
        spark.range(0, 200, numPartitions=2).groupBy((F.col("id") % 5).alias("k")).count().collect()
        spark.sparkContext._jvm.System.gc()
        time.sleep(0.05)


def test_the_sessions_block_manager_pools_are_bounded_and_their_threads_kept(spark):
    assert _sizes(spark) == [(POOL_THREADS, POOL_THREADS)] * 2  # spark_session bounded them
    _jobs_whose_broadcasts_and_shuffles_are_removed(spark, 20)
    time.sleep(1)
    first = _pool_threads(spark)
    assert {n.rsplit("-", 1)[0] for n in first.values()} == {
        "block-manager-ask-thread-pool", "block-manager-storage-async-thread-pool"}
    _jobs_whose_broadcasts_and_shuffles_are_removed(spark, 40)
    time.sleep(1)
    later = _pool_threads(spark)
    # Spark's sizes: both pools at their 100 threads after 40 such jobs (db4ce07)
    assert len(later) <= 2 * POOL_THREADS, sorted(later.values())
    assert set(later) == set(first), "threads were started and ended between the rounds"


def test_a_spark_whose_endpoints_differ_is_left_as_it_is(spark, monkeypatch, caplog):
    monkeypatch.setattr(driver_pools, "ENDPOINTS", ("org.example.NoSuchEndpoint",))
    with caplog.at_level("INFO", logger="logcount.spark"):
        assert bound_block_manager_pools(spark, threads=1) == 0
    assert "found 0 of the driver's 1 block-manager pools" in caplog.text
    monkeypatch.undo()
    assert _sizes(spark) == [(POOL_THREADS, POOL_THREADS)] * 2  # not lowered to 1
