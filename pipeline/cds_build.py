"""`python -m pipeline.cds_build`: make the driver's class-data-sharing archive (see cds.py).

Run once by scripts/setup.sh: a throw-away session, started with the stage's own settings,
runs small jobs and the JVM writes the archive as it exits.
"""

from __future__ import annotations

import contextlib
import os
import sys
from pathlib import Path

from pipeline.cds import QUIET, archive_path
from pipeline.job import batch_frame
from pipeline.spark import spark_session


def _train(tmp: Path) -> None:
    """Run in a child process: start Spark with ArchiveClassesAtExit, exercise it, exit the JVM."""
    # The stage's own session settings, so the archive holds what a stage start loads.
    spark = spark_session("local[*]", "logcount-cds", f"-XX:ArchiveClassesAtExit={tmp} {QUIET}")
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
    r = subprocess.run([sys.executable, "-m", "pipeline.cds_build", "--train", str(tmp)],
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
