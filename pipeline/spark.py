"""The stage's SparkSession: built here when the stage runs on its own, or the one
`spark-submit` gave it. Leaf of the Spark side: imports only the JVM's options (the CDS archive,
the JDK's), the driver's pools and the jar paths."""

from __future__ import annotations

import concurrent.futures
import logging
import os
import re
import sys
import time
from collections.abc import Iterable
from pathlib import Path

from logcount.core.errors import DependencyError
from logcount.core.paths import jars_dir
from logcount.pipeline.cds import spark_java_options
from logcount.pipeline.driver_pools import bound_block_manager_pools
from logcount.pipeline.jdk import native_trim_option
from logcount.pipeline.jvm_launch import launched_jvms, stop_trees


def connector_jars() -> list[str]:
    """The connector jars set-up fetched, refused unless they are the installed pyspark's: a
    connector of another Spark version fails in the first batch's job, not at start."""
    import pyspark

    d = jars_dir() / "spark-kafka"
    jars = sorted(str(p) for p in Path(d).glob("*.jar"))
    if not jars:
        raise DependencyError(f"Spark's Kafka connector jars are missing in {d}: run "
                              f"scripts/setup.sh (or set LOGCOUNT_JARS_DIR)")
    found = connector_version(Path(j).name for j in jars)
    if found != pyspark.__version__:
        raise DependencyError(f"Spark's Kafka connector in {d} is for Spark {found}, but pyspark "
                              f"is {pyspark.__version__}: run scripts/setup.sh again")
    return jars


def jar_settings(master: str, jars: list[str]) -> dict[str, str]:
    """How our own session gets the connector jars (pure). In local mode they go on the driver
    JVM's class path: its classes then come from the CDS archive, and the first task does not
    copy the jars through the file server first. Executors elsewhere fetch them (spark.jars).
    Figures: docs/tuning.md#connector-class-path"""
    if master == "local" or master.startswith("local["):
        return {"spark.driver.extraClassPath": os.pathsep.join(jars)}
    return {"spark.jars": ",".join(jars)}


def connector_version(names: Iterable[str]) -> str | None:
    """The Spark version of the spark-sql-kafka jar among jar file names (pure)."""
    for name in names:
        m = re.fullmatch(re.escape(KAFKA_PACKAGE.split(":")[1]) + r"-(.+)\.jar", name)
        if m:
            return m[1]
    return None


# Spark 4.0's default of spark.sql.sources.useV1SourceList (the sources read through V1).
V1_SOURCES_KEY = "spark.sql.sources.useV1SourceList"
V1_SOURCES_DEFAULT = "avro,csv,json,kafka,orc,parquet,text"


def without_kafka(v1_sources: str) -> str:
    """A useV1SourceList value with kafka taken out, the rest kept (pure)."""
    kept = (s.strip() for s in v1_sources.split(","))
    return ",".join(s for s in kept if s and s.lower() != "kafka")


