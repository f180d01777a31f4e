"""Another checkout's code, for an A/B run's B side: `python -m logcount.bench.checkout BASE` prints
the environment (`KEY=VALUE` lines) under which `python ...` runs BASE's code, in its own
process and every Python process it starts, e.g.

    env $(python -m logcount.bench.checkout ../base) python -m logcount.bench.plans OUT

An editable install maps `logcount.pipeline` and `logcount.connectors` onto this checkout's
top-level pipeline/ and connectors/ (pyproject.toml, package-dir): with only BASE on PYTHONPATH,
`logcount` was BASE's but those two were still this checkout's. The directory made here holds
one file, a `sitecustomize` that Python's start-up imports from PYTHONPATH: it puts first on
sys.meta_path a finder of BASE's own mapping (`logcount` and each package-dir entry onto BASE's
folders), so BASE's code is found everywhere before the editable install's finder is asked.
LOGCOUNT_HOME stays this checkout's: the fetched jars and the embedded stack it runs.
"""

from __future__ import annotations

import hashlib
import sys
import tempfile
import tomllib
from pathlib import Path

from logcount.core.paths import home

# The package-dir entries of a checkout whose pyproject.toml names none (older layouts).
MAPPED = {"logcount.pipeline": "pipeline", "logcount.connectors": "connectors"}

# Run by the child at start-up, before anything imports logcount: stdlib only.
HOOK = '''"""The A/B run's B side (logcount/bench/checkout.py): BASE's packages, first."""
import importlib.util
import sys

FOLDERS = {folders!r}


class BaseCheckout:
    @staticmethod
    def find_spec(name, path=None, target=None):
        folder = FOLDERS.get(name)
        if folder is None:
            return None  # a module inside one of them: its package's __path__ is BASE's
        return importlib.util.spec_from_file_location(
            name, folder + "/__init__.py", submodule_search_locations=[folder])


sys.meta_path.insert(0, BaseCheckout)
'''


def package_folders(base: str | Path) -> dict[str, str]:
    """Import name -> BASE's folder: `logcount`, and BASE's own package-dir mapping."""
    src = Path(base).resolve()
    if not (src / "logcount" / "__init__.py").is_file():
        raise ValueError(f"{src} is not a logcount checkout (no logcount/__init__.py)")
    try:
        setup = tomllib.loads((src / "pyproject.toml").read_text())["tool"]["setuptools"]
        mapped = setup.get("package-dir", {})
    except (FileNotFoundError, KeyError):
        mapped = MAPPED
    folders = {"logcount": src / "logcount"} | {n: src / f for n, f in mapped.items()}
    return {name: str(f) for name, f in folders.items() if (f / "__init__.py").is_file()}


def import_root(base: str | Path, under: str | Path | None = None) -> Path:
    """A directory for PYTHONPATH whose one file, sitecustomize.py, imports BASE's code."""
    folders = package_folders(base)
    parent = Path(under) if under is not None else Path(tempfile.gettempdir())
    root = parent / f"logcount-ab-{hashlib.sha256(folders['logcount'].encode()).hexdigest()[:12]}"
    root.mkdir(parents=True, exist_ok=True)
    (root / "sitecustomize.py").write_text(HOOK.format(folders=folders))
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
