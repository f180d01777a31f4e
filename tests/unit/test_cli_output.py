"""What reaches an operator's terminal (logcount/cli.py)."""

import logging
import os

import pytest

from logcount.cli import _py4j_root_info

PY4J = os.path.join("site-packages", "py4j", "java_gateway.py")


def _record(name: str, level: int, pathname: str) -> logging.LogRecord:
    return logging.makeLogRecord({"name": name, "levelno": level, "pathname": pathname,
                                  "msg": "Exception while sending command."})


def test_py4j_info_on_the_root_logger_is_dropped():
    assert not _py4j_root_info(_record("root", logging.INFO, PY4J))


def test_py4j_warnings_and_everything_else_pass():
    assert _py4j_root_info(_record("root", logging.WARNING, PY4J))
    assert _py4j_root_info(_record("root", logging.INFO, "/app/pipeline/driver.py"))
    assert _py4j_root_info(_record("logcount.stage", logging.INFO, PY4J))


@pytest.mark.parametrize("verbose", [False, True])
def test_the_jvm_shares_our_stderr_only_with_verbose(tmp_path, verbose):
    """A failing start waits for the Spark start it began only when the JVM's output (fd 2)
    would follow the error line on the terminal (pipeline/driver.py)."""
    import subprocess
    import sys

    code = ("from logcount.cli import _output; "
            "from logcount.pipeline.compute import _jvm_writes_where_we_do; "
            f"_output('run', {verbose}); print(_jvm_writes_where_we_do())")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env={**os.environ, "LOGCOUNT_LOG_DIR": str(tmp_path)}, check=True)
    assert done.stdout.strip() == str(verbose)