# Settings of every batch's SQL, applied to our own session and to one spark-submit gave us.
SQL_CONF = {
    # A timestamp without a zone is read as UTC and converted explicitly (--timezone, with
    # to_utc_timestamp): the session's own zone must never move a minute.
    "spark.sql.session.timeZone": "UTC",
    # upper() of the level through the JVM's case mapping, not ICU's: ICU's first use in a JVM
    # loads its data for about a second, paid by every start's first batch. Levels are ASCII words;
    # the two agree outside a few locale rules. Figures: docs/tuning.md#icu-case-mapping
    "spark.sql.icu.caseMappings.enabled": "false",
    # What a batch shuffles is already aggregated (minutes x partitions, plus the bounded
    # malformed refs): one reduce task holds it, and each extra task is per-batch overhead.
    "spark.sql.shuffle.partitions": "1",
    # Adaptive execution re-plans between stages to fix skew and partition counts; our plan's
    # shape never changes and its shuffles are tiny, so it only adds latency to every batch
    # (0.5 s -> 0.3 s for a small batch on 2 cores, measured with bench's latency run).
    "spark.sql.adaptive.enabled": "false",
    # Kafka through DataSource V2 (KafkaBatch), not the V1 relation Spark's default list names:
    # V1 turns every record into an external Row and back and asks the brokers while planning; V2
    # reads into UnsafeRows. Same counts, refs and errors. Figures: docs/tuning.md#kafka-v2-source
    V1_SOURCES_KEY: without_kafka(V1_SOURCES_DEFAULT),
    # The rule's columns are one select that refers to its own earlier columns by name
    # (formats/spark.py line_frame): Spark's default since 3.4, set so a cluster's cannot unset it.
    "spark.sql.lateralColumnAlias.enableImplicitResolution": "true",
}
KAFKA_PACKAGE = "org.apache.spark:spark-sql-kafka-0-10_2.13"
# spark.kafka.consumer.cache.capacity: one cached consumer per input partition, up to 1024
# (spark_session; under spark-submit pass it with --conf, see docs/deploy.md).
KAFKA_CONSUMER_CACHE = 1024

# Spark's status store keeps jobs, stages, tasks and SQL executions even with the UI off, and a
# stage runs ~860,000 jobs a day that never read it: Spark's bounds grew the heap for ~1,000
# batches. A few of each serve a heap dump's reader. Figures: docs/tuning.md#status-store
STATUS_STORE_BOUNDS = {
    "spark.ui.retainedJobs": "50",
    "spark.ui.retainedStages": "50",
    "spark.ui.retainedTasks": "500",
    "spark.sql.ui.retainedExecutions": "50",
}

# Our own driver JVM's collector and JIT (in local mode the executors' tasks run in it too):
# Parallel GC (throughput, no threads competing with tasks), C2 at 10x the invocation counts (a
# cold start compiles less), 256 MB metaspace (no full GC in the first job), fixed 192 MB young
# generation (eden no longer grows toward -Xmx). Figures: docs/tuning.md#driver-jvm
_JIT_AND_METASPACE = (
    "-XX:Tier4InvocationThreshold=50000 -XX:Tier4MinInvocationThreshold=6000 "
    "-XX:Tier4CompileThreshold=150000 -XX:Tier4BackEdgeThreshold=400000 -XX:MetaspaceSize=256m")
DRIVER_JVM_OPTIONS = f"-XX:+UseParallelGC {_JIT_AND_METASPACE} -Xmn192m"
# The heap starts at 512 MB committed (-Xms; the whole heap when spark.driver.memory is less):
# without it the parallel collector kept growing the old generation for the first ~15 minutes of
# a steady stage while the live heap stayed ~80 MB. Figures: docs/tuning.md#heap-floor
HEAP_FLOOR_MB = 512
# A paced stage's (the default cadence) driver JVM: the serial collector (~1 MB of structures, the
# parallel one's ~80 MB) with a 48 MB young generation from a 64 MB heap: ~300 MB less RSS, and
# its full collections (~130 ms) fit the cadence's second. Figures: docs/tuning.md#paced-driver-jvm
PACED_JVM_OPTIONS = f"-XX:+UseSerialGC {_JIT_AND_METASPACE} -Xmn48m"
PACED_HEAP_FLOOR_MB = 64
DEFAULT_DRIVER_MEMORY = "2g"
# spark.driver.memory's units (Spark's JavaUtils.byteStringAsBytes; a bare number is MiB there)
_MEMORY = re.compile(r"\s*(\d+)\s*(b|[kmgtp]b?)?\s*", re.IGNORECASE)
_MB_PER_UNIT = {"b": 1 / 1024**2, "k": 1 / 1024, "m": 1, "g": 1024, "t": 1024**2, "p": 1024**3}


