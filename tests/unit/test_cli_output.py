"""What reaches an operator's terminal (logcount/cli.py)."""

import logging
import os

import pytest

from logcount.cli import _py4j_root_info

pytestmark = pytest.mark.unit

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
