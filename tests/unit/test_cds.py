"""pipeline/cds.py: the driver JVM uses the archive only when set-up made one; its options start."""

from logcount.pipeline import cds
from tests.support.jvm import final_flags


def test_archive_is_used_only_when_present_and_not_turned_off(tmp_path, monkeypatch):
    monkeypatch.setenv("LOGCOUNT_JARS_DIR", str(tmp_path))
    monkeypatch.delenv("LOGCOUNT_CDS", raising=False)
    (tmp_path / "spark-kafka").mkdir()
    (tmp_path / "spark-kafka" / "spark-sql-kafka-0-10_2.13-4.0.0.jar").write_bytes(b"")
    path = cds.archive_path()
    assert path.parent == tmp_path / "cds"
    assert cds.spark_java_options() is None
    path.parent.mkdir()
    path.write_bytes(b"x")
    assert cds.spark_java_options() == f"-XX:SharedArchiveFile={path} " + cds.QUIET
    monkeypatch.setenv("LOGCOUNT_CDS", "0")
    assert cds.spark_java_options() is None


def test_archive_name_follows_the_connector_jars(tmp_path, monkeypatch):
    monkeypatch.setenv("LOGCOUNT_JARS_DIR", str(tmp_path))
    (tmp_path / "spark-kafka").mkdir()
    before = cds.archive_path()
    (tmp_path / "spark-kafka" / "kafka-clients-3.9.0.jar").write_bytes(b"")
    assert cds.archive_path() != before


def test_archive_name_follows_where_the_jars_are(tmp_path, monkeypatch):
    """The archive records its class path: the same jars in another checkout (another jars
    folder) get an archive of their own, or every class would be loaded from the jars again."""
    for where in ("a", "b"):
        (tmp_path / where / "spark-kafka").mkdir(parents=True)
        (tmp_path / where / "spark-kafka" / "kafka-clients-3.9.0.jar").write_bytes(b"")
    monkeypatch.setenv("LOGCOUNT_JARS_DIR", str(tmp_path / "a"))
    in_a = cds.archive_path().name
    monkeypatch.setenv("LOGCOUNT_JARS_DIR", str(tmp_path / "b"))
    assert cds.archive_path().name != in_a


def test_archive_name_follows_the_jdk_pyspark_starts(tmp_path, monkeypatch):
    """An archive written by one JVM is refused by another: $JAVA_HOME, as pyspark reads it."""
    monkeypatch.setenv("LOGCOUNT_JARS_DIR", str(tmp_path))
    (tmp_path / "spark-kafka").mkdir()
    monkeypatch.delenv("JAVA_HOME", raising=False)
    on_path = cds.archive_path()
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "other-jdk"))
    assert cds.archive_path() != on_path
    assert cds.archive_path() == cds.archive_path()


def test_driver_jvm_options_start_this_machines_java():
    """A misspelt -XX flag stops the JVM before Spark starts: every stage would fail to start."""
    from logcount.pipeline.spark import DRIVER_JVM_OPTIONS

    final = final_flags(DRIVER_JVM_OPTIONS)
    assert final["UseParallelGC"] == "true"
    assert final["Tier4InvocationThreshold"] == "50000"
