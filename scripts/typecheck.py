"""Type-check the package as it installs: mypy over `logcount`, pipeline/ and connectors/ included,
and over tools/ (the experiment instruments, not installed) beside it.

mypy finds modules by folder and does not read pyproject's package-dir mapping, so this lays the
package out as it installs (links in .cache/typecheck/), runs mypy there with the project's
configuration, and prints each path as it is in the repository. Exit status: mypy's."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def layout(base: Path) -> dict[str, str]:
    """Link the installed layout under `base`; return view path prefix -> repository prefix."""
    shutil.rmtree(base, ignore_errors=True)
    pkg = base / "logcount"
    pkg.mkdir(parents=True)
    mapping = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    mapped = {name.removeprefix("logcount.") for name in mapping["package-dir"]}
    for entry in (ROOT / "logcount").iterdir():
        if entry.name != "__pycache__" and entry.name not in mapped:
            (pkg / entry.name).symlink_to(entry)
    prefixes = {}
    for name, folder in mapping["package-dir"].items():
        (pkg / name.removeprefix("logcount.")).symlink_to(ROOT / folder)
        prefixes[f"logcount/{name.removeprefix('logcount.')}/"] = f"{folder}/"
    (base / "tools").symlink_to(ROOT / "tools")  # run from a checkout, beside the package
    return prefixes


def main() -> int:
    base = ROOT / ".cache" / "typecheck"
    prefixes = layout(base / "src")
    r = subprocess.run(
        [sys.executable, "-m", "mypy", "--config-file", str(ROOT / "pyproject.toml"),
         "--cache-dir", str(base / "mypy-cache"), "-p", "logcount", "-p", "tools"],
        cwd=base / "src", capture_output=True, text=True,
        env={k: v for k, v in os.environ.items() if k not in ("MYPYPATH", "PYTHONPATH")})
    for line in (r.stdout + r.stderr).splitlines():
        for view, repo in prefixes.items():
            if line.startswith(view):
                line = repo + line.removeprefix(view)
        print(line)
    return r.returncode


if __name__ == "__main__":
    sys.exit(main())
