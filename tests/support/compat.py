"""Older Spark lines for the compat tier: a virtualenv per pyspark version under .cache/compat,
with logcount installed into it as a cluster's Python would get it, and the connector jars of
that version fetched with the project's own jvm/fetch.sh."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from tests.support.run import ROOT

# The sources pyproject.toml builds the distribution from (as docker/Dockerfile copies them).
SOURCES = ("README.md", "pyproject.toml", "logcount", "pipeline", "connectors")


@dataclass(frozen=True)
class CompatEnv:
    version: str
    venv: Path
    jars: Path  # LOGCOUNT_JARS_DIR of this version: spark-kafka/ only

    def bin(self, name: str) -> str:
        return str(self.venv / "bin" / name)

    def env(self, log_dir: Path) -> dict[str, str]:
        """The environment of this venv's processes: nothing of the test's own Python."""
        env = {k: v for k, v in os.environ.items()
               if k not in ("PYTHONPATH", "VIRTUAL_ENV", "SPARK_HOME", "PYSPARK_PYTHON",
                            "PYSPARK_DRIVER_PYTHON")}
        return {**env, "LOGCOUNT_JARS_DIR": str(self.jars), "LOGCOUNT_LOG_DIR": str(log_dir),
                "PYSPARK_PYTHON": self.bin("python"), "PYSPARK_DRIVER_PYTHON": self.bin("python")}

    def installed_pyspark(self) -> str:
        return _run([self.bin("python"), "-c", "import pyspark; print(pyspark.__version__)"],
                    self.venv).stdout.strip()

    def main_script(self) -> str:
        """logcount/__main__.py as installed: the file spark-submit runs (docs/deploy.md)."""
        return _run([self.bin("python"), "-c",
                     "import logcount, os; print(os.path.dirname(logcount.__file__))"],
                    self.venv).stdout.strip() + "/__main__.py"


def _run(cmd: list[str], cwd: Path, log: Path | None = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=1800, cwd=cwd, env=env)
    if log is not None:
        with open(log, "a") as f:
            f.write(f"$ {' '.join(cmd)}\n{proc.stdout}{proc.stderr}")
    if proc.returncode != 0:
        raise AssertionError(f"{' '.join(cmd)} exited {proc.returncode}:\n{proc.stderr[-3000:]}")
    return proc


def _stamp(*parts: str | Path) -> str:
    h = hashlib.sha256()
    for part in parts:
        h.update(part.read_bytes() if isinstance(part, Path) else part.encode())
    return h.hexdigest()[:16]


def compat_env(version: str, scratch: Path) -> CompatEnv:
    """The venv of pyspark `version` with this checkout's logcount in it, and its jars.

    pyspark goes in first, then logcount with its dependencies from a copy of the sources: the
    range in pyproject.toml must keep that pyspark (a wrong range fails here). The venv's
    dependencies are made once per pyproject.toml; logcount itself is installed again each run."""
    home = ROOT / ".cache" / "compat" / f"pyspark-{version}"
    venv, jars, log = home / "venv", home / "jars", home / "setup.log"
    home.mkdir(parents=True, exist_ok=True)
    src = scratch / "src"
    shutil.rmtree(src, ignore_errors=True)
    src.mkdir(parents=True)
    for name in SOURCES:
        (shutil.copytree if (ROOT / name).is_dir() else shutil.copy2)(ROOT / name, src / name)
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "-q"]
    want = _stamp(version, ROOT / "pyproject.toml")
    if (venv / ".stamp").exists() and (venv / ".stamp").read_text() == want:
        # Offline (the heavy tiers run in a network namespace): the venv's own build backend.
        _run([*pip, "--no-deps", "--no-build-isolation", "--force-reinstall", str(src)], home, log)
    else:
        shutil.rmtree(venv, ignore_errors=True)
        _run([sys.executable, "-m", "venv", str(venv)], home, log)
        _run([*pip, "--upgrade", "pip", "setuptools>=68", "wheel"], home, log)
        _run([*pip, f"pyspark=={version}"], home, log)
        _run([*pip, str(src)], home, log)
        (venv / ".stamp").write_text(want)
    jars_want = _stamp(version, ROOT / "jvm" / "spark-kafka" / "pom.xml",
                       ROOT / "jvm" / "settings.xml")
    if not (jars / ".stamp").exists() or (jars / ".stamp").read_text() != jars_want:
        shutil.rmtree(jars, ignore_errors=True)
        _run([str(ROOT / "jvm" / "fetch.sh"), str(ROOT / "jvm" / "spark-kafka"),
              str(jars / "spark-kafka"), f"-Dspark.version={version}"], ROOT, log)
        (jars / ".stamp").write_text(jars_want)
    return CompatEnv(version, venv, jars)
