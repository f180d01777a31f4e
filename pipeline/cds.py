"""A class-data-sharing archive for the Spark driver JVM: seconds off every stage start.

A fresh Spark driver loads some 15,000 classes before its first batch. A dynamic CDS archive
(JDK 13+) holds them pre-parsed, which takes seconds off the session start and the first job:
most of what a restart (`recovery_s`) waits for (figures: docs/tuning.md#cds-archive).

`python -m logcount.pipeline.cds_build` (run by scripts/setup.sh) makes it once per JVM, pyspark
version and connector jars: a throw-away session runs small jobs and the JVM writes the archive
as it exits. `spark_java_options()` uses it when present. A stale or foreign archive is harmless:
the JVM checks it and runs without it (-Xshare:auto), silently (-Xlog:cds=off).
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from logcount.core.paths import jars_dir
from logcount.pipeline.jdk import java_home

QUIET = "-Xshare:auto -Xlog:cds=off -Xlog:cds+dynamic=off"
# Part of the archive's key: raised when the training (cds_build) loads more, so that set-up
# builds the new archive on machines that have an older one. What each value added:
# docs/tuning.md#cds-training
TRAINING = 6


def archive_path() -> Path:
    import pyspark

    home = java_home()  # the JDK pyspark starts ($JAVA_HOME first): the archive is that JVM's
    java = os.path.realpath(home / "bin" / "java") if home else "java"
    # Paths, not names: the archive records its class path, and a JVM whose jars sit elsewhere
    # (a moved checkout, another venv) silently loads every class from the jars again.
    connector = sorted(str(p) for p in (jars_dir() / "spark-kafka").glob("*.jar"))
    facts = (java, pyspark.__version__, os.path.dirname(pyspark.__file__), connector, TRAINING)
    key = hashlib.sha256(repr(facts).encode()).hexdigest()[:12]
    return jars_dir() / "cds" / f"spark-driver-{key}.jsa"


def spark_java_options() -> str | None:
    """The driver's -XX options for the archive, or None when there is none (yet)."""
    if os.environ.get("LOGCOUNT_CDS", "1") == "0":
        return None
    path = archive_path()
    return f"-XX:SharedArchiveFile={path} {QUIET}" if path.exists() else None
