"""The driver's block-manager thread pools, bounded.

Spark removes every job's broadcasts and shuffles (its ContextCleaner, as their references die)
through two pools of the driver: BlockManagerMasterEndpoint's `block-manager-ask-thread-pool` and
BlockManagerStorageEndpoint's `block-manager-storage-async-thread-pool`. Both are
ThreadPoolExecutors whose core size is their maximum (100) with a 60 s idle timeout, so each task
starts a new thread until 100 are alive: at a batch a second the stage's driver held ~190 of them
and started and ended ~2.8 threads a second. No setting sizes them (Spark 4.0-4.2 hard-code 100);
`bound_block_manager_pools` lowers their sizes once the session is up, so a few threads take the
removals in turn. Where this Spark's internals differ, what is not found keeps Spark's sizes (and
the log says so). On a cluster each executor's storage endpoint keeps its own pool: only the
driver's are ours.
"""

from __future__ import annotations

import logging

from py4j.java_gateway import JavaObject

log = logging.getLogger("logcount.spark")

# Removals are short and come a few a second; four threads a pool leave room for one that waits
# on the master (a removal reports its blocks with askSync) without queueing the rest behind it.
# Figures: docs/tuning.md#block-manager-pools
POOL_THREADS = 4
ENDPOINTS = ("org.apache.spark.storage.BlockManagerMasterEndpoint",
             "org.apache.spark.storage.BlockManagerStorageEndpoint")


def block_manager_pools(spark) -> list:
    """The driver's block-manager pools (py4j ThreadPoolExecutors): the endpoints are keys of the
    RPC dispatcher's maps, their pools fields of type ThreadPoolExecutor. Found by type, not by
    name: private names are the compiler's and may change between releases. Raises py4j's
    errors where this Spark's classes differ."""
    jvm = spark.sparkContext._jvm
    dispatcher = spark.sparkContext._jsc.sc().env().rpcEnv().dispatcher()
    endpoints = [e for m in _fields(jvm, dispatcher, "java.util.Map") for e in m.keySet()
                 if isinstance(e, JavaObject) and e.getClass().getName() in ENDPOINTS]
    pool_type = "java.util.concurrent.ThreadPoolExecutor"
    return [p for e in endpoints for p in _fields(jvm, e, pool_type)]


def bound_block_manager_pools(spark, threads: int = POOL_THREADS) -> int:
    """Lowers the driver's block-manager pools to `threads` threads each; how many it found."""
    try:
        pools = block_manager_pools(spark)
    except Exception as exc:  # py4j: a Spark whose classes differ
        log.info("the driver's block-manager pools keep Spark's sizes (%s)", exc)
        return 0
    if len(pools) < len(ENDPOINTS):
        log.info("found %d of the driver's %d block-manager pools", len(pools), len(ENDPOINTS))
    for pool in pools:
        if pool.getCorePoolSize() > threads:  # the core first: it may not exceed the maximum
            pool.setCorePoolSize(threads)
            pool.setMaximumPoolSize(threads)  # and threads over it end when next idle
    return len(pools)


def _fields(jvm, obj, type_name: str) -> list:
    """The values of `obj`'s own fields whose declared type is `type_name` or below it."""
    wanted = jvm.java.lang.Class.forName(type_name)
    values = []
    for field in obj.getClass().getDeclaredFields():
        if wanted.isAssignableFrom(field.getType()):
            field.setAccessible(True)
            value = field.get(obj)
            if value is not None:
                values.append(value)
    return values
