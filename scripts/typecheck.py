"""Type-check the package as it installs: mypy over `logcount`, pipeline/ and connectors/ included,
over tools/ (the experiment instruments, not installed) and over tests/ (the fakes included).

mypy names a file's module by its folder and does not read pyproject's package-dir mapping, so
this hands mypy every file with the name it installs under (pipeline/driver.py is
`logcount.pipeline.driver`), read from that one mapping: no tree of links, and every path mypy
prints is the file's own. Exit status: 0 clean, 1 type errors, 2 mypy could not run."""

from __future__ import annotations

import os
import sys
import tomllib
from pathlib import Path

from mypy import build
from mypy.errors import CompileError
from mypy.main import process_options
from mypy.modulefinder import BuildSource

ROOT = Path(__file__).resolve().parents[1]
UNINSTALLED = ("tools", "tests")  # run from a checkout, beside the package
# The package as it installs, nothing beside it: no extra folder on mypy's search path.
HIDDEN = {"PYTHONPATH", "MYPYPATH"}


def packages() -> dict[str, str]:
    """Import name -> the repository folder it is read from: pyproject's package-dir mapping,
    `logcount` from logcount/, and the checkout's own tools/ and tests/."""
    mapped = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    return {"logcount": "logcount", **mapped.get("package-dir", {}),
            **{name: name for name in UNINSTALLED}}


def sources() -> list[BuildSource]:
    """Every .py file of every package, under the module name it is imported by."""
    out = []
    for name, folder in packages().items():
        for path in sorted((ROOT / folder).rglob("*.py")):
            rel = path.relative_to(ROOT / folder).with_suffix("").parts
            module = ".".join((name, *rel)).removesuffix(".__init__")
            out.append(BuildSource(str(path), module))
    return out


def main() -> int:
    # mypy also searches its working directory: not the checkout's, whose docker/ (compose
    # files) would stand for the docker package.
    work = ROOT / ".cache" / "mypy"
    work.mkdir(parents=True, exist_ok=True)
    os.chdir(work)
    _, options = process_options(
        ["--config-file", str(ROOT / "pyproject.toml"),
         "--cache-dir", str(work / "cache")], require_targets=False)
    found = sources()
    try:
        res = build.build(found, options)
    except CompileError as e:  # a syntax error: mypy stops before checking anything
        print("\n".join(line.removeprefix(f"{ROOT}/") for line in e.messages))
        return 2
    if not res.errors:
        print(f"Success: no issues found in {len(found)} source files")
        return 0
    print("\n".join(line.removeprefix(f"{ROOT}/") for line in res.errors))
    n_files = len({e.partition(":")[0] for e in res.errors if ": error:" in e})
    n_errors = sum(": error:" in e for e in res.errors)
    print(f"Found {n_errors} errors in {n_files} files (checked {len(found)} source files)")
    return 1


if __name__ == "__main__":
    if HIDDEN & os.environ.keys():  # mypy searches this interpreter's sys.path: start afresh
        os.execve(sys.executable, [sys.executable, *sys.argv],
                  {k: v for k, v in os.environ.items() if k not in HIDDEN})
    sys.exit(main())
