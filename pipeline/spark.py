"""The stage's SparkSession: built here when the stage runs on its own, or the one
`spark-submit` gave it. Leaf of the Spark side: imports only the CDS options and the jar paths."""

from __future__ import annotations

import os
from pathlib import Path

from core.errors import DependencyError
from core.paths import jars_dir
from pipeline.cds import spark_java_options


def connector_jars() -> list[str]:
    d = jars_dir() / "spark-kafka"
    jars = sorted(str(p) for p in Path(d).glob("*.jar"))
    if not jars:
        raise DependencyError(f"Spark's Kafka connector jars are missing in {d}: run "
                              f"scripts/setup.sh (or set LOGCOUNT_JARS_DIR)")
    return jars


def spark_session(master: str, app_name: str = "logcount", java_options: str | None = None):
    """One session per stage process (it takes seconds to start; batches reuse it).

    `java_options` are the driver JVM's; by default those of set-up's CDS archive, if any.
    """
    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", os.sys.executable)
    builder = (
        SparkSession.builder.master(master).appName(app_name)
        .config("spark.jars", ",".join(connector_jars()))
        # Minutes are text cut from the line, never converted between zones; UTC keeps any
        # timestamp function free of daylight-saving gaps.
        .config("spark.sql.session.timeZone", "UTC")
        # What a batch shuffles is already aggregated (minutes x partitions, plus the bounded
        # malformed refs): one reduce task holds it, and each extra task is per-batch overhead.
        .config("spark.sql.shuffle.partitions", "1")
        # Adaptive execution re-plans between stages to fix skew and partition counts; our
        # plan's shape never changes and its shuffles are tiny, so it only adds latency to every
        # batch (0.5 s -> 0.3 s for a small batch on 2 cores, measured with bench's latency run).
        .config("spark.sql.adaptive.enabled", "false")
        .config("spark.ui.enabled", "false")
        .config("spark.driver.memory", os.environ.get("LOGCOUNT_SPARK_DRIVER_MEMORY", "2g"))
        .config("spark.ui.showConsoleProgress", "false")
    )
    if java_options is None:
        java_options = spark_java_options()  # the class-data-sharing archive, when set-up made one
    if java_options:
        builder = builder.config("spark.driver.extraJavaOptions", java_options)
    if master.startswith("spark://"):
        host = os.environ.get("LOGCOUNT_SPARK_DRIVER_HOST", "127.0.0.1")
        builder = builder.config("spark.driver.host", host)
        if host != "127.0.0.1":  # in a container: listen on all interfaces, advertise `host`
            builder = builder.config("spark.driver.bindAddress", "0.0.0.0")
    try:
        spark = builder.getOrCreate()
    except Exception as exc:  # py4j / JVM start failures
        raise DependencyError(f"Spark session on {master} could not start: {exc}") from exc
    spark.sparkContext.setLogLevel("WARN")
    # The executors' Kafka clients log every refused reconnect while a broker restarts; the
    # driver logs the failed batch once, which is what an operator needs.
    jvm = spark.sparkContext._jvm
    jvm.org.apache.logging.log4j.core.config.Configurator.setLevel(
        "org.apache.kafka", jvm.org.apache.logging.log4j.Level.ERROR)
    return spark
