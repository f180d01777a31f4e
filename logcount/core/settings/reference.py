"""The configuration reference of docs/configuration.md, generated from the settings classes
(scripts/gen_config_reference.py writes it there; a test fails when the file differs)."""

from __future__ import annotations

from logcount.core.settings.commands import (
    BenchSettings,
    DemoSettings,
    ProduceSettings,
    RunSettings,
    SinkSettings,
    StackSettings,
    StateShowSettings,
)
from logcount.core.settings.framework import env_name, flag, flag_fields

# Environment variables that are not flags: where things are, and deployment details.
EXTRA_ENV = {
    "LOGCOUNT_HOME": "the checkout or install root (default: found from the package)",
    "LOGCOUNT_JARS_DIR": "the fetched jars (default: $LOGCOUNT_HOME/.cache/jars)",
    "LOGCOUNT_STATE_DIR": "the embedded stack's data, logs, pids (default: $LOGCOUNT_HOME/.stack)",
    "LOGCOUNT_SPARK_DRIVER_HOST": "address executors use to reach the driver (cluster mode)",
    "LOGCOUNT_SPARK_DRIVER_MEMORY": "spark.driver.memory (default 2g)",
    "LOGCOUNT_SPARK_JAVA_OPTIONS": "more options of the driver JVM the stage starts, after its "
                                   "own (they win; docs/deploy.md, Sizing)",
    "LOGCOUNT_VERBOSE": "1: the Spark JVM's and librdkafka's own output on stderr too (--verbose)",
    "LOGCOUNT_LOG_DIR": "where that output goes otherwise (default: $LOGCOUNT_STATE_DIR/logs)",
    "LOGCOUNT_CDS": "0: start the Spark driver JVM without set-up's class-data-sharing archive",
    "LOGCOUNT_CRASH_AT": "fault tests only: crash point and batch, e.g. after_produce:2",
    "LOGCOUNT_CRASH_MODE": "fault tests only: exit (default), stop (SIGSTOP) or hang (the thread)",
}


def reference_markdown() -> str:
    """The configuration reference (docs/configuration.md), generated from the settings classes."""
    sections = [
        ("run", RunSettings), ("state show", StateShowSettings), ("sink", SinkSettings),
        ("produce", ProduceSettings), ("demo", DemoSettings), ("bench", BenchSettings),
        ("stack up", StackSettings),
    ]
    out = []
    for name, cls in sections:
        out.append(f"#### `logcount {name}`\n")
        fields = flag_fields(cls)
        if cls is StateShowSettings:  # run's flags, then its own
            out.append("Every flag and variable of `logcount run`, and:\n")
            fields = [f for f in fields if f.name not in RunSettings.__dataclass_fields__]
        out.append("| flag | env | default | meaning |")
        out.append("|---|---|---|---|")
        for f in fields:
            default = "" if f.default in (None, ()) else f"`{f.default}`"
            out.append(f"| `{flag(f)}` | `{env_name(f)}` | {default} | {f.metadata['help']} |")
        out.append("")
    out.append("#### Other environment variables\n")
    out.append("| env | meaning |")
    out.append("|---|---|")
    out += [f"| `{k}` | {v} |" for k, v in EXTRA_ENV.items()]
    out.append("")
    return "\n".join(out)

