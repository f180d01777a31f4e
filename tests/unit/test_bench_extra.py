"""`logcount bench` needs the `bench` extra (matplotlib, for its plots); the stage does not. Without
it the command says so in one line and exits 2 before anything starts, and the package's modules
import without it (the plots import it where they are drawn)."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys

import pytest

from logcount import cli
from logcount.core.errors import ConfigError

# matplotlib as absent: find_spec and import both see None in sys.modules.
WITHOUT_MATPLOTLIB = "import sys; sys.modules['matplotlib'] = None; "


class Started(Exception):
    """The command went past its check to read its settings."""


def _started(*_args, **_kwargs):
    raise Started


def test_bench_without_the_extra_refuses_before_reading_its_settings(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "matplotlib" else real(name, *a))
    monkeypatch.setattr(cli.st, "from_namespace", _started)
    args = cli.build_parser().parse_args(["bench", "--lines", "1000"])
    with pytest.raises(ConfigError) as err:
        args.handler(args)
    assert str(err.value) == "logcount bench needs the bench extra: pip install 'logcount[bench]'"
    assert err.value.exit_code == 2


def test_bench_with_the_extra_goes_on(monkeypatch):
    monkeypatch.setattr(cli.st, "from_namespace", _started)
    args = cli.build_parser().parse_args(["bench", "--soak", "1"])
    with pytest.raises(Started):
        args.handler(args)


def test_the_missing_extra_is_one_line_on_stderr_and_exit_2(tmp_path):
    # Were the check gone, the settings' reader stops the run before any stack or Spark starts.
    code = WITHOUT_MATPLOTLIB + ("from logcount.core import settings; "
                                 "settings.from_namespace = lambda *a: sys.exit('started'); "
                                 "from logcount.cli import main; sys.exit(main(['bench']))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       env={**os.environ, "LOGCOUNT_LOG_DIR": str(tmp_path)}, timeout=60)
    assert (r.returncode, r.stdout) == (2, "")
    assert r.stderr.splitlines() == [
        "logcount: error: logcount bench needs the bench extra: pip install 'logcount[bench]'"]


def test_every_module_imports_without_matplotlib():
    mods = ("logcount.cli", "logcount.bench.runner", "logcount.bench.report",
            "logcount.bench.soak", "logcount.bench.soak_report", "logcount.bench.grouping")
    r = subprocess.run([sys.executable, "-c", WITHOUT_MATPLOTLIB + f"import {', '.join(mods)}"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