def driver_memory() -> str:
    return os.environ.get("LOGCOUNT_SPARK_DRIVER_MEMORY", DEFAULT_DRIVER_MEMORY)


def driver_java_options(memory: str, cds: str | None, extra: str = "",
                        paced: bool = False, trim: str = "") -> str:
    """spark.driver.extraJavaOptions of the driver JVM the stage starts (pure): ours (the paced
    mode's when `paced`, with `trim`, pipeline/jdk.py native_trim_option), the heap floor for
    `memory`, the CDS archive's, then `extra` (LOGCOUNT_SPARK_JAVA_OPTIONS). Extra comes last
    because HotSpot takes the last of a repeated flag: an operator's -Xmn or -Xms wins over ours
    (a collector of their own needs ours off before it, -XX:-UseSerialGC or -XX:-UseParallelGC;
    docs/deploy.md, Sizing)."""
    ours = f"{PACED_JVM_OPTIONS} {trim}".strip() if paced else DRIVER_JVM_OPTIONS
    floor = PACED_HEAP_FLOOR_MB if paced else HEAP_FLOOR_MB
    return " ".join(o for o in (ours, initial_heap_option(memory, floor), cds or "",
                                extra.strip()) if o)


def initial_heap_option(memory: str, floor: int = HEAP_FLOOR_MB) -> str:
    """-Xms for a driver of spark.driver.memory `memory`: `floor` MB, or `memory` when it is
    smaller; "" when `memory` is no size Spark reads (Spark then refuses it itself)."""
    m = _MEMORY.fullmatch(memory)
    if not m:
        return ""
    mb = int(m[1]) * _MB_PER_UNIT[(m[2] or "m")[0].lower()]
    return f"-Xms{max(1, min(floor, int(mb)))}m"


def under_spark_submit() -> bool:
    """True when spark-submit (or a pyspark shell) started this Python process: its JVM is
    already running with the master, jars and memory the user gave, and it says where."""
    return "PYSPARK_GATEWAY_PORT" in os.environ


def spark_session(master: str, app_name: str = "logcount", java_options: str | None = None,
                  paced: bool = False):
    """The stage's session: spark-submit's when it started us, else our own (it takes seconds
    to start; batches reuse it). Our own driver JVM gets DRIVER_JVM_OPTIONS (PACED_JVM_OPTIONS
    when `paced`: the stage runs with --min-batch-interval) and `java_options`: by default
    those of set-up's CDS archive, if any."""
    from pyspark.sql import SparkSession

    if under_spark_submit():
        return _submitted_session(SparkSession, app_name)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = (
        SparkSession.builder.master(master).appName(app_name)
        .config("spark.ui.enabled", "false")
        .config("spark.driver.memory", driver_memory())
        .config("spark.ui.showConsoleProgress", "false")
        # The executors keep one Kafka consumer per input partition, 64 by default: a wider
        # input evicted and re-created consumers in every batch. Idle ones still close after
        # 5 minutes. Figures: docs/tuning.md#consumer-cache
        .config("spark.kafka.consumer.cache.capacity", str(KAFKA_CONSUMER_CACHE))
    )
    for key, value in {**jar_settings(master, connector_jars()), **STATUS_STORE_BOUNDS}.items():
        builder = builder.config(key, value)
    for key, value in SQL_CONF.items():
        builder = builder.config(key, value)
    if java_options is None:
        java_options = spark_java_options()  # the class-data-sharing archive, when set-up made one
    builder = builder.config("spark.driver.extraJavaOptions", driver_java_options(
        driver_memory(), java_options, os.environ.get("LOGCOUNT_SPARK_JAVA_OPTIONS", ""), paced,
        native_trim_option() if paced else ""))
    if master.startswith("spark://"):
        host = os.environ.get("LOGCOUNT_SPARK_DRIVER_HOST", "127.0.0.1")
        builder = builder.config("spark.driver.host", host)
        if host != "127.0.0.1":  # in a container: listen on all interfaces, advertise `host`
            builder = builder.config("spark.driver.bindAddress", "0.0.0.0")
    try:
        spark = builder.getOrCreate()
    except Exception as exc:  # py4j / JVM start failures
        raise DependencyError(f"Spark session on {master} could not start: {exc}") from exc
    return _settled(spark)


