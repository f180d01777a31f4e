"""`python -m logcount.pipeline.cds_build`: make the driver's class-data-sharing archive (see
cds.py).

Run once by scripts/setup.sh: a throw-away session, started with the stage's own settings,
runs small jobs and the JVM writes the archive as it exits.
"""

from __future__ import annotations

import contextlib
import os
import sys
from pathlib import Path

from logcount.formats.spec import LineFormat
from logcount.pipeline.cds import QUIET, archive_path
from logcount.pipeline.job import batch_frame, read_ranges
from logcount.pipeline.offsets import OffsetRange
from logcount.pipeline.spark import spark_session

# Nothing listens here: the Kafka path is walked up to its first connection (see _kafka_classes).
NO_BROKER = "127.0.0.1:9"


def _train(tmp: Path) -> None:
    """Run in a child process: start Spark with ArchiveClassesAtExit, exercise it, exit the JVM."""
    # The stage's own session settings, so the archive holds what a stage start loads.
    spark = spark_session("local[*]", "logcount-cds", f"-XX:ArchiveClassesAtExit={tmp} {QUIET}")
    spark.range(10).count()
    # The seed fast path and the default rule's general path (a Kafka log line), then a
    # structured JSON format: the classes of every kind of plan a stage may run.
    df = spark.createDataFrame([(0, 0, b"2017-07-30 14:09:08 ERROR x"), (0, 1, b"bad"),
                                (0, 2, b"[2017-07-30 14:09:08,123] ERROR x (kafka.Foo)")],
                               "partition int, offset long, value binary")
    batch_frame(df, LineFormat(), 1).collect()  # a batch with the malformed refs numbered
    batch_frame(df, LineFormat(), None).collect()  # without (a first batch, a caught-up stage)
    structured = LineFormat(json_time_field="ts", json_level_field="level")
    batch_frame(df, structured, None).collect()
    _kafka_classes(spark)
    jvm_pid = spark._jvm.java.lang.ProcessHandle.current().pid()
    spark.stop()
    # The archive is written while the JVM exits; the gateway goes with it, as intended.
    with contextlib.suppress(Exception):
        spark._jvm.java.lang.System.exit(0)
    os.waitpid(jvm_pid, 0)  # the JVM is our child (pyspark's launcher started it)


def _kafka_classes(spark) -> None:
    """Load the Kafka connector's and client's classes as a first batch does, with no broker:
    set-up runs before any broker is up. The batch's job gets as far as the offset reader's
    admin client, which fails to connect (after its 0.5 s timeout and Spark's retries, ~5 s
    once per set-up); a consumer like the executors' is created and polled once. That saves
    as much as training against a real broker would (docs/tuning.md#cds-archive)."""
    df = read_ranges(spark, NO_BROKER, "logcount-cds", [OffsetRange(0, 0, 1)],
                     {"default.api.timeout.ms": "500", "request.timeout.ms": "500"})
    with contextlib.suppress(Exception):  # the expected TimeoutException, via py4j
        # Through DataSource V2 (pipeline/spark.py SQL_CONF) the offsets are asked for when the
        # job starts: collect, which fails there, before any task.
        batch_frame(df.coalesce(1), LineFormat(), None).collect()
    jvm = spark._jvm
    props = jvm.java.util.Properties()
    deserializer = "org.apache.kafka.common.serialization.ByteArrayDeserializer"
    for key, value in {"bootstrap.servers": NO_BROKER, "key.deserializer": deserializer,
                       "value.deserializer": deserializer, "isolation.level": "read_committed",
                       "group.id": "logcount-cds", "enable.auto.commit": "false"}.items():
        props.put(key, value)
    consumer = jvm.org.apache.kafka.clients.consumer.KafkaConsumer(props)
    tps = jvm.java.util.ArrayList()
    tps.add(jvm.org.apache.kafka.common.TopicPartition("logcount-cds", 0))
    consumer.assign(tps)
    consumer.seek(tps.get(0), 0)
    consumer.poll(jvm.java.time.Duration.ofMillis(300))
    consumer.close(jvm.java.time.Duration.ZERO)


def main() -> int:
    path = archive_path()
    if path.exists():
        print(f"cds: archive present: {path}")
        return 0
    if "--train" in sys.argv:
        _train(Path(sys.argv[-1]))
        return 0
    import subprocess

    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".tmp{os.getpid()}")
    r = subprocess.run([sys.executable, "-m", "logcount.pipeline.cds_build", "--train", str(tmp)],
                       capture_output=True, text=True, timeout=600)
    if r.returncode != 0 or not tmp.exists() or tmp.stat().st_size == 0:
        tmp.unlink(missing_ok=True)
        print(f"cds: no archive (Spark starts without it): {r.stderr.strip()[-300:]}")
        return 1
    tmp.rename(path)
    for old in path.parent.glob("spark-driver-*.jsa"):  # other trainings, JVMs or jars: unused
        if old != path:
            old.unlink(missing_ok=True)
    print(f"cds: archive written: {path} ({path.stat().st_size >> 20} MB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
