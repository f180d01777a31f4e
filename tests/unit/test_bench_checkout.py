"""An A/B run's B side imports the base checkout's code everywhere (logcount/bench/checkout.py),
the packages the editable install maps onto this checkout (pipeline/, connectors/) included."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from logcount.bench.checkout import ab_env, import_root
from logcount.core.paths import home


def _base(tmp_path: Path) -> Path:
    base = tmp_path / "base"
    for pkg in ("logcount", "logcount/core", "pipeline", "connectors"):
        (base / pkg).mkdir(parents=True)
        (base / pkg / "__init__.py").write_text("")
    (base / "logcount" / "core" / "paths.py").write_text("WHO = 'base'\n")
    (base / "pipeline" / "job.py").write_text("WHO = 'base'\n")
    (base / "connectors" / "stack.py").write_text("WHO = 'base'\n")
    return base


def test_the_b_side_imports_the_base_pipeline_and_connectors_not_this_checkout(tmp_path):
    base = _base(tmp_path)
    code = ("import logcount.core.paths as a, logcount.pipeline.job as b, "
            "logcount.connectors.stack as c; print(a.WHO, b.WHO, c.WHO)")
    env = {**os.environ, **ab_env(base, tmp_path)}
    out = subprocess.run([sys.executable, "-P", "-c", code], env=env, capture_output=True,
                         text=True, check=True, cwd=tmp_path)
    assert out.stdout.split() == ["base", "base", "base"]
    assert env["LOGCOUNT_HOME"] == str(home())  # the jars and the stack stay this checkout's
    # A child the bench starts as `python -m` from this checkout's directory (the stage) runs
    # the base's code too: sys.path's first entry is not the working directory.
    here = Path(__file__).resolve().parents[2]
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, check=True, cwd=here)
    assert out.stdout.split() == ["base", "base", "base"]
    # What the bench did before: the base on PYTHONPATH alone. pipeline was this checkout's.
    plain = {**os.environ, "PYTHONPATH": str(base)}
    out = subprocess.run([sys.executable, "-P", "-c", "import logcount.pipeline.job as j; "
                          "print(j.__file__)"], env=plain, capture_output=True, text=True,
                         cwd=tmp_path)
    assert str(base) not in out.stdout


def test_the_b_side_follows_the_base_s_own_mapping_and_links_nothing(tmp_path):
    """BASE's pyproject.toml says where its packages are; the import root is one file."""
    base = _base(tmp_path)
    (base / "pipeline").rename(base / "stage")
    (base / "pyproject.toml").write_text(
        '[tool.setuptools.package-dir]\n"logcount.pipeline" = "stage"\n')
    root = import_root(base, tmp_path)
    assert [p.name for p in root.iterdir()] == ["sitecustomize.py"]
    env = {**os.environ, **ab_env(base, tmp_path)}
    out = subprocess.run([sys.executable, "-c", "import logcount.pipeline.job as j; "
                          "print(j.__file__, j.WHO)"], env=env, capture_output=True,
                         text=True, check=True, cwd=tmp_path)
    assert out.stdout.split() == [str(base / "stage" / "job.py"), "base"]


def test_a_directory_that_is_no_checkout_is_refused(tmp_path):
    with pytest.raises(ValueError, match="not a logcount checkout"):
        import_root(tmp_path, tmp_path)
