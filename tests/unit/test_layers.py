"""The house reads top-down: no module imports one that imports it back, the ground floor
(`formats`, the pure line formats) imports nothing of the project, `core` nothing above those two,
and the CLI (`logcount`) nothing imports. Tests share through tests/support/, never by importing
one another."""

from __future__ import annotations

import ast
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# The one import name's folders: logcount/ holds the CLI, core, formats and bench; pipeline/ and
# connectors/ stay at the top of the repository and install as logcount.pipeline/.connectors,
# as pyproject.toml's package-dir maps them (the mapping scripts/typecheck.py reads too).
FOLDERS = {"logcount": "logcount", **{folder: name for name, folder in tomllib.loads(
    (ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"].items()}}
# The commands' own modules: the stage and everything under it never import these.
COMMANDS = ("logcount.cli", "logcount.__main__", "logcount.pipeline.state_view",
            "logcount.pipeline.demo", "logcount.bench")


def _module(path: Path) -> str:
    rel = path.relative_to(ROOT)
    name = ".".join((FOLDERS[rel.parts[0]], *rel.with_suffix("").parts[1:]))
    return name.removesuffix(".__init__")


def import_graph() -> dict[str, set[str]]:
    """Project module -> the project modules it imports (anywhere in the file)."""
    modules = {_module(p): p for folder in FOLDERS for p in (ROOT / folder).rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        found: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                cands = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            elif isinstance(node, ast.Import):
                cands = [a.name for a in node.names]
            else:
                continue
            found |= {c for c in cands if c in modules and c != name}
        graph[name] = found - {name.rpartition(".")[0]}  # a package's own __init__ is no edge
    return graph


def test_no_module_imports_one_that_imports_it_back():
    graph = import_graph()
    state: dict[str, int] = {}  # 1 on the stack, 2 done

    def visit(node: str, path: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                cycle = path[path.index(nxt):] + [nxt] if nxt in path else [node, nxt]
                raise AssertionError("import cycle: " + " -> ".join(cycle))
            if nxt not in state:
                visit(nxt, path + [nxt])
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node, [node])


def test_floors():
    graph = import_graph()
    for mod, deps in graph.items():
        if mod.startswith("logcount.formats"):
            assert all(d.startswith("logcount.formats") for d in deps), \
                f"{mod} imports above: {deps}"
        if mod.startswith("logcount.core"):
            assert all(d.startswith(("logcount.core", "logcount.formats")) for d in deps), \
                f"{mod} imports above: {deps}"
        if not mod.startswith(COMMANDS):
            assert not any(d.startswith(COMMANDS) for d in deps), \
                f"{mod} imports a command module: {deps}"


# The synthetic generator (shapes.py) and its tables: data for produce, the tests and the bench.
GENERATOR = ("logcount.formats.shapes", "logcount.formats.synthetic_tables")


def test_core_does_not_import_the_generator():
    """core's settings need the catalogue of shapes (logcount/formats/catalogue.py), never the
    generator that writes them."""
    graph = import_graph()
    for mod, deps in graph.items():
        if mod.startswith("logcount.core") or mod == "logcount.formats.catalogue":
            assert not deps & set(GENERATOR), f"{mod} imports the generator: {deps}"


def test_one_import_name():
    """Every project import names the package: `import core` would be someone else's."""
    old = ("core", "formats", "pipeline", "connectors", "bench", "tests.")
    for folder in (*FOLDERS, "tests", "scripts", "tools"):
        for path in (ROOT / folder).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text())):
                names = ([node.module] if isinstance(node, ast.ImportFrom) and node.module
                         and node.level == 0 else
                         [a.name for a in node.names] if isinstance(node, ast.Import) else [])
                for name in names:
                    top = name.split(".")[0]
                    assert top not in old[:-1], f"{path.relative_to(ROOT)} imports {name}"


def test_nothing_installed_imports_the_tools():
    """tools/ (the experiment instruments) is not installed: a module of the package that
    imported it, even lazily, or ran one (`-m tools.X`, a path under tools/) would fail in
    every user's environment."""
    found = []
    for folder in FOLDERS:
        for path in sorted((ROOT / folder).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    names = [node.module]
                elif isinstance(node, ast.Import):
                    names = [a.name for a in node.names]
                elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                    names = [node.value] if node.value.startswith(("tools.", "tools/")) else []
                else:
                    continue
                if any(n.split(".")[0].split("/")[0] == "tools" for n in names):
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert not found, f"installed modules import tools/: {found}"


def test_no_test_module_imports_another():
    """What tests share lives in tests/support/: a test module imported by another runs its
    fixtures and tests twice over, and ties one tier to another's files."""
    found = []
    for path in sorted((ROOT / "tests").rglob("test_*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                names = [*(node.module or "").split("."), *(a.name for a in node.names)]
            elif isinstance(node, ast.Import):
                names = [part for a in node.names for part in a.name.split(".")]
            else:
                continue
            if any(n.startswith("test_") for n in names):
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert not found, f"test modules import test modules: {found}"
