"""A class-data-sharing archive for the Spark driver JVM: seconds off every stage start.

A fresh Spark driver loads some 15,000 classes before its first batch. A dynamic CDS archive
(JDK 13+) holds them pre-parsed; measured on 2 cores: session start 4.7-5.1 s -> 3.0-3.4 s and
the first job 2.3-2.9 s -> 1.3-1.9 s, which is most of what a restart (`recovery_s`) waits for.

`python -m pipeline.cds` (run by scripts/setup.sh) makes it once per JVM, pyspark version and
connector jars: a throw-away session runs small jobs and the JVM writes the archive as it exits.
`spark_java_options()` uses it when present. A stale or foreign archive is harmless: the JVM
checks it and runs without it (-Xshare:auto), silently (-Xlog:cds=off).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import sys
from pathlib import Path

from logcount.paths import jars_dir

_QUIET = "-Xshare:auto -Xlog:cds=off -Xlog:cds+dynamic=off"


def archive_path() -> Path:
    import pyspark

    java = os.path.realpath(shutil.which("java") or "java")
    connector = sorted(p.name for p in (jars_dir() / "spark-kafka").glob("*.jar"))
    key = hashlib.sha256(repr((java, pyspark.__version__, connector)).encode()).hexdigest()[:12]
    return jars_dir() / "cds" / f"spark-driver-{key}.jsa"


def spark_java_options() -> str | None:
    """The driver's -XX options for the archive, or None when there is none (yet)."""
    if os.environ.get("LOGCOUNT_CDS", "1") == "0":
        return None
    path = archive_path()
    return f"-XX:SharedArchiveFile={path} {_QUIET}" if path.exists() else None


def _train(tmp: Path) -> None:
    """Run in a child process: start Spark with ArchiveClassesAtExit, exercise it, exit the JVM."""
    from pipeline.job import batch_frame, spark_session

    # The stage's own session settings, so the archive holds what a stage start loads.
    spark = spark_session("local[*]", "logcount-cds", f"-XX:ArchiveClassesAtExit={tmp} {_QUIET}")
    spark.range(10).count()
    df = spark.createDataFrame([(0, 0, b"2017-07-30 14:09:08 ERROR x"), (0, 1, b"bad")],
                               "partition int, offset long, value binary")
    batch_frame(df, "ERROR", 1).collect()
    jvm_pid = spark._jvm.java.lang.ProcessHandle.current().pid()
    spark.stop()
    # The archive is written while the JVM exits; the gateway goes with it, as intended.
    with contextlib.suppress(Exception):
        spark._jvm.java.lang.System.exit(0)
    os.waitpid(jvm_pid, 0)  # the JVM is our child (pyspark's launcher started it)


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
    r = subprocess.run([sys.executable, "-m", "pipeline.cds", "--train", str(tmp)],
                       capture_output=True, text=True, timeout=600)
    if r.returncode != 0 or not tmp.exists() or tmp.stat().st_size == 0:
        tmp.unlink(missing_ok=True)
        print(f"cds: no archive (Spark starts without it): {r.stderr.strip()[-300:]}")
        return 1
    tmp.rename(path)
    print(f"cds: archive written: {path} ({path.stat().st_size >> 20} MB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
