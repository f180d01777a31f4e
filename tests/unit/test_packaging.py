"""The distribution installs one import name, `logcount`, with every subpackage under it: a
wheel built from the checkout, installed into a folder of its own and imported from elsewhere."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SUBPACKAGES = ("core", "formats", "bench", "pipeline", "connectors")
# The experiment instruments that left logcount.bench for tools/, which runs from a checkout.
MOVED_TO_TOOLS = ("cadence", "cycle", "dim_parse", "driver_cells", "jfr_top",
                  "partitions", "plan_steps", "projections", "rate", "scan_floor", "series_cells",
                  "state_restore", "steady_state", "thread_cpu")


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """The wheel pip builds from this checkout."""
    tmp = tmp_path_factory.mktemp("wheel")
    src = tmp / "src"  # a copy, as the Dockerfile takes it: the build leaves no files behind
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    # tools/ too: `pip install .` in a checkout sees it beside the package, and leaves it out.
    for folder in ("logcount", "pipeline", "connectors", "tools"):
        shutil.copytree(ROOT / folder, src / folder,
                        ignore=shutil.ignore_patterns("__pycache__"))
    # The test environment's setuptools (the test extra), so the build needs no network.
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps",
                    "--no-build-isolation", str(src),
                    "-w", str(tmp / "dist")], check=True, capture_output=True, cwd=tmp)
    (built,) = (tmp / "dist").glob("logcount-*.whl")
    return built


@pytest.fixture(scope="module")
def installed(wheel: Path) -> Path:
    """The wheel, installed (without its dependencies, which the test's own environment has)
    into a fresh folder."""
    assert {n.split("/")[0] for n in zipfile.ZipFile(wheel).namelist()} == {
        "logcount", wheel.name.split("-py3")[0] + ".dist-info"}
    site = wheel.parent.parent / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target",
                    str(site), str(wheel)], check=True, capture_output=True)
    return site


def _python(site: Path, code: str) -> subprocess.CompletedProcess:
    # -I would drop PYTHONPATH too: -s and a neutral directory keep the checkout off sys.path.
    env = {**os.environ, "PYTHONPATH": str(site)}
    return subprocess.run([sys.executable, "-s", "-c", code], capture_output=True, text=True,
                          env=env, cwd=site.parent)


def test_only_logcount_is_installed(installed: Path):
    top = {p.name for p in installed.iterdir() if not p.name.endswith(".dist-info")}
    assert top - {"bin"} == {"logcount"}
    for old in ("core", "pipeline", "bench", "tools"):
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


def test_the_wheel_ships_no_experiment_instrument(wheel: Path):
    """`pip install .` installs the stage and `logcount bench`, not tools/'s instruments."""
    names = zipfile.ZipFile(wheel).namelist()
    assert not [n for n in names if n.split("/")[0] == "tools"], names
    shipped = {Path(n).stem for n in names if n.endswith(".py")}
    assert not shipped & set(MOVED_TO_TOOLS), sorted(shipped & set(MOVED_TO_TOOLS))
    assert all((ROOT / "tools" / f"{m}.py").is_file() for m in MOVED_TO_TOOLS)


def _name(requirement: str) -> str:
    found = re.match(r"[\w.-]+", requirement)
    assert found, requirement
    return found[0].lower()


def test_pip_install_pulls_no_plotting_library(wheel: Path):
    """matplotlib is `logcount bench`'s alone: only the `bench` extra requires it."""
    zf = zipfile.ZipFile(wheel)
    (meta,) = [n for n in zf.namelist() if n.endswith(".dist-info/METADATA")]
    requires = [line.removeprefix("Requires-Dist:").strip()
                for line in zf.read(meta).decode().splitlines()
                if line.startswith("Requires-Dist:")]
    named = [(_name(r), r.partition(";")[2].strip()) for r in requires]
    plotting = [(name, marker) for name, marker in named
                if name in ("matplotlib", "seaborn", "plotly", "bokeh", "pillow")]
    assert plotting == [("matplotlib", 'extra == "bench"')], requires
