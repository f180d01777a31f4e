"""Another checkout's code, for an A/B run's B side: `python -m logcount.bench.checkout BASE` prints
the environment (`KEY=VALUE` lines) under which `python ...` runs BASE's code, in its own
process and every Python process it starts, e.g.

    env $(python -m logcount.bench.checkout ../base) python -m logcount.bench.plans OUT

An editable install maps `logcount.pipeline` and `logcount.connectors` onto this checkout's
top-level pipeline/ and connectors/ (pyproject.toml, package-dir): with only BASE on PYTHONPATH,
`logcount` was BASE's but those two were still this checkout's. The import root made here is a
`logcount` package of links to BASE's entries, pipeline/ and connectors/ included, so Python's
path finder reaches BASE's code everywhere before the editable install's finder is asked.
LOGCOUNT_HOME stays this checkout's: the fetched jars and the embedded stack it runs.
"""

from __future__ import annotations

import hashlib
import shutil
import sys
import tempfile
from pathlib import Path

from logcount.core.paths import home

MAPPED = ("pipeline", "connectors")  # pyproject.toml's package-dir entries


def import_root(base: str | Path, under: str | Path | None = None) -> Path:
    """A directory whose `logcount` package is BASE's code, the mapped packages included."""
    src = Path(base).resolve()
    if not (src / "logcount" / "__init__.py").is_file():
        raise ValueError(f"{src} is not a logcount checkout (no logcount/__init__.py)")
    parent = Path(under) if under is not None else Path(tempfile.gettempdir())
    root = parent / f"logcount-ab-{hashlib.sha256(str(src).encode()).hexdigest()[:12]}"
    shutil.rmtree(root, ignore_errors=True)
    pkg = root / "logcount"
    pkg.mkdir(parents=True)
    for entry in (src / "logcount").iterdir():
        if entry.name != "__pycache__":
            (pkg / entry.name).symlink_to(entry)
    for name in MAPPED:
        if (src / name).is_dir() and not (pkg / name).exists():
            (pkg / name).symlink_to(src / name)
    return root


def ab_env(base: str | Path, under: str | Path | None = None) -> dict[str, str]:
    """The environment of a child that runs BASE's code (module docstring). PYTHONSAFEPATH is
    `-P` for it and every process it starts: the bench starts the stage as `python -m
    logcount.cli` from its own directory, and a checkout's directory first on sys.path gave
    that stage this checkout's code."""
    return {"PYTHONPATH": str(import_root(base, under)), "LOGCOUNT_HOME": str(home()),
            "PYTHONSAFEPATH": "1"}


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python -m logcount.bench.checkout BASE")
    print("\n".join(f"{k}={v}" for k, v in ab_env(sys.argv[1]).items()))
