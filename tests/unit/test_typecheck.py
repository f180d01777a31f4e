"""scripts/typecheck.py checks the package as it installs: each file under the module name pip
gives it (pyproject's package-dir: pipeline/ is logcount.pipeline), with no tree of links."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _typecheck():
    spec = importlib.util.spec_from_file_location("typecheck", ROOT / "scripts" / "typecheck.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_file_is_checked_under_its_installed_name():
    by_path = {Path(s.path).relative_to(ROOT).as_posix(): s.module
               for s in _typecheck().sources()}
    assert by_path["pipeline/batch.py"] == "logcount.pipeline.batch"
    assert by_path["connectors/__init__.py"] == "logcount.connectors"
    assert by_path["logcount/core/settings/__init__.py"] == "logcount.core.settings"
    assert by_path["tools/__init__.py"] == "tools"
    assert not [p for p, m in by_path.items() if m.startswith(("pipeline.", "connectors."))]
    assert len(set(by_path.values())) == len(by_path)  # one file per module name


def test_no_script_builds_a_tree_of_links():
    """The installed layout comes from the package-dir mapping, read where it is needed (mypy's
    sources, the A/B's import hook), never from links made to imitate it."""
    found = [f"{p.relative_to(ROOT)}" for folder in ("scripts", "logcount", "pipeline",
                                                     "connectors", "tools")
             for p in (ROOT / folder).rglob("*.py")
             if re.search(r"\bsymlink_to\(|\bos\.symlink\(", p.read_text())]
    assert not found, found