class SessionStart:
    """The stage's session, starting on a thread of its own from the moment this is made. It is
    the longest part of a stage's start (~2 s of ~5 s to the first commit), so everything that
    does not need it (importing the stage, the broker, fencing, the state) goes beside it."""

    def __init__(self, master: str, paced: bool = False) -> None:
        self.master = master
        self.paced = paced
        self.began = time.monotonic()
        self.took: float | None = None  # seconds, once ready
        # JVMs launched before (a test's shared session): never this start's to stop.
        self._before = set() if under_spark_submit() else launched_jvms()
        pool = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="spark-start")
        self._future = pool.submit(self._start)
        pool.shutdown(wait=False)

    def _start(self):
        spark = spark_session(self.master, paced=self.paced)
        self.took = time.monotonic() - self.began
        return spark

    def result(self, timeout: float | None = None):
        """The session (waits for it); raises what its start raised."""
        return self._future.result(timeout)

    def abandon(self) -> None:
        """The stage will not start: stop the driver JVM if it is still starting. Left alone it
        would finish its start (3-7 CPU-s) before it sees our pipe close: a refused start
        would cost nearly what a run's does. Figures: docs/tuning.md#refused-starts"""
        if self._future.done() or under_spark_submit():
            return
        # The start's thread may be talking to the JVM: what py4j says of its death is no news,
        # and the error that stops us must be the only line.
        logging.getLogger("py4j").setLevel(logging.CRITICAL)
        stop_trees(launched_jvms() - self._before)


def _submitted_session(session_class, app_name: str):
    """The session spark-submit configured (master, jars or --packages, memory): only the SQL
    settings of our plan are ours. A missing Kafka connector is one line, not a failing job."""
    spark = session_class.builder.appName(app_name).getOrCreate()
    for key, value in SQL_CONF.items():
        if key == V1_SOURCES_KEY:  # keep what spark-submit's configuration reads through V1
            value = without_kafka(spark.conf.get(key, V1_SOURCES_DEFAULT))
        spark.conf.set(key, value)
    jvm = spark.sparkContext._jvm
    try:
        jvm.org.apache.spark.sql.execution.datasources.DataSource.lookupDataSource(
            "kafka", spark._jsparkSession.sessionState().conf())
    except Exception as exc:  # noqa: BLE001 - py4j wraps the JVM's ClassNotFound
        raise DependencyError(
            f"Spark's Kafka connector is not on spark-submit's classpath: pass --packages "
            f"{KAFKA_PACKAGE}:{spark.version} or --jars with the jars in "
            f"{jars_dir() / 'spark-kafka'}") from exc
    return _settled(spark)


def _settled(spark):
    """What every stage session gets once up, ours or spark-submit's."""
    bound_block_manager_pools(spark)
    return _quiet(spark)


def _quiet(spark):
    spark.sparkContext.setLogLevel("WARN")
    # The executors' Kafka clients log every refused reconnect while a broker restarts; the
    # driver logs the failed batch once, which is what an operator needs.
    jvm = spark.sparkContext._jvm
    set_level, error = (jvm.org.apache.logging.log4j.core.config.Configurator.setLevel,
                        jvm.org.apache.logging.log4j.Level.ERROR)
    set_level("org.apache.kafka", error)
    # Every batch's read warns, in six lines, that kafka.group.id is set. The stage sets it on
    # purpose (one id per stage, so the executors' consumers are reused; they assign partitions
    # and join no group); a stage running for days would fill its log with the warning.
    set_level("org.apache.spark.sql.kafka010.KafkaSourceProvider", error)
    return spark
