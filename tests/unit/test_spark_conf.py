"""pipeline/spark.py: the SQL settings every batch runs with."""

import os

import pytest

from logcount.pipeline.spark import SQL_CONF, V1_SOURCES_DEFAULT, V1_SOURCES_KEY, without_kafka
from tests.support.jvm import final_flags


def test_kafka_leaves_the_v1_source_list_and_nothing_else_does():
    assert without_kafka("avro,csv,json,kafka,orc,parquet,text") == "avro,csv,json,orc,parquet,text"
    assert without_kafka("Kafka, csv") == "csv"
    assert without_kafka("kafka") == ""
    assert without_kafka("") == ""
    assert without_kafka("csv,kafka2") == "csv,kafka2"


def test_our_session_reads_kafka_through_v2():
    assert "kafka" in V1_SOURCES_DEFAULT.split(",")
    assert SQL_CONF[V1_SOURCES_KEY] == without_kafka(V1_SOURCES_DEFAULT)
    assert "kafka" not in SQL_CONF[V1_SOURCES_KEY].split(",")


@pytest.mark.parametrize("memory, option", [
    ("2g", "-Xms512m"), ("2G", "-Xms512m"), ("512m", "-Xms512m"), ("4096", "-Xms512m"),
    ("1024mb", "-Xms512m"), ("1t", "-Xms512m"), (" 3gb ", "-Xms512m"),
    # below the floor: the whole heap, as -Xms above -Xmx stops the JVM
    ("450m", "-Xms450m"), ("300", "-Xms300m"), ("460800k", "-Xms450m"),
    ("471859200b", "-Xms450m"),
    # no size Spark reads: no -Xms (Spark refuses the setting itself)
    ("2 gigabytes", ""), ("", ""), ("-1g", ""), ("1.5g", ""),
])
def test_the_initial_heap_is_the_floor_or_the_whole_heap(memory, option):
    from logcount.pipeline.spark import initial_heap_option

    assert initial_heap_option(memory) == option


@pytest.mark.parametrize("memory", ["2g", "460m"])
def test_the_initial_heap_starts_this_machines_java_beside_its_xmx(memory):
    """spark.driver.memory becomes -Xmx; our -Xms must never exceed it (the JVM would not start)
    and must be what the JVM commits first."""

    from logcount.pipeline.spark import DRIVER_JVM_OPTIONS, initial_heap_option

    xms = initial_heap_option(memory)
    final = final_flags(f"{DRIVER_JVM_OPTIONS} {xms} -Xmx{memory}")
    assert int(final["InitialHeapSize"]) == int(xms[4:-1]) * 1024 * 1024


def test_an_operators_java_options_come_last_so_they_win():
    from logcount.pipeline.spark import DRIVER_JVM_OPTIONS, driver_java_options

    cds = "-XX:SharedArchiveFile=/a.jsa -Xshare:auto"
    opts = driver_java_options("2g", cds, " -Xmn48m -Xms128m ")
    assert opts == f"{DRIVER_JVM_OPTIONS} -Xms512m {cds} -Xmn48m -Xms128m"
    assert opts.rindex("-Xmn48m") > opts.index("-Xmn192m")
    # nothing extra and no archive: no stray blanks
    assert driver_java_options("2g", None) == f"{DRIVER_JVM_OPTIONS} -Xms512m"
    assert driver_java_options("bogus", None, "") == DRIVER_JVM_OPTIONS


def test_an_operators_collector_and_young_generation_start_this_machines_java():
    """The memory-tight recipe of docs/deploy.md (Sizing), after our flags, is a JVM that
    starts, with the operator's collector and sizes, not ours."""
    from logcount.pipeline.spark import driver_java_options

    recipe = "-XX:-UseParallelGC -XX:+UseSerialGC -Xmn48m -Xms64m"
    final = final_flags(driver_java_options("2g", None, recipe) + " -Xmx2g")
    assert final["UseSerialGC"] == "true" and final["UseParallelGC"] == "false"
    assert int(final["NewSize"]) == 48 * 1024 * 1024
    assert int(final["InitialHeapSize"]) == 64 * 1024 * 1024


