"""Where logcount keeps what set-up fetched and what the embedded stack writes."""

from __future__ import annotations

import os
from pathlib import Path


def home() -> Path:
    """The checkout (editable install) or `LOGCOUNT_HOME` (e.g. in the docker image)."""
    env = os.environ.get("LOGCOUNT_HOME")
    return Path(env) if env else Path(__file__).resolve().parents[2]


def jars_dir() -> Path:
    """Jars fetched by scripts/setup.sh: `kafka/` (the broker), `spark-kafka/` (the connector)."""
    env = os.environ.get("LOGCOUNT_JARS_DIR")
    return Path(env) if env else home() / ".cache" / "jars"


def state_dir() -> Path:
    """The embedded stack's data, logs and pid files."""
    env = os.environ.get("LOGCOUNT_STATE_DIR")
    return Path(env) if env else home() / ".stack"


def log_file(command: str) -> Path:
    """Where a command's JVM and librdkafka output goes unless --verbose."""
    env = os.environ.get("LOGCOUNT_LOG_DIR")
    return (Path(env) if env else state_dir() / "logs") / f"logcount-{command}.log"
