"""The distribution installs one import name, `logcount`, with every subpackage under it: a
wheel built from the checkout, installed into a folder of its own and imported from elsewhere."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SUBPACKAGES = ("core", "formats", "bench", "pipeline", "connectors")


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """The wheel pip builds from this checkout, installed (without its dependencies, which the
    test's own environment has) into a fresh folder."""
    tmp = tmp_path_factory.mktemp("wheel")
    src = tmp / "src"  # a copy, as the Dockerfile takes it: the build leaves no files behind
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    for folder in ("logcount", "pipeline", "connectors"):
        shutil.copytree(ROOT / folder, src / folder,
                        ignore=shutil.ignore_patterns("__pycache__"))
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", str(src),
                    "-w", str(tmp / "dist")], check=True, capture_output=True, cwd=tmp)
    (wheel,) = (tmp / "dist").glob("logcount-*.whl")
    assert {n.split("/")[0] for n in zipfile.ZipFile(wheel).namelist()} == {
        "logcount", wheel.name.split("-py3")[0] + ".dist-info"}
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target",
                    str(tmp / "site"), str(wheel)], check=True, capture_output=True)
    return tmp / "site"


def _python(site: Path, code: str) -> subprocess.CompletedProcess:
    # -I would drop PYTHONPATH too: -s and a neutral directory keep the checkout off sys.path.
    env = {**os.environ, "PYTHONPATH": str(site)}
    return subprocess.run([sys.executable, "-s", "-c", code], capture_output=True, text=True,
                          env=env, cwd=site.parent)


def test_only_logcount_is_installed(installed: Path):
    top = {p.name for p in installed.iterdir() if not p.name.endswith(".dist-info")}
    assert top - {"bin"} == {"logcount"}
    for old in ("core", "pipeline", "bench"):
        r = _python(installed, f"import {old}")
        assert "ModuleNotFoundError" in r.stderr, (old, r.stderr)


def test_every_subpackage_imports_from_the_install(installed: Path):
    mods = ", ".join(f"logcount.{p}" for p in SUBPACKAGES)
    code = (f"import {mods}; import logcount.cli, logcount.bench.runner; "
            "print(*(m.__file__ for m in (" + mods + ")), sep='\\n')")
    r = _python(installed, code)
    assert r.returncode == 0, r.stderr
    assert all(line.startswith(str(installed)) for line in r.stdout.split()), r.stdout
    assert (installed / "logcount" / "bench" / "streams" / "LogCountStreams.java").is_file()