def test_a_paced_stage_starts_the_serial_collector_with_a_small_heap():
    """The default cadence's driver JVM (--min-batch-interval > 0) is the memory-tight one; the
    low-latency mode keeps the parallel collector and its 512 MB floor."""
    from logcount.pipeline.spark import PACED_JVM_OPTIONS, driver_java_options

    opts = driver_java_options("2g", None, paced=True)
    assert opts == f"{PACED_JVM_OPTIONS} -Xms64m"
    final = final_flags(opts + " -Xmx2g")
    assert final["UseSerialGC"] == "true" and final["UseParallelGC"] == "false"
    assert int(final["NewSize"]) == 48 * 1024 * 1024
    assert int(final["InitialHeapSize"]) == 64 * 1024 * 1024
    assert final["Tier4InvocationThreshold"] == "50000"
    assert driver_java_options("40m", None, paced=True).endswith(" -Xms40m")
    assert "-XX:+UseParallelGC" in driver_java_options("2g", None, paced=False)


def test_the_paced_jvm_trims_its_native_heap_unless_the_operator_says_otherwise():
    """The trim (pipeline/jdk.py, only where the JDK has it) is ours: in the paced JVM only, and
    before LOGCOUNT_SPARK_JAVA_OPTIONS, whose own interval (0 turns it off) wins."""
    from logcount.pipeline.spark import PACED_JVM_OPTIONS, driver_java_options

    trim = "-XX:TrimNativeHeapInterval=15000"
    opts = driver_java_options("2g", None, "-XX:TrimNativeHeapInterval=0", paced=True, trim=trim)
    assert opts == f"{PACED_JVM_OPTIONS} {trim} -Xms64m -XX:TrimNativeHeapInterval=0"
    assert final_flags(opts)["TrimNativeHeapInterval"] == "0"
    assert trim not in driver_java_options("2g", None, paced=False, trim=trim)



def test_the_connector_jars_must_be_the_installed_pysparks(tmp_path, monkeypatch):
    """Jars of another Spark (pyspark upgraded after set-up) are refused at start, in one line."""
    import pyspark

    from logcount.core.errors import DependencyError
    from logcount.pipeline.spark import connector_jars, connector_version

    assert connector_version(["kafka-clients-3.9.2.jar", "spark-sql-kafka-0-10_2.13-4.1.1.jar",
                              "spark-token-provider-kafka-0-10_2.13-4.1.1.jar"]) == "4.1.1"
    assert connector_version(["kafka-clients-3.9.2.jar"]) is None
    monkeypatch.setenv("LOGCOUNT_JARS_DIR", str(tmp_path))
    (tmp_path / "spark-kafka").mkdir()
    other = "3.5.1" if pyspark.__version__ != "3.5.1" else "3.5.2"
    jar = tmp_path / "spark-kafka" / f"spark-sql-kafka-0-10_2.13-{other}.jar"
    jar.write_bytes(b"")
    with pytest.raises(DependencyError, match=f"is for Spark {other}, but pyspark is "):
        connector_jars()
    jar.rename(jar.with_name(f"spark-sql-kafka-0-10_2.13-{pyspark.__version__}.jar"))
    assert connector_jars() == [str(tmp_path / "spark-kafka" /
                                    f"spark-sql-kafka-0-10_2.13-{pyspark.__version__}.jar")]


def test_local_mode_puts_the_connector_on_the_class_path_and_a_cluster_fetches_it():
    from logcount.pipeline.spark import jar_settings

    jars = ["/j/spark-sql-kafka-0-10_2.13-4.2.0.jar", "/j/kafka-clients-3.9.1.jar"]
    for master in ("local", "local[*]", "local[2]", "local[1,3]"):
        assert jar_settings(master, jars) == {
            "spark.driver.extraClassPath": os.pathsep.join(jars)}
    for master in ("spark://h:7077", "yarn", "k8s://https://h:6443", "localhost"):
        assert jar_settings(master, jars) == {"spark.jars": ",".join(jars)}
